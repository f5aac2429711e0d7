// linear_forward.wgsl: y = act(x W + b) in ONE dispatch (matmul, bias add and activation fused).
//
// x: [batch, in], params: [(in + 1), out] (W row-major, then b as the last row) -> y: [batch, out].
//
// Why not a classic tiled matmul? Training shapes are small and skinny: 64 x 784 x 128 for an
// MNIST batch is 6.4 M multiply-adds, a fraction of a microsecond of arithmetic for a big GPU.
// What costs is latency: a 16x16 tile kernel walks K = 784 in 49 dependent steps with a barrier
// in each, and makes only 32 workgroups, far fewer than the GPU has cores. So this kernel splits
// K instead: a workgroup owns TR rows x TN columns; its KS = 8 rows of invocations each sum every
// 8th k (8 independent chains, 8x shorter), keeping TR = 4 row accumulators per invocation so
// each weight read from memory is used 4 times. The KS partial sums then meet in workgroup
// memory, where the bias and the activation are applied on the way out. Lanes of a subgroup run
// along the columns: their weight reads are contiguous and their x reads are one broadcast value.

struct Params {
    inputs: u32,
    outputs: u32,
    act: u32,
    _pad: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> params: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> batch: Batch;
@group(0) @binding(4) var<uniform> p: Params;

const TN: u32 = 32u; // columns per workgroup (workgroup_size.x)
const KS: u32 = 8u;  // slices of the k loop (workgroup_size.y)
const TR: u32 = 4u;  // rows per workgroup, one accumulator each per invocation

var<workgroup> partial: array<f32, 1024>; // [KS][TR][TN]

@compute @workgroup_size(32, 8)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let row0 = wid.y * TR;
    if row0 >= batch.rows {
        return; // whole workgroup past the live batch
    }
    let k_len = p.inputs;
    let n = p.outputs;
    let col = wid.x * TN + lid.x;
    // Rows past the batch read the last live row instead (always in bounds, no branch in the
    // hot loop); their results are never written.
    let last = batch.rows - 1u;
    let x0 = min(row0, last) * k_len;
    let x1 = min(row0 + 1u, last) * k_len;
    let x2 = min(row0 + 2u, last) * k_len;
    let x3 = min(row0 + 3u, last) * k_len;
    var acc = vec4<f32>(0.0);
    if col < n {
        for (var k = lid.y; k < k_len; k += KS) {
            let w = params[k * n + col];
            acc += vec4<f32>(x[x0 + k], x[x1 + k], x[x2 + k], x[x3 + k]) * w;
        }
    }
    let base = lid.y * TR * TN + lid.x;
    partial[base] = acc.x;
    partial[base + TN] = acc.y;
    partial[base + 2u * TN] = acc.z;
    partial[base + 3u * TN] = acc.w;
    workgroupBarrier();

    // TR x TN = 128 outputs; the first 128 invocations each add up one output's KS slices.
    let t = lid.y * TN + lid.x;
    if t < TR * TN {
        let r = t / TN;
        let c = t % TN;
        var z = 0.0;
        for (var s = 0u; s < KS; s++) {
            z += partial[(s * TR + r) * TN + c];
        }
        let row = row0 + r;
        let out_col = wid.x * TN + c;
        if row < batch.rows && out_col < n {
            y[row * n + out_col] = activate(z + params[k_len * n + out_col], p.act);
        }
    }
}
