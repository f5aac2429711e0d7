// linear_forward.wgsl: y = act(x W + b) in ONE dispatch (matmul, bias add and activation fused).
//
// x: [batch, in], params: [(in + 1), out] (W row-major, then b as the last row) -> y: [batch, out].
//
// Why not a classic tiled matmul? Training shapes are small and skinny: 64 x 784 x 128 for an
// MNIST batch is 6.4 M multiply-adds, a fraction of a microsecond of arithmetic for a big GPU.
// What costs is LATENCY: a thread that walks k = 0..784 one load at a time waits for memory
// ~800 times in a row, and a 16x16-tile kernel walks 49 tiles with two barriers each, in only 32
// workgroups. So this kernel splits k instead: a workgroup owns TR rows x TN columns; its KS = 16
// rows of invocations each sum every 16th k (16 chains, 16x shorter; KS = 8 on devices that
// allow only WebGPU's default 256 invocations per workgroup), with TR = 4 row
// accumulators per invocation so each weight read is used 4 times; and the k loop is unrolled
// by 8 with all loads first, so 40 loads are in flight at once instead of 5. The KS partial
// sums then meet in workgroup memory, where bias and activation are applied on the way out.
// Lanes of a subgroup run along the columns: their weight reads are contiguous, and their x
// reads are one value broadcast to all.

struct LinearParams {
    inputs: u32,
    outputs: u32,
    act: u32,
    _pad: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> params: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> batch: Batch;
@group(0) @binding(4) var<uniform> p: LinearParams;

// From the prelude (the host sizes the grid with them): TN columns per workgroup
// (workgroup_size.x) and TR rows per workgroup, one accumulator each per invocation. The kernel
// reads its TR rows as one vec4, so TR is 4. Also from the prelude, chosen for the device
// (wgsl.rs, DeviceFit): KS slices of the k loop (workgroup_size.y), at least TR so that the
// TN x KS invocations cover the TR x TN outputs of the final sum.

var<workgroup> partial: array<f32, KS * TR * TN>; // [KS][TR][TN]

@compute @workgroup_size(TN, KS)
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
        var k = lid.y;
        // Eight k's per iteration, all loads first: 8 weights and 32 inputs in flight at once.
        // A GPU runs a thread's instructions in order, so a loop that loads one k and then
        // multiplies waits a full memory latency per k; here it waits once per 8.
        loop {
            if k + 7u * KS >= k_len {
                break;
            }
            let k0 = k;
            let k1 = k + 1u * KS;
            let k2 = k + 2u * KS;
            let k3 = k + 3u * KS;
            let k4 = k + 4u * KS;
            let k5 = k + 5u * KS;
            let k6 = k + 6u * KS;
            let k7 = k + 7u * KS;
            let w0 = params[k0 * n + col];
            let w1 = params[k1 * n + col];
            let w2 = params[k2 * n + col];
            let w3 = params[k3 * n + col];
            let w4 = params[k4 * n + col];
            let w5 = params[k5 * n + col];
            let w6 = params[k6 * n + col];
            let w7 = params[k7 * n + col];
            let a0 = vec4<f32>(x[x0 + k0], x[x1 + k0], x[x2 + k0], x[x3 + k0]);
            let a1 = vec4<f32>(x[x0 + k1], x[x1 + k1], x[x2 + k1], x[x3 + k1]);
            let a2 = vec4<f32>(x[x0 + k2], x[x1 + k2], x[x2 + k2], x[x3 + k2]);
            let a3 = vec4<f32>(x[x0 + k3], x[x1 + k3], x[x2 + k3], x[x3 + k3]);
            let a4 = vec4<f32>(x[x0 + k4], x[x1 + k4], x[x2 + k4], x[x3 + k4]);
            let a5 = vec4<f32>(x[x0 + k5], x[x1 + k5], x[x2 + k5], x[x3 + k5]);
            let a6 = vec4<f32>(x[x0 + k6], x[x1 + k6], x[x2 + k6], x[x3 + k6]);
            let a7 = vec4<f32>(x[x0 + k7], x[x1 + k7], x[x2 + k7], x[x3 + k7]);
            acc += a0 * w0 + a1 * w1 + a2 * w2 + a3 * w3;
            acc += a4 * w4 + a5 * w5 + a6 * w6 + a7 * w7;
            k += 8u * KS;
        }
        for (; k < k_len; k += KS) {
            acc += vec4<f32>(x[x0 + k], x[x1 + k], x[x2 + k], x[x3 + k]) * params[k * n + col];
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
