//! Variant 1: the textbook triple loop, i-j-k. Each output element is a dot product of a row
//! of A with a column of B.
//!
//! Why it is slow: the inner loop walks down a column of B, `n` floats apart. Every step
//! touches a new cache line (and, for large `n`, a new page), so the CPU spends its time
//! waiting for memory; and the single running sum is a dependency chain the compiler may not
//! reorder (floating-point addition is not associative), so nothing is vectorized.

use super::MatRef;

/// `out [m, n] = a [m, k] * b [k, n]`, one dot product per output element.
// ANCHOR: naive
pub(crate) fn matmul_1_naive(a: MatRef<'_>, b: MatRef<'_>, out: &mut [f32]) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0.0f32;
            for p in 0..k {
                acc += a.at(i, p) * b.at(p, j);
            }
            out[i * n + j] = acc;
        }
    }
}
// ANCHOR_END: naive
