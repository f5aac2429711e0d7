// 06_coop_matrix.wgsl: tensor cores through cooperative matrices: f16 inputs, f32 accumulation.
//
// The idea: a GPU with tensor cores multiplies small matrices (here 16x16 by 16x16) in one
// instruction, shared by a whole subgroup (32 invocations on NVIDIA). WGSL reaches them in wgpu
// through `enable wgpu_cooperative_matrix;` (an experimental extension; naga 30): the types
// `coop_mat16x16<T, A|B|C>` hold one 16x16 fragment spread over the subgroup's registers, and
// `coopLoad`/`coopLoadT` (column- / row-major), `coopMultiplyAdd(a, b, c)` and
// `coopStore`/`coopStoreT` work on a whole fragment at once. The roles A, B and C are reserved
// words in such shaders: no variable may be called A, B or C.
//
// The matrices stay f32 in memory (the same GpuMatrix as every other kernel). While a tile is
// copied to workgroup memory it is rounded to f16, the format the tensor cores take; products
// are accumulated in f32. So the result carries the rounding of the INPUTS to f16 (a relative
// 2^-11 per element), which the runner's looser tolerance for this kernel allows for.
//
// Workgroup: BM x BN of C, one subgroup per WM x WN block of it; each subgroup owns FM x FN
// fragments of 16 x 16 (WM = 16 FM, WN = 16 FN; up to 4 x 4 accumulators, named c00 .. c33
// below, because fragments cannot live in arrays we index). The default, 128 x 128 with
// 64 x 32 per subgroup:
//
//     BN = 128 columns: 4 subgroup columns of 32
//   +--------+--------+--------+--------+
//   | sg 0   | sg 1   | sg 2   | sg 3   |  64 rows: each sg block is
//   |        |        |        |        |  [c00 c01]
//   +--------+--------+--------+--------+  [c10 c11]   four 16-row strips x two 16-col strips
//   | sg 4   | sg 5   | sg 6   | sg 7   |  [c20 c21]
//   |        |        |        |        |  [c30 c31]
//   +--------+--------+--------+--------+
//
// Per step of BK along k (double-buffered as in kernel 05): every invocation issues its global
// loads (vec4<f32>) of the NEXT A and B tiles, each subgroup runs BK/16 x FM x FN
// coopMultiplyAdds on the CURRENT tiles, then the loaded values are rounded to f16 into the
// other half of the tiles (padded rows: 16-byte-aligned fragments, fewer bank conflicts), and
// one barrier ends the step. A transposed operand is not shuffled: its tile keeps the stored
// layout and is read with the column-major `coopLoad` instead of the row-major `coopLoadT`.
//
// At the end, fragments of workgroups lying wholly inside C go straight to memory with
// `coopStoreT`; at the edges each fragment goes through a per-subgroup f32 scratch tile and
// only in-range elements are written. The vec4 loads need row strides that are multiples of 4
// (`Matmul::prepare` checks, as for kernels 04 and 05).

enable f16;
enable wgpu_cooperative_matrix;

struct Dims {
    m: u32, k: u32, n: u32,
    lda: u32, ldb: u32, ldc: u32,
    _pad0: u32, _pad1: u32,
}

@group(0) @binding(0) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> b: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@group(0) @binding(3) var<uniform> dims: Dims;

const TRANS_A: bool = false;
const TRANS_B: bool = false;
const BM: u32 = 128u;
const BN: u32 = 128u;
const BK: u32 = 32u;
const SG: u32 = 32u;            // subgroup size (checked on the Rust side)
const FM: u32 = 4u;             // fragments per subgroup along m (1 to 4)
const FN: u32 = 2u;             // fragments per subgroup along n (1 to 4)
const WM: u32 = 16u * FM;       // rows of C per subgroup
const WN: u32 = 16u * FN;       // columns of C per subgroup
const SG_N: u32 = BN / WN;      // subgroups along n
const SUBGROUPS: u32 = (BM / WM) * SG_N;
const THREADS: u32 = SUBGROUPS * SG;
const PAD: u32 = 8u;            // halves of padding per tile row: keeps 16-byte alignment

// Each tile is kept in the layout its operand is stored in: [rows][cols + PAD] with the
// stored matrix's contiguous dimension as cols.
const A_ROWS: u32 = select(BM, BK, TRANS_A);   // A: [BM][BK] or, transposed, [BK][BM]
const A_COLS: u32 = select(BK, BM, TRANS_A);
const B_ROWS: u32 = select(BK, BN, TRANS_B);   // B: [BK][BN] or, transposed, [BN][BK]
const B_COLS: u32 = select(BN, BK, TRANS_B);
const LDA_S: u32 = A_COLS + PAD;
const LDB_S: u32 = B_COLS + PAD;
const A_VEC4: u32 = A_ROWS * A_COLS / 4u;     // vec4s per A tile
const B_VEC4: u32 = B_ROWS * B_COLS / 4u;
const LA: u32 = (A_VEC4 + THREADS - 1u) / THREADS;
const LB: u32 = (B_VEC4 + THREADS - 1u) / THREADS;

const A_HALF: u32 = A_ROWS * LDA_S;           // halves in one buffer of the A tile
const B_HALF: u32 = B_ROWS * LDB_S;

var<workgroup> a_tile: array<f16, 2u * A_HALF>; // two buffers: current and next
var<workgroup> b_tile: array<f16, 2u * B_HALF>;
var<workgroup> c_stage: array<f32, SUBGROUPS * 256u>; // one 16x16 f32 scratch per subgroup

var<private> a_next: array<vec4<f32>, LA>;
var<private> b_next: array<vec4<f32>, LB>;

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

// Global loads of the tiles at k = p0 into registers.
fn fetch(tid: u32, row0: u32, col0: u32, p0: u32) {
    // Where each tile starts in its stored matrix.
    let a_r0 = select(row0, p0, TRANS_A);
    let a_c0 = select(p0, row0, TRANS_A);
    let b_r0 = select(p0, col0, TRANS_B);
    let b_c0 = select(col0, p0, TRANS_B);
    for (var l = 0u; l < LA; l++) {
        let e = tid + l * THREADS;
        if A_VEC4 % THREADS != 0u && e >= A_VEC4 { break; }
        a_next[l] = load_a4(a_r0 + e / (A_COLS / 4u), a_c0 + (e % (A_COLS / 4u)) * 4u);
    }
    for (var l = 0u; l < LB; l++) {
        let e = tid + l * THREADS;
        if B_VEC4 % THREADS != 0u && e >= B_VEC4 { break; }
        b_next[l] = load_b4(b_r0 + e / (B_COLS / 4u), b_c0 + (e % (B_COLS / 4u)) * 4u);
    }
}

// The fetched registers, rounded to f16, into buffer `h` of the tiles.
fn stash(tid: u32, h: u32) {
    for (var l = 0u; l < LA; l++) {
        let e = tid + l * THREADS;
        if A_VEC4 % THREADS != 0u && e >= A_VEC4 { break; }
        let at = h * A_HALF + (e / (A_COLS / 4u)) * LDA_S + (e % (A_COLS / 4u)) * 4u;
        let v = vec4<f16>(a_next[l]);
        a_tile[at] = v.x; a_tile[at + 1u] = v.y; a_tile[at + 2u] = v.z; a_tile[at + 3u] = v.w;
    }
    for (var l = 0u; l < LB; l++) {
        let e = tid + l * THREADS;
        if B_VEC4 % THREADS != 0u && e >= B_VEC4 { break; }
        let at = h * B_HALF + (e / (B_COLS / 4u)) * LDB_S + (e % (B_COLS / 4u)) * 4u;
        let v = vec4<f16>(b_next[l]);
        b_tile[at] = v.x; b_tile[at + 1u] = v.y; b_tile[at + 2u] = v.z; b_tile[at + 3u] = v.w;
    }
}

// The 16x16 fragment of buffer h of the A tile at rows i..i+16, k q..q+16.
fn frag_a(h: u32, i: u32, q: u32) -> coop_mat16x16<f16, A> {
    if TRANS_A {
        return coopLoad<coop_mat16x16<f16, A>>(&a_tile[h * A_HALF + q * LDA_S + i], LDA_S);
    }
    return coopLoadT<coop_mat16x16<f16, A>>(&a_tile[h * A_HALF + i * LDA_S + q], LDA_S);
}

// The 16x16 fragment of buffer h of the B tile at k q..q+16, columns j..j+16.
fn frag_b(h: u32, q: u32, j: u32) -> coop_mat16x16<f16, B> {
    if TRANS_B {
        return coopLoad<coop_mat16x16<f16, B>>(&b_tile[h * B_HALF + j * LDB_S + q], LDB_S);
    }
    return coopLoadT<coop_mat16x16<f16, B>>(&b_tile[h * B_HALF + q * LDB_S + j], LDB_S);
}

// Writes fragment `acc` of C at (i0, j0): straight to memory when the whole workgroup block is
// inside C, else through the subgroup's scratch tile, element by element with bounds tests.
fn store(acc: coop_mat16x16<f32, C>, i0: u32, j0: u32, direct: bool, sg: u32, lane: u32) {
    // (Cooperative operations must stay in uniform control flow, which naga's validator
    // checks: `direct` is the same for the whole workgroup, and there is no early `return`.)
    if direct {
        // naga 30's SPIR-V writer needs the matrix, index and stride of a coopStore bound to
        // `let`s ("Expression ... is not cached" otherwise).
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

@compute @workgroup_size(THREADS)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
    @builtin(subgroup_id) sg: u32,
    @builtin(subgroup_invocation_id) lane: u32,
) {
    let row0 = wg.y * BM;
    let col0 = wg.x * BN;
    // A workgroup wholly past the logical shape (after set_dims) skips the k loop and writes
    // nothing. No early `return`: naga requires cooperative operations in uniform control
    // flow and counts any `return` against it.
    let inside = row0 < dims.m && col0 < dims.n;
    // This subgroup's WM x WN block inside the workgroup's tile.
    let wi = (sg / SG_N) * WM;
    let wj = (sg % SG_N) * WN;

    // FM x FN accumulators; those past FM or FN are never touched (the tests on FM and FN
    // below are on constants: uniform, and removed by the compiler).
    var c00 = coop_mat16x16<f32, C>(); var c01 = coop_mat16x16<f32, C>();
    var c02 = coop_mat16x16<f32, C>(); var c03 = coop_mat16x16<f32, C>();
    var c10 = coop_mat16x16<f32, C>(); var c11 = coop_mat16x16<f32, C>();
    var c12 = coop_mat16x16<f32, C>(); var c13 = coop_mat16x16<f32, C>();
    var c20 = coop_mat16x16<f32, C>(); var c21 = coop_mat16x16<f32, C>();
    var c22 = coop_mat16x16<f32, C>(); var c23 = coop_mat16x16<f32, C>();
    var c30 = coop_mat16x16<f32, C>(); var c31 = coop_mat16x16<f32, C>();
    var c32 = coop_mat16x16<f32, C>(); var c33 = coop_mat16x16<f32, C>();
    var b0: coop_mat16x16<f16, B>; var b1: coop_mat16x16<f16, B>;
    var b2: coop_mat16x16<f16, B>; var b3: coop_mat16x16<f16, B>;
    var a0: coop_mat16x16<f16, A>;

    let steps = select(0u, (dims.k + BK - 1u) / BK, inside);
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
        for (var q = 0u; q < BK; q += 16u) {
            // ANCHOR: fragments
            b0 = frag_b(h, q, wj);
            if FN > 1u { b1 = frag_b(h, q, wj + 16u); }
            if FN > 2u { b2 = frag_b(h, q, wj + 32u); }
            if FN > 3u { b3 = frag_b(h, q, wj + 48u); }
            a0 = frag_a(h, wi, q);
            c00 = coopMultiplyAdd(a0, b0, c00);
            if FN > 1u { c01 = coopMultiplyAdd(a0, b1, c01); }
            if FN > 2u { c02 = coopMultiplyAdd(a0, b2, c02); }
            if FN > 3u { c03 = coopMultiplyAdd(a0, b3, c03); }
            // ANCHOR_END: fragments
            if FM > 1u {
                a0 = frag_a(h, wi + 16u, q);
                c10 = coopMultiplyAdd(a0, b0, c10);
                if FN > 1u { c11 = coopMultiplyAdd(a0, b1, c11); }
                if FN > 2u { c12 = coopMultiplyAdd(a0, b2, c12); }
                if FN > 3u { c13 = coopMultiplyAdd(a0, b3, c13); }
            }
            if FM > 2u {
                a0 = frag_a(h, wi + 32u, q);
                c20 = coopMultiplyAdd(a0, b0, c20);
                if FN > 1u { c21 = coopMultiplyAdd(a0, b1, c21); }
                if FN > 2u { c22 = coopMultiplyAdd(a0, b2, c22); }
                if FN > 3u { c23 = coopMultiplyAdd(a0, b3, c23); }
            }
            if FM > 3u {
                a0 = frag_a(h, wi + 48u, q);
                c30 = coopMultiplyAdd(a0, b0, c30);
                if FN > 1u { c31 = coopMultiplyAdd(a0, b1, c31); }
                if FN > 2u { c32 = coopMultiplyAdd(a0, b2, c32); }
                if FN > 3u { c33 = coopMultiplyAdd(a0, b3, c33); }
            }
        }
        if more {
            stash(tid, 1u - h); // the other buffer: last read one step ago, before the barrier
        }
        workgroupBarrier();
    }

    // Direct stores need the workgroup's block inside C and 16-byte-aligned rows.
    let direct = row0 + BM <= dims.m && col0 + BN <= dims.n && dims.ldc % 4u == 0u;
    let i = row0 + wi;
    let j = col0 + wj;
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
