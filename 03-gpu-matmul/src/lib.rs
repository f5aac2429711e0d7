//! Stage 03: matrix multiplication on the GPU, from a naive WGSL kernel to tiled, register-blocked,
//! vectorised and tensor-core kernels, each checked against the CPU.
//!
//! The kernels live in `shaders/NN_name.wgsl`, numbered like [`Kernel`] and the runner's command
//! line (`cargo run --release -p gpu-matmul -- 3`; 0 is the CPU reference). Later stages use the
//! library:
//!
//! ```no_run
//! use common::GpuContext;
//! use cpu_matrix::Matrix;
//! use gpu_matmul::{GpuMatrix, Kernel, Matmul, Transpose};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ctx = GpuContext::new()?;
//! let mm = Matmul::new(&ctx, Kernel::BEST)?;            // compile once
//! let a = GpuMatrix::upload(&ctx, &Matrix::random_uniform(64, 784, -1.0, 1.0, 1))?;
//! let b = GpuMatrix::upload(&ctx, &Matrix::random_uniform(784, 128, -1.0, 1.0, 2))?;
//! let out = GpuMatrix::zeros(&ctx, 64, 128)?;
//! gpu_matmul::matmul(&ctx, &mm, &a, &b, &out, Transpose::None)?; // out = a * b
//! let c = out.download(&ctx)?;
//! # Ok(()) }
//! ```
//!
//! Shapes are row-major everywhere. A [`GpuMatrix`]'s `rows x cols` is its *capacity*;
//! [`MatmulCall::set_dims`] can shrink the logical shape (a smaller last batch). The logical
//! matrices are then the top-left corners of the capacity matrices, read and written with the
//! capacity widths as row strides, and the rest of `out` is left as it was.
//!
//! The files, from the bottom up: `transpose.rs` (the three products), `tile.rs` ([`Tile`]),
//! `checks.rs` ([`Checks`]), `coop.rs` ([`coop_support`]), `kernel.rs` (the kernel catalogue),
//! `error.rs` ([`MatmulError`]), `wgsl.rs` (a tile's WGSL), `matrix.rs` ([`GpuMatrix`]),
//! `dispatch.rs` (a prepared dispatch), `call.rs` ([`MatmulCall`]), `matmul.rs` ([`Matmul`]),
//! `peak.rs` (the ceiling probes) and `cpu.rs` (the CPU reference). This file only names them.

mod call;
mod checks;
mod coop;
mod cpu;
mod dispatch;
mod error;
mod kernel;
mod matmul;
mod matrix;
pub mod peak;
mod tile;
mod transpose;
mod wgsl;

pub use call::MatmulCall;
pub use checks::Checks;
pub use coop::coop_support;
pub use cpu::{matmul_cpu, reference_rows};
pub use error::MatmulError;
pub use kernel::{F16_PAD_K, F16_PAD_MN, Kernel, MIN_WORKGROUPS, Precision};
#[cfg(not(target_arch = "wasm32"))]
pub use matmul::matmul;
pub use matmul::Matmul;
pub use matrix::GpuMatrix;
pub use peak::{PEAK_ITERS, PeakProbe};
pub use tile::Tile;
pub use transpose::{TRANSPOSES, Transpose, formula, product_dims};
pub use wgsl::specialize;
