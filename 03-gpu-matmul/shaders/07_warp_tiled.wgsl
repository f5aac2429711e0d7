// 07_warp_tiled.wgsl: kernel 05 with warp tiling, deeper k-steps and a swizzled workgroup order.
//
// The idea: kernel 05 spreads each invocation's TM x TN outputs across the whole workgroup
// tile ("strided ownership"). Here the workgroup tile is first cut into warp tiles, one per
// group of 32 consecutive invocations (a subgroup, "warp", on NVIDIA), and an invocation's
// outputs stay inside its warp's tile. Three things follow:
//
// - Every read of workgroup memory by a warp touches few, neighbouring vec4s: the 32
//   invocations of a warp form WTY x WTX (e.g. 4 x 8), so one load of A serves 4 distinct
//   vec4s (the rest are broadcasts) and one load of B 8 neighbouring vec4s: one 128-byte
//   row of the banks, no conflicts, no second pass.
// - A warp's accumulators cover a compact WM x WN block of C, so its reads of the tiles are
//   the same few rows and columns again and again, and its stores of C are whole 128-byte
//   rows.
// - Warps are the unit the hardware schedules; keeping a warp's data local is what siboehm's
//   SGEMM kernel 10 ("warptiling") does on CUDA.
//
//   workgroup tile BM x BN                 one warp tile WM x WN (WTY x WTX invocations)
//   +---------+---------+                  +---+---+---+---+---+---+---+---+---+---+ ...
//   | warp 0  | warp 1  |                  |0,0|0,1|...|0,7|0,0|0,1|...         <- 4 columns
//   |  WM x WN|         |                  +---+---+---+---+---+---+              per cell,
//   +---------+---------+                  |1,0|1,1|...                            TN/4 cells
//   | warp 2  | warp 3  |                  ...   (wy, wx): invocation of the warp  per row
//   +---------+---------+
//
// Invocation (wy, wx) owns rows (i * WTY + wy) * 4 .. + 4 of its warp tile for i < TM / 4,
// and columns (j * WTX + wx) * 4 .. + 4 for j < TN / 4: TM x TN outputs, in groups of four
// interleaved across the warp (as kernel 04 interleaves them across the workgroup).
//
// Also here, as tile parameters the tuner can switch:
// - BK, the depth of a k-step (double-buffered as in kernel 05, one barrier per step): 16
//   would halve kernel 05's barriers per multiply-add.
// - A swizzled workgroup order ("grouped launch"): workgroups are numbered along rows of C, so
//   consecutive workgroups would share one row band of A and sweep all of B. Instead GM row
//   bands are walked column by column, so the workgroups resident at one time share a few
//   bands of A and of B, which then stay in the L2 cache. (GM = 1 is the plain order.)
//
// On the H200 none of the three paid (book/src/worklog/03.md): the best tile is kernel 05's
// (128 x 128 x 8, 16 x 8 per invocation) with 64 x 64 warp tiles, at kernel 05's speed; BK = 16
// made every tile slower, and the swizzle changed nothing measurable.
//
// Everything else (transposed A staging, vec4 masks, guards, the multiple-of-4 strides) is as
// in 05_double_buffered.wgsl. Constraints (checked in kernels.rs): WTY * WTX = 32 with
// WTY = WM / TM and WTX = WN / TN; WM | BM, WN | BN; TM, TN, BK multiples of 4.

struct Dims {
    m: u32, k: u32, n: u32,
    lda: u32, ldb: u32, ldc: u32,
    _pad0: u32, _pad1: u32,
}

@group(0) @binding(0) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> b: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> c: array<vec4<f32>>;
@group(0) @binding(3) var<uniform> dims: Dims;

const TRANS_A: bool = false;
const TRANS_B: bool = false;
const BM: u32 = 128u;
const BN: u32 = 128u;
const BK: u32 = 8u;
const WM: u32 = 64u;            // rows of C per warp
const WN: u32 = 64u;            // columns of C per warp
const TM: u32 = 16u;            // rows of C per invocation
const TN: u32 = 8u;             // columns of C per invocation
const GM: u32 = 8u;             // row bands of workgroups walked together (swizzle)
const WTY: u32 = WM / TM;       // invocations of a warp along m
const WTX: u32 = WN / TN;       // invocations of a warp along n (WTY * WTX = 32)
const WARPS_N: u32 = BN / WN;
const THREADS: u32 = (BM / WM) * WARPS_N * 32u;

const A_TILE: u32 = BK * BM / 4u; // vec4s in one A tile
const B_TILE: u32 = BK * BN / 4u;
const LA: u32 = (A_TILE + THREADS - 1u) / THREADS;
const LB: u32 = (B_TILE + THREADS - 1u) / THREADS;

var<workgroup> a_tile: array<vec4<f32>, 2u * A_TILE>; // two halves, each [BK][BM / 4]: A transposed
var<workgroup> b_tile: array<vec4<f32>, 2u * B_TILE>; // two halves, each [BK][BN / 4]

fn masked(v: vec4<f32>, col: u32, cols: u32) -> vec4<f32> {
    return select(vec4(0.0), v, vec4(col) + vec4(0u, 1u, 2u, 3u) < vec4(cols));
}

// Four elements of a row of A or B as STORED, zeros past the logical shape.
fn load_a4(row: u32, col: u32) -> vec4<f32> {
    let rows = select(dims.m, dims.k, TRANS_A);
    let cols = select(dims.k, dims.m, TRANS_A);
    if row >= rows || col >= cols { return vec4(0.0); }
    return masked(a[(row * dims.lda + col) / 4u], col, cols);
}

fn load_b4(row: u32, col: u32) -> vec4<f32> {
    let rows = select(dims.k, dims.n, TRANS_B);
    let cols = select(dims.n, dims.k, TRANS_B);
    if row >= rows || col >= cols { return vec4(0.0); }
    return masked(b[(row * dims.ldb + col) / 4u], col, cols);
}

var<private> a_next: array<vec4<f32>, LA>;
var<private> b_next: array<vec4<f32>, LB>;

// Global loads of the tiles at k = p0 into registers (as in kernel 05).
fn fetch(tid: u32, row0: u32, col0: u32, p0: u32) {
    for (var l = 0u; l < LA; l++) {
        let e = tid + l * THREADS;
        if A_TILE % THREADS != 0u && e >= A_TILE { break; }
        if TRANS_A {
            let q = e / (BM / 4u); let r4 = e % (BM / 4u);
            a_next[l] = load_a4(p0 + q, row0 + r4 * 4u);
        } else {
            let r = e / (BK / 4u); let q4 = e % (BK / 4u);
            a_next[l] = load_a4(row0 + r, p0 + q4 * 4u);
        }
    }
    for (var l = 0u; l < LB; l++) {
        let e = tid + l * THREADS;
        if B_TILE % THREADS != 0u && e >= B_TILE { break; }
        if TRANS_B {
            let j = e / (BK / 4u); let q4 = e % (BK / 4u);
            b_next[l] = load_b4(col0 + j, p0 + q4 * 4u);
        } else {
            let q = e / (BN / 4u); let j4 = e % (BN / 4u);
            b_next[l] = load_b4(p0 + q, col0 + j4 * 4u);
        }
    }
}

// The fetched registers into half `h` of the tiles (A transposed, as in kernel 04).
fn stash(tid: u32, h: u32) {
    for (var l = 0u; l < LA; l++) {
        let e = tid + l * THREADS;
        if A_TILE % THREADS != 0u && e >= A_TILE { break; }
        if TRANS_A {
            a_tile[h * A_TILE + e] = a_next[l];
        } else {
            let r = e / (BK / 4u); let q4 = e % (BK / 4u);
            for (var s = 0u; s < 4u; s++) {
                a_tile[h * A_TILE + (q4 * 4u + s) * (BM / 4u) + r / 4u][r % 4u] = a_next[l][s];
            }
        }
    }
    for (var l = 0u; l < LB; l++) {
        let e = tid + l * THREADS;
        if B_TILE % THREADS != 0u && e >= B_TILE { break; }
        if TRANS_B {
            let j = e / (BK / 4u); let q4 = e % (BK / 4u);
            for (var s = 0u; s < 4u; s++) {
                b_tile[h * B_TILE + (q4 * 4u + s) * (BN / 4u) + j / 4u][j % 4u] = b_next[l][s];
            }
        } else {
            b_tile[h * B_TILE + e] = b_next[l];
        }
    }
}

// ANCHOR: swizzle
// The block (row band, column band) of C this workgroup computes: groups of GM row bands are
// walked column by column, so workgroups that run at the same time share tiles in the L2.
fn swizzle(wg: vec3<u32>, groups: vec3<u32>) -> vec2<u32> {
    let id = wg.y * groups.x + wg.x;
    let per_group = GM * groups.x;
    let first = (id / per_group) * GM;
    let rows = min(groups.y - first, GM);
    let in_group = id % per_group;
    return vec2(first + in_group % rows, in_group / rows);
}
// ANCHOR_END: swizzle

@compute @workgroup_size(THREADS)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let block = swizzle(wg, groups);
    let row0 = block.x * BM;
    let col0 = block.y * BN;
    if row0 >= dims.m || col0 >= dims.n {
        return; // the whole workgroup is past the logical shape (uniform: barriers stay legal)
    }
    // ANCHOR: warp_tile
    let warp = tid / 32u;
    let lane = tid % 32u;
    // This warp's tile inside the workgroup tile, in vec4 columns of the transposed tiles.
    let wm4 = (warp / WARPS_N) * (WM / 4u);
    let wn4 = (warp % WARPS_N) * (WN / 4u);
    let wx = lane % WTX;
    let wy = lane / WTX;
    // ANCHOR_END: warp_tile

    var acc: array<vec4<f32>, TM * TN / 4u>; // [TM rows][TN / 4 groups]
    for (var i = 0u; i < TM * TN / 4u; i++) { acc[i] = vec4(0.0); }
    var a_reg: array<vec4<f32>, TM / 4u>;
    var b_reg: array<vec4<f32>, TN / 4u>;

    let steps = (dims.k + BK - 1u) / BK;
    if steps > 0u {
        fetch(tid, row0, col0, 0u);
        stash(tid, 0u);
    }
    workgroupBarrier();
    for (var t = 0u; t < steps; t++) {
        let h = t % 2u;
        let more = t + 1u < steps;
        if more {
            fetch(tid, row0, col0, (t + 1u) * BK); // in flight during the multiply-adds
        }
        let a_base = h * A_TILE + wm4 + wy;
        let b_base = h * B_TILE + wn4 + wx;
        for (var q = 0u; q < BK; q++) {
            for (var g = 0u; g < TM / 4u; g++) { a_reg[g] = a_tile[a_base + q * (BM / 4u) + g * WTY]; }
            for (var g = 0u; g < TN / 4u; g++) { b_reg[g] = b_tile[b_base + q * (BN / 4u) + g * WTX]; }
            for (var r = 0u; r < TM; r++) {
                let x = vec4(a_reg[r / 4u][r % 4u]);
                for (var g = 0u; g < TN / 4u; g++) {
                    acc[r * (TN / 4u) + g] = fma(x, b_reg[g], acc[r * (TN / 4u) + g]);
                }
            }
        }
        if more {
            stash(tid, 1u - h); // the other half: last read one step ago, before the barrier
        }
        workgroupBarrier();
    }
    for (var r = 0u; r < TM; r++) {
        let i = row0 + (wm4 + (r / 4u) * WTY + wy) * 4u + r % 4u;
        if i >= dims.m { continue; }
        for (var g = 0u; g < TN / 4u; g++) {
            let j = col0 + (wn4 + g * WTX + wx) * 4u;
            let v = acc[r * (TN / 4u) + g];
            let at = (i * dims.ldc + j) / 4u;
            if j + 3u < dims.n {
                c[at] = v;
            } else {
                for (var s = 0u; s < 4u; s++) {
                    if j + s < dims.n { c[at][s] = v[s]; }
                }
            }
        }
    }
}
