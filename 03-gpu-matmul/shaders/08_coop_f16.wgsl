// 08_coop_f16.wgsl: tensor cores fed from f16 copies in one layout, with 64 x 64 blocks per
// subgroup.
//
// The idea: kernel 06 reads the f32 operands for every tile, rounds each value to f16 and
// writes it to workgroup memory one half (16 bits) at a time, in whatever layout the operand
// has. So per multiply-add it moves twice the bytes the tensor cores need, through the slowest
// kind of store, and its speed depends on the transpose. Here:
//
// 1. Two passes first (`to_f16_a`, `to_f16_b`) write f16 copies of A and B, once per product,
//    always in the same layout: op(A) as [k][m] and op(B) as [k][n], rows of m or n halves.
//    Where the operand is stored the other way round, the pass transposes it through a
//    64 x 64 tile in workgroup memory (reads and writes both along rows). The copies are
//    zero-padded: m and n to multiples of PAD_MN, k to multiples of PAD_K, so the product
//    needs no bounds tests on its loads. All three products then run the same product code,
//    on the layout that was fastest in kernel 06's terms (wide rows: each k-step's tiles are
//    BK rows of 256 or 512 bytes).
// 2. The product moves those copies as `vec4<f16>`, two neighbouring ones (16 bytes) per
//    invocation and round, from global memory to registers to workgroup memory; a cooperative
//    load may point into an array of vectors (offsets and strides then count vectors, here 4
//    halves). Each tile row is padded by 8 halves so that the 8 rows a fragment load touches
//    fall in different banks.
// 3. Each subgroup owns a WM x WN block of C as FM x FN fragments of 16 x 16 (up to 4 x 4:
//    64 x 64, 16 accumulators, c00 .. c33), so each A fragment loaded from workgroup memory
//    feeds FN multiply-adds and each B fragment FM.
// 4. The global loads of the next k-step are in flight while this step's multiply-adds run.
//    STAGES = 2: double-buffered tiles, one barrier per step (as kernel 05). STAGES = 1: one
//    buffer and two barriers per step, which leaves room for deeper steps (BK = 64) in the
//    48 KiB of workgroup memory (the tuner's `s1` tiles). On the H200 one buffer with 32-deep
//    steps is the fastest tile (278 TFLOP/s for the product at n = 4096, against 190 for two
//    buffers with 16-deep steps; book/src/worklog/03.md), so it is the ladder's first.
//    FRAG_PREFETCH (the tuner's `pf` tiles; not taken): with STAGES = 1 or 2, each 16-deep
//    sub-step's fragments are loaded from the tiles one sub-step ahead. On the H200 that cost
//    the ladder's tile a quarter of its speed (184 against 240-245 TFLOP/s at n = 4096) and
//    gave the 64-deep one 2 % (218 against 213; book/src/worklog/03.md).
//    EARLY_FETCH (the tuner's `ef` tiles, STAGES = 1): the next step's global loads are
//    issued right after this step's tile is stored, before the barrier rather than after it.
//    On the H200 that cost 3-7 % (book/src/worklog/03.md); not taken.
//    SYNC_COPY (the tuner's `sc` tiles, STAGES = 1): each step loads its own tiles and stores
//    them at once, so no registers stay reserved for tiles in flight during the multiply-adds
//    (fewer registers per invocation, perhaps more workgroups per multiprocessor); the loads'
//    latency is then hidden only by the other workgroups.
//    LANE_LOADS (the tuner's `ln` tiles, STAGES = 1 or 2): one vec4<f16> per invocation and
//    load, neighbours in neighbouring lanes, instead of two side by side (see `fetch`).
//    STAGES = 0 (the tuner's `direct` tiles; 99-103 TFLOP/s on the H200, not taken): no tiles
//    in workgroup memory and no barriers in the loop. Each subgroup loads its own fragments
//    straight from the copies (served by the L1 and L2 caches), one 16-deep step ahead into a
//    second set of fragments (na0 .. na3, nb0 .. nb3), so no subgroup waits for another. The
//    price: a fragment is loaded by every subgroup that uses it (BN / WN of them for an A
//    fragment), from the caches, where the staged tiles load it once into workgroup memory.
// 5. The swizzled workgroup order of kernel 07 (GM row bands walked column by column), so
//    workgroups resident together share tiles in the L2 cache.
//
//   workgroup BM x BN = 128 x 128          subgroup block WM x WN = 64 x 64
//   +-------------+-------------+          [c00 c01 c02 c03]   per 16-deep step q:
//   | sg 0        | sg 1        |          [c10 c11 c12 c13]   load a0..a3 (column of A)
//   +-------------+-------------+          [c20 c21 c22 c23]   and b0..b3 (row of B),
//   | sg 2        | sg 3        |          [c30 c31 c32 c33]   then 16 coopMultiplyAdds
//   +-------------+-------------+
//
// The price: the f16 copies take half the memory of A and B again (they belong to the
// `MatmulCall`), and the conversion passes read A and B once more per product; products that
// reuse an operand could convert it once (`MatmulCall::record_product` times the product
// alone). Values beyond f16's range (|x| > 65504) become infinities, as in kernel 06.
//
// C is written as in kernel 06: straight from the fragments where the workgroup's block lies
// inside C, through a per-subgroup f32 scratch tile with a test per element at the edges.

enable f16;
enable wgpu_cooperative_matrix;

struct Dims {
    m: u32, k: u32, n: u32,
    lda: u32, ldb: u32, ldc: u32,
    lda16: u32, ldb16: u32,  // row strides of the f16 copies, in vec4<f16>
}

// The product reads the f16 copies (read-only bindings) and writes C.
@group(0) @binding(0) var<storage, read> a16: array<vec4<f16>>;
@group(0) @binding(1) var<storage, read> b16: array<vec4<f16>>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@group(0) @binding(3) var<uniform> dims: Dims;
// The conversion passes read the f32 operands and write the copies, two halves at a time.
@group(0) @binding(4) var<storage, read> a: array<f32>;
@group(0) @binding(5) var<storage, read_write> a16_out: array<vec2<f16>>;
@group(0) @binding(6) var<storage, read> b: array<f32>;
@group(0) @binding(7) var<storage, read_write> b16_out: array<vec2<f16>>;

const TRANS_A: bool = false;
const TRANS_B: bool = false;
const BM: u32 = 128u;
const BN: u32 = 128u;
const BK: u32 = 16u;            // 16, 32 or 64: divides PAD_K
const WM: u32 = 64u;            // rows of C per subgroup (16 FM)
const WN: u32 = 64u;            // columns of C per subgroup (16 FN)
const GM: u32 = 8u;             // row bands of workgroups walked together (swizzle)
const STAGES: u32 = 2u;         // buffers of the tiles: 1 or 2; 0: none (direct loads)
const FRAG_PREFETCH: bool = false; // STAGES = 1, 2: fragments loaded one 16-deep sub-step ahead
const EARLY_FETCH: bool = false;   // STAGES = 1: the next step's global loads before the barrier
const SYNC_COPY: bool = false;     // STAGES = 1: each step loads and stores its own tiles first
const LANE_LOADS: bool = false;    // STAGES = 1, 2: one vec4<f16> per load, neighbours in neighbouring lanes
const PAD_MN: u32 = 256u;       // the copies' m and n are padded to multiples of this
const PAD_K: u32 = 64u;         // and k to multiples of this
const SG: u32 = 32u;            // subgroup size (checked on the Rust side)
const FM: u32 = WM / 16u;
const FN: u32 = WN / 16u;
const SG_N: u32 = BN / WN;      // subgroups along n
const SUBGROUPS: u32 = (BM / WM) * SG_N;
const THREADS: u32 = SUBGROUPS * SG;

// Tiles as the copies: A [BK][BM], B [BK][BN], each row padded by 8 halves; in vec4<f16>.
const LDA_S: u32 = BM / 4u + 2u;
const LDB_S: u32 = BN / 4u + 2u;
const A_V8: u32 = BK * BM / 8u;                 // 16-byte loads per A tile
const B_V8: u32 = BK * BN / 8u;
const LA: u32 = (A_V8 + THREADS - 1u) / THREADS;
const LB: u32 = (B_V8 + THREADS - 1u) / THREADS;
const A_V4: u32 = 2u * A_V8;                    // 8-byte loads per A tile (LANE_LOADS)
const B_V4: u32 = 2u * B_V8;
const A_BUF: u32 = BK * LDA_S;                  // vec4<f16> per buffer of the A tile
const B_BUF: u32 = BK * LDB_S;
const B_OFF: u32 = STAGES * A_BUF;              // B's buffers follow A's
const TILES: u32 = max(STAGES * (A_BUF + B_BUF), 1u); // (STAGES = 0: one unused vector)

var<workgroup> tiles: array<vec4<f16>, TILES>;
var<workgroup> c_stage: array<f32, SUBGROUPS * 256u>; // one 16x16 f32 scratch per subgroup

var<private> a_next: array<vec4<f16>, 2u * LA>;
var<private> b_next: array<vec4<f16>, 2u * LB>;

fn round_up(x: u32, to: u32) -> u32 {
    return (x + to - 1u) / to * to;
}

// ---- conversion passes: f32 operand -> zero-padded f16 copy, [k][m] or [k][n] ----

const CT: u32 = 64u;                            // a workgroup converts CT x CT of a copy
var<workgroup> ct: array<f32, CT * (CT + 1u)>;  // one source tile, rows padded by one float

fn a_at(r: u32, col: u32, rows: u32, cols: u32) -> f32 {
    if r < rows && col < cols { return a[r * dims.lda + col]; }
    return 0.0;
}

fn b_at(r: u32, col: u32, rows: u32, cols: u32) -> f32 {
    if r < rows && col < cols { return b[r * dims.ldb + col]; }
    return 0.0;
}

// Elements (dr, dc) and (dr, dc + 1) of a copy's CT x CT tile from the staged source tile
// `ct`, transposed or not. (Each entry point writes its own copy: a function that touched
// both outputs would make both entry points bind both.)
fn staged_pair(transpose: bool, dr: u32, dc: u32) -> vec2<f16> {
    if transpose {
        return vec2<f16>(vec2(ct[dc * (CT + 1u) + dr], ct[(dc + 1u) * (CT + 1u) + dr]));
    }
    return vec2<f16>(vec2(ct[dr * (CT + 1u) + dc], ct[dr * (CT + 1u) + dc + 1u]));
}

// Rows p0 .. p0 + CT (along k) and columns i0 .. i0 + CT (along m) of the copy of op(A). The
// grid covers the copy's capacity; only the part the product reads for the current logical
// shape is written (each CT x CT tile lies wholly inside or outside it).
@compute @workgroup_size(256)
fn to_f16_a(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let p0 = wg.y * CT;
    let i0 = wg.x * CT;
    if p0 >= round_up(dims.k, PAD_K) || i0 >= round_up(dims.m, PAD_MN) {
        return; // uniform: the whole workgroup
    }
    // a is stored [m][k] (transposed into the copy) or, for A^T * B, [k][m] (copied).
    let rows = select(dims.m, dims.k, TRANS_A);
    let cols = select(dims.k, dims.m, TRANS_A);
    let r0 = select(i0, p0, TRANS_A);
    let c0 = select(p0, i0, TRANS_A);
    for (var l = 0u; l < CT * CT / 256u; l++) {
        let e = tid + l * 256u;
        ct[(e / CT) * (CT + 1u) + e % CT] = a_at(r0 + e / CT, c0 + e % CT, rows, cols);
    }
    workgroupBarrier();
    // Two halves per invocation and round, along the copy's rows.
    for (var l = 0u; l < CT * CT / 512u; l++) {
        let e = tid + l * 256u;
        let dr = e / (CT / 2u);
        let dc = (e % (CT / 2u)) * 2u;
        a16_out[((p0 + dr) * dims.lda16 * 4u + i0 + dc) / 2u] = staged_pair(!TRANS_A, dr, dc);
    }
}

// Rows p0 .. (along k) and columns j0 .. (along n) of the copy of op(B).
@compute @workgroup_size(256)
fn to_f16_b(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let p0 = wg.y * CT;
    let j0 = wg.x * CT;
    if p0 >= round_up(dims.k, PAD_K) || j0 >= round_up(dims.n, PAD_MN) {
        return;
    }
    // b is stored [k][n] (copied) or, for A * B^T, [n][k] (transposed into the copy).
    let rows = select(dims.k, dims.n, TRANS_B);
    let cols = select(dims.n, dims.k, TRANS_B);
    let r0 = select(p0, j0, TRANS_B);
    let c0 = select(j0, p0, TRANS_B);
    for (var l = 0u; l < CT * CT / 256u; l++) {
        let e = tid + l * 256u;
        ct[(e / CT) * (CT + 1u) + e % CT] = b_at(r0 + e / CT, c0 + e % CT, rows, cols);
    }
    workgroupBarrier();
    for (var l = 0u; l < CT * CT / 512u; l++) {
        let e = tid + l * 256u;
        let dr = e / (CT / 2u);
        let dc = (e % (CT / 2u)) * 2u;
        b16_out[((p0 + dr) * dims.ldb16 * 4u + j0 + dc) / 2u] = staged_pair(TRANS_B, dr, dc);
    }
}

// ---- the product ----

// Global loads of the tiles at k = p0 into registers: 8 halves (two vec4<f16>, 16 bytes) per
// invocation and round, no bounds tests (the copies are padded to whole tiles). The driver
// issues each pair as two 8-byte loads whose lanes lie 16 bytes apart, so each load touches
// twice the bytes it uses; with LANE_LOADS (the tuner's `ln` tiles) each load is one
// vec4<f16> per invocation, neighbours in neighbouring lanes: 256 contiguous bytes per
// subgroup and load, and the same for the stores into the tiles.
fn fetch(tid: u32, row0: u32, col0: u32, p0: u32) {
    if LANE_LOADS {
        for (var l = 0u; l < 2u * LA; l++) {
            let e = tid + l * THREADS;
            if A_V4 % THREADS != 0u && e >= A_V4 { break; }
            a_next[l] = a16[(p0 + e / (BM / 4u)) * dims.lda16 + row0 / 4u + e % (BM / 4u)];
        }
        for (var l = 0u; l < 2u * LB; l++) {
            let e = tid + l * THREADS;
            if B_V4 % THREADS != 0u && e >= B_V4 { break; }
            b_next[l] = b16[(p0 + e / (BN / 4u)) * dims.ldb16 + col0 / 4u + e % (BN / 4u)];
        }
        return;
    }
    for (var l = 0u; l < LA; l++) {
        let e = tid + l * THREADS;
        if A_V8 % THREADS != 0u && e >= A_V8 { break; }
        let at = (p0 + e / (BM / 8u)) * dims.lda16 + row0 / 4u + (e % (BM / 8u)) * 2u;
        a_next[2u * l] = a16[at];
        a_next[2u * l + 1u] = a16[at + 1u];
    }
    for (var l = 0u; l < LB; l++) {
        let e = tid + l * THREADS;
        if B_V8 % THREADS != 0u && e >= B_V8 { break; }
        let at = (p0 + e / (BN / 8u)) * dims.ldb16 + col0 / 4u + (e % (BN / 8u)) * 2u;
        b_next[2u * l] = b16[at];
        b_next[2u * l + 1u] = b16[at + 1u];
    }
}

// The fetched registers into buffer `h` of the tiles, 16 bytes side by side.
fn stash(tid: u32, h: u32) {
    if LANE_LOADS {
        for (var l = 0u; l < 2u * LA; l++) {
            let e = tid + l * THREADS;
            if A_V4 % THREADS != 0u && e >= A_V4 { break; }
            tiles[h * A_BUF + (e / (BM / 4u)) * LDA_S + e % (BM / 4u)] = a_next[l];
        }
        for (var l = 0u; l < 2u * LB; l++) {
            let e = tid + l * THREADS;
            if B_V4 % THREADS != 0u && e >= B_V4 { break; }
            tiles[B_OFF + h * B_BUF + (e / (BN / 4u)) * LDB_S + e % (BN / 4u)] = b_next[l];
        }
        return;
    }
    for (var l = 0u; l < LA; l++) {
        let e = tid + l * THREADS;
        if A_V8 % THREADS != 0u && e >= A_V8 { break; }
        let at = h * A_BUF + (e / (BM / 8u)) * LDA_S + (e % (BM / 8u)) * 2u;
        tiles[at] = a_next[2u * l];
        tiles[at + 1u] = a_next[2u * l + 1u];
    }
    for (var l = 0u; l < LB; l++) {
        let e = tid + l * THREADS;
        if B_V8 % THREADS != 0u && e >= B_V8 { break; }
        let at = B_OFF + h * B_BUF + (e / (BN / 8u)) * LDB_S + (e % (BN / 8u)) * 2u;
        tiles[at] = b_next[2u * l];
        tiles[at + 1u] = b_next[2u * l + 1u];
    }
}

// The 16x16 fragment of buffer h of the A tile at rows i..i+16 of C, k q..q+16: the tile is
// [k][m], so a column-major load.
fn frag_a(h: u32, i: u32, q: u32) -> coop_mat16x16<f16, A> {
    return coopLoad<coop_mat16x16<f16, A>>(&tiles[h * A_BUF + q * LDA_S + i / 4u], LDA_S);
}

// The 16x16 fragment of buffer h of the B tile at k q..q+16, columns j..j+16 (row-major).
fn frag_b(h: u32, q: u32, j: u32) -> coop_mat16x16<f16, B> {
    return coopLoadT<coop_mat16x16<f16, B>>(&tiles[B_OFF + h * B_BUF + q * LDB_S + j / 4u], LDB_S);
}

// With STAGES = 0: the 16x16 fragment of the copy of op(A) itself at rows i..i+16 of C, k
// p..p+16 ([k][m], so column-major, rows lda16 vectors apart), straight from global memory.
fn copy_a(i: u32, p: u32) -> coop_mat16x16<f16, A> {
    return coopLoad<coop_mat16x16<f16, A>>(&a16[p * dims.lda16 + i / 4u], dims.lda16);
}

// With STAGES = 0: the fragment of the copy of op(B) at k p..p+16, columns j..j+16 (row-major).
fn copy_b(p: u32, j: u32) -> coop_mat16x16<f16, B> {
    return coopLoadT<coop_mat16x16<f16, B>>(&b16[p * dims.ldb16 + j / 4u], dims.ldb16);
}

// Writes fragment `acc` of C at (i0, j0): straight to memory when the whole workgroup block is
// inside C, else through this subgroup's 16 x 16 f32 scratch, element by element with bounds
// tests.
fn store(acc: coop_mat16x16<f32, C>, i0: u32, j0: u32, direct: bool, sg: u32, lane: u32) {
    // `direct` is the same for the whole workgroup: cooperative operations stay in uniform
    // control flow. naga 30 wants a coopStore's matrix, index and stride bound to `let`s.
    if direct {
        let at = i0 * dims.ldc + j0;
        let stride = dims.ldc;
        let frag = acc;
        coopStoreT(frag, &c[at], stride);
    } else {
        let scratch = sg * 256u;
        let stride = 16u;
        let frag = acc;
        coopStoreT(frag, &c_stage[scratch], stride);
        workgroupBarrier();
        for (var e = lane; e < 256u; e += SG) {
            let i = i0 + e / 16u;
            let j = j0 + e % 16u;
            if i < dims.m && j < dims.n {
                c[i * dims.ldc + j] = c_stage[scratch + e];
            }
        }
        workgroupBarrier();
    }
}

// The block (row band, column band) of C this workgroup computes (as in kernel 07).
fn swizzle(wg: vec3<u32>, groups: vec3<u32>) -> vec2<u32> {
    let id = wg.y * groups.x + wg.x;
    let per_group = GM * groups.x;
    let first = (id / per_group) * GM;
    let rows = min(groups.y - first, GM);
    let in_group = id % per_group;
    return vec2(first + in_group % rows, in_group / rows);
}

@compute @workgroup_size(THREADS)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
    @builtin(subgroup_id) sg: u32,
    @builtin(subgroup_invocation_id) lane: u32,
) {
    let block = swizzle(wg, groups);
    let row0 = block.x * BM;
    let col0 = block.y * BN;
    // No early `return` (naga counts any against the uniform control flow cooperative
    // operations need): a workgroup past the logical shape runs no k-steps and stores nothing.
    let inside = row0 < dims.m && col0 < dims.n;
    let wi = (sg / SG_N) * WM;
    let wj = (sg % SG_N) * WN;
    let i = row0 + wi; // this subgroup's block of C
    let j = col0 + wj;

    var c00 = coop_mat16x16<f32, C>(); var c01 = coop_mat16x16<f32, C>();
    var c02 = coop_mat16x16<f32, C>(); var c03 = coop_mat16x16<f32, C>();
    var c10 = coop_mat16x16<f32, C>(); var c11 = coop_mat16x16<f32, C>();
    var c12 = coop_mat16x16<f32, C>(); var c13 = coop_mat16x16<f32, C>();
    var c20 = coop_mat16x16<f32, C>(); var c21 = coop_mat16x16<f32, C>();
    var c22 = coop_mat16x16<f32, C>(); var c23 = coop_mat16x16<f32, C>();
    var c30 = coop_mat16x16<f32, C>(); var c31 = coop_mat16x16<f32, C>();
    var c32 = coop_mat16x16<f32, C>(); var c33 = coop_mat16x16<f32, C>();
    var a0: coop_mat16x16<f16, A>; var a1: coop_mat16x16<f16, A>;
    var a2: coop_mat16x16<f16, A>; var a3: coop_mat16x16<f16, A>;
    var b0: coop_mat16x16<f16, B>; var b1: coop_mat16x16<f16, B>;
    var b2: coop_mat16x16<f16, B>; var b3: coop_mat16x16<f16, B>;
    // STAGES = 0, or FRAG_PREFETCH: the next 16-deep step's fragments, loaded during this
    // step's multiply-adds.
    var na0: coop_mat16x16<f16, A>; var na1: coop_mat16x16<f16, A>;
    var na2: coop_mat16x16<f16, A>; var na3: coop_mat16x16<f16, A>;
    var nb0: coop_mat16x16<f16, B>; var nb1: coop_mat16x16<f16, B>;
    var nb2: coop_mat16x16<f16, B>; var nb3: coop_mat16x16<f16, B>;

    // The copies hold zeros from k up to a multiple of PAD_K, so whole BK steps are safe.
    let steps = select(0u, (dims.k + BK - 1u) / BK, inside);
    if STAGES > 0u && steps > 0u && !SYNC_COPY {
        fetch(tid, row0, col0, 0u);
    }
    if STAGES == 0u && steps > 0u {
        na0 = copy_a(i, 0u);
        if FM > 1u { na1 = copy_a(i + 16u, 0u); }
        if FM > 2u { na2 = copy_a(i + 32u, 0u); }
        if FM > 3u { na3 = copy_a(i + 48u, 0u); }
        nb0 = copy_b(0u, j);
        if FN > 1u { nb1 = copy_b(0u, j + 16u); }
        if FN > 2u { nb2 = copy_b(0u, j + 32u); }
        if FN > 3u { nb3 = copy_b(0u, j + 48u); }
    }
    if STAGES == 2u {
        if steps > 0u { stash(tid, 0u); }
        workgroupBarrier();
    }
    for (var t = 0u; t < steps; t++) {
        let h = select(0u, t % 2u, STAGES == 2u);
        let more = t + 1u < steps;
        // ANCHOR: one_buffer
        if STAGES == 1u {
            if SYNC_COPY {
                fetch(tid, row0, col0, t * BK); // tile t, now: nothing is in flight across the math
            }
            stash(tid, 0u); // tile t, fetched during the last step (or just now)
            if EARLY_FETCH && more {
                fetch(tid, row0, col0, (t + 1u) * BK); // (the registers were just stored)
            }
            workgroupBarrier();
        }
        // ANCHOR_END: one_buffer
        if STAGES > 0u && FRAG_PREFETCH {
            // Tile t is in buffer h now (STAGES = 2: since the barrier that ended the last
            // step): the first sub-step's fragments.
            na0 = frag_a(h, wi, 0u);
            if FM > 1u { na1 = frag_a(h, wi + 16u, 0u); }
            if FM > 2u { na2 = frag_a(h, wi + 32u, 0u); }
            if FM > 3u { na3 = frag_a(h, wi + 48u, 0u); }
            nb0 = frag_b(h, 0u, wj);
            if FN > 1u { nb1 = frag_b(h, 0u, wj + 16u); }
            if FN > 2u { nb2 = frag_b(h, 0u, wj + 32u); }
            if FN > 3u { nb3 = frag_b(h, 0u, wj + 48u); }
        }
        // ANCHOR: fetch_next
        if STAGES > 0u && more && !EARLY_FETCH && !SYNC_COPY {
            fetch(tid, row0, col0, (t + 1u) * BK); // in flight during the multiply-adds
        }
        // ANCHOR_END: fetch_next
        for (var q = 0u; q < BK; q += 16u) {
            // (Tests on STAGES, FM and FN are on constants: uniform, and removed by the
            // compiler.)
            if STAGES == 0u {
                // This step's fragments arrived during the last step's multiply-adds; ask for
                // the next step's now (unused ones, past FM or FN, are zeros).
                a0 = na0; a1 = na1; a2 = na2; a3 = na3;
                b0 = nb0; b1 = nb1; b2 = nb2; b3 = nb3;
                let p = t * BK + q + 16u;
                if p < steps * BK {
                    na0 = copy_a(i, p);
                    if FM > 1u { na1 = copy_a(i + 16u, p); }
                    if FM > 2u { na2 = copy_a(i + 32u, p); }
                    if FM > 3u { na3 = copy_a(i + 48u, p); }
                    nb0 = copy_b(p, j);
                    if FN > 1u { nb1 = copy_b(p, j + 16u); }
                    if FN > 2u { nb2 = copy_b(p, j + 32u); }
                    if FN > 3u { nb3 = copy_b(p, j + 48u); }
                }
            } else if FRAG_PREFETCH {
                // This sub-step's fragments were loaded before the last sub-step's multiply-adds
                // (or after the barrier); ask for the next sub-step's of the same tile now.
                // (`q + 16u < BK`: the same for the whole workgroup, as the loop over q.)
                a0 = na0; a1 = na1; a2 = na2; a3 = na3;
                b0 = nb0; b1 = nb1; b2 = nb2; b3 = nb3;
                if q + 16u < BK {
                    na0 = frag_a(h, wi, q + 16u);
                    if FM > 1u { na1 = frag_a(h, wi + 16u, q + 16u); }
                    if FM > 2u { na2 = frag_a(h, wi + 32u, q + 16u); }
                    if FM > 3u { na3 = frag_a(h, wi + 48u, q + 16u); }
                    nb0 = frag_b(h, q + 16u, wj);
                    if FN > 1u { nb1 = frag_b(h, q + 16u, wj + 16u); }
                    if FN > 2u { nb2 = frag_b(h, q + 16u, wj + 32u); }
                    if FN > 3u { nb3 = frag_b(h, q + 16u, wj + 48u); }
                }
            } else {
                // ANCHOR: fragments
                a0 = frag_a(h, wi, q);
                if FM > 1u { a1 = frag_a(h, wi + 16u, q); }
                if FM > 2u { a2 = frag_a(h, wi + 32u, q); }
                if FM > 3u { a3 = frag_a(h, wi + 48u, q); }
                b0 = frag_b(h, q, wj);
                if FN > 1u { b1 = frag_b(h, q, wj + 16u); }
                if FN > 2u { b2 = frag_b(h, q, wj + 32u); }
                if FN > 3u { b3 = frag_b(h, q, wj + 48u); }
                // ANCHOR_END: fragments
            }
            // ANCHOR: multiply_adds
            c00 = coopMultiplyAdd(a0, b0, c00);
            if FN > 1u { c01 = coopMultiplyAdd(a0, b1, c01); }
            if FN > 2u { c02 = coopMultiplyAdd(a0, b2, c02); }
            if FN > 3u { c03 = coopMultiplyAdd(a0, b3, c03); }
            // ANCHOR_END: multiply_adds
            if FM > 1u {
                c10 = coopMultiplyAdd(a1, b0, c10);
                if FN > 1u { c11 = coopMultiplyAdd(a1, b1, c11); }
                if FN > 2u { c12 = coopMultiplyAdd(a1, b2, c12); }
                if FN > 3u { c13 = coopMultiplyAdd(a1, b3, c13); }
            }
            if FM > 2u {
                c20 = coopMultiplyAdd(a2, b0, c20);
                if FN > 1u { c21 = coopMultiplyAdd(a2, b1, c21); }
                if FN > 2u { c22 = coopMultiplyAdd(a2, b2, c22); }
                if FN > 3u { c23 = coopMultiplyAdd(a2, b3, c23); }
            }
            if FM > 3u {
                c30 = coopMultiplyAdd(a3, b0, c30);
                if FN > 1u { c31 = coopMultiplyAdd(a3, b1, c31); }
                if FN > 2u { c32 = coopMultiplyAdd(a3, b2, c32); }
                if FN > 3u { c33 = coopMultiplyAdd(a3, b3, c33); }
            }
        }
        if STAGES == 2u && more {
            stash(tid, 1u - h); // the other buffer: last read one step ago, before the barrier
        }
        if STAGES > 0u {
            workgroupBarrier(); // (STAGES = 1: everyone is done reading before the next stash)
        }
    }

    // Direct stores need the workgroup's block inside C and 16-byte-aligned rows.
    let direct = row0 + BM <= dims.m && col0 + BN <= dims.n && dims.ldc % 4u == 0u;
    if inside {
        store(c00, i, j, direct, sg, lane);
        if FN > 1u { store(c01, i, j + 16u, direct, sg, lane); }
        if FN > 2u { store(c02, i, j + 32u, direct, sg, lane); }
        if FN > 3u { store(c03, i, j + 48u, direct, sg, lane); }
        if FM > 1u {
            store(c10, i + 16u, j, direct, sg, lane);
            if FN > 1u { store(c11, i + 16u, j + 16u, direct, sg, lane); }
            if FN > 2u { store(c12, i + 16u, j + 32u, direct, sg, lane); }
            if FN > 3u { store(c13, i + 16u, j + 48u, direct, sg, lane); }
        }
        if FM > 2u {
            store(c20, i + 32u, j, direct, sg, lane);
            if FN > 1u { store(c21, i + 32u, j + 16u, direct, sg, lane); }
            if FN > 2u { store(c22, i + 32u, j + 32u, direct, sg, lane); }
            if FN > 3u { store(c23, i + 32u, j + 48u, direct, sg, lane); }
        }
        if FM > 3u {
            store(c30, i + 48u, j, direct, sg, lane);
            if FN > 1u { store(c31, i + 48u, j + 16u, direct, sg, lane); }
            if FN > 2u { store(c32, i + 48u, j + 32u, direct, sg, lane); }
            if FN > 3u { store(c33, i + 48u, j + 48u, direct, sg, lane); }
        }
    }
}
