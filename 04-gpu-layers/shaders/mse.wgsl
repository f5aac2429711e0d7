// mse.wgsl: mean squared error against one-hot labels, its gradient, and the metrics; one
// invocation per row. y: [batch, classes], labels: [batch] u32 -> out: [batch, classes].
//
//     loss of row r   = sum_c (y_c - onehot_c)^2 / classes
//     dL/dy_c         = 2 (y_c - onehot_c) / (classes * batch)    (the mean over rows and classes)
//
// Train writes dL/dy to out and counts the step; eval and predict copy y to out. The loss sum,
// correct count (first largest output == label) and rows go to the counters with the integer
// atomics of softmax_row.wgsl (add_loss), so the sum is exact and matches the CPU reference (cpu::reference::mse)
// bit for bit. A row's work is tiny (a few classes), so one invocation per row is enough.

struct MseParams {
    classes: u32,
    mode: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> y: array<f32>;
@group(0) @binding(1) var<storage, read> labels: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<storage, read_write> counters: array<atomic<u32>>;
@group(0) @binding(4) var<uniform> batch: Batch;
@group(0) @binding(5) var<uniform> p: MseParams;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let row = gid.x + gid.y * nwg.x * WG;
    if row >= batch.rows {
        return;
    }
    let classes = p.classes;
    let base = row * classes;
    var label = 0u;
    if p.mode != MODE_PREDICT {
        label = labels[row];
    }
    let label_ok = label < classes;
    let scale = 2.0 * batch.inv_rows / f32(classes);
    var arg = 0u;
    var sum = 0.0;
    for (var c = 0u; c < classes; c++) {
        let v = y[base + c];
        if v > y[base + arg] {
            arg = c;
        }
        let diff = v - select(0.0, 1.0, c == label);
        sum += diff * diff;
        var o = v;
        if p.mode == MODE_TRAIN {
            o = select(0.0, diff * scale, label_ok);
        }
        out[base + c] = o;
    }
    if p.mode == MODE_PREDICT {
        return;
    }
    // The step counter is what Adam's bias correction and dropout's generator read.
    if p.mode == MODE_TRAIN && row == 0u {
        atomicAdd(&counters[COUNTER_STEP], 1u);
    }
    atomicAdd(&counters[COUNTER_ROWS], 1u);
    if !label_ok {
        atomicAdd(&counters[COUNTER_BAD_LABELS], 1u); // its gradient row is 0
        return;
    }
    add_loss(sum / f32(classes));
    if arg == label {
        atomicAdd(&counters[COUNTER_CORRECT], 1u);
    }
}
