// output_layer.wgsl: the whole output layer of a training step in ONE dispatch, one workgroup
// per row:
//   1. logits z = h W + b                        h: [batch, in], params: [(in + 1), classes]
//   2. softmax + cross-entropy + dL/dz            (softmax_row.wgsl), loss/correct on the GPU
//   3. dh = (dL/dz W^T) * act'(h)                 the gradient for the hidden layer below
// Done as separate kernels this is matmul, bias add, softmax-CE, matmul A*B^T and the activation
// backward: five dispatches, each a barrier on the GPU, and z and dL/dz written to memory and
// read back. Here z and dL/dz never leave workgroup memory (out receives dL/dz only because the
// weight update needs it). With 10 classes the work per row is tiny, so a row per workgroup
// gives the GPU `batch` independent workgroups and no cross-workgroup communication.
//
// When W, b and the row of h fit in workgroup memory (MNIST: 129 x 10 and 128 values), they are
// staged there first, in one round of loads issued eight at a time: every later read is a
// workgroup-memory read of ~30 cycles instead of a global one of several hundred, which matters
// because steps 1 and 3 are chains of dependent multiply-adds.

struct OutputLayerParams {
    inputs: u32,
    classes: u32,
    mode: u32,
    // The activation of h, for step 3; ACT_NONE when h is the network input (no layer below).
    hidden_act: u32,
}

@group(0) @binding(0) var<storage, read> h: array<f32>;
@group(0) @binding(1) var<storage, read> params: array<f32>;
@group(0) @binding(2) var<storage, read> labels: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read_write> dh: array<f32>;
@group(0) @binding(5) var<storage, read_write> counters: array<atomic<u32>>;
@group(0) @binding(6) var<uniform> batch: Batch;
@group(0) @binding(7) var<uniform> p: OutputLayerParams;

// From the prelude, chosen for the device (wgsl.rs, DeviceFit): W_SHARED floats of [W; b] and
// H_SHARED floats of one row of h can be staged (4096 and 1024: 20 KiB, where the device allows
// 25 KiB of workgroup memory in all; 2048 and 512 within WebGPU's default 16 KiB).
var<workgroup> w_sh: array<f32, W_SHARED>;
var<workgroup> h_sh: array<f32, H_SHARED>;

// Reads through workgroup memory when staged (`staged` is the same for the whole dispatch).
fn weight(staged: bool, i: u32) -> f32 {
    if staged {
        return w_sh[i];
    }
    return params[i];
}

fn hidden(staged: bool, h_row: u32, k: u32) -> f32 {
    if staged {
        return h_sh[k];
    }
    return h[h_row + k];
}

// dst[i] = src[i] for i in [0, len), by all ROW_WG invocations, eight loads in flight each.
fn stage_weights(lid: u32, len: u32) {
    var i = lid;
    loop {
        if i + 7u * ROW_WG >= len {
            break;
        }
        let v0 = params[i];
        let v1 = params[i + ROW_WG];
        let v2 = params[i + 2u * ROW_WG];
        let v3 = params[i + 3u * ROW_WG];
        let v4 = params[i + 4u * ROW_WG];
        let v5 = params[i + 5u * ROW_WG];
        let v6 = params[i + 6u * ROW_WG];
        let v7 = params[i + 7u * ROW_WG];
        w_sh[i] = v0;
        w_sh[i + ROW_WG] = v1;
        w_sh[i + 2u * ROW_WG] = v2;
        w_sh[i + 3u * ROW_WG] = v3;
        w_sh[i + 4u * ROW_WG] = v4;
        w_sh[i + 5u * ROW_WG] = v5;
        w_sh[i + 6u * ROW_WG] = v6;
        w_sh[i + 7u * ROW_WG] = v7;
        i += 8u * ROW_WG;
    }
    for (; i < len; i += ROW_WG) {
        w_sh[i] = params[i];
    }
}

@compute @workgroup_size(ROW_WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let row = wid.x + wid.y * nwg.x;
    if row >= batch.rows {
        return;
    }
    let k_len = p.inputs;
    let classes = p.classes;
    let h_row = row * k_len;
    let staged = (k_len + 1u) * classes <= W_SHARED && k_len <= H_SHARED;
    var label = 0u;
    if p.mode != MODE_PREDICT {
        label = labels[row]; // issued now, used much later
    }
    if staged {
        for (var k = lid; k < k_len; k += ROW_WG) {
            h_sh[k] = h[h_row + k];
        }
        stage_weights(lid, (k_len + 1u) * classes);
    }
    workgroupBarrier();

    // 1. Logits. With few classes, split k too: `slices` invocations per class each sum every
    //    slices-th k (10 classes: 6 slices of ~21 terms instead of one chain of 128).
    if classes <= ROW_WG {
        let slices = ROW_WG / classes;
        let c = lid % classes;
        let s = lid / classes;
        var acc = 0.0;
        if s < slices {
            for (var k = s; k < k_len; k += slices) {
                acc += hidden(staged, h_row, k) * weight(staged, k * classes + c);
            }
        }
        red_val[lid] = acc;
        workgroupBarrier();
        if lid < classes {
            var z = weight(staged, k_len * classes + lid);
            for (var t = 0u; t < slices; t++) {
                z += red_val[t * classes + lid];
            }
            row_values[lid] = z;
        }
    } else {
        for (var c = lid; c < classes; c += ROW_WG) {
            var z = weight(staged, k_len * classes + c);
            for (var k = 0u; k < k_len; k++) {
                z += hidden(staged, h_row, k) * weight(staged, k * classes + c);
            }
            row_values[c] = z;
        }
    }
    workgroupBarrier();

    // 2. Softmax cross-entropy; row_values becomes dL/dz (train) or probabilities.
    softmax_ce_row(lid, classes, label, p.mode, batch.inv_rows, row == 0u);
    for (var c = lid; c < classes; c += ROW_WG) {
        out[row * classes + c] = row_values[c];
    }

    // 3. Backpropagate into the layer below, straight from workgroup memory.
    if p.mode == MODE_TRAIN && p.hidden_act != ACT_NONE {
        for (var k = lid; k < k_len; k += ROW_WG) {
            var g = 0.0;
            for (var c = 0u; c < classes; c++) {
                g += row_values[c] * weight(staged, k * classes + c);
            }
            dh[h_row + k] = g * activate_grad(hidden(staged, h_row, k), p.hidden_act);
        }
    }
}
