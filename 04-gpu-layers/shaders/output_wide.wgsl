// output_wide.wgsl: output_layer.wgsl's work (logits z = h W + b, softmax + cross-entropy (or
// mean squared error) into
// the counters, dL/dz into `out`, dh = (dL/dz W^T) * act'(h)) for a WIDE h and few classes
// (784-1024-10: h has 1,024 columns, 10 classes), one row per workgroup.
//
// output_rows.wgsl gives each invocation one class and a slice of k: at 1,024 inputs each of
// them walks a chain of ~20 loads of W from memory, one after the other, and dh walks another.
// Here the loop runs the other way round: each invocation owns OW_KPI values of k (k = lid,
// lid + OW_WG, ...) and ALL classes, so its loads are issued at once (OW_KPI values of h and
// OW_KPI rows of W, neighbouring invocations reading neighbouring rows) and kept in registers:
//
//   1. acc[c] = sum over my k of h[k] W[k][c]          OW_C partial logits per invocation
//   2. the workgroup adds them up: scratch[c][lid], then OW_S slices per class, then z[c] + b[c]
//      (three barriers, no chain longer than OW_WG / OW_S loads)
//   3. every invocation reads the row's logits and finds max, argmax and the sum of
//      exponentials itself (ten of each with ten classes), then dh for its own k, from the W
//      and h it still holds.
//
// Classes are held in OW_C registers whatever the layer's `classes` (at most OW_C): W is read
// at a clamped column for c >= classes and those logits are dropped, so no load sits behind a
// branch. A layer wider than OW_WG x OW_KPI takes its k in several chunks (dh then reloads each).
// Same math and the same order per class as output_rows.wgsl up to the order of the sum over k,
// so the CPU reference is the same (cpu::reference::output_layer).
//
// With p.sums = 1 it also finishes the layer below: that layer's linear_forward_tiled, split over
// k into OW_SPLITS workgroups, wrote raw partial sums [split][batch][inputs] of x W, and each
// invocation adds up the slices of its own values of k, adds the bias, applies the activation
// and writes h, in the same loads that fetch h otherwise. The split forward gets OW_SPLITS times
// the workgroups, and this kernel a few more loads in flight.

// Its uniform `p` (OutputLayerParams: p.sums, p.below_inputs, p.below_act for the sums) and
// bindings 1-7 are output_layer.wgsl's, in output_params.wgsl; h is written when p.sums = 1.
@group(0) @binding(0) var<storage, read_write> h: array<f32>;
@group(0) @binding(8) var<storage, read> partials: array<f32>;     // [OW_SPLITS][batch][inputs]
@group(0) @binding(9) var<storage, read> below_params: array<f32>; // [(below_inputs + 1), inputs]

// From the prelude: OW_WG invocations, OW_KPI values of k per invocation per chunk, OW_C
// classes in registers, OW_S slices per class in the reduction (OW_WG / OW_S loads each), and
// OW_SPLITS slices of the layer below's partial sums (FusedTiles::k_splits).
var<workgroup> scratch: array<f32, OW_C * OW_WG>; // [class][invocation]: the partial logits
var<workgroup> slices: array<f32, OW_C * OW_S>;   // [class][slice]
var<workgroup> z_sh: array<f32, OW_C>;

// This invocation's chunk of h and W, in registers (constant indices once the loops unroll).
var<private> hv: array<f32, OW_KPI>;
var<private> wv: array<f32, OW_KPI * OW_C>;

// Loads h[row][k] and W[k][0 .. OW_C] for k = base + i * OW_WG + lid, i < OW_KPI. Past the
// layer's k (or its classes), the last valid index is read and h counts as 0. With p.sums, h
// is computed from the partial sums (and written: `write`, once per k).
fn load_chunk(row: u32, base: u32, lid: u32, write: bool) {
    let k_len = p.inputs;
    let mask_step = dropout_step();
    let classes = p.classes;
    for (var i = 0u; i < OW_KPI; i++) {
        let k = base + i * OW_WG + lid;
        let kk = min(k, k_len - 1u);
        var v: f32;
        // ANCHOR: sums
        if p.sums == 1u {
            var z = below_params[p.below_inputs * k_len + kk];
            for (var s = 0u; s < OW_SPLITS; s++) {
                z += partials[(s * batch.rows + row) * k_len + kk];
            }
            v = activate(z, p.below_act) * mask_value(p.drop, mask_step, row * k_len + kk);
            if write && k < k_len {
                h[row * k_len + k] = v;
            }
        } else {
            v = h[row * k_len + kk];
        }
        // ANCHOR_END: sums
        hv[i] = select(0.0, v, k < k_len);
        for (var c = 0u; c < OW_C; c++) {
            wv[i * OW_C + c] = out_params[kk * classes + min(c, classes - 1u)];
        }
    }
}

@compute @workgroup_size(OW_WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let row = wid.x + wid.y * nwg.x;
    if row >= batch.rows {
        return; // the whole workgroup
    }
    let k_len = p.inputs;
    let classes = p.classes;
    let chunk = OW_WG * OW_KPI;
    var label = 0u;
    if p.mode != MODE_PREDICT {
        label = labels[row]; // issued now, used in step 3
    }

    // 1. This invocation's partial logits.
    var acc: array<f32, OW_C>;
    for (var base = 0u; base < k_len; base += chunk) {
        load_chunk(row, base, lid, true);
        for (var i = 0u; i < OW_KPI; i++) {
            for (var c = 0u; c < OW_C; c++) {
                acc[c] += hv[i] * wv[i * OW_C + c];
            }
        }
    }

    // 2. The sum over the workgroup: every class in OW_S interleaved slices (slice s adds
    //    invocations s, s + OW_S, ...: neighbouring slices read neighbouring words), then one
    //    invocation per class adds the slices and the bias.
    for (var c = 0u; c < OW_C; c++) {
        scratch[c * OW_WG + lid] = acc[c];
    }
    workgroupBarrier();
    if lid < classes * OW_S {
        let c = lid / OW_S;
        let s = lid % OW_S;
        var sum = 0.0;
        for (var j = 0u; j < OW_WG / OW_S; j++) {
            sum += scratch[c * OW_WG + j * OW_S + s];
        }
        slices[c * OW_S + s] = sum;
    }
    workgroupBarrier();
    if lid < classes {
        var z = out_params[k_len * classes + lid];
        for (var s = 0u; s < OW_S; s++) {
            z += slices[lid * OW_S + s];
        }
        z_sh[lid] = z;
    }
    workgroupBarrier();

    // 3. Softmax cross-entropy, dL/dz and dh, each invocation from the logits in z_sh.
    let mse = p.loss == LOSS_MSE;
    let mse_scale = 2.0 * batch.inv_rows / f32(classes);
    let s = row_stats(0u, classes, label, mse);
    let label_ok = label < classes;
    if lid == OW_WG - 1u && p.mode != MODE_PREDICT {
        count_row(label_ok, row_loss(0u, s, classes, label, mse), s.arg == label, p.mode, row == 0u);
    }
    if lid < classes {
        out[row * classes + lid] = dl_dz(0u, lid, s, label, label_ok, mse, mse_scale);
    }
    if p.mode != MODE_TRAIN || p.hidden_act == ACT_NONE {
        return;
    }
    // dL/dz of every class in registers (0 past the layer's classes, whose W columns were
    // clamped copies; `classes` is the same for the whole dispatch, so the test never diverges),
    // then dh for this invocation's k.
    var dz: array<f32, OW_C>;
    for (var c = 0u; c < OW_C; c++) {
        if c < classes {
            dz[c] = dl_dz(0u, c, s, label, label_ok, mse, mse_scale);
        }
    }
    let one_chunk = k_len <= chunk; // then hv and wv still hold it
    let mask_step = dropout_step();
    for (var base = 0u; base < k_len; base += chunk) {
        if !one_chunk {
            load_chunk(row, base, lid, false);
        }
        for (var i = 0u; i < OW_KPI; i++) {
            let k = base + i * OW_WG + lid;
            var g = 0.0;
            for (var c = 0u; c < OW_C; c++) {
                g += dz[c] * wv[i * OW_C + c];
            }
            if k < k_len {
                let e = row * k_len + k;
                dh[e] = dropout_grad(g, hv[i], p.hidden_act, p.drop, mask_step, e);
            }
        }
    }
}
