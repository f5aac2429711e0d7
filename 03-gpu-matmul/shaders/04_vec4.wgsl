// 04_vec4.wgsl: kernel 03 plus 128-bit loads and stores (vec4<f32>) and a transposed A tile.
//
// The idea: kernel 03 spends many instructions just moving data. Reading memory as vec4<f32>
// moves four floats per instruction, both from global memory and from workgroup memory. For
// the inner loop to read vec4s, the four values an invocation needs together must sit next to
// each other in the tile: for B they already do (a row of b_tile), for A they do not (kernel
// 03's a_tile is [BM][BK], so a column is strided). So A is stored TRANSPOSED while it is
// copied in ("transposed staging"): a_tile is [BK][BM], and a column of A becomes a row.
//
//   A as stored (row-major [m, k])           a_tile [BK][BM/4 vec4]
//   row r: | a(r,p) a(r,p+1) a(r,p+2) a(r,p+3) |  ---->  column r: a(r,p) in row p,
//          one vec4 load                              a(r,p+1) in row p+1, ...
//
// Each invocation owns TM rows x TN columns of C, taken as TM/4 x TN/4 groups of 4 that are
// interleaved across the workgroup ("strided" ownership): group g of invocation tx covers
// columns (g * TX + tx) * 4 .. +4. Neighbouring invocations then read neighbouring vec4s of
// the tiles (no workgroup-memory bank conflicts) and write neighbouring vec4s of C.
//
//   C block columns:  | tx0 | tx1 | ... | tx15 | tx0 | tx1 | ... | tx15 |
//                       g = 0 ------------------  g = 1 ------------------
//
// vec4 access needs every row to start on a 16-byte boundary: the row strides lda, ldb, ldc
// must be multiples of 4. `Matmul::prepare` checks that and runs kernel 03 with the same tile
// on operands that do not qualify. Inside a row, any m, k, n works: positions past the
// logical shape load 0.0 (masked per component), and C is written per component at the edge.

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
const TM: u32 = 8u;
const TN: u32 = 8u;
const TX: u32 = BN / TN; // invocations along n
const TY: u32 = BM / TM; // invocations along m
const THREADS: u32 = TX * TY;

var<workgroup> a_tile: array<vec4<f32>, BK * BM / 4u>; // [BK][BM / 4]: A transposed
var<workgroup> b_tile: array<vec4<f32>, BK * BN / 4u>; // [BK][BN / 4]

// Four consecutive elements of a row of a matrix as STORED (rows x cols, stride ld), starting
// at column col (a multiple of 4); zeros past the logical rows or columns.
fn masked(v: vec4<f32>, col: u32, cols: u32) -> vec4<f32> {
    return select(vec4(0.0), v, vec4(col) + vec4(0u, 1u, 2u, 3u) < vec4(cols));
}

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

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let row0 = wg.y * BM;
    let col0 = wg.x * BN;
    if row0 >= dims.m || col0 >= dims.n {
        return; // the whole workgroup is past the logical shape (uniform: barriers stay legal)
    }
    let tx = tid % TX;
    let ty = tid / TX;

    var acc: array<vec4<f32>, TM * TN / 4u>; // [TM rows][TN / 4 groups]
    for (var i = 0u; i < TM * TN / 4u; i++) { acc[i] = vec4(0.0); }
    var a_reg: array<vec4<f32>, TM / 4u>;
    var b_reg: array<vec4<f32>, TN / 4u>;

    for (var p0 = 0u; p0 < dims.k; p0 += BK) {
        // ANCHOR: copy_a
        // Copy op(A)'s BM x BK block into a_tile[q][r], one vec4 along the stored rows.
        for (var e = tid; e < BM * BK / 4u; e += THREADS) {
            if TRANS_A {
                // stored [k, m]: a vec4 runs along m, which is already a_tile's row.
                let q = e / (BM / 4u); let r4 = e % (BM / 4u);
                a_tile[q * (BM / 4u) + r4] = load_a4(p0 + q, row0 + r4 * 4u);
            } else {
                // stored [m, k]: a vec4 runs along k; scatter it down a_tile's column r.
                let r = e / (BK / 4u); let q4 = e % (BK / 4u);
                let v = load_a4(row0 + r, p0 + q4 * 4u);
                for (var s = 0u; s < 4u; s++) {
                    a_tile[(q4 * 4u + s) * (BM / 4u) + r / 4u][r % 4u] = v[s];
                }
            }
        }
        // ANCHOR_END: copy_a
        // Copy op(B)'s BK x BN block into b_tile[q][j].
        for (var e = tid; e < BK * BN / 4u; e += THREADS) {
            if TRANS_B {
                // stored [n, k]: a vec4 runs along k; scatter it down b_tile's column j.
                let j = e / (BK / 4u); let q4 = e % (BK / 4u);
                let v = load_b4(col0 + j, p0 + q4 * 4u);
                for (var s = 0u; s < 4u; s++) {
                    b_tile[(q4 * 4u + s) * (BN / 4u) + j / 4u][j % 4u] = v[s];
                }
            } else {
                let q = e / (BN / 4u); let j4 = e % (BN / 4u);
                b_tile[q * (BN / 4u) + j4] = load_b4(p0 + q, col0 + j4 * 4u);
            }
        }
        workgroupBarrier();
        // ANCHOR: inner_loop
        for (var q = 0u; q < BK; q++) {
            for (var g = 0u; g < TM / 4u; g++) { a_reg[g] = a_tile[q * (BM / 4u) + g * TY + ty]; }
            for (var g = 0u; g < TN / 4u; g++) { b_reg[g] = b_tile[q * (BN / 4u) + g * TX + tx]; }
            for (var r = 0u; r < TM; r++) {
                let x = vec4(a_reg[r / 4u][r % 4u]);
                for (var g = 0u; g < TN / 4u; g++) {
                    acc[r * (TN / 4u) + g] = fma(x, b_reg[g], acc[r * (TN / 4u) + g]);
                }
            }
        }
        // ANCHOR_END: inner_loop
        workgroupBarrier();
    }

    for (var r = 0u; r < TM; r++) {
        let i = row0 + ((r / 4u) * TY + ty) * 4u + r % 4u;
        if i >= dims.m { continue; }
        for (var g = 0u; g < TN / 4u; g++) {
            let j = col0 + (g * TX + tx) * 4u;
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
