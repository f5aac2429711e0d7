//! The CPU reference: `matmul_cpu` (stage 02's best matmul, which the runner times as `0`), and
//! `reference_rows`, the f64-accumulated rows every GPU kernel is checked against (whole
//! products at small sizes, a sample of rows at large ones).

use cpu_matrix::{Matrix, MatrixError};

use crate::transpose::Transpose;

/// The CPU reference (`0` on the runner's command line): `op(a) * op(b)` on the CPU with
/// stage 02's best matmul (transposes read in place). Shapes as in [`crate::Matmul::prepare`].
pub fn matmul_cpu(a: &Matrix, b: &Matrix, t: Transpose) -> Result<Matrix, MatrixError> {
    cpu_matrix::matmul_t(cpu_matrix::CpuKernel::BEST, t, a, b)
}

/// Rows `rows` of `op(a) * op(b)`, accumulated in f64: `[rows.len(), n]`, row-major. Stage
/// 02's reference ([`cpu_matrix::matmul_f64_reference`]), under the name this crate's runner,
/// tests and benches use. Errors if the shapes do not fit or a row is out of range.
pub use cpu_matrix::matmul_f64_reference as reference_rows;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transposed_products_agree_with_explicit_transposes() {
        let a = Matrix::random_uniform(5, 3, -1.0, 1.0, 1);
        let b = Matrix::random_uniform(3, 4, -1.0, 1.0, 2);
        let ab = matmul_cpu(&a, &b, Transpose::None).unwrap();
        let at_b = matmul_cpu(&a.transpose(), &b, Transpose::A).unwrap();
        let a_bt = matmul_cpu(&a, &b.transpose(), Transpose::B).unwrap();
        common::assert_close(&at_b.data, &ab.data, 1e-6, 1e-6);
        common::assert_close(&a_bt.data, &ab.data, 1e-6, 1e-6);
        for t in crate::transpose::TRANSPOSES {
            let (aa, bb) = match t {
                Transpose::None => (a.clone(), b.clone()),
                Transpose::A => (a.transpose(), b.clone()),
                Transpose::B => (a.clone(), b.transpose()),
            };
            let rows = reference_rows(&aa, &bb, t, &[4, 0, 2]).unwrap();
            let expect: Vec<f32> = [4, 0, 2].iter().flat_map(|&r| ab.data[r * 4..r * 4 + 4].to_vec()).collect();
            common::assert_close(&rows, &expect, 1e-6, 1e-6);
        }
    }

    #[test]
    fn shape_errors_name_the_shapes() {
        let a = Matrix::zeros(2, 3);
        let b = Matrix::zeros(4, 5);
        let err = matmul_cpu(&a, &b, Transpose::None).unwrap_err().to_string();
        assert!(err.contains("2x3") && err.contains("4x5"), "{err}");
        assert!(reference_rows(&a, &b, Transpose::B, &[0]).is_err());
        assert!(reference_rows(&a, &Matrix::zeros(3, 1), Transpose::None, &[2]).is_err());
    }
}
