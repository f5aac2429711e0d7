//! One product's operands and the f64 CPU reference the runner checks every result against:
//! the whole product when it is cheap, a sample of rows otherwise.

use common::GpuContext;
use cpu_matrix::Matrix;
use gpu_matmul::{GpuMatrix, Transpose, product_dims, reference_rows};

/// Above this many multiply-adds, validation compares a sample of rows instead of the whole
/// product (the f64 reference is single-pass CPU work).
const FULL_CHECK_LIMIT: usize = 1 << 27;
/// How many rows a sampled validation compares.
const SAMPLE_ROWS: usize = 48;

/// Where the GPU results are compared, and the f64 reference values there.
pub struct Reference {
    rows: Vec<usize>,
    values: Vec<f32>,
    full: bool,
}

impl Reference {
    pub fn new(a: &Matrix, b: &Matrix, t: Transpose) -> Self {
        let (m, k, n) = product_dims(t, a.shape(), b.shape()).expect("shapes made to fit");
        let full = m * k * n <= FULL_CHECK_LIMIT;
        let rows: Vec<usize> = if full {
            (0..m).collect()
        } else {
            // The first and last rows, and rows spread evenly in between (odd offsets, so
            // they land at different positions inside the tiles).
            let mut r: Vec<usize> = (0..SAMPLE_ROWS).map(|i| (i * (m - 1)) / (SAMPLE_ROWS - 1)).map(|r| (r + r % 7).min(m - 1)).collect();
            r.extend([0, m - 1]);
            r.sort_unstable();
            r.dedup();
            r
        };
        // Rows are independent: spread them over the CPU cores.
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(rows.len().max(1));
        let chunk = rows.len().div_ceil(threads).max(1);
        let values = std::thread::scope(|s| {
            let handles: Vec<_> =
                rows.chunks(chunk).map(|c| s.spawn(move || reference_rows(a, b, t, c).expect("rows in range"))).collect();
            handles.into_iter().flat_map(|h| h.join().expect("reference thread")).collect()
        });
        Self { rows, values, full }
    }

    pub fn describe(&self) -> String {
        if self.full {
            "every element against the f64 CPU reference".into()
        } else {
            format!("{} sampled rows (first, last, spread) against the f64 CPU reference", self.rows.len())
        }
    }

    /// Compares `got [m, n]` at the reference rows; returns the largest error relative to
    /// the tolerance's scale, or the checker's report.
    pub fn check(&self, got: &Matrix, rel: f64, abs: f64) -> Result<f64, String> {
        let n = got.cols;
        let picked: Vec<f32> = self.rows.iter().flat_map(|&r| got.data[r * n..(r + 1) * n].iter().copied()).collect();
        common::check_close(&picked, &self.values, rel, abs).map(|s| s.max_abs_err).map_err(|e| e.to_string())
    }
}

/// Random operands for `op(a) [m, k] * op(b) [k, n]`, stored as `t` says.
fn operands(m: usize, k: usize, n: usize, t: Transpose, seed: u64) -> (Matrix, Matrix) {
    let (sa, sb) = match t {
        Transpose::None => ((m, k), (k, n)),
        Transpose::A => ((k, m), (k, n)),
        Transpose::B => ((m, k), (n, k)),
    };
    (Matrix::random_uniform(sa.0, sa.1, -1.0, 1.0, seed), Matrix::random_uniform(sb.0, sb.1, -1.0, 1.0, seed + 1))
}

/// One product's operands on the CPU and the GPU, its output buffer and its reference: made
/// once and shared by every kernel that runs the product.
pub struct Operands {
    pub a: Matrix,
    pub b: Matrix,
    pub t: Transpose,
    pub reference: Reference,
    pub ga: GpuMatrix,
    pub gb: GpuMatrix,
    pub out: GpuMatrix,
}

impl Operands {
    /// Random operands for `op(a) [m, k] * op(b) [k, n]`, uploaded, and their reference.
    pub fn new(ctx: &GpuContext, (m, k, n): (usize, usize, usize), t: Transpose, seed: u64) -> Result<Self, common::GpuError> {
        let (a, b) = operands(m, k, n, t, seed);
        let reference = Reference::new(&a, &b, t);
        let (ga, gb) = (GpuMatrix::upload(ctx, &a)?, GpuMatrix::upload(ctx, &b)?);
        let out = GpuMatrix::zeros(ctx, m, n)?;
        Ok(Self { a, b, t, reference, ga, gb, out })
    }

    /// `(m, k, n)`.
    pub fn dims(&self) -> (usize, usize, usize) {
        product_dims(self.t, self.a.shape(), self.b.shape()).expect("shapes made to fit")
    }
}
