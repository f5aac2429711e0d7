//! The three products a layer needs, with their shapes: the forward `x W`, the weight
//! gradient `xᵀ dy` and the input gradient `dy Wᵀ`, without building a transpose.
//!
//!     cargo run --release -p cpu-matrix --example shapes

use cpu_matrix::{Matrix, MatrixError, matmul, matmul_a_bt, matmul_at_b};

fn main() -> Result<(), MatrixError> {
    // ANCHOR: shapes
    let x = Matrix::random_uniform(64, 784, -1.0, 1.0, 1); // a batch: [batch, in]
    let w = Matrix::random_normal(784, 128, 0.0, 0.05, 2); // weights: [in, out]
    let h = matmul(&x, &w)?; // [64, 128]
    let dw = matmul_at_b(&x, &h)?; // x^T * dy: [784, 128], no transpose built
    let dx = matmul_a_bt(&h, &w)?; // dy * W^T: [64, 784]
    // ANCHOR_END: shapes
    println!("h {}x{}, dW {}x{}, dx {}x{}", h.rows, h.cols, dw.rows, dw.cols, dx.rows, dx.cols);
    Ok(())
}
