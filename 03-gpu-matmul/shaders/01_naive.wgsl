// 01_naive.wgsl: one invocation computes one element of C = op(A) * op(B).
//
// The idea: the textbook triple loop, with the two outer loops turned into the GPU's grid.
// Invocation (i, j) walks row i of op(A) and column j of op(B) and writes their dot product.
//
//            op(B) [k, n]
//              . . j . .
//              . . | . .
//              . . | . .
//   op(A)    +-----------+
//   [m, k]   |           |
//   i ------>|     *     |  C[i, j] = sum_p op(A)[i, p] * op(B)[p, j]
//            |           |
//            +-----------+  C [m, n]
//
// gid.x runs along a row of C (the column j), so the 16 invocations in a row of the workgroup
// read 16 neighbouring floats of B at once (one memory transaction: "coalesced"), and all read
// the same element of A (a broadcast). Every element of A is still read n times and every
// element of B m times straight from memory: 2 loads per multiply-add. That ratio, not the
// arithmetic, limits this kernel; the next kernels reuse loaded values to lower it.
//
// Layouts: row-major with row strides lda, ldb, ldc (the CAPACITY widths of the matrices,
// which can exceed the logical m, k, n after `set_dims`).
//   TRANS_A = false: a is [m, k], op(A)[i, p] = a[i * lda + p]
//   TRANS_A = true:  a is [k, m], op(A)[i, p] = a[p * lda + i]      (A^T * B, for backprop)
//   TRANS_B = false: b is [k, n], op(B)[p, j] = b[p * ldb + j]
//   TRANS_B = true:  b is [n, k], op(B)[p, j] = b[j * ldb + p]      (A * B^T)
// The Rust side rewrites the `const` lines below before compiling (see `specialize`).

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
// A workgroup of WG_X x WG_Y invocations covers WG_Y rows and WG_X columns of C.
const WG_X: u32 = 16u;
const WG_Y: u32 = 16u;

// ANCHOR: main
@compute @workgroup_size(WG_X, WG_Y)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.y;
    let j = gid.x;
    // The grid is rounded up to whole workgroups: invocations past the edge do nothing.
    if i >= dims.m || j >= dims.n {
        return;
    }
    var acc = 0.0;
    for (var p = 0u; p < dims.k; p++) {
        var x: f32;
        if TRANS_A { x = a[p * dims.lda + i]; } else { x = a[i * dims.lda + p]; }
        var y: f32;
        if TRANS_B { y = b[j * dims.ldb + p]; } else { y = b[p * dims.ldb + j]; }
        acc = fma(x, y, acc);
    }
    c[i * dims.ldc + j] = acc;
}
// ANCHOR_END: main
