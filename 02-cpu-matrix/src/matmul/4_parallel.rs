//! Variant 4: variant 3 on every core. The rows of C are cut into one horizontal strip per
//! thread (a whole number of `MR`-row tiles each); each thread runs the single-threaded blocked
//! kernel on its strip of A and all of B, writing only its own rows of C.
//!
//! Why `std::thread::scope` and not a pool (rayon) or a finer split: the strips are disjoint
//! `&mut` slices from `chunks_mut`, so the borrow checker proves there are no data races with
//! no `unsafe` and no dependency. Each thread packs its own copy of B's panels; that duplicated
//! work is `k * n` copies against `m * k * n / threads` multiply-adds, well under 1% at the
//! sizes where threads pay. Spawning a thread costs tens of microseconds, so small products
//! (below [`PARALLEL_MIN_FLOPS`]) stay on the calling thread; a persistent pool would lower that
//! cut-off (see the README's challenge).

use super::MatRef;
use super::blocked::{MR, MicroKernel, gemm_blocked};

/// Below this many flops (`2 m n k`) one thread is faster than paying for spawns: about
/// 0.1 ms of single-core work.
pub(crate) const PARALLEL_MIN_FLOPS: usize = 4 << 20;

/// `out [m, n] = a [m, k] * b [k, n]`, rows of `out` split over [`super::num_threads`] threads.
pub(crate) fn matmul_4_parallel(a: MatRef<'_>, b: MatRef<'_>, out: &mut [f32]) {
    gemm_parallel(a, b, out, super::num_threads(), MicroKernel::detect());
}

/// Variant 4 with an explicit thread limit and micro-kernel (the tests use both).
pub(crate) fn gemm_parallel(a: MatRef<'_>, b: MatRef<'_>, out: &mut [f32], max_threads: usize, kernel: MicroKernel) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    let threads = threads_for(m, k, n, max_threads);
    if threads <= 1 {
        return gemm_blocked(a, b, out, n, kernel);
    }
    // Whole register tiles per strip, so no tile straddles two threads.
    let strip_rows = m.div_ceil(threads).next_multiple_of(MR);
    std::thread::scope(|scope| {
        let mut strips = out[..m * n].chunks_mut(strip_rows * n).enumerate();
        // The calling thread takes the first strip itself: one spawn fewer.
        let first = strips.next();
        for (t, strip) in strips {
            let a_strip = a.row_range(t * strip_rows, strip.len() / n);
            scope.spawn(move || gemm_blocked(a_strip, b, strip, n, kernel));
        }
        if let Some((_, strip)) = first {
            gemm_blocked(a.row_range(0, strip.len() / n), b, strip, n, kernel);
        }
    });
}

/// How many threads a product of this size gets: at most `max_threads`, at most one per
/// `MR`-row tile, and one when the product is too small to repay the spawns.
fn threads_for(m: usize, k: usize, n: usize, max_threads: usize) -> usize {
    let flops = 2usize.saturating_mul(m).saturating_mul(k).saturating_mul(n);
    if flops < PARALLEL_MIN_FLOPS {
        return 1;
    }
    max_threads.clamp(1, m.div_ceil(MR))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_or_thin_products_use_fewer_threads() {
        assert_eq!(threads_for(16, 16, 16, 8), 1, "too small to repay a spawn");
        assert_eq!(threads_for(1024, 1024, 1024, 8), 8);
        assert_eq!(threads_for(16, 100_000, 100_000, 8), 2, "one thread per 8-row tile at most");
        assert_eq!(threads_for(1024, 1024, 1024, 0), 1);
    }
}
