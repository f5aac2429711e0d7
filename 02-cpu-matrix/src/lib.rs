//! Stage 02: a row-major `Matrix` and CPU matrix multiplication, from naive to fast.
//! (Skeleton: the foundation's minimal API; stage 02 fills in the variants.)

use std::fmt;

/// Shape errors. They name both shapes so the caller can see which side is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MatrixError {
    /// `data.len()` does not equal `rows * cols`.
    DataLength { rows: usize, cols: usize, len: usize },
    /// Two operands whose shapes do not fit the operation.
    Shape { op: &'static str, left: (usize, usize), right: (usize, usize) },
}

impl fmt::Display for MatrixError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MatrixError::DataLength { rows, cols, len } => {
                write!(f, "a {rows}x{cols} matrix needs {} values, got {len}", rows * cols)
            }
            MatrixError::Shape { op, left, right } => {
                write!(f, "{op}: shapes {}x{} and {}x{} do not fit", left.0, left.1, right.0, right.1)
            }
        }
    }
}

impl std::error::Error for MatrixError {}

/// A dense row-major matrix of f32: element (r, c) is `data[r * cols + c]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<f32>,
}

impl Matrix {
    /// A `rows x cols` matrix from row-major `data`; errors unless `data.len() == rows * cols`.
    pub fn new(rows: usize, cols: usize, data: Vec<f32>) -> Result<Self, MatrixError> {
        if data.len() != rows * cols {
            return Err(MatrixError::DataLength { rows, cols, len: data.len() });
        }
        Ok(Self { rows, cols, data })
    }

    pub fn zeros(rows: usize, cols: usize) -> Self {
        Self { rows, cols, data: vec![0.0; rows * cols] }
    }

    /// Uniform random values in `[lo, hi)`, reproducible from `seed`.
    pub fn random_uniform(rows: usize, cols: usize, lo: f32, hi: f32, seed: u64) -> Self {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let data = (0..rows * cols).map(|_| rng.random_range(lo..hi)).collect();
        Self { rows, cols, data }
    }

    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }
}

/// `a [m, k] * b [k, n] -> [m, n]`, accumulated in f64: slow, but the most accurate reference
/// every faster variant (CPU or GPU) is checked against.
pub fn matmul_f64_reference(a: &Matrix, b: &Matrix) -> Result<Matrix, MatrixError> {
    if a.cols != b.rows {
        return Err(MatrixError::Shape { op: "matmul", left: a.shape(), right: b.shape() });
    }
    let (m, k, n) = (a.rows, a.cols, b.cols);
    let mut out = Matrix::zeros(m, n);
    let mut row = vec![0f64; n];
    for i in 0..m {
        row.iter_mut().for_each(|v| *v = 0.0);
        for p in 0..k {
            let x = a.data[i * k + p] as f64;
            for (j, acc) in row.iter_mut().enumerate() {
                *acc += x * b.data[p * n + j] as f64;
            }
        }
        for (o, v) in out.data[i * n..(i + 1) * n].iter_mut().zip(&row) {
            *o = *v as f32;
        }
    }
    Ok(out)
}
