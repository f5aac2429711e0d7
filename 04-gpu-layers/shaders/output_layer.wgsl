// output_layer.wgsl: the whole output layer of a training step in ONE dispatch, a few rows per
// workgroup:
//   1. logits z = h W + b                        h: [batch, in], params: [(in + 1), classes]
//   2. softmax + cross-entropy + dL/dz            loss/correct/rows added to the counters
//   3. dh = (dL/dz W^T) * act'(h)                 the gradient for the hidden layer below
// Done as separate kernels this is matmul, bias add, softmax-CE, matmul A*B^T and the activation
// backward: five dispatches, each a barrier on the GPU, and z and dL/dz written to memory and
// read back. Here z and dL/dz never leave workgroup memory (out receives dL/dz only because the
// weight update needs it).
//
// Each workgroup takes `rows_per_group` rows (the host picks it: OUT_RPW, fewer when the classes
// of that many rows would not fit in z_sh), with OUT_WG / rows_per_group invocations per row.
// Why several rows: W and b are staged in workgroup memory once for all of them (MNIST: 129 x 10
// floats, one load per invocation), and the loss counters take one set of atomic adds per row
// from far fewer workgroups. Why the softmax is serial: with ten classes a row's max, sum and
// argmax are ten steps for one invocation, where a tree over 64 invocations took a dozen
// barriers; only the exponentials and the division, one per class, are spread over the row's
// invocations. Every barrier below is reached by the whole workgroup (uniform control flow).
//
// Numerically stable, as in softmax_row.wgsl: with m = max_c z_c,
//     p_c = exp(z_c - m) / sum_c' exp(z_c' - m),  loss = log(sum_c' exp(z_c' - m)) + m - z_label,
//     dL/dz_c = (p_c - [c == label]) / batch.

struct OutputLayerParams {
    inputs: u32,
    classes: u32,
    mode: u32,
    // The activation of h, for step 3; ACT_NONE when h is the network input (no layer below).
    hidden_act: u32,
    // Rows per workgroup; the grid has ceil(batch / rows_per_group) workgroups.
    rows_per_group: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<storage, read> h: array<f32>;
@group(0) @binding(1) var<storage, read> params: array<f32>;
@group(0) @binding(2) var<storage, read> labels: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read_write> dh: array<f32>;
@group(0) @binding(5) var<storage, read_write> counters: array<atomic<u32>>;
@group(0) @binding(6) var<uniform> batch: Batch;
@group(0) @binding(7) var<uniform> p: OutputLayerParams;

// OUT_WG (invocations) and OUT_RPW come from the prelude; OUT_Z_SHARED too (the host divides
// by it to pick rows_per_group). Also from the prelude, chosen for the device (wgsl.rs,
// DeviceFit): W_SHARED floats of [W; b] and H_SHARED floats of the group's rows of h are staged
// when they fit (4096 and 1024 where the device allows the ~25 KiB of workgroup memory this
// kernel then takes; 2048 and 512 within WebGPU's default 16 KiB).
var<workgroup> w_sh: array<f32, W_SHARED>;
var<workgroup> h_sh: array<f32, H_SHARED>;
var<workgroup> z_sh: array<f32, OUT_Z_SHARED>; // [rows_per_group][classes]: z, then dL/dz
var<workgroup> partial: array<f32, OUT_WG>;
var<workgroup> row_max: array<f32, OUT_RPW>;
var<workgroup> row_total: array<f32, OUT_RPW>;

// Reads through workgroup memory when staged (`staged` is the same for the whole dispatch).
fn weight(staged: bool, i: u32) -> f32 {
    if staged {
        return w_sh[i];
    }
    return params[i];
}

fn hidden(staged: bool, local_row: u32, row: u32, k: u32) -> f32 {
    if staged {
        return h_sh[local_row * p.inputs + k];
    }
    return h[row * p.inputs + k];
}

@compute @workgroup_size(OUT_WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let rpw = p.rows_per_group;
    let row0 = (wid.x + wid.y * nwg.x) * rpw;
    if row0 >= batch.rows {
        return; // the whole workgroup
    }
    let k_len = p.inputs;
    let classes = p.classes;
    let rows_here = min(rpw, batch.rows - row0);
    let per_row = OUT_WG / rpw; // invocations per row
    let lr = lid / per_row;     // this invocation's row in the group (>= rows_here: idle)
    let t = lid % per_row;      // its place in the row
    let row = row0 + lr;
    let live = lr < rows_here;
    var label = 0u;
    if live && p.mode != MODE_PREDICT {
        label = labels[row]; // issued now, used much later
    }

    // 0. Stage W, b and the group's rows of h: eight loads in flight per invocation at a time.
    let w_len = (k_len + 1u) * classes;
    let w_staged = w_len <= W_SHARED;
    let h_len = rows_here * k_len;
    let h_staged = rpw * k_len <= H_SHARED;
    if w_staged {
        stage_weights(lid, w_len);
    }
    if h_staged {
        stage_hidden(row0 * k_len, lid, h_len);
    }
    workgroupBarrier();

    // 1. Logits. With few classes, split k too: the row's invocations form `slices` groups of
    //    `classes`, each summing every slices-th k (ten classes, 64 invocations: 6 slices).
    let small = classes <= per_row;
    if small {
        let slices = per_row / classes;
        let c = t % classes;
        let s = t / classes;
        var acc = 0.0;
        if live && s < slices {
            for (var k = s; k < k_len; k += slices) {
                acc += hidden(h_staged, lr, row, k) * weight(w_staged, k * classes + c);
            }
        }
        partial[lid] = acc;
    }
    workgroupBarrier();
    if live {
        if small {
            if t < classes {
                var z = weight(w_staged, k_len * classes + t);
                for (var s = 0u; s < per_row / classes; s++) {
                    z += partial[lr * per_row + s * classes + t];
                }
                z_sh[lr * classes + t] = z;
            }
        } else {
            for (var c = t; c < classes; c += per_row) {
                var z = weight(w_staged, k_len * classes + c);
                for (var k = 0u; k < k_len; k++) {
                    z += hidden(h_staged, lr, row, k) * weight(w_staged, k * classes + c);
                }
                z_sh[lr * classes + c] = z;
            }
        }
    }
    workgroupBarrier();

    // 2. Softmax cross-entropy. One invocation per row finds the max and argmax (first maximum
    //    wins, as on the CPU) and the label's logit, and adds the row to the counters once the
    //    sum is known; the exponentials and the division are spread over the row.
    let zr = lr * classes;
    let label_ok = label < classes;
    var z_label = 0.0;
    var arg = 0u;
    if live && t == 0u {
        var m = z_sh[zr];
        for (var c = 1u; c < classes; c++) {
            let z = z_sh[zr + c];
            if z > m {
                m = z;
                arg = c;
            }
        }
        row_max[lr] = m;
        if label_ok {
            z_label = z_sh[zr + label];
        }
    }
    workgroupBarrier();
    if live {
        let m = row_max[lr];
        for (var c = t; c < classes; c += per_row) {
            z_sh[zr + c] = exp(z_sh[zr + c] - m);
        }
    }
    workgroupBarrier();
    if live && t == 0u {
        var total = 0.0;
        for (var c = 0u; c < classes; c++) {
            total += z_sh[zr + c];
        }
        row_total[lr] = total;
        if p.mode != MODE_PREDICT {
            atomicAdd(&counters[COUNTER_ROWS], 1u);
            if label_ok {
                add_loss(log(total) + row_max[lr] - z_label);
                if arg == label {
                    atomicAdd(&counters[COUNTER_CORRECT], 1u);
                }
            } else {
                atomicAdd(&counters[COUNTER_BAD_LABELS], 1u);
            }
            // The step Adam's bias correction reads: counted once per training step.
            if p.mode == MODE_TRAIN && row == 0u {
                atomicAdd(&counters[COUNTER_STEP], 1u);
            }
        }
    }
    workgroupBarrier();
    if live {
        let total = row_total[lr];
        for (var c = t; c < classes; c += per_row) {
            let prob = z_sh[zr + c] / total;
            var v = prob;
            if p.mode == MODE_TRAIN {
                // A row with a bad label contributes nothing (and was counted above).
                v = select(0.0, (prob - select(0.0, 1.0, c == label)) * batch.inv_rows, label_ok);
            }
            z_sh[zr + c] = v;
            out[row * classes + c] = v;
        }
    }
    workgroupBarrier();

    // 3. Backpropagate into the layer below, straight from workgroup memory.
    if live && p.mode == MODE_TRAIN && p.hidden_act != ACT_NONE {
        for (var k = t; k < k_len; k += per_row) {
            var g = 0.0;
            for (var c = 0u; c < classes; c++) {
                g += z_sh[zr + c] * weight(w_staged, k * classes + c);
            }
            dh[row * k_len + k] = g * activate_grad(hidden(h_staged, lr, row, k), p.hidden_act);
        }
    }
}

// w_sh[i] = params[i] for i in [0, len), by all OUT_WG invocations, eight loads in flight each
// before the stores (MNIST's 1,290 floats: one round).
fn stage_weights(lid: u32, len: u32) {
    var i = lid;
    loop {
        if i + 7u * OUT_WG >= len {
            break;
        }
        var v: array<f32, 8>;
        for (var u = 0u; u < 8u; u++) {
            v[u] = params[i + u * OUT_WG];
        }
        for (var u = 0u; u < 8u; u++) {
            w_sh[i + u * OUT_WG] = v[u];
        }
        i += 8u * OUT_WG;
    }
    for (; i < len; i += OUT_WG) {
        w_sh[i] = params[i];
    }
}

// h_sh[i] = h[start + i] for i in [0, len), the same way.
fn stage_hidden(start: u32, lid: u32, len: u32) {
    var i = lid;
    loop {
        if i + 7u * OUT_WG >= len {
            break;
        }
        var v: array<f32, 8>;
        for (var u = 0u; u < 8u; u++) {
            v[u] = h[start + i + u * OUT_WG];
        }
        for (var u = 0u; u < 8u; u++) {
            h_sh[i + u * OUT_WG] = v[u];
        }
        i += 8u * OUT_WG;
    }
    for (; i < len; i += OUT_WG) {
        h_sh[i] = h[start + i];
    }
}
