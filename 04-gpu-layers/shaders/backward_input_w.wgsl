// backward_input_w.wgsl: the chunks of W that linear_backward_input.wgsl and output_backward.wgsl
// stage for dx = dy W^T. A workgroup owns BI_K values of k (dx's columns) for BI_R rows and
// walks j (dy's columns) in chunks of BI_J: each invocation loads its share of
// W[k0 .. k0 + BI_K][j0 .. j0 + BI_J] along j (neighbouring invocations, neighbouring words)
// into registers, then stores it TRANSPOSED into `wt`, where each invocation (one k) reads
// along kk without bank conflicts. The including kernel declares `params` ([(in + 1), out],
// W row-major) and calls these with its layer's `inputs` and `outputs`.
//
// BI_K, BI_R and BI_J come from the prelude (src/wgsl.rs); BI_K * BI_R invocations per workgroup.

const THREADS: u32 = BI_K * BI_R;
const W_LOADS: u32 = (BI_K * BI_J + THREADS - 1u) / THREADS; // W values each invocation copies per chunk
const PAD: u32 = BI_K + 1u; // a row of the transposed W tile: BI_K values and one to skip banks

var<workgroup> wt: array<f32, BI_J * PAD>; // [BI_J][PAD]: W[k0 + kk][j0 + jj] at wt[jj * PAD + kk]

// Element l of this invocation's share of chunk j0 (index e < BI_K * BI_J: k e / BI_J, j e % BI_J).
// Zero past the layer's sizes.
fn load_w(tid: u32, l: u32, k0: u32, j0: u32, inputs: u32, outputs: u32) -> f32 {
    let e = tid + l * THREADS;
    let k = k0 + e / BI_J;
    let j = j0 + e % BI_J;
    let ok = e < BI_K * BI_J && k < inputs && j < outputs;
    return select(0.0, params[min(k, inputs - 1u) * outputs + min(j, outputs - 1u)], ok);
}

// This invocation's share of chunk j0, loaded into registers.
fn load_w_chunk(tid: u32, k0: u32, j0: u32, inputs: u32, outputs: u32) -> array<f32, W_LOADS> {
    var w: array<f32, W_LOADS>;
    for (var l = 0u; l < W_LOADS; l++) {
        w[l] = load_w(tid, l, k0, j0, inputs, outputs);
    }
    return w;
}

// The chunk that arrived, into `wt` (transposed).
fn store_w_chunk(tid: u32, w: array<f32, W_LOADS>) {
    for (var l = 0u; l < W_LOADS; l++) {
        let e = tid + l * THREADS;
        if e < BI_K * BI_J {
            wt[(e % BI_J) * PAD + e / BI_J] = w[l];
        }
    }
}
