// 05_double_buffered.wgsl: kernel 04 with double buffering.
//
// The idea: in kernel 04 every step along k goes "load tiles, barrier, compute, barrier", and
// while the tiles load the arithmetic units wait. Here each invocation first issues its
// global loads for the NEXT tile into registers, then computes on the CURRENT tile (the loads
// complete meanwhile), then writes the registers into the other half of a doubled workgroup
// tile. One barrier per step is enough, because the half being written was last read one
// step earlier, before the previous barrier.
//
//   step t:   regs <- global tile t+1     (in flight)
//             compute on tile[t % 2]      (hides the load latency)
//             tile[(t+1) % 2] <- regs
//             barrier
//
// Like kernels 03 and 04, `Matmul` builds it without naga's runtime checks
// (`ShaderRuntimeChecks::unchecked()`, see `Kernel::default_checks`). That is sound only
// because every global access below is guarded by an explicit test against the shape (the
// tests run awkward shapes to keep it so), and every workgroup/private index is a function of
// constants and the invocation id that stays inside the arrays by construction.
//
// Everything else (layouts, transposed A staging, strided ownership, vec4 masks, the
// "strides must be multiples of 4" rule) is as in 04_vec4.wgsl.
//
// Interior workgroups load without tests. The shape tests of `load_a4`/`load_b4` (is the row
// inside, mask the columns past the edge) cost instructions in every k-step, and on the H200
// this kernel is limited by how fast instructions issue: its CUDA twin
// (reference/cuda_matmul_05.cu), profiled with Nsight Compute, issued an instruction on 78% of cycles
// with "selected" and "not selected" the top stall reasons, so every instruction taken out of
// the loop is time saved. A workgroup whose block lies wholly inside C, with k a multiple of
// BK, runs `k_steps(.., true)`, whose loads have no tests; the edge workgroups run
// `k_steps(.., false)`, as before. (`inside` is a constant in each call, so the driver compiles
// two loops.)

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

const A_TILE: u32 = BK * BM / 4u; // vec4s in one A tile
const B_TILE: u32 = BK * BN / 4u;
// vec4s of each tile one invocation copies (rounded up; the last round is guarded unless
// THREADS divides the tile, a test on constants that the compiler removes).
const LA: u32 = (A_TILE + THREADS - 1u) / THREADS;
const LB: u32 = (B_TILE + THREADS - 1u) / THREADS;

var<workgroup> a_tile: array<vec4<f32>, 2u * A_TILE>; // two halves, each [BK][BM / 4]: A transposed
var<workgroup> b_tile: array<vec4<f32>, 2u * B_TILE>; // two halves, each [BK][BN / 4]

// Four consecutive elements of a row of a matrix as STORED (rows x cols, stride ld), starting
// at column col (a multiple of 4); zeros past the logical rows or columns.
fn masked(v: vec4<f32>, col: u32, cols: u32) -> vec4<f32> {
    return select(vec4(0.0), v, vec4(col) + vec4(0u, 1u, 2u, 3u) < vec4(cols));
}

fn load_a4(row: u32, col: u32, inside: bool) -> vec4<f32> {
    if inside { return a[(row * dims.lda + col) / 4u]; }
    let rows = select(dims.m, dims.k, TRANS_A);
    let cols = select(dims.k, dims.m, TRANS_A);
    if row >= rows || col >= cols { return vec4(0.0); }
    return masked(a[(row * dims.lda + col) / 4u], col, cols);
}

fn load_b4(row: u32, col: u32, inside: bool) -> vec4<f32> {
    if inside { return b[(row * dims.ldb + col) / 4u]; }
    let rows = select(dims.k, dims.n, TRANS_B);
    let cols = select(dims.n, dims.k, TRANS_B);
    if row >= rows || col >= cols { return vec4(0.0); }
    return masked(b[(row * dims.ldb + col) / 4u], col, cols);
}

// The registers an invocation copies one tile through: global -> a_next/b_next -> workgroup.
var<private> a_next: array<vec4<f32>, LA>;
var<private> b_next: array<vec4<f32>, LB>;

// Issues this invocation's global loads for the tile at k = p0 (no workgroup memory touched);
// `inside`: the tile lies wholly inside A and B, so the loads need no tests.
fn fetch(tid: u32, row0: u32, col0: u32, p0: u32, inside: bool) {
    for (var l = 0u; l < LA; l++) {
        let e = tid + l * THREADS;
        if A_TILE % THREADS != 0u && e >= A_TILE { break; }
        if TRANS_A {
            let q = e / (BM / 4u); let r4 = e % (BM / 4u);
            a_next[l] = load_a4(p0 + q, row0 + r4 * 4u, inside);
        } else {
            let r = e / (BK / 4u); let q4 = e % (BK / 4u);
            a_next[l] = load_a4(row0 + r, p0 + q4 * 4u, inside);
        }
    }
    for (var l = 0u; l < LB; l++) {
        let e = tid + l * THREADS;
        if B_TILE % THREADS != 0u && e >= B_TILE { break; }
        if TRANS_B {
            let j = e / (BK / 4u); let q4 = e % (BK / 4u);
            b_next[l] = load_b4(col0 + j, p0 + q4 * 4u, inside);
        } else {
            let q = e / (BN / 4u); let j4 = e % (BN / 4u);
            b_next[l] = load_b4(p0 + q, col0 + j4 * 4u, inside);
        }
    }
}

// Writes the fetched registers into half `h` of the tiles (A transposed, as in kernel 04).
fn stash(tid: u32, h: u32) {
    for (var l = 0u; l < LA; l++) {
        let e = tid + l * THREADS;
        if A_TILE % THREADS != 0u && e >= A_TILE { break; }
        if TRANS_A {
            a_tile[h * A_TILE + e] = a_next[l]; // q * (BM / 4) + r4 == e
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
            b_tile[h * B_TILE + e] = b_next[l]; // q * (BN / 4) + j4 == e
        }
    }
}

// The accumulators: [TM rows][TN / 4 groups] (private, so that `k_steps` can add into them).
var<private> acc: array<vec4<f32>, TM * TN / 4u>;

// Every k-step of the workgroup's block, accumulated into `acc`; `inside` (a constant at each
// call): the block and every k-step lie inside the matrices, so the loads need no tests.
fn k_steps(tid: u32, row0: u32, col0: u32, tx: u32, ty: u32, inside: bool) {
    var a_reg: array<vec4<f32>, TM / 4u>;
    var b_reg: array<vec4<f32>, TN / 4u>;

    let steps = (dims.k + BK - 1u) / BK;
    if steps > 0u {
        fetch(tid, row0, col0, 0u, inside);
        stash(tid, 0u);
    }
    workgroupBarrier();
    // ANCHOR: k_loop
    for (var t = 0u; t < steps; t++) {
        let h = t % 2u;
        let more = t + 1u < steps;
        if more {
            fetch(tid, row0, col0, (t + 1u) * BK, inside);
        }
        let a_base = h * A_TILE;
        let b_base = h * B_TILE;
        for (var q = 0u; q < BK; q++) {
            for (var g = 0u; g < TM / 4u; g++) { a_reg[g] = a_tile[a_base + q * (BM / 4u) + g * TY + ty]; }
            for (var g = 0u; g < TN / 4u; g++) { b_reg[g] = b_tile[b_base + q * (BN / 4u) + g * TX + tx]; }
            for (var r = 0u; r < TM; r++) {
                let x = vec4(a_reg[r / 4u][r % 4u]);
                for (var g = 0u; g < TN / 4u; g++) {
                    acc[r * (TN / 4u) + g] = fma(x, b_reg[g], acc[r * (TN / 4u) + g]);
                }
            }
        }
        if more {
            stash(tid, 1u - h);
        }
        workgroupBarrier();
    }
    // ANCHOR_END: k_loop
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

    for (var i = 0u; i < TM * TN / 4u; i++) { acc[i] = vec4(0.0); }
    // A workgroup whose block lies wholly inside C, with whole k-steps, loads without tests.
    let inside = row0 + BM <= dims.m && col0 + BN <= dims.n && dims.k % BK == 0u;
    if inside {
        k_steps(tid, row0, col0, tx, ty, true);
    } else {
        k_steps(tid, row0, col0, tx, ty, false);
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
