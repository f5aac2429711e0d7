// linear_forward_coop.wgsl: a wide layer's forward split over k, on the tensor cores: the raw
// partial sums of x W with f16 inputs and f32 sums, for output_wide.wgsl to add up.
//
// x: [batch, in] f32, params: [(in + 1), out] f32 (W row-major, then b: not read here) ->
// y: [k_split][batch][out] f32, the sum over workgroup z's share of k of x[row][k] W[k][col].
//
// The f32 counterpart is linear_forward_tiled.wgsl's k split form: the same grid semantics (workgroup z
// takes rounds z * ceil(rounds / k_split) .. of k), the same output, the same output_wide above
// it. What changes is who multiplies. There, every invocation runs 4 x 4 f32 multiply-adds per
// value of k; here, stage 03's kernel 08 shows the way (cooperative matrices, one subgroup per
// block of fragments), with two differences that suit a training step:
//
// - the operands stay f32 in memory (x is the batch the step before wrote, W the parameters the
//   last update moved) and are rounded to f16 as they are staged into workgroup memory, so no
//   conversion pass and no f16 copy is needed. Each value is rounded once per workgroup that
//   stages it (x once per column band, W once per row band), which is cheap next to the loads;
// - small tiles: at 784-1024 in a batch of 256 the product is 0.4 GFLOP, a few microseconds of
//   tensor-core time, and the kernel is all latency. CF_M x CF_N outputs per workgroup (32 or
//   64 each way: 1 to 4 subgroups of 32 x 32, 2 x 2 fragments of 16 x 16 each) and the k loop
//   split over grid z give at 256 x 1024, with 64 x 64, 16 x 4 x k_split workgroups.
//
//   workgroup: CF_M x CF_N = 64 x 64 of y         per round of CF_K = 32 values of k:
//   +---------+---------+                         all invocations copy x [64][32] and
//   | sg 0    | sg 1    |  each subgroup 32 x 32: W [32][64] (4 quads of each per invocation,
//   +---------+---------+  c00 c01                1 or 4 loads each), rounded to f16, into
//   | sg 2    | sg 3    |  c10 c11                workgroup memory; each subgroup then loads
//   +---------+---------+                         2 + 2 fragments per 16 of k and issues 4
//                                                 multiply-adds
//
// The next round's copies are loaded into registers while this round multiplies (one buffer,
// two barriers per round, as kernel 08's fastest tile). The rows of staged tiles are padded by
// 8 halves, so the 8 rows one fragment load reads fall in different banks. After the last
// round each subgroup stores its fragments into a padded f32 tile in workgroup memory, and all
// invocations write it out with bounds tests (rows past the live batch, columns past `out`).
//
// Precision: each input is rounded to f16 (a relative 2^-11; values beyond f16's range, 65504,
// become infinities, which the trainer's NaN check reports), products and sums are f32. Needs
// cooperative matrices with 16 x 16 x 16 f16 inputs and f32 results, and subgroups of 32 (the
// host checks: gpu_matmul::coop_support); `enable` lines are prepended by src/gpu/kernels.rs.
// CF_M, CF_N and COOP_LOADS come from the prelude (src/tiles.rs, `FusedTiles::coop_m`, `coop_n`,
// `coop_loads`).

// x and params as vec4 (every tensor's buffer is a whole number of 16-byte quads), read in one
// of three ways (COOP_LOADS): 0, each invocation copies whole quads, as four 4-byte loads
// (`[i / 4][i % 4]`); 1, the same quads as one 16-byte load each where the rows are whole quads;
// 2, each invocation copies single values, neighbouring invocations neighbouring values (every
// load instruction of a subgroup reads 128 contiguous bytes), stored to workgroup memory one
// half at a time.
@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> params: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>; // [k_split][batch][out]
@group(0) @binding(3) var<uniform> batch: Batch;
@group(0) @binding(4) var<uniform> p: LinearParams;

const CF_K: u32 = 32u;
const SUB_M: u32 = 32u;                      // each subgroup's rows (2 fragments)
const SUB_N: u32 = 32u;                      // and columns (2 fragments)
const SG_N: u32 = CF_N / SUB_N;              // subgroups along the columns
const THREADS: u32 = 32u * (CF_M / SUB_M) * SG_N; // subgroups of 32
const LDX: u32 = (CF_K + 8u) / 4u;           // vec4<f16> per staged x row (padded)
const LDW: u32 = (CF_N + 8u) / 4u;           // vec4<f16> per staged W row (padded)
const LDC: u32 = CF_N + 4u;                  // f32 per staged output row (padded)
const XQ: u32 = CF_M * CF_K / 4u / THREADS;  // x quads each invocation copies per round
const WQ: u32 = CF_K * CF_N / 4u / THREADS;  // W quads each invocation copies per round
const XE: u32 = 4u * XQ;                     // or x values (COOP_LOADS 2)
const WE: u32 = 4u * WQ;                     // or W values

var<workgroup> xs: array<vec4<f16>, CF_M * LDX>; // x tile [row][k]
var<workgroup> ws: array<vec4<f16>, CF_K * LDW>; // W tile [k][col]
var<workgroup> cs: array<f32, CF_M * LDC>;       // the workgroup's outputs, after the rounds

// Four values of x's row `row` from column k, a multiple of 4 (zeros past the input).
fn x_quad(row: u32, k: u32, k_len: u32) -> vec4<f32> {
    if COOP_LOADS == 1u && k_len % 4u == 0u {
        return select(vec4<f32>(0.0), x[(row * k_len + min(k, k_len - 4u)) / 4u], k < k_len);
    }
    var v: vec4<f32>;
    for (var e = 0u; e < 4u; e++) {
        let i = row * k_len + min(k + e, k_len - 1u);
        v[e] = select(0.0, x[i / 4u][i % 4u], k + e < k_len);
    }
    return v;
}

// Four weights of W's row k from column col, a multiple of 4 (zeros past the input and past
// the columns).
fn w_quad(k: u32, col: u32, k_len: u32, n: u32) -> vec4<f32> {
    if COOP_LOADS == 1u && n % 4u == 0u {
        let i = min(k, k_len - 1u) * n + min(col, n - 4u);
        return select(vec4<f32>(0.0), params[i / 4u], k < k_len && col < n);
    }
    var v: vec4<f32>;
    for (var e = 0u; e < 4u; e++) {
        let c = col + e;
        let i = min(k, k_len - 1u) * n + min(c, n - 1u);
        v[e] = select(0.0, params[i / 4u][i % 4u], k < k_len && c < n);
    }
    return v;
}

// The round's copies in flight: quads (COOP_LOADS 0, 1) or single values (2).
var<private> xn: array<vec4<f32>, XQ>;
var<private> wn: array<vec4<f32>, WQ>;
var<private> xe: array<f32, XE>;
var<private> we: array<f32, WE>;

// Loads the copies of the round that starts at k = k0, for the workgroup's rows row0.. (rows past
// the batch read the last live row; their outputs are never written) and columns col0...
fn fetch(tid: u32, row0: u32, last: u32, col0: u32, k0: u32, k_len: u32, n: u32) {
    if COOP_LOADS == 2u {
        // Value e: x row e / CF_K, k e % CF_K; W row e / CF_N, column e % CF_N.
        for (var l = 0u; l < XE; l++) {
            let e = tid + l * THREADS;
            let k = k0 + e % CF_K;
            let i = min(row0 + e / CF_K, last) * k_len + min(k, k_len - 1u);
            xe[l] = select(0.0, x[i / 4u][i % 4u], k < k_len);
        }
        for (var l = 0u; l < WE; l++) {
            let e = tid + l * THREADS;
            let k = k0 + e / CF_N;
            let c = col0 + e % CF_N;
            let i = min(k, k_len - 1u) * n + min(c, n - 1u);
            we[l] = select(0.0, params[i / 4u][i % 4u], k < k_len && c < n);
        }
        return;
    }
    // Quad q: x row q / (CF_K / 4), k 4 (q % (CF_K / 4)); W row q / (CF_N / 4), column 4 (q % (CF_N / 4)).
    for (var l = 0u; l < XQ; l++) {
        let q = tid + l * THREADS;
        xn[l] = x_quad(min(row0 + q / (CF_K / 4u), last), k0 + 4u * (q % (CF_K / 4u)), k_len);
    }
    for (var l = 0u; l < WQ; l++) {
        let q = tid + l * THREADS;
        wn[l] = w_quad(k0 + q / (CF_N / 4u), col0 + 4u * (q % (CF_N / 4u)), k_len, n);
    }
}

// Stores the copies that arrived into workgroup memory, rounded to f16.
fn stash(tid: u32) {
    if COOP_LOADS == 2u {
        for (var l = 0u; l < XE; l++) {
            let e = tid + l * THREADS;
            let k = e % CF_K;
            xs[(e / CF_K) * LDX + k / 4u][k % 4u] = f16(xe[l]);
        }
        for (var l = 0u; l < WE; l++) {
            let e = tid + l * THREADS;
            let c = e % CF_N;
            ws[(e / CF_N) * LDW + c / 4u][c % 4u] = f16(we[l]);
        }
        return;
    }
    for (var l = 0u; l < XQ; l++) {
        let q = tid + l * THREADS;
        xs[(q / (CF_K / 4u)) * LDX + q % (CF_K / 4u)] = vec4<f16>(xn[l]);
    }
    for (var l = 0u; l < WQ; l++) {
        let q = tid + l * THREADS;
        ws[(q / (CF_N / 4u)) * LDW + q % (CF_N / 4u)] = vec4<f16>(wn[l]);
    }
}

@compute @workgroup_size(THREADS)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
    @builtin(subgroup_id) sg: u32,
) {
    let row0 = wid.y * CF_M;
    if row0 >= batch.rows {
        return; // the whole workgroup is past the live batch (uniform: the cooperative ops stay uniform)
    }
    let k_len = p.inputs;
    let n = p.outputs;
    let col0 = wid.x * CF_N;
    let last = batch.rows - 1u;
    let splits = max(p.k_split, 1u);
    let all_rounds = (k_len + CF_K - 1u) / CF_K;
    let per_split = (all_rounds + splits - 1u) / splits;
    let first_round = min(wid.z * per_split, all_rounds);
    let rounds = min(first_round + per_split, all_rounds) - first_round;
    let kb = first_round * CF_K;
    fetch(tid, row0, last, col0, kb, k_len, n);

    let wr = (sg / SG_N) * SUB_M; // this subgroup's block of the workgroup's outputs
    let wc = (sg % SG_N) * SUB_N;
    var c00 = coop_mat16x16<f32, C>();
    var c01 = coop_mat16x16<f32, C>();
    var c10 = coop_mat16x16<f32, C>();
    var c11 = coop_mat16x16<f32, C>();
    // ANCHOR: rounds
    for (var t = 0u; t < rounds; t++) {
        stash(tid); // the round that arrived
        workgroupBarrier();
        if t + 1u < rounds {
            fetch(tid, row0, last, col0, kb + (t + 1u) * CF_K, k_len, n); // in flight during the multiply-adds
        }
        for (var kk = 0u; kk < CF_K; kk += 16u) {
            // Row-major fragments: x rows wr.., 16 values of k each; W rows kk.., 16 columns each
            // (offsets and strides in vec4<f16>).
            let a0 = coopLoadT<coop_mat16x16<f16, A>>(&xs[wr * LDX + kk / 4u], LDX);
            let a1 = coopLoadT<coop_mat16x16<f16, A>>(&xs[(wr + 16u) * LDX + kk / 4u], LDX);
            let b0 = coopLoadT<coop_mat16x16<f16, B>>(&ws[kk * LDW + wc / 4u], LDW);
            let b1 = coopLoadT<coop_mat16x16<f16, B>>(&ws[kk * LDW + (wc + 16u) / 4u], LDW);
            c00 = coopMultiplyAdd(a0, b0, c00);
            c01 = coopMultiplyAdd(a0, b1, c01);
            c10 = coopMultiplyAdd(a1, b0, c10);
            c11 = coopMultiplyAdd(a1, b1, c11);
        }
        workgroupBarrier(); // everyone is done reading before the next round is stored
    }
    // ANCHOR_END: rounds

    // The fragments into the f32 tile (naga wants a coopStore's matrix and index in `let`s),
    // then out with bounds tests: element e of the tile is row e / CF_N, column e % CF_N, so
    // neighbouring invocations write neighbouring columns.
    let s00 = c00;
    let s01 = c01;
    let s10 = c10;
    let s11 = c11;
    let i00 = wr * LDC + wc;
    let i01 = wr * LDC + wc + 16u;
    let i10 = (wr + 16u) * LDC + wc;
    let i11 = (wr + 16u) * LDC + wc + 16u;
    coopStoreT(s00, &cs[i00], LDC);
    coopStoreT(s01, &cs[i01], LDC);
    coopStoreT(s10, &cs[i10], LDC);
    coopStoreT(s11, &cs[i11], LDC);
    workgroupBarrier();
    for (var e = tid; e < CF_M * CF_N; e += THREADS) {
        let row = row0 + e / CF_N;
        let col = col0 + e % CF_N;
        if row < batch.rows && col < n {
            y[(wid.z * batch.rows + row) * n + col] = cs[(e / CF_N) * LDC + e % CF_N];
        }
    }
}
