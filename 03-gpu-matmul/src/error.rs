//! [`MatmulError`]: everything that can go wrong in a GPU matmul, each shape error naming
//! every shape involved.

use std::fmt;

use common::GpuError;

use crate::kernel::Kernel;
use crate::tile::Tile;

/// Everything that can go wrong in a GPU matmul. Shape errors name every shape involved.
#[derive(Debug, Clone, PartialEq)]
pub enum MatmulError {
    /// The GPU refused something (limits, validation, device lost).
    Gpu(GpuError),
    /// Operands whose shapes do not fit the product.
    Shape { op: String, shapes: String, why: String },
    /// `set_dims` asked for more than the matrices hold.
    Dims { asked: (usize, usize, usize), capacity: (usize, usize, usize) },
    /// A tile shape this kernel cannot run (the tuner and tests pass tiles explicitly).
    Config { kernel: Kernel, tile: Tile, why: String },
    /// This kernel cannot run here, or not on these operands.
    Unsupported { kernel: Kernel, why: String },
}

impl fmt::Display for MatmulError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MatmulError::Gpu(e) => write!(f, "{e}"),
            MatmulError::Shape { op, shapes, why } => write!(f, "{op}: {shapes}: {why}"),
            MatmulError::Dims { asked, capacity } => write!(
                f,
                "set_dims(m={}, k={}, n={}) exceeds the capacity m={}, k={}, n={} of the prepared matrices; \
                 allocate the matrices for the largest shape you need",
                asked.0, asked.1, asked.2, capacity.0, capacity.1, capacity.2
            ),
            MatmulError::Config { kernel, tile, why } => write!(f, "kernel {kernel} cannot use tile {tile}: {why}"),
            MatmulError::Unsupported { kernel, why } => write!(f, "kernel {kernel} cannot run: {why}"),
        }
    }
}

impl std::error::Error for MatmulError {}

impl From<GpuError> for MatmulError {
    fn from(e: GpuError) -> Self {
        MatmulError::Gpu(e)
    }
}
