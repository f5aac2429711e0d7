//! [`MatmulCall`]: one prepared product (its dispatches and shape uniform), recorded as often as
//! needed; the shape uniform every kernel reads.

use common::GpuContext;

use crate::dispatch::Dispatch;
use crate::error::MatmulError;
use crate::kernel::Kernel;
use crate::tile::Tile;

/// The shape uniform every kernel reads: logical sizes and the row strides (capacity widths).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct Dims {
    pub(crate) m: u32,
    pub(crate) k: u32,
    pub(crate) n: u32,
    pub(crate) lda: u32,
    pub(crate) ldb: u32,
    pub(crate) ldc: u32,
    /// Row strides of kernel 08's f16 copies of a and b, in vec4<f16>; 0 elsewhere.
    pub(crate) ld16: [u32; 2],
}

/// One prepared product: pipelines, bind groups and shape uniform (and, for kernel 08, the f16
/// copies of the operands). Record it as often as needed.
pub struct MatmulCall {
    /// The dispatches in order: kernel 08's two conversions, then the product (last).
    dispatches: Vec<Dispatch>,
    uniform: wgpu::Buffer,
    capacity: (usize, usize, usize),
    dims: Dims,
    kernel: Kernel,
    tile: Tile,
}

impl MatmulCall {
    /// A call of `dispatches` (the product last) over matrices of capacity `(m, k, n)`, whose
    /// shape uniform `uniform` holds `dims`; it runs `kernel` with `tile`.
    pub(crate) fn new(
        dispatches: Vec<Dispatch>,
        uniform: wgpu::Buffer,
        capacity: (usize, usize, usize),
        dims: Dims,
        (kernel, tile): (Kernel, Tile),
    ) -> Self {
        Self { dispatches, uniform, capacity, dims, kernel, tile }
    }

    /// Records the product into an open compute pass (no submit, no read-back): one dispatch,
    /// or for kernel 08 three (a and b to f16 copies, then the product on the copies).
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        self.dispatches.iter().for_each(|d| d.record(pass));
    }

    /// Records only the product dispatch. For kernel 08 it multiplies the f16 copies as the
    /// last recorded [`MatmulCall::record`] left them (stale if a or b changed since, or the
    /// shape did): this times the product without the conversions, or reuses copies of
    /// operands that do not change. For every other kernel it is `record`.
    pub fn record_product(&self, pass: &mut wgpu::ComputePass<'_>) {
        self.dispatches.last().expect("a call has a product dispatch").record(pass);
    }

    /// Dispatches [`MatmulCall::record`] records: 1, or 3 for kernel 08.
    pub fn dispatches(&self) -> usize {
        self.dispatches.len()
    }

    /// Changes the logical `(m, k, n)` used from the next submit on (it writes the shape
    /// uniform through the queue), e.g. for a smaller last batch. Each must be at most the
    /// capacity given by the matrices. The logical matrices are the top-left corners of the
    /// stored ones (same row strides); elements of `out` outside `m x n` are left unchanged.
    /// Recordings made before or after stay valid: the dispatch always covers the capacity.
    pub fn set_dims(&self, ctx: &GpuContext, m: usize, k: usize, n: usize) -> Result<(), MatmulError> {
        let (cm, ck, cn) = self.capacity;
        if m > cm || k > ck || n > cn {
            return Err(MatmulError::Dims { asked: (m, k, n), capacity: self.capacity });
        }
        let dims = Dims { m: m as u32, k: k as u32, n: n as u32, ..self.dims };
        ctx.queue.write_buffer(&self.uniform, 0, bytemuck::bytes_of(&dims));
        Ok(())
    }

    /// `(m, k, n)` as given by the matrices at `prepare`.
    pub fn capacity(&self) -> (usize, usize, usize) {
        self.capacity
    }

    /// The kernel and tile shape this call runs.
    pub fn kernel(&self) -> (Kernel, Tile) {
        (self.kernel, self.tile)
    }
}
