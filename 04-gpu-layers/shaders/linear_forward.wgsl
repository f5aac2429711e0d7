// linear_forward.wgsl: y = act(x W + b) in ONE dispatch (matmul, bias add and activation fused).
//
// x: [batch, in], params: [(in + 1), out] (W row-major, then b as the last row) -> y: [batch, out].
//
// Why not a classic tiled matmul? Training shapes are small and skinny: 64 x 784 x 128 for an
// MNIST batch is 6.4 M multiply-adds, a fraction of a microsecond of arithmetic for a big GPU.
// What costs is LATENCY: a thread that walks k = 0..784 one load at a time waits for memory
// ~800 times in a row, and a 16x16-tile kernel walks 49 tiles with two barriers each, in only 32
// workgroups. So this kernel splits k instead: a workgroup owns TR rows x TN columns; its KS rows
// of invocations each sum every KS-th k (KS chains, KS times shorter), with TR row accumulators
// per invocation so each weight read is used TR times; and the k loop issues U weight loads
// (and their U x TR inputs) before the first multiply, so a thread waits for memory once per U
// values of k instead of once per k. The KS partial sums then meet in workgroup memory, where
// bias and activation are applied on the way out. Lanes of a subgroup run along the columns:
// their weight reads are contiguous, and their x reads are one value broadcast to all.
//
// TN, KS, TR and U come from the prelude (src/tiles.rs, `FusedTiles`): `gpu-layers --sweep`
// times the combinations; on a device that allows fewer invocations per workgroup than TN x KS
// (WebGPU's default is 256), `FusedTiles::fitted` halves KS until they fit (src/routing.rs,
// `DeviceFit`). Every loop over them has a constant trip count, which the shader
// compiler unrolls, so the arrays below live in registers.

// `p` is the layer's LinearParams (common.wgsl).
// The input (binding 0, and 5-9 when gathering) is read through `input_start` and `input`,
// from forward_input.wgsl (the tensor x) or forward_input_gather.wgsl (bytes gathered by this
// dispatch itself), prepended by the host.
@group(0) @binding(1) var<storage, read> params: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> batch: Batch;
@group(0) @binding(4) var<uniform> p: LinearParams;
// Read only with dropout (p.drop): the step its mask is drawn for.
@group(0) @binding(14) var<storage, read> counters: array<u32>;

var<workgroup> partial: array<f32, KS * TR * TN>; // [KS][TR][TN]
const TRQ: u32 = (TR + 3u) / 4u; // rows in quads of 4 (forward_transposed.wgsl)

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
    // The gathering form stages the workgroup's input rows in workgroup memory first (and the
    // first column of workgroups keeps them for the rest of the step); a no-op otherwise.
    // The plain form stages them transposed (forward_transposed.wgsl).
    stage_input(row0, k_len, wid.x == 0u, lid.y * TN + lid.x);
    let transposed = stage_transposed(row0, k_len, lid.y * TN + lid.x);
    workgroupBarrier();
    var xr: array<u32, TR>;
    for (var r = 0u; r < TR; r++) {
        xr[r] = input_start(r, min(row0 + r, last), k_len);
    }
    var acc: array<f32, TR>;
    if col < n && transposed {
        let sums = transposed_k_loop(lid.y, k_len, n, col);
        for (var r = 0u; r < TR; r++) {
            acc[r] = sums[r / 4u][r % 4u];
        }
    } else if col < n {
        var k = lid.y;
        loop {
            if k + (U - 1u) * KS >= k_len {
                break;
            }
            // U weights and U x TR inputs in flight before the first multiply.
            var w: array<f32, U>;
            var a: array<f32, U * TR>;
            for (var u = 0u; u < U; u++) {
                w[u] = params[(k + u * KS) * n + col];
                for (var r = 0u; r < TR; r++) {
                    a[u * TR + r] = input(xr[r], k + u * KS);
                }
            }
            for (var u = 0u; u < U; u++) {
                for (var r = 0u; r < TR; r++) {
                    acc[r] += a[u * TR + r] * w[u];
                }
            }
            k += U * KS;
        }
        for (; k < k_len; k += KS) {
            let w = params[k * n + col];
            for (var r = 0u; r < TR; r++) {
                acc[r] += input(xr[r], k) * w;
            }
        }
    }
    for (var r = 0u; r < TR; r++) {
        partial[(lid.y * TR + r) * TN + lid.x] = acc[r];
    }
    workgroupBarrier();

    // TR x TN outputs; the invocations each add up the KS slices of one (or more) of them,
    // then bias, activation and (with p.drop) the dropout mask.
    var mask_step = 0u;
    if p.drop.threshold != 0u {
        mask_step = counters[COUNTER_MASK_STEP];
    }
    for (var o = lid.y * TN + lid.x; o < TR * TN; o += TN * KS) {
        let r = o / TN;
        let c = o % TN;
        var z = 0.0;
        for (var s = 0u; s < KS; s++) {
            z += partial[(s * TR + r) * TN + c];
        }
        let row = row0 + r;
        let out_col = wid.x * TN + c;
        if row < batch.rows && out_col < n {
            let i = row * n + out_col;
            y[i] = activate(z + params[k_len * n + out_col], p.act) * mask_value(p.drop, mask_step, i);
        }
    }
}
