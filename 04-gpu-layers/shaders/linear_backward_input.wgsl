// linear_backward_input.wgsl: dx = (dy W^T) * act'(h), matmul and activation backward fused.
//
// dy: [batch, out] (dL/d pre-activation of this layer), params: [(in + 1), out] (only W is
// read), h: [batch, in] (the forward output of the layer below, whose activation is `act`)
// -> dx: [batch, in] (dL/d pre-activation of the layer below). Used between two hidden layers.
// When h had a dropout, its mask is drawn again here (common.wgsl, dropout_grad).
//
// dx[r][k] = sum over j of dy[r][j] * W[k][j]: for a fixed k the sum runs along ROW k of W. Its
// first version gave each invocation one element of dx and that loop: neighbouring invocations
// (neighbouring k) then read W 4 * out bytes apart, one cache sector each per step, and every
// row of the batch read all of W again. In 784-512-256-10 at batch 64 (dx 64 x 512, out 256)
// that took 37.5 us on the H200, half of the training step (stage 04's README, "The backward
// between two hidden layers"). Now a workgroup owns BI_K values of k for BI_R rows and walks j
// in chunks of BI_J: all invocations copy W[k0 .. k0 + BI_K][j0 .. j0 + BI_J] (along j, so
// neighbouring invocations read neighbouring words) into workgroup memory TRANSPOSED, and the
// chunk of dy; then each invocation (one k, one row) multiplies BI_J pairs from there: W is read
// from memory once per BI_R rows instead of once per row, and always along its rows. The next
// chunk's copies are loaded into registers while this chunk multiplies.
//
// BI_K, BI_R and BI_J come from the prelude (src/wgsl.rs); BI_K * BI_R invocations per workgroup.
// The W chunks' loads and stores are backward_input_w.wgsl's (prepended by the host), which
// output_backward.wgsl shares.

// `p` is the layer's LinearParams (common.wgsl).
@group(0) @binding(0) var<storage, read> dy: array<f32>;
@group(0) @binding(1) var<storage, read> params: array<f32>;
@group(0) @binding(2) var<storage, read> h: array<f32>;
@group(0) @binding(3) var<storage, read_write> dx: array<f32>;
@group(0) @binding(4) var<uniform> batch: Batch;
@group(0) @binding(5) var<uniform> p: LinearParams;
// Read only when h has a dropout (p.drop): the step its mask was drawn for.
@group(0) @binding(6) var<storage, read> counters: array<u32>;

const DY_LOADS: u32 = (BI_R * BI_J + THREADS - 1u) / THREADS; // dy values each invocation copies

var<workgroup> dys: array<f32, BI_R * BI_J>; // [BI_R][BI_J]: dy[r0 + rr][j0 + jj]

// Element l of this invocation's share of dy's chunk j0 (row e / BI_J, j e % BI_J). Zero past
// the layer's sizes and the batch.
fn load_dy(tid: u32, l: u32, r0: u32, j0: u32) -> f32 {
    let e = tid + l * THREADS;
    let row = r0 + e / BI_J;
    let j = j0 + e % BI_J;
    let ok = e < BI_R * BI_J && row < batch.rows && j < p.outputs;
    return select(0.0, dy[min(row, batch.rows - 1u) * p.outputs + min(j, p.outputs - 1u)], ok);
}

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let k0 = wid.x * BI_K;
    let r0 = wid.y * BI_R;
    if r0 >= batch.rows {
        return; // the whole workgroup is past the live batch
    }
    let kk = tid % BI_K;
    let rr = tid / BI_K;
    var w_next = load_w_chunk(tid, k0, 0u, p.inputs, p.outputs);
    var dy_next: array<f32, DY_LOADS>;
    for (var l = 0u; l < DY_LOADS; l++) {
        dy_next[l] = load_dy(tid, l, r0, 0u);
    }
    var g = 0.0;
    let chunks = (p.outputs + BI_J - 1u) / BI_J;
    for (var t = 0u; t < chunks; t++) {
        // The chunk that arrived, into workgroup memory (W transposed).
        store_w_chunk(tid, w_next);
        for (var l = 0u; l < DY_LOADS; l++) {
            let e = tid + l * THREADS;
            if e < BI_R * BI_J {
                dys[e] = dy_next[l];
            }
        }
        workgroupBarrier();
        // The next chunk's copies, in flight during this chunk's multiply-adds.
        if t + 1u < chunks {
            let j0 = (t + 1u) * BI_J;
            w_next = load_w_chunk(tid, k0, j0, p.inputs, p.outputs);
            for (var l = 0u; l < DY_LOADS; l++) {
                dy_next[l] = load_dy(tid, l, r0, j0);
            }
        }
        // dy[rr][jj] is the same for the whole subgroup (a broadcast); wt along kk is conflict-free.
        for (var jj = 0u; jj < BI_J; jj++) {
            g += dys[rr * BI_J + jj] * wt[jj * PAD + kk];
        }
        workgroupBarrier(); // everyone is done reading before the next chunk is stored
    }
    let row = r0 + rr;
    let k = k0 + kk;
    if row < batch.rows && k < p.inputs {
        let i = row * p.inputs + k;
        var mask_step = 0u;
        if p.drop.threshold != 0u {
            mask_step = counters[COUNTER_MASK_STEP];
        }
        dx[i] = dropout_grad(g, h[i], p.act, p.drop, mask_step, i);
    }
}
