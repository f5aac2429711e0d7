//! Variant 0: the `matrixmultiply` crate's `sgemm`, the library reference every other variant
//! is measured against (the role cuBLAS plays in GPU matmul tutorials).
//!
//! `matrixmultiply` is BLIS-style pure Rust: it packs panels of A and B, then runs a 16x16
//! AVX-512 (or 8x8 AVX2/FMA) micro-kernel chosen at run time. It takes strides for every
//! operand, so transposed views cost nothing. Threads: the workspace enables its `threading`
//! feature; it reads `MATMUL_NUM_THREADS` ONCE per process (default: the physical core count,
//! at most 4). The runner times it single-threaded in a child process with
//! `MATMUL_NUM_THREADS=1`.

use super::MatRef;

/// `out [m, n] = a [m, k] * b [k, n]` via `matrixmultiply::sgemm` (alpha 1, beta 0).
pub(crate) fn matmul_0_library(a: MatRef<'_>, b: MatRef<'_>, out: &mut [f32]) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    assert!(out.len() >= m * n && a.rows * a.cols > 0 && b.rows * b.cols > 0);
    // The last elements each view touches must lie inside its slice.
    assert!((m - 1) * a.rs + (k - 1) * a.cs < a.data.len());
    assert!((k - 1) * b.rs + (n - 1) * b.cs < b.data.len());
    // SAFETY: the asserts above keep every element sgemm reads inside `a.data` / `b.data`, and
    // every element it writes (rows of `n` with stride `n`) inside `out`. beta = 0, so `out`'s
    // old contents are not read.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.data.as_ptr(),
            a.rs as isize,
            a.cs as isize,
            b.data.as_ptr(),
            b.rs as isize,
            b.cs as isize,
            0.0,
            out.as_mut_ptr(),
            n as isize,
            1,
        );
    }
}
