// linear_forward_tiled.wgsl: y = act(x W + b) in ONE dispatch, for WIDE layers in big batches.
//
// x: [batch, in], params: [(in + 1), out] (W row-major, then b as the last row) -> y: [batch, out].
//
// linear_forward.wgsl is built for latency: a workgroup owns a few rows (TR) and one column
// per invocation, and every multiply-add needs one weight load plus TR input loads, straight
// from memory. At 784-128 in a batch of 64 that is right (the step is all latency). At
// 784-1024 in a batch of 256 it is not: 0.2 G multiply-adds, each behind more than one load,
// and W (3.2 MB) read again by every band of TR rows. This kernel is a small register-blocked
// matmul in the style of stage 03's kernels 03-05, with the bias and the activation fused:
//
// - a workgroup owns FT_M rows x FT_N columns of y; each invocation a 4 x 4 block of them, for
//   one of FT_S slices of each k round (the slices' partial sums meet at the end, which
//   shortens every chain of dependent multiply-adds FT_S times and gives the workgroup
//   FT_S times the invocations);
// - k goes in rounds of FT_K: all invocations copy the round's x tile ([FT_M][FT_K]) and W tile
//   ([FT_K][FT_N]) into workgroup memory, then each reads 4 x 4 inputs and 4 x 4 weights as
//   eight vec4 per 64 multiply-adds (linear_forward: five scalar loads per four);
// - the next round's tiles are loaded into registers while this round's multiply-adds run
//   (one buffer in workgroup memory, two barriers per round: the fastest arrangement of
//   stage 03's kernel 08 on the H200);
// - the input is the tensor x, read through forward_input.wgsl's `input_start` / `input`. It
//   never gathers byte images itself: its gathering form, which read the scattered rows'
//   bytes in the k loop, made an epoch of 784-1024-10 at batch 256 take 22.4 ms on the H200
//   against 19.8 with a separate gather dispatch before this one (README, "Wide layers").
//
// - split over k (p.k_split > 1: the wide layer below output_wide.wgsl): workgroup z of the
//   grid takes rounds z * ceil(rounds / k_split) .. of k only and writes its raw partial sums
//   (no bias, no activation) to y[z][row][col]; output_wide adds them up. k_split times the
//   workgroups, each walking 1 / k_split of the rounds.
//
// FT_M, FT_N, FT_K and FT_S come from the prelude (src/tiles.rs, `FusedTiles`).
// `FusedTiles::tiled_min` decides which layers run this kernel instead of linear_forward.

// `p` is the layer's LinearParams (common.wgsl).
@group(0) @binding(1) var<storage, read> params: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>; // [k_split][batch][out] when split
@group(0) @binding(3) var<uniform> batch: Batch;
@group(0) @binding(4) var<uniform> p: LinearParams;
// Read only with dropout (p.drop, unsplit): the step its mask is drawn for.
@group(0) @binding(14) var<storage, read> counters: array<u32>;

const MQ: u32 = FT_M / 4u;                 // 4-row blocks of the workgroup's rows
const NQ: u32 = FT_N / 4u;                 // 4-column blocks
const KQ: u32 = FT_K / 4u;                 // 4-deep groups of a round
const THREADS: u32 = MQ * NQ * FT_S;
const XL: u32 = FT_M * FT_K / THREADS;     // x elements each invocation copies per round
const WL: u32 = FT_K * FT_N / THREADS;     // weights each invocation copies per round
const X_TILE: u32 = FT_M * KQ;             // vec4: x as [FT_M][FT_K / 4], 4 values of k each
const W_TILE: u32 = FT_K * NQ;             // vec4: W as [FT_K][FT_N / 4], 4 columns each
const PARTIALS: u32 = (FT_S - 1u) * MQ * NQ * 4u; // vec4: slices 1.. after the last round
// One array: the tiles during the rounds, the slices' partial sums after them.
var<workgroup> sh: array<vec4<f32>, max(X_TILE + W_TILE, max(PARTIALS, 1u))>;

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let row0 = wid.y * FT_M;
    if row0 >= batch.rows {
        return; // whole workgroup past the live batch
    }
    let k_len = p.inputs;
    let n = p.outputs;
    let col0 = wid.x * FT_N;
    let last = batch.rows - 1u;

    // This invocation's share of each round's copies: x element l is row e / FT_K, k e % FT_K
    // (neighbouring invocations read neighbouring k of a row); weight l is k e / FT_N, column
    // e % FT_N. Rows past the batch read the last live row (never written).
    var starts: array<u32, XL>;
    for (var l = 0u; l < XL; l++) {
        let r = (tid + l * THREADS) / FT_K;
        starts[l] = input_start(r, min(row0 + r, last), k_len);
    }
    var x_next: array<f32, XL>;
    var w_next: array<f32, WL>;
    // ANCHOR: k_split
    // This workgroup's rounds: all of them, or its share of a split k loop (possibly none).
    let splits = max(p.k_split, 1u);
    let all_rounds = (k_len + FT_K - 1u) / FT_K;
    let per_split = (all_rounds + splits - 1u) / splits;
    let first_round = min(wid.z * per_split, all_rounds);
    let rounds = min(first_round + per_split, all_rounds) - first_round;
    let kb = first_round * FT_K; // its first k
    // ANCHOR_END: k_split
    // The copies of its first round into registers; zeros past k and past the columns.
    for (var l = 0u; l < XL; l++) {
        let kk = kb + (tid + l * THREADS) % FT_K;
        x_next[l] = select(0.0, input(starts[l], min(kk, k_len - 1u)), kk < k_len);
    }
    for (var l = 0u; l < WL; l++) {
        let e = tid + l * THREADS;
        let kk = kb + e / FT_N;
        let col = col0 + e % FT_N;
        w_next[l] = select(0.0, params[min(kk, k_len - 1u) * n + min(col, n - 1u)], kk < k_len && col < n);
    }

    let slice = tid / (MQ * NQ);
    let bi = (tid % (MQ * NQ)) / NQ;  // rows 4 bi .. 4 bi + 3 of the workgroup's
    let bj = tid % NQ;                // columns 4 bj .. 4 bj + 3
    var acc: array<vec4<f32>, 4>;     // acc[i]: row 4 bi + i, four columns
    for (var t = 0u; t < rounds; t++) {
        // The round that arrived, into workgroup memory.
        for (var l = 0u; l < XL; l++) {
            let e = tid + l * THREADS;
            let r = e / FT_K;
            let kk = e % FT_K;
            sh[r * KQ + kk / 4u][kk % 4u] = x_next[l];
        }
        for (var l = 0u; l < WL; l++) {
            let e = tid + l * THREADS;
            let kk = e / FT_N;
            let c = e % FT_N;
            sh[X_TILE + kk * NQ + c / 4u][c % 4u] = w_next[l];
        }
        workgroupBarrier();
        // The next round's copies, in flight during this round's multiply-adds.
        if t + 1u < rounds {
            let k0 = kb + (t + 1u) * FT_K;
            for (var l = 0u; l < XL; l++) {
                let k = k0 + (tid + l * THREADS) % FT_K;
                x_next[l] = select(0.0, input(starts[l], min(k, k_len - 1u)), k < k_len);
            }
            for (var l = 0u; l < WL; l++) {
                let e = tid + l * THREADS;
                let k = k0 + e / FT_N;
                let col = col0 + e % FT_N;
                w_next[l] = select(0.0, params[min(k, k_len - 1u) * n + min(col, n - 1u)], k < k_len && col < n);
            }
        }
        // This slice's 4-deep groups of the round: 4 x 4 inputs, 4 x 4 weights, 64 multiply-adds.
        for (var qq = 0u; qq < KQ / FT_S; qq++) {
            let q = qq * FT_S + slice;
            let a0 = sh[(4u * bi) * KQ + q];
            let a1 = sh[(4u * bi + 1u) * KQ + q];
            let a2 = sh[(4u * bi + 2u) * KQ + q];
            let a3 = sh[(4u * bi + 3u) * KQ + q];
            for (var kk = 0u; kk < 4u; kk++) {
                let w = sh[X_TILE + (4u * q + kk) * NQ + bj];
                acc[0] += a0[kk] * w;
                acc[1] += a1[kk] * w;
                acc[2] += a2[kk] * w;
                acc[3] += a3[kk] * w;
            }
        }
        workgroupBarrier(); // everyone is done reading before the next round is stored
    }

    // The slices' partial sums meet; slice 0 adds the bias, activates and writes (split over k:
    // writes the raw sum of its rounds).
    if FT_S > 1u && slice > 0u {
        for (var i = 0u; i < 4u; i++) {
            sh[(((slice - 1u) * MQ + bi) * NQ + bj) * 4u + i] = acc[i];
        }
    }
    workgroupBarrier();
    if slice == 0u {
        var mask_step = 0u;
        if p.drop.threshold != 0u && splits <= 1u {
            mask_step = counters[COUNTER_MASK_STEP];
        }
        for (var s = 1u; s < FT_S; s++) {
            for (var i = 0u; i < 4u; i++) {
                acc[i] += sh[(((s - 1u) * MQ + bi) * NQ + bj) * 4u + i];
            }
        }
        for (var i = 0u; i < 4u; i++) {
            let row = row0 + 4u * bi + i;
            for (var c = 0u; c < 4u; c++) {
                let col = col0 + 4u * bj + c;
                if row < batch.rows && col < n {
                    if splits > 1u {
                        y[(wid.z * batch.rows + row) * n + col] = acc[i][c];
                    } else {
                        let e = row * n + col;
                        y[e] = activate(acc[i][c] + params[k_len * n + col], p.act) * mask_value(p.drop, mask_step, e);
                    }
                }
            }
        }
    }
}
