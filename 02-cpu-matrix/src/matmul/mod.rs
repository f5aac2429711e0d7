//! Matrix multiplication on the CPU, one numbered variant per file, from the loop every
//! textbook shows to a cache-blocked, register-blocked, multi-threaded kernel:
//!
//! | # | file             | technique                                                     |
//! |---|------------------|---------------------------------------------------------------|
//! | 0 | `0_library.rs`   | the `matrixmultiply` crate's sgemm: the reference to beat      |
//! | 1 | `1_naive.rs`     | i-j-k: a dot product per output element                       |
//! | 2 | `2_ikj.rs`       | i-k-j: the inner loop streams rows, so it vectorizes          |
//! | 3 | `3_blocked.rs`   | cache blocks, packed panels and a register-blocked micro-kernel |
//! | 4 | `4_parallel.rs`  | variant 3 with the rows of C split over all cores             |
//!
//! Every variant has the same signature, `(a: MatRef, b: MatRef, out: &mut [f32])`:
//! `a [m, k] * b [k, n] -> out [m, n]`, row-major, `out` overwritten. The operands are strided
//! views ([`MatRef`]), so a transposed operand is the same data read with swapped strides, and
//! `A^T * B` / `A * B^T` (what backpropagation needs) never materialize a transpose.
//! The public functions below check shapes and return errors that name both shapes.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::{Matrix, MatrixError};

#[path = "0_library.rs"]
mod library;
#[path = "1_naive.rs"]
mod naive;
#[path = "2_ikj.rs"]
mod ikj;
#[path = "3_blocked.rs"]
mod blocked;
#[path = "4_parallel.rs"]
mod parallel;
mod reference;
#[cfg(test)]
mod tests;

pub use reference::{matmul_f64_reference, matmul_f64_reference_full};

/// A read-only strided view of a matrix: element `(i, j)` is `data[i * rs + j * cs]`.
/// A row-major `[rows, cols]` matrix has `rs = cols, cs = 1`; its transpose is the same data
/// with the strides swapped.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MatRef<'a> {
    pub data: &'a [f32],
    pub rows: usize,
    pub cols: usize,
    /// Distance between consecutive rows.
    pub rs: usize,
    /// Distance between consecutive columns.
    pub cs: usize,
}

impl<'a> MatRef<'a> {
    fn of(m: &'a Matrix) -> Self {
        Self { data: &m.data, rows: m.rows, cols: m.cols, rs: m.cols, cs: 1 }
    }

    /// The transposed view: `[rows, cols] -> [cols, rows]`, no copy.
    fn t(self) -> Self {
        Self { data: self.data, rows: self.cols, cols: self.rows, rs: self.cs, cs: self.rs }
    }

    #[inline(always)]
    pub fn at(&self, i: usize, j: usize) -> f32 {
        self.data[i * self.rs + j * self.cs]
    }

    /// Rows `start..start + count` as a view of their own (`start + count <= rows`).
    pub fn row_range(self, start: usize, count: usize) -> Self {
        debug_assert!(start + count <= self.rows);
        let offset = (start * self.rs).min(self.data.len());
        Self { data: &self.data[offset..], rows: count, ..self }
    }
}

/// The numbered CPU variants; the number is also the file's and the runner's `--variants`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CpuKernel {
    /// 0: `matrixmultiply::sgemm` (its thread count comes from `MATMUL_NUM_THREADS`).
    Library = 0,
    /// 1: i-j-k, one dot product per output element.
    Naive = 1,
    /// 2: i-k-j, rows streamed through the inner loop.
    Ikj = 2,
    /// 3: cache blocking + packing + register-blocked micro-kernel, one thread.
    Blocked = 3,
    /// 4: variant 3 over [`num_threads`] threads.
    Parallel = 4,
}

impl CpuKernel {
    pub const ALL: [CpuKernel; 5] =
        [CpuKernel::Library, CpuKernel::Naive, CpuKernel::Ikj, CpuKernel::Blocked, CpuKernel::Parallel];
    /// The fastest of our own variants; [`matmul`] uses it.
    pub const BEST: CpuKernel = CpuKernel::Parallel;

    pub fn number(self) -> u32 {
        self as u32
    }

    pub fn from_number(n: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.number() == n)
    }

    /// The technique in a few words, as the runner prints it.
    pub fn name(self) -> &'static str {
        match self {
            CpuKernel::Library => "matrixmultiply",
            CpuKernel::Naive => "naive ijk",
            CpuKernel::Ikj => "loop order ikj",
            CpuKernel::Blocked => "blocked+packed",
            CpuKernel::Parallel => "blocked, threads",
        }
    }

    // ANCHOR: variants
    fn function(self) -> fn(MatRef<'_>, MatRef<'_>, &mut [f32]) {
        match self {
            CpuKernel::Library => library::matmul_0_library,
            CpuKernel::Naive => naive::matmul_1_naive,
            CpuKernel::Ikj => ikj::matmul_2_ikj,
            CpuKernel::Blocked => blocked::matmul_3_blocked,
            CpuKernel::Parallel => parallel::matmul_4_parallel,
        }
    }
    // ANCHOR_END: variants
}

/// Which operand is read transposed: `None`: `A * B`; `A`: `A^T * B` with `a: [k, m]`;
/// `B`: `A * B^T` with `b: [n, k]`. (The same names as stage 03's GPU matmul.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transpose {
    None,
    A,
    B,
}

/// 0 means "all cores" (`std::thread::available_parallelism`).
static THREADS: AtomicUsize = AtomicUsize::new(0);

/// Sets how many threads variant 4 (and so [`matmul`]) may use; 0 means all cores.
/// Variant 0's threads are set by `matrixmultiply`'s `MATMUL_NUM_THREADS` instead.
pub fn set_num_threads(n: usize) {
    THREADS.store(n, Ordering::Relaxed);
}

/// How many threads variant 4 uses at most.
pub fn num_threads() -> usize {
    match THREADS.load(Ordering::Relaxed) {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
}

/// `out = op(a) * op(b)` with variant `kernel`, `op` chosen by `t` (see [`Transpose`]).
/// Checks that the inner dimensions agree and that `out` has the product's shape.
pub fn matmul_t_into(
    kernel: CpuKernel,
    t: Transpose,
    a: &Matrix,
    b: &Matrix,
    out: &mut Matrix,
) -> Result<(), MatrixError> {
    let (op, av, bv) = match t {
        Transpose::None => ("matmul (a: [m, k], b: [k, n])", MatRef::of(a), MatRef::of(b)),
        Transpose::A => ("matmul_at_b (a: [k, m], b: [k, n])", MatRef::of(a).t(), MatRef::of(b)),
        Transpose::B => ("matmul_a_bt (a: [m, k], b: [n, k])", MatRef::of(a), MatRef::of(b).t()),
    };
    if av.cols != bv.rows {
        return Err(MatrixError::Shape { op, left: a.shape(), right: b.shape() });
    }
    let (m, k, n) = (av.rows, av.cols, bv.cols);
    if out.shape() != (m, n) {
        return Err(MatrixError::Output { op, expected: (m, n), got: out.shape() });
    }
    if m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        out.data.fill(0.0); // a sum over nothing
        return Ok(());
    }
    kernel.function()(av, bv, &mut out.data);
    Ok(())
}

/// `op(a) * op(b) -> [m, n]` with variant `kernel`; see [`matmul_t_into`].
pub fn matmul_t(kernel: CpuKernel, t: Transpose, a: &Matrix, b: &Matrix) -> Result<Matrix, MatrixError> {
    let (m, n) = match t {
        Transpose::None => (a.rows, b.cols),
        Transpose::A => (a.cols, b.cols),
        Transpose::B => (a.rows, b.rows),
    };
    let mut out = Matrix::zeros(m, n);
    matmul_t_into(kernel, t, a, b, &mut out)?;
    Ok(out)
}

/// `a [m, k] * b [k, n] -> [m, n]` with variant `kernel`.
pub fn matmul_with(kernel: CpuKernel, a: &Matrix, b: &Matrix) -> Result<Matrix, MatrixError> {
    matmul_t(kernel, Transpose::None, a, b)
}

/// `out [m, n] = a [m, k] * b [k, n]` with variant `kernel`, reusing `out`'s buffer.
pub fn matmul_into_with(kernel: CpuKernel, a: &Matrix, b: &Matrix, out: &mut Matrix) -> Result<(), MatrixError> {
    matmul_t_into(kernel, Transpose::None, a, b, out)
}

/// `a [m, k] * b [k, n] -> [m, n]` with the best CPU variant.
pub fn matmul(a: &Matrix, b: &Matrix) -> Result<Matrix, MatrixError> {
    matmul_with(CpuKernel::BEST, a, b)
}

/// `out [m, n] = a [m, k] * b [k, n]` with the best CPU variant, reusing `out`'s buffer.
pub fn matmul_into(a: &Matrix, b: &Matrix, out: &mut Matrix) -> Result<(), MatrixError> {
    matmul_into_with(CpuKernel::BEST, a, b, out)
}

/// `a^T * b`: `a [k, m]`, `b [k, n] -> [m, n]`, without materializing `a^T` (a weight
/// gradient: `dW = x^T * dy`).
pub fn matmul_at_b(a: &Matrix, b: &Matrix) -> Result<Matrix, MatrixError> {
    matmul_t(CpuKernel::BEST, Transpose::A, a, b)
}

/// `out [m, n] = a^T * b` with `a [k, m]`, `b [k, n]`, reusing `out`'s buffer.
pub fn matmul_at_b_into(a: &Matrix, b: &Matrix, out: &mut Matrix) -> Result<(), MatrixError> {
    matmul_t_into(CpuKernel::BEST, Transpose::A, a, b, out)
}

/// `a * b^T`: `a [m, k]`, `b [n, k] -> [m, n]`, without materializing `b^T` (the input
/// gradient: `dx = dy * W^T`).
pub fn matmul_a_bt(a: &Matrix, b: &Matrix) -> Result<Matrix, MatrixError> {
    matmul_t(CpuKernel::BEST, Transpose::B, a, b)
}

/// `out [m, n] = a * b^T` with `a [m, k]`, `b [n, k]`, reusing `out`'s buffer.
pub fn matmul_a_bt_into(a: &Matrix, b: &Matrix, out: &mut Matrix) -> Result<(), MatrixError> {
    matmul_t_into(CpuKernel::BEST, Transpose::B, a, b, out)
}
