//! [`GpuMatrix`]: a row-major f32 matrix on the GPU, its capacity shape, and its transfers.

use common::{GpuContext, GpuError};
use cpu_matrix::Matrix;

use crate::error::MatmulError;

/// A row-major f32 matrix that lives on the GPU. `rows`/`cols` are the CAPACITY shape.
///
/// The buffer holds at least `rows * cols` floats; buffers made here are padded to a multiple
/// of 16 bytes so kernels can read them as `vec4<f32>`.
#[derive(Debug, Clone)]
pub struct GpuMatrix {
    pub buffer: wgpu::Buffer,
    pub rows: usize,
    pub cols: usize,
}

impl GpuMatrix {
    /// Copies `m` to a new GPU buffer, through the context's fast transfer path
    /// ([`GpuContext::upload`]: reused staging buffers, several threads). Later submits see it.
    pub fn upload(ctx: &GpuContext, m: &Matrix) -> Result<Self, GpuError> {
        let matrix = Self::zeros(ctx, m.rows, m.cols)?;
        ctx.upload(&matrix.buffer, 0, &m.data)?;
        Ok(matrix)
    }

    /// A `rows x cols` matrix of zeros on the GPU.
    pub fn zeros(ctx: &GpuContext, rows: usize, cols: usize) -> Result<Self, GpuError> {
        let bytes = Self::padded_bytes(rows, cols);
        let buffer = ctx.storage_buffer_empty(&format!("matrix {rows}x{cols}"), bytes)?;
        Ok(Self { buffer, rows, cols })
    }

    /// Overwrites the whole matrix with `m`, which must have the same shape (fast path, like
    /// [`upload`](Self::upload)). Later submits see it.
    pub fn write(&self, ctx: &GpuContext, m: &Matrix) -> Result<(), MatmulError> {
        if m.shape() != (self.rows, self.cols) {
            return Err(MatmulError::Shape {
                op: "GpuMatrix::write".into(),
                shapes: format!("GPU matrix {}x{}, data {}x{}", self.rows, self.cols, m.rows, m.cols),
                why: "the shapes must be equal".into(),
            });
        }
        ctx.upload(&self.buffer, 0, &m.data)?;
        Ok(())
    }

    /// Copies the matrix back to the CPU (waits for all submitted work; fast path,
    /// [`GpuContext::download`]; native targets).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn download(&self, ctx: &GpuContext) -> Result<Matrix, GpuError> {
        let data = ctx.download(&self.buffer, self.rows * self.cols)?;
        Ok(Matrix { rows: self.rows, cols: self.cols, data })
    }

    /// `(rows, cols)`.
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    fn padded_bytes(rows: usize, cols: usize) -> u64 {
        ((rows * cols * 4) as u64).next_multiple_of(16).max(16)
    }
}
