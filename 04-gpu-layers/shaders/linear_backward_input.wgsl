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
// chunk of dy; then the invocations multiply from there: W is read
// from memory once per BI_R rows instead of once per row, and always along its rows. The next
// chunk's copies are loaded into registers while this chunk multiplies.
//
// Each invocation then sums four rows of one k over a SLICE of the chunk (BI_S slices of
// BI_J / BI_S values of j): one load of dy's four rows (dy is staged transposed, four rows to a
// vec4) and one of W per four multiply-adds, where one row per invocation took two loads per
// multiply-add; the slices' sums meet in workgroup memory at the end.
//
// BI_K, BI_R (a multiple of 4), BI_J and BI_S come from the prelude (src/wgsl.rs); BI_K x BI_R / 4
// x BI_S invocations per workgroup.

// `p` is the layer's LinearParams (common.wgsl).
@group(0) @binding(0) var<storage, read> dy: array<f32>;
@group(0) @binding(1) var<storage, read> params: array<f32>;
@group(0) @binding(2) var<storage, read> h: array<f32>;
@group(0) @binding(3) var<storage, read_write> dx: array<f32>;
@group(0) @binding(4) var<uniform> batch: Batch;
@group(0) @binding(5) var<uniform> p: LinearParams;
// Read only when h has a dropout (p.drop): the step its mask was drawn for.
@group(0) @binding(6) var<storage, read> counters: array<u32>;

const RQ: u32 = BI_R / 4u;                // quads of rows
const THREADS: u32 = BI_K * RQ * BI_S;
const JS: u32 = BI_J / BI_S;              // values of j per slice of a chunk
const W_LOADS: u32 = (BI_K * BI_J + THREADS - 1u) / THREADS; // W values each invocation copies per chunk
const DY_LOADS: u32 = (BI_R * BI_J + THREADS - 1u) / THREADS; // dy values each invocation copies
const PAD: u32 = BI_K + 1u; // a row of the transposed W tile: BI_K values and one to skip banks

var<workgroup> wt: array<f32, BI_J * PAD>; // [BI_J][PAD]: W[k0 + kk][j0 + jj] at wt[jj * PAD + kk]
var<workgroup> dys: array<vec4<f32>, BI_J * RQ>; // [BI_J][RQ]: dy[r0 + 4q + e][j0 + jj] at dys[jj * RQ + q][e]
var<workgroup> sums: array<vec4<f32>, BI_S * RQ * BI_K>; // [BI_S][RQ][BI_K]: the slices' sums

// Element l of this invocation's share of chunk j0: of W (index e < BI_K * BI_J, k e / BI_J,
// j e % BI_J) and of dy (row e / BI_J, j e % BI_J). Zero past the layer's sizes and the batch.
fn load_w(tid: u32, l: u32, k0: u32, j0: u32) -> f32 {
    let e = tid + l * THREADS;
    let k = k0 + e / BI_J;
    let j = j0 + e % BI_J;
    let ok = e < BI_K * BI_J && k < p.inputs && j < p.outputs;
    return select(0.0, params[min(k, p.inputs - 1u) * p.outputs + min(j, p.outputs - 1u)], ok);
}

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
    let q = (tid / BI_K) % RQ; // rows 4q..4q+3
    let s = tid / (BI_K * RQ); // the slice of each chunk
    var w_next: array<f32, W_LOADS>;
    var dy_next: array<f32, DY_LOADS>;
    for (var l = 0u; l < W_LOADS; l++) {
        w_next[l] = load_w(tid, l, k0, 0u);
    }
    for (var l = 0u; l < DY_LOADS; l++) {
        dy_next[l] = load_dy(tid, l, r0, 0u);
    }
    var g = vec4<f32>(0.0);
    let chunks = (p.outputs + BI_J - 1u) / BI_J;
    for (var t = 0u; t < chunks; t++) {
        // The chunk that arrived, into workgroup memory (W and dy transposed).
        for (var l = 0u; l < W_LOADS; l++) {
            let e = tid + l * THREADS;
            if e < BI_K * BI_J {
                wt[(e % BI_J) * PAD + e / BI_J] = w_next[l];
            }
        }
        for (var l = 0u; l < DY_LOADS; l++) {
            let e = tid + l * THREADS;
            if e < BI_R * BI_J {
                let r = e / BI_J;
                dys[(e % BI_J) * RQ + r / 4u][r % 4u] = dy_next[l];
            }
        }
        workgroupBarrier();
        // The next chunk's copies, in flight during this chunk's multiply-adds.
        if t + 1u < chunks {
            let j0 = (t + 1u) * BI_J;
            for (var l = 0u; l < W_LOADS; l++) {
                w_next[l] = load_w(tid, l, k0, j0);
            }
            for (var l = 0u; l < DY_LOADS; l++) {
                dy_next[l] = load_dy(tid, l, r0, j0);
            }
        }
        // dys[jj][q] is the same for the whole subgroup (a broadcast); wt along kk is conflict-free.
        for (var jj = s * JS; jj < (s + 1u) * JS; jj++) {
            g += dys[jj * RQ + q] * wt[jj * PAD + kk];
        }
        workgroupBarrier(); // everyone is done reading before the next chunk is stored
    }
    sums[(s * RQ + q) * BI_K + kk] = g;
    workgroupBarrier();
    // Output (rr, kk) of the workgroup's BI_R x BI_K: its rows' quad, summed over the slices.
    var mask_step = 0u;
    if p.drop.threshold != 0u {
        mask_step = counters[COUNTER_MASK_STEP];
    }
    for (var o = tid; o < BI_R * BI_K; o += THREADS) {
        let rr = o / BI_K;
        let kc = o % BI_K;
        var total = 0.0;
        for (var t = 0u; t < BI_S; t++) {
            total += sums[(t * RQ + rr / 4u) * BI_K + kc][rr % 4u];
        }
        let row = r0 + rr;
        let k = k0 + kc;
        if row < batch.rows && k < p.inputs {
            let i = row * p.inputs + k;
            dx[i] = dropout_grad(total, h[i], p.act, p.drop, mask_step, i);
        }
    }
}
