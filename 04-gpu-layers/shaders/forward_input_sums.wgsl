// forward_input_sums.wgsl: where linear_forward.wgsl reads its input in the split step of a
// network of two hidden layers: the second layer's forward, whose input h1 = act(x W1 + b1)
// (times its dropout mask) is in no buffer yet. The previous step's linear_update left the
// partial sums of x W1 for each of its k-tiles of W1 (linear_update_next.wgsl); here the
// workgroup adds up each of its rows' tiles as it stages them (transposed, for
// forward_transposed.wgsl's k loop), with the bias, the activation and the mask of the layer
// below, and the first column of workgroups keeps h1 in `x` for the rest of the step (the
// backward and the update read it). Each workgroup adds up its own rows: the workgroups of
// other columns add up the same ones, reading the partial sums again from L2.

@group(0) @binding(0) var<storage, read_write> x: array<f32>; // h1: [batch][in], written here
// [ceil(below_inputs / T) k-tiles][sums.partial_rows][in]: the next batch's x W1 by k-tile (T
// from the prelude), the bias row left out.
@group(0) @binding(5) var<storage, read> partials: array<f32>;
@group(0) @binding(6) var<storage, read> params_below: array<f32>; // [(below_inputs + 1)][in]: b1 last
@group(0) @binding(7) var<uniform> sums: SumsParams;

struct SumsParams {
    below_inputs: u32,
    below_act: u32,
    partial_rows: u32,
    _pad: u32,
    below_drop: DropoutMask,
}

// Stages rows row0..row0 + TR of h1 transposed (rows past the batch repeat its last row; columns
// past the input and rows past TR zero), and keeps them in x from the first column. The host
// runs this form only where they fit X_SHARED floats.
// ANCHOR: stage_sums
fn stage_input(row0: u32, k_len: u32, first_column: bool, li: u32) {
    let tiles = (sums.below_inputs + T - 1u) / T;
    let last = batch.rows - 1u;
    var mask_step = 0u;
    if sums.below_drop.threshold != 0u {
        mask_step = counters[COUNTER_MASK_STEP];
    }
    for (var i = li; i < TRQ * k_pad(k_len); i += TN * KS) {
        let k = i / TRQ;
        let q = i % TRQ;
        var v = vec4<f32>(0.0);
        if k < k_len {
            // The quad's four rows at once: four loads in flight per k-tile.
            var z = vec4<f32>(0.0);
            var at: vec4<u32>;
            for (var e = 0u; e < 4u; e++) {
                at[e] = min(row0 + min(4u * q + e, TR - 1u), last) * k_len + k;
            }
            for (var t = 0u; t < tiles; t++) {
                let base = t * sums.partial_rows * k_len;
                z += vec4<f32>(partials[base + at.x], partials[base + at.y], partials[base + at.z], partials[base + at.w]);
            }
            let bias = params_below[sums.below_inputs * k_len + k];
            for (var e = 0u; e < 4u; e++) {
                let r = 4u * q + e;
                let h = activate(z[e] + bias, sums.below_act) * mask_value(sums.below_drop, mask_step, at[e]);
                v[e] = select(0.0, h, r < TR);
                if first_column && r < TR && row0 + r < batch.rows {
                    x[at[e]] = h;
                }
            }
        }
        xt[i] = v;
    }
}
// ANCHOR_END: stage_sums

// The rows are always staged transposed here.
fn stage_transposed(row0: u32, k_len: u32, li: u32) -> bool {
    return true;
}

// Row r of the workgroup's (batch row `row`) among the staged rows.
fn input_start(r: u32, row: u32, k_len: u32) -> u32 {
    return r;
}

// Element k of the staged row `r`.
fn input(r: u32, k: u32) -> f32 {
    return xt[k * TRQ + r / 4u][r % 4u];
}
