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

struct Params {
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
@group(0) @binding(7) var<uniform> p: Params;

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

    // 1. Logits. With few classes, split k too: `slices` invocations per class each sum every
    //    slices-th k (10 classes: 6 slices of ~21 terms instead of one chain of 128).
    if classes <= ROW_WG {
        let slices = ROW_WG / classes;
        let c = lid % classes;
        let s = lid / classes;
        var acc = 0.0;
        if s < slices {
            // Unrolled by 4, loads first, so four pairs of loads are in flight at once.
            var k = s;
            loop {
                if k + 3u * slices >= k_len {
                    break;
                }
                let k1 = k + slices;
                let k2 = k1 + slices;
                let k3 = k2 + slices;
                let h0 = h[h_row + k];
                let h1 = h[h_row + k1];
                let h2 = h[h_row + k2];
                let h3 = h[h_row + k3];
                let w0 = params[k * classes + c];
                let w1 = params[k1 * classes + c];
                let w2 = params[k2 * classes + c];
                let w3 = params[k3 * classes + c];
                acc += h0 * w0 + h1 * w1 + h2 * w2 + h3 * w3;
                k += 4u * slices;
            }
            for (; k < k_len; k += slices) {
                acc += h[h_row + k] * params[k * classes + c];
            }
        }
        red_val[lid] = acc;
        workgroupBarrier();
        if lid < classes {
            var z = params[k_len * classes + lid];
            for (var t = 0u; t < slices; t++) {
                z += red_val[t * classes + lid];
            }
            row_values[lid] = z;
        }
    } else {
        for (var c = lid; c < classes; c += ROW_WG) {
            var z = params[k_len * classes + c];
            for (var k = 0u; k < k_len; k++) {
                z += h[h_row + k] * params[k * classes + c];
            }
            row_values[c] = z;
        }
    }
    workgroupBarrier();

    // 2. Softmax cross-entropy; row_values becomes dL/dz (train) or probabilities.
    var label = 0u;
    if p.mode != MODE_PREDICT {
        label = labels[row];
    }
    softmax_ce_row(lid, classes, label, p.mode, batch.inv_rows, row == 0u);
    for (var c = lid; c < classes; c += ROW_WG) {
        out[row * classes + c] = row_values[c];
    }

    // 3. Backpropagate into the layer below, straight from workgroup memory.
    if p.mode == MODE_TRAIN && p.hidden_act != ACT_NONE {
        for (var k = lid; k < k_len; k += ROW_WG) {
            var g = 0.0;
            for (var c = 0u; c < classes; c++) {
                g += row_values[c] * params[k * classes + c];
            }
            dh[h_row + k] = g * activate_grad(h[h_row + k], p.hidden_act);
        }
    }
}
