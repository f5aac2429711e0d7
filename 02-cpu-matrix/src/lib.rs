//! Stage 02: a row-major `Matrix` and CPU matrix multiplication, from naive to fast, measured
//! against the `matrixmultiply` crate and this CPU's peak.
//!
//! - `matrix.rs`: the [`Matrix`] type, constructors, element access, [`MatrixError`].
//! - `ops.rs`: transpose, bias add, map / zip_map, sum over rows, argmax per row.
//! - `matmul/`: the numbered variants `0_library.rs` .. `4_parallel.rs` ([`CpuKernel`]), the f64
//!   reference, and the transposed products `A^T * B` / `A * B^T` backpropagation needs.
//! - `main.rs`: the runner, `cargo run --release -p cpu-matrix`, which validates every variant,
//!   then prints GFLOP/s, "% of matrixmultiply" and "% of peak".
//!
//! Later stages use [`matmul`], [`matmul_at_b`], [`matmul_a_bt`] (and their `_into` forms) as
//! the CPU reference and the CPU training path.

mod matmul;
mod matrix;
mod ops;

pub use matmul::{
    CpuKernel, Transpose, matmul, matmul_a_bt, matmul_a_bt_into, matmul_at_b, matmul_at_b_into,
    matmul_f64_reference, matmul_f64_reference_full, matmul_into, matmul_into_with, matmul_t, matmul_t_into, matmul_with,
    num_threads, set_num_threads,
};
pub use matrix::{Matrix, MatrixError};
