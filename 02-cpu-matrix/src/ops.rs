//! The element-wise and reduction operations a neural network layer needs besides matmul:
//! transpose, bias add (a row vector added to every row), map / zip_map (activations and their
//! derivatives), sum over rows (the bias gradient) and argmax per row (the predicted class).
//!
//! Every operation on two matrices checks their shapes and returns a [`MatrixError`] naming
//! both, never panics. The `_in_place` forms reuse the left operand's buffer, so a training loop
//! does not allocate per step.

use crate::{Matrix, MatrixError};

/// Tile edge for [`Matrix::transpose`]: a 32x32 f32 tile reads 32 rows of 128 bytes and writes
/// 32 rows of 128 bytes, which all stay in L1, so neither side strides through memory.
const TRANSPOSE_TILE: usize = 32;

impl Matrix {
    /// `self [r, c] -> [c, r]`, copied tile by tile so reads and writes both stay in cache.
    pub fn transpose(&self) -> Matrix {
        let (r, c) = self.shape();
        let mut out = Matrix::zeros(c, r);
        for i0 in (0..r).step_by(TRANSPOSE_TILE) {
            for j0 in (0..c).step_by(TRANSPOSE_TILE) {
                for i in i0..(i0 + TRANSPOSE_TILE).min(r) {
                    for j in j0..(j0 + TRANSPOSE_TILE).min(c) {
                        out.data[j * r + i] = self.data[i * c + j];
                    }
                }
            }
        }
        out
    }

    /// `self [r, c] + v [1, c]`, with `v` added to every row (the bias of a dense layer).
    pub fn add_row_vector(&self, v: &Matrix) -> Result<Matrix, MatrixError> {
        let mut out = self.clone();
        out.add_row_vector_in_place(v)?;
        Ok(out)
    }

    /// In-place form of [`Matrix::add_row_vector`]: `self [r, c] += v [1, c]` on every row.
    pub fn add_row_vector_in_place(&mut self, v: &Matrix) -> Result<(), MatrixError> {
        if v.rows != 1 || v.cols != self.cols {
            return Err(MatrixError::Shape { op: "add_row_vector", left: self.shape(), right: v.shape() });
        }
        if self.cols == 0 {
            return Ok(());
        }
        for row in self.data.chunks_exact_mut(self.cols) {
            for (x, b) in row.iter_mut().zip(&v.data) {
                *x += b;
            }
        }
        Ok(())
    }

    /// `f` applied to every element: `[r, c] -> [r, c]`.
    pub fn map(&self, f: impl Fn(f32) -> f32) -> Matrix {
        Matrix { rows: self.rows, cols: self.cols, data: self.data.iter().map(|&x| f(x)).collect() }
    }

    /// In-place form of [`Matrix::map`].
    pub fn map_in_place(&mut self, f: impl Fn(f32) -> f32) {
        self.data.iter_mut().for_each(|x| *x = f(*x));
    }

    /// `f(self[i], other[i])` for every element of two matrices of the same shape.
    pub fn zip_map(&self, other: &Matrix, f: impl Fn(f32, f32) -> f32) -> Result<Matrix, MatrixError> {
        let mut out = self.clone();
        out.zip_map_in_place(other, f)?;
        Ok(out)
    }

    /// In-place form of [`Matrix::zip_map`]: `self[i] = f(self[i], other[i])`.
    pub fn zip_map_in_place(&mut self, other: &Matrix, f: impl Fn(f32, f32) -> f32) -> Result<(), MatrixError> {
        if self.shape() != other.shape() {
            return Err(MatrixError::Shape { op: "zip_map", left: self.shape(), right: other.shape() });
        }
        self.data.iter_mut().zip(&other.data).for_each(|(x, &y)| *x = f(*x, y));
        Ok(())
    }

    /// The sum over rows, i.e. each column's sum: `[r, c] -> [1, c]` (the bias gradient of a
    /// dense layer is `sum_rows` of the output gradient). Accumulates row by row, so the inner
    /// loop runs along contiguous memory and vectorizes.
    pub fn sum_rows(&self) -> Matrix {
        let mut out = Matrix::zeros(1, self.cols);
        if self.cols == 0 {
            return out;
        }
        for row in self.data.chunks_exact(self.cols) {
            for (s, x) in out.data.iter_mut().zip(row) {
                *s += x;
            }
        }
        out
    }

    /// The column of each row's largest value: `[r, c] -> r` indices (the predicted class).
    /// Ties go to the first index; NaN is never the maximum (a row of NaN only gives 0).
    /// Errors when there are no columns to choose from.
    pub fn argmax_rows(&self) -> Result<Vec<usize>, MatrixError> {
        if self.cols == 0 {
            return Err(MatrixError::Empty { op: "argmax_rows", shape: self.shape() });
        }
        Ok(self
            .data
            .chunks_exact(self.cols)
            .map(|row| {
                let mut best: Option<(usize, f32)> = None;
                for (j, &x) in row.iter().enumerate() {
                    if !x.is_nan() && best.is_none_or(|(_, b)| x > b) {
                        best = Some((j, x));
                    }
                }
                best.map_or(0, |(j, _)| j)
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::assert_close;

    /// Element-wise ops do one rounding per element, like the f64 check below, so the only
    /// difference is f32 rounding of the result: 1e-6 relative.
    const REL: f64 = 1e-6;
    const ABS: f64 = 1e-6;

    const SHAPES: [(usize, usize); 7] = [(1, 1), (1, 17), (17, 1), (17, 63), (33, 65), (129, 257), (0, 5)];

    #[test]
    fn transpose_matches_indexing_on_awkward_shapes() {
        for (i, &(r, c)) in SHAPES.iter().enumerate() {
            let m = Matrix::random_uniform(r, c, -1.0, 1.0, i as u64);
            let t = m.transpose();
            assert_eq!(t.shape(), (c, r));
            for a in 0..r {
                for b in 0..c {
                    assert_eq!(t[(b, a)], m[(a, b)]);
                }
            }
            assert_eq!(t.transpose(), m);
        }
    }

    #[test]
    fn add_row_vector_adds_to_every_row() {
        for (i, &(r, c)) in SHAPES.iter().enumerate() {
            let m = Matrix::random_uniform(r, c, -1.0, 1.0, 10 + i as u64);
            let v = Matrix::random_uniform(1, c, -1.0, 1.0, 20 + i as u64);
            let expected: Vec<f32> =
                (0..r * c).map(|k| (m.data[k] as f64 + v.data[k % c] as f64) as f32).collect();
            assert_close(&m.add_row_vector(&v).unwrap().data, &expected, REL, ABS);
        }
    }

    #[test]
    fn shape_mismatches_name_both_shapes() {
        let m = Matrix::zeros(4, 3);
        let err = m.add_row_vector(&Matrix::zeros(1, 4)).unwrap_err();
        assert_eq!(err.to_string(), "add_row_vector: shapes 4x3 and 1x4 do not fit");
        assert!(m.add_row_vector(&Matrix::zeros(2, 3)).is_err(), "a 2-row 'vector' is rejected");
        let err = m.zip_map(&Matrix::zeros(3, 4), |a, b| a + b).unwrap_err();
        assert_eq!(err, MatrixError::Shape { op: "zip_map", left: (4, 3), right: (3, 4) });
        let err = Matrix::zeros(3, 0).argmax_rows().unwrap_err();
        assert_eq!(err.to_string(), "argmax_rows: needs at least one column, got a 3x0 matrix");
    }

    #[test]
    fn map_and_zip_map_apply_per_element() {
        let a = Matrix::random_uniform(17, 63, -2.0, 2.0, 1);
        let b = Matrix::random_uniform(17, 63, -2.0, 2.0, 2);
        let relu = a.map(|x| x.max(0.0));
        assert!(relu.data.iter().zip(&a.data).all(|(&r, &x)| r == x.max(0.0)));
        let prod = a.zip_map(&b, |x, y| x * y).unwrap();
        let expected: Vec<f32> = a.data.iter().zip(&b.data).map(|(&x, &y)| (x as f64 * y as f64) as f32).collect();
        assert_close(&prod.data, &expected, REL, ABS);
        let mut c = a.clone();
        c.map_in_place(|x| 2.0 * x);
        c.zip_map_in_place(&a, |x, y| x - y).unwrap();
        assert_close(&c.data, &a.data, REL, ABS);
    }

    #[test]
    fn sum_rows_matches_f64_column_sums() {
        for (i, &(r, c)) in SHAPES.iter().enumerate() {
            let m = Matrix::random_uniform(r, c, -1.0, 1.0, 30 + i as u64);
            let s = m.sum_rows();
            assert_eq!(s.shape(), (1, c));
            let expected: Vec<f32> =
                (0..c).map(|j| (0..r).map(|k| m.data[k * c + j] as f64).sum::<f64>() as f32).collect();
            // r additions in f32, each with error <= eps * |partial sum| <= eps * r: scale abs by r.
            assert_close(&s.data, &expected, 1e-5, 1e-6 * r.max(1) as f64);
        }
    }

    #[test]
    fn argmax_rows_picks_first_maximum_and_skips_nan() {
        let m = Matrix::new(4, 3, vec![
            0.1, 0.7, 0.2, //
            5.0, 5.0, -1.0, //
            f32::NAN, -3.0, -2.0, //
            f32::NAN, f32::NAN, f32::NAN,
        ])
        .unwrap();
        assert_eq!(m.argmax_rows().unwrap(), vec![1, 0, 2, 0]);
        assert_eq!(Matrix::zeros(0, 3).argmax_rows().unwrap(), Vec::<usize>::new());
        let big = Matrix::random_uniform(129, 10, -1.0, 1.0, 5);
        for (r, &j) in big.argmax_rows().unwrap().iter().enumerate() {
            let row = big.row(r).unwrap();
            assert!(row.iter().all(|&x| x <= row[j]));
        }
    }
}
