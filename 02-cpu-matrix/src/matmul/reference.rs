//! The f64 reference every faster variant (CPU or GPU) is checked against.

use crate::{Matrix, MatrixError};

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
