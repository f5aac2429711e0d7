//! The f64 reference every faster variant (CPU or GPU) is checked against: this stage's
//! variants, stage 03's GPU kernels (which re-export it as `reference_rows`) and the benches.

use super::MatRef;
use crate::{Matrix, MatrixError, Transpose};

/// Rows `rows` of `op(a) * op(b)`, accumulated in f64: `[rows.len(), n]`, row-major. `op` is
/// chosen by `t` as in [`crate::matmul_t`]: `None`: `a [m, k] * b [k, n]`; `A`: `a^T * b` with
/// `a [k, m]`; `B`: `a * b^T` with `b [n, k]`. Slow, but the most accurate reference; a subset
/// of rows keeps the check affordable at sizes where the whole product would take minutes.
/// Errors if the shapes do not fit or a row is not below `m`.
pub fn matmul_f64_reference(a: &Matrix, b: &Matrix, t: Transpose, rows: &[usize]) -> Result<Vec<f32>, MatrixError> {
    let (op, av, bv) = match t {
        Transpose::None => ("matmul_f64_reference (a: [m, k], b: [k, n])", MatRef::of(a), MatRef::of(b)),
        Transpose::A => ("matmul_f64_reference (a: [k, m], b: [k, n])", MatRef::of(a).t(), MatRef::of(b)),
        Transpose::B => ("matmul_f64_reference (a: [m, k], b: [n, k])", MatRef::of(a), MatRef::of(b).t()),
    };
    if av.cols != bv.rows {
        return Err(MatrixError::Shape { op, left: a.shape(), right: b.shape() });
    }
    let (m, k, n) = (av.rows, av.cols, bv.cols);
    if let Some(&bad) = rows.iter().find(|&&r| r >= m) {
        return Err(MatrixError::Shape { op: "matmul_f64_reference: a row out of range", left: (bad, 0), right: (m, n) });
    }
    let mut out = Vec::with_capacity(rows.len() * n);
    let mut acc = vec![0f64; n];
    for &i in rows {
        acc.iter_mut().for_each(|v| *v = 0.0);
        for p in 0..k {
            let x = av.at(i, p) as f64;
            if bv.cs == 1 {
                // b's row p is contiguous: the inner loop streams it.
                let row = &bv.data[p * bv.rs..p * bv.rs + n];
                for (v, &y) in acc.iter_mut().zip(row) {
                    *v += x * y as f64;
                }
            } else {
                for (j, v) in acc.iter_mut().enumerate() {
                    *v += x * bv.at(p, j) as f64;
                }
            }
        }
        out.extend(acc.iter().map(|&v| v as f32));
    }
    Ok(out)
}

/// The whole product `op(a) * op(b)` as a matrix, by [`matmul_f64_reference`] over every row.
pub fn matmul_f64_reference_full(a: &Matrix, b: &Matrix, t: Transpose) -> Result<Matrix, MatrixError> {
    let m = if t == Transpose::A { a.cols } else { a.rows };
    let n = if t == Transpose::B { b.rows } else { b.cols };
    let rows: Vec<usize> = (0..m).collect();
    Matrix::new(m, n, matmul_f64_reference(a, b, t, &rows)?)
}
