// softmax_ce.wgsl: fused softmax + cross-entropy + its gradient, one workgroup per row.
//
// logits: [batch, classes], labels: [batch] u32 -> out: [batch, classes] holding dL/dlogits
// (train) or the probabilities (eval, predict); loss sum, correct count and row count are added
// to `counters` on the GPU, so nothing is read back per step. The math is in softmax_row.wgsl.
// Fusing the three (softmax, loss, gradient) saves two dispatches and two round trips of the
// [batch, classes] tensor through memory.

struct SoftmaxCeParams {
    classes: u32,
    mode: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> logits: array<f32>;
@group(0) @binding(1) var<storage, read> labels: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<storage, read_write> counters: array<atomic<u32>>;
@group(0) @binding(4) var<uniform> batch: Batch;
@group(0) @binding(5) var<uniform> p: SoftmaxCeParams;

@compute @workgroup_size(ROW_WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let row = wid.x + wid.y * nwg.x;
    if row >= batch.rows {
        return; // the whole workgroup leaves together, so the barriers below stay uniform
    }
    let classes = p.classes;
    for (var c = lid; c < classes; c += ROW_WG) {
        row_values[c] = logits[row * classes + c];
    }
    workgroupBarrier();
    var label = 0u;
    if p.mode != MODE_PREDICT {
        label = labels[row];
    }
    softmax_ce_row(lid, classes, label, p.mode, batch.inv_rows, row == 0u);
    for (var c = lid; c < classes; c += ROW_WG) {
        out[row * classes + c] = row_values[c];
    }
}
