//! The `Matrix` type: a dense row-major `Vec<f32>` with its shape, and the error every
//! shape check returns. Element `(r, c)` lives at `data[r * cols + c]`.
//!
//! Constructors that take data check its length and return [`MatrixError`] instead of
//! panicking; random matrices are reproducible from a seed.

use std::fmt;

/// Shape errors. They name both shapes so the caller can see which side is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MatrixError {
    /// `data.len()` does not equal `rows * cols`.
    DataLength { rows: usize, cols: usize, len: usize },
    /// Two operands whose shapes do not fit the operation.
    Shape { op: &'static str, left: (usize, usize), right: (usize, usize) },
    /// The output matrix given to an `_into` function does not have the result's shape.
    Output { op: &'static str, expected: (usize, usize), got: (usize, usize) },
    /// The operation needs at least one column (for example an argmax over each row).
    Empty { op: &'static str, shape: (usize, usize) },
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
            MatrixError::Output { op, expected, got } => {
                write!(f, "{op}: the output must be {}x{}, got {}x{}", expected.0, expected.1, got.0, got.1)
            }
            MatrixError::Empty { op, shape } => {
                write!(f, "{op}: needs at least one column, got a {}x{} matrix", shape.0, shape.1)
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
        if Some(data.len()) != rows.checked_mul(cols) {
            return Err(MatrixError::DataLength { rows, cols, len: data.len() });
        }
        Ok(Self { rows, cols, data })
    }

    pub fn zeros(rows: usize, cols: usize) -> Self {
        Self { rows, cols, data: vec![0.0; rows * cols] }
    }

    /// A matrix whose element `(r, c)` is `f(r, c)`.
    pub fn from_fn(rows: usize, cols: usize, mut f: impl FnMut(usize, usize) -> f32) -> Self {
        let data = (0..rows * cols).map(|i| f(i / cols.max(1), i % cols.max(1))).collect();
        Self { rows, cols, data }
    }

    /// Uniform random values in `[lo, hi)`, reproducible from `seed`. Panics unless `lo < hi`.
    pub fn random_uniform(rows: usize, cols: usize, lo: f32, hi: f32, seed: u64) -> Self {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let data = (0..rows * cols).map(|_| rng.random_range(lo..hi)).collect();
        Self { rows, cols, data }
    }

    /// Normally distributed values (`mean`, standard deviation `std`), reproducible from `seed`:
    /// the He/Xavier initialisations of a layer's weights. Panics unless `std` is finite and
    /// `>= 0` (a programming error, like `lo >= hi` in [`Matrix::random_uniform`]).
    pub fn random_normal(rows: usize, cols: usize, mean: f32, std: f32, seed: u64) -> Self {
        use rand::SeedableRng;
        use rand_distr::Distribution;
        let normal = rand_distr::Normal::new(mean, std)
            .unwrap_or_else(|e| panic!("random_normal: mean {mean}, std {std}: {e}"));
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let data = (0..rows * cols).map(|_| normal.sample(&mut rng)).collect();
        Self { rows, cols, data }
    }

    /// `(rows, cols)`.
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    /// Element `(r, c)`, or `None` outside the matrix.
    pub fn get(&self, r: usize, c: usize) -> Option<f32> {
        (r < self.rows && c < self.cols).then(|| self.data[r * self.cols + c])
    }

    /// A mutable reference to element `(r, c)`, or `None` outside the matrix.
    pub fn get_mut(&mut self, r: usize, c: usize) -> Option<&mut f32> {
        (r < self.rows && c < self.cols).then(|| &mut self.data[r * self.cols + c])
    }

    /// Row `r` as a slice, or `None` past the last row.
    pub fn row(&self, r: usize) -> Option<&[f32]> {
        (r < self.rows).then(|| &self.data[r * self.cols..(r + 1) * self.cols])
    }
}

/// `m[(r, c)]`: element access that panics outside the matrix, like slice indexing.
/// Use [`Matrix::get`] where the index comes from user input.
impl std::ops::Index<(usize, usize)> for Matrix {
    type Output = f32;
    fn index(&self, (r, c): (usize, usize)) -> &f32 {
        assert!(r < self.rows && c < self.cols, "index ({r}, {c}) outside a {}x{} matrix", self.rows, self.cols);
        &self.data[r * self.cols + c]
    }
}

impl std::ops::IndexMut<(usize, usize)> for Matrix {
    fn index_mut(&mut self, (r, c): (usize, usize)) -> &mut f32 {
        assert!(r < self.rows && c < self.cols, "index ({r}, {c}) outside a {}x{} matrix", self.rows, self.cols);
        &mut self.data[r * self.cols + c]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_checks_the_length_and_names_the_shape() {
        let err = Matrix::new(2, 3, vec![0.0; 5]).unwrap_err();
        assert_eq!(err, MatrixError::DataLength { rows: 2, cols: 3, len: 5 });
        assert_eq!(err.to_string(), "a 2x3 matrix needs 6 values, got 5");
        assert!(Matrix::new(usize::MAX, 2, vec![]).is_err(), "overflowing shapes are errors, not panics");
        let m = Matrix::new(2, 3, (0..6).map(|x| x as f32).collect()).unwrap();
        assert_eq!(m[(1, 2)], 5.0);
        assert_eq!(m.get(1, 0), Some(3.0));
        assert_eq!(m.get(2, 0), None);
        assert_eq!(m.row(1), Some(&[3.0, 4.0, 5.0][..]));
    }

    #[test]
    fn from_fn_is_row_major() {
        let m = Matrix::from_fn(2, 3, |r, c| (10 * r + c) as f32);
        assert_eq!(m.data, vec![0.0, 1.0, 2.0, 10.0, 11.0, 12.0]);
        assert_eq!(Matrix::from_fn(3, 0, |_, _| 1.0).data.len(), 0);
    }

    #[test]
    fn random_matrices_are_seeded_and_in_range() {
        let a = Matrix::random_uniform(20, 30, -1.0, 1.0, 7);
        assert_eq!(a, Matrix::random_uniform(20, 30, -1.0, 1.0, 7));
        assert_ne!(a, Matrix::random_uniform(20, 30, -1.0, 1.0, 8));
        assert!(a.data.iter().all(|&x| (-1.0..1.0).contains(&x)));

        let n = Matrix::random_normal(100, 100, 2.0, 0.5, 3);
        assert_eq!(n, Matrix::random_normal(100, 100, 2.0, 0.5, 3));
        let mean = n.data.iter().map(|&x| x as f64).sum::<f64>() / 1e4;
        let var = n.data.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / 1e4;
        assert!((mean - 2.0).abs() < 0.02, "mean {mean}");
        assert!((var.sqrt() - 0.5).abs() < 0.02, "std {}", var.sqrt());
    }
}
