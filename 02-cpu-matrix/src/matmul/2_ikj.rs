//! Variant 2: the same arithmetic in loop order i-k-j.
//!
//! Swapping the two inner loops turns the dot product into "add `a[i][p]` times row `p` of B to
//! row `i` of C". The inner loop now reads B and writes C contiguously, one cache line serving
//! 16 floats, and its iterations are independent, so the compiler vectorizes it (SSE on the
//! baseline x86-64 target: 4 floats per instruction). What remains slow: every step reloads and
//! stores the row of C, for each of the `k` rows of B, so the loop is bound by loads and stores
//! rather than arithmetic, and B is re-read from memory for every row of A once it no longer
//! fits in cache.

use super::MatRef;

/// `out [m, n] = a [m, k] * b [k, n]`, accumulating scaled rows of B into each row of C.
// ANCHOR: ikj
pub(crate) fn matmul_2_ikj(a: MatRef<'_>, b: MatRef<'_>, out: &mut [f32]) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    for i in 0..m {
        let c_row = &mut out[i * n..(i + 1) * n];
        c_row.fill(0.0);
        for p in 0..k {
            let x = a.at(i, p);
            if b.cs == 1 {
                // Row p of B is contiguous: the loop the compiler vectorizes.
                let b_row = &b.data[p * b.rs..p * b.rs + n];
                for (c, &y) in c_row.iter_mut().zip(b_row) {
                    *c += x * y;
                }
            } else {
                // A transposed B (`A * B^T`) is read with a stride: correct, not fast.
                for (j, c) in c_row.iter_mut().enumerate() {
                    *c += x * b.at(p, j);
                }
            }
        }
    }
}
// ANCHOR_END: ikj
