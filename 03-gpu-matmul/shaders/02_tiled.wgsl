// 02_tiled.wgsl: workgroup shared-memory tiling. Each workgroup stages a TILE x TILE block of
// op(A) and of op(B) in fast on-chip memory, then every invocation reads them from there.
//
// The idea: in kernel 01 each value of A is fetched from memory n times. Here a workgroup
// computes a TILE x TILE block of C together. For each step along k it copies one block of
// op(A) and one of op(B) into `var<workgroup>` arrays (one element per invocation), waits at a
// barrier, and then each invocation runs TILE multiply-adds out of workgroup memory. Every
// value fetched from global memory is now used TILE times.
//
//                 op(B): k-step p0 .. p0+TILE
//                  +----+
//                  | Bt |  b_tile [TILE k][TILE n]
//                  +----+
//   op(A)  +----+  +----+
//   a_tile | At |  | C  |  C block [TILE][TILE] += a_tile * b_tile, then move p0 on by TILE
//          +----+  +----+
//
// Two barriers per step: after the copy (nobody reads a half-written tile) and after the
// multiply-adds (nobody overwrites a tile another invocation is still reading).
// Edges: positions past m, k or n load 0.0, so partial tiles add nothing, and only
// in-range elements of C are written: any m, k, n works.
//
// Layouts and strides as in 01_naive.wgsl; TRANS_A / TRANS_B choose how op(A) / op(B) index
// memory. For a transposed operand the copy swaps which invocation index runs along memory,
// so that neighbouring invocations still read neighbouring addresses.

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
const TILE: u32 = 16u;

var<workgroup> a_tile: array<f32, TILE * TILE>; // [TILE rows of C][TILE along k]
var<workgroup> b_tile: array<f32, TILE * TILE>; // [TILE along k][TILE columns of C]

// op(A)[i, p], or 0 outside the logical m x k.
fn load_a(i: u32, p: u32) -> f32 {
    if i >= dims.m || p >= dims.k { return 0.0; }
    if TRANS_A { return a[p * dims.lda + i]; }
    return a[i * dims.lda + p];
}

// op(B)[p, j], or 0 outside the logical k x n.
fn load_b(p: u32, j: u32) -> f32 {
    if p >= dims.k || j >= dims.n { return 0.0; }
    if TRANS_B { return b[j * dims.ldb + p]; }
    return b[p * dims.ldb + j];
}

@compute @workgroup_size(TILE, TILE)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let row0 = wg.y * TILE;
    let col0 = wg.x * TILE;
    // The whole workgroup lies past the logical shape (after set_dims): nothing to do. The
    // test depends only on the workgroup, so the barriers below stay in uniform control flow.
    if row0 >= dims.m || col0 >= dims.n {
        return;
    }
    let tx = lid.x;
    let ty = lid.y;
    var acc = 0.0;
    // ANCHOR: k_loop
    for (var p0 = 0u; p0 < dims.k; p0 += TILE) {
        // Copy: one element of each tile per invocation; tx runs along memory rows.
        if TRANS_A {
            a_tile[tx * TILE + ty] = load_a(row0 + tx, p0 + ty);
        } else {
            a_tile[ty * TILE + tx] = load_a(row0 + ty, p0 + tx);
        }
        if TRANS_B {
            b_tile[tx * TILE + ty] = load_b(p0 + tx, col0 + ty);
        } else {
            b_tile[ty * TILE + tx] = load_b(p0 + ty, col0 + tx);
        }
        workgroupBarrier();
        for (var q = 0u; q < TILE; q++) {
            acc = fma(a_tile[ty * TILE + q], b_tile[q * TILE + tx], acc);
        }
        workgroupBarrier();
    }
    // ANCHOR_END: k_loop
    let i = row0 + ty;
    let j = col0 + tx;
    if i < dims.m && j < dims.n {
        c[i * dims.ldc + j] = acc;
    }
}
