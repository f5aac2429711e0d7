// 03_blocked2d.wgsl: 2D register blocking. Each invocation computes a TM x TN block of C in
// registers, so each value it reads from workgroup memory feeds several multiply-adds.
//
// The idea: kernel 02 does one multiply-add per two workgroup-memory reads, and workgroup
// memory, although on chip, is not free. Here a workgroup computes a BM x BN block of C with
// (BM/TM) * (BN/TN) invocations. At each step q along k an invocation reads TM values of the
// A tile (a column) and TN values of the B tile (a row) into registers and adds their outer
// product to its TM x TN accumulators: TM + TN reads for TM * TN multiply-adds.
//
//           b_tile [BK][BN]                      one invocation, one step q:
//          +----------------+
//          |   q: b0..b(TN) |                        b0 b1 b2 b3
//          +----------------+                    a0 [ +  +  +  + ]
//   a_tile +--+ +-----------+                    a1 [ +  +  +  + ]   acc[r][c] += a_r * b_c
//   [BM]   |a0| |  TM x TN  |  <- one invocation a2 [ +  +  +  + ]
//   [BK]   |..| |   block   |                    a3 [ +  +  +  + ]
//          +--+ +-----------+
//
// Tiles are copied from global memory by all invocations together, BM*BK and BK*BN elements
// per step, each invocation taking every THREADS-th element (neighbouring invocations read
// neighbouring addresses). Out-of-range positions load 0.0; only in-range C is written.
// Layouts and strides as in 01_naive.wgsl. Constraints (checked in kernels.rs): BM % TM == 0,
// BN % TN == 0, THREADS within the device limit, the two tiles within workgroup memory.

struct Dims {
    m: u32, k: u32, n: u32,
    lda: u32, ldb: u32, ldc: u32,
    _pad0: u32, _pad1: u32,
}

@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@group(0) @binding(3) var<uniform> dims: Dims;

const TRANS_A: bool = false;
const TRANS_B: bool = false;
const BM: u32 = 64u;
const BN: u32 = 64u;
const BK: u32 = 8u;
const TM: u32 = 4u;
const TN: u32 = 4u;
const THREADS: u32 = (BM / TM) * (BN / TN);

var<workgroup> a_tile: array<f32, BM * BK>; // [BM][BK]
var<workgroup> b_tile: array<f32, BK * BN>; // [BK][BN]

fn load_a(i: u32, p: u32) -> f32 {
    if i >= dims.m || p >= dims.k { return 0.0; }
    if TRANS_A { return a[p * dims.lda + i]; }
    return a[i * dims.lda + p];
}

fn load_b(p: u32, j: u32) -> f32 {
    if p >= dims.k || j >= dims.n { return 0.0; }
    if TRANS_B { return b[j * dims.ldb + p]; }
    return b[p * dims.ldb + j];
}

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let row0 = wg.y * BM;
    let col0 = wg.x * BN;
    if row0 >= dims.m || col0 >= dims.n {
        return; // the whole workgroup is past the logical shape (uniform: barriers stay legal)
    }
    // This invocation's block: rows ty*TM .. +TM, columns tx*TN .. +TN of the workgroup's block.
    let tx = tid % (BN / TN);
    let ty = tid / (BN / TN);

    var acc: array<f32, TM * TN>;
    for (var i = 0u; i < TM * TN; i++) { acc[i] = 0.0; }
    var a_reg: array<f32, TM>;
    var b_reg: array<f32, TN>;

    for (var p0 = 0u; p0 < dims.k; p0 += BK) {
        // Copy the tiles. Element e of the tile is taken so that consecutive invocations
        // read consecutive addresses of the matrix as it is stored.
        for (var e = tid; e < BM * BK; e += THREADS) {
            if TRANS_A {
                let q = e / BM; let r = e % BM;       // memory runs along m
                a_tile[r * BK + q] = load_a(row0 + r, p0 + q);
            } else {
                let r = e / BK; let q = e % BK;       // memory runs along k
                a_tile[r * BK + q] = load_a(row0 + r, p0 + q);
            }
        }
        for (var e = tid; e < BK * BN; e += THREADS) {
            if TRANS_B {
                let j = e / BK; let q = e % BK;       // memory runs along k
                b_tile[q * BN + j] = load_b(p0 + q, col0 + j);
            } else {
                let q = e / BN; let j = e % BN;       // memory runs along n
                b_tile[q * BN + j] = load_b(p0 + q, col0 + j);
            }
        }
        workgroupBarrier();
        // ANCHOR: inner_loop
        for (var q = 0u; q < BK; q++) {
            for (var r = 0u; r < TM; r++) { a_reg[r] = a_tile[(ty * TM + r) * BK + q]; }
            for (var s = 0u; s < TN; s++) { b_reg[s] = b_tile[q * BN + tx * TN + s]; }
            for (var r = 0u; r < TM; r++) {
                for (var s = 0u; s < TN; s++) {
                    acc[r * TN + s] = fma(a_reg[r], b_reg[s], acc[r * TN + s]);
                }
            }
        }
        // ANCHOR_END: inner_loop
        workgroupBarrier();
    }

    for (var r = 0u; r < TM; r++) {
        let i = row0 + ty * TM + r;
        if i >= dims.m { break; }
        for (var s = 0u; s < TN; s++) {
            let j = col0 + tx * TN + s;
            if j < dims.n {
                c[i * dims.ldc + j] = acc[r * TN + s];
            }
        }
    }
}
