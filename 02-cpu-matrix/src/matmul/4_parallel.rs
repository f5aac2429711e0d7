//! Variant 4: variant 3 on every core. The rows of C are cut into one horizontal strip per
//! thread (a whole number of `MR`-row tiles each); each thread runs the single-threaded blocked
//! kernel on its strip of A and all of B, writing only its own rows of C.
//!
//! Why rayon and not `std::thread::scope`: both give each thread a disjoint `&mut` strip (from
//! `chunks_mut` / `par_chunks_mut`), so the borrow checker proves there are no data races, with
//! no `unsafe`. The difference is the start-up cost. `thread::scope` creates and joins an OS
//! thread on every call: we measured about 60-80 us per call on this 2-core VM, which made
//! variant 4 *slower* than variant 3 below a few hundred microseconds of work (the MNIST layer
//! products: 150 us on two threads against 130 us on one). rayon keeps its worker threads
//! alive and only wakes them, so the same products gain from the second core (measured: the
//! MNIST forward product 74-113 us instead of 150, 256^3 170-200 us instead of 244).
//! Each thread packs its own copy of B's panels; that duplicated work is `k * n` copies against
//! `m * k * n / threads` multiply-adds, well under 1% at the sizes where threads pay. Products
//! below [`PARALLEL_MIN_FLOPS`] stay on the calling thread.

use rayon::prelude::*;

use super::MatRef;
use super::blocked::{MR, MicroKernel, gemm_blocked};

/// Below this many flops (`2 m n k`), about 80 us of single-core work, one thread is faster
/// than waking the pool: measured here, 128^3 (4.2 MFLOP) took 42 us on one thread and 49-66 us
/// on two; the MNIST layer products (12.8 MFLOP) gain from the second core.
pub(crate) const PARALLEL_MIN_FLOPS: usize = 8 << 20;

/// `out [m, n] = a [m, k] * b [k, n]`, rows of `out` split over [`super::num_threads`] threads.
pub(crate) fn matmul_4_parallel(a: MatRef<'_>, b: MatRef<'_>, out: &mut [f32]) {
    gemm_parallel(a, b, out, super::num_threads(), PARALLEL_MIN_FLOPS, MicroKernel::detect());
}

/// Variant 4 with an explicit thread limit, size cut-off and micro-kernel (tests vary all three).
pub(crate) fn gemm_parallel(
    a: MatRef<'_>,
    b: MatRef<'_>,
    out: &mut [f32],
    max_threads: usize,
    min_flops: usize,
    kernel: MicroKernel,
) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    let threads = threads_for(m, k, n, max_threads, min_flops);
    if threads <= 1 {
        return gemm_blocked(a, b, out, n, kernel);
    }
    // ANCHOR: strips
    // Whole register tiles per strip, so no tile straddles two threads. One strip per thread:
    // rayon runs them on its pool (the calling thread takes part) and returns when all are done.
    let strip_rows = m.div_ceil(threads).next_multiple_of(MR);
    out[..m * n].par_chunks_mut(strip_rows * n).enumerate().for_each(|(t, strip)| {
        let a_strip = a.row_range(t * strip_rows, strip.len() / n);
        gemm_blocked(a_strip, b, strip, n, kernel);
    });
    // ANCHOR_END: strips
}

/// How many threads a product of this size gets: at most `max_threads`, at most one per
/// `MR`-row tile, and one below `min_flops`.
fn threads_for(m: usize, k: usize, n: usize, max_threads: usize, min_flops: usize) -> usize {
    let flops = 2usize.saturating_mul(m).saturating_mul(k).saturating_mul(n);
    if flops < min_flops {
        return 1;
    }
    max_threads.clamp(1, m.div_ceil(MR))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_or_thin_products_use_fewer_threads() {
        assert_eq!(threads_for(16, 16, 16, 8, PARALLEL_MIN_FLOPS), 1, "too small to repay waking a thread");
        assert_eq!(threads_for(128, 128, 128, 2, PARALLEL_MIN_FLOPS), 1);
        assert_eq!(threads_for(64, 784, 128, 2, PARALLEL_MIN_FLOPS), 2, "the MNIST layer product gains from 2 threads");
        assert_eq!(threads_for(1024, 1024, 1024, 8, PARALLEL_MIN_FLOPS), 8);
        assert_eq!(threads_for(16, 100_000, 100_000, 8, PARALLEL_MIN_FLOPS), 2, "one thread per 8-row tile at most");
        assert_eq!(threads_for(1024, 1024, 1024, 0, PARALLEL_MIN_FLOPS), 1);
        assert_eq!(threads_for(17, 3, 3, 5, 0), 3, "no cut-off: one thread per 8-row tile");
    }
}
