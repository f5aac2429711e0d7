//! The fast copies on a `GpuContext` (native): `Transfer`'s public methods, which take the
//! context and hand `transfer.rs` the parts of it a transfer works on, and
//! `GpuContext::upload` / `download`, through the `Transfer` the context keeps. The machinery
//! itself (staging rings, chunks, threads) is in `transfer.rs`.

use bytemuck::Pod;

use crate::lock::lock;
use crate::transfer::{MappedRead, Transfer};
use crate::{GpuContext, GpuError};

impl Transfer {
    /// Queues a copy of `data` into `dst` at byte `dst_offset`; later submits see it. Returns once
    /// `data` has been copied into staging memory (so you may reuse it), without waiting for the
    /// GPU: call [`GpuContext::wait`] to know it has arrived.
    ///
    /// `dst` needs `COPY_DST`, `dst_offset` must be a multiple of 4, and `dst` must hold
    /// `data`'s bytes rounded up to a multiple of 4 (wgpu copies whole 4-byte words; the bytes
    /// past the data's end are written as zeros).
    pub fn upload<T: Pod>(
        &mut self,
        ctx: &GpuContext,
        dst: &wgpu::Buffer,
        dst_offset: u64,
        data: &[T],
    ) -> Result<(), GpuError> {
        self.upload_on(ctx.gpu(), dst, dst_offset, data)
    }

    /// Copies `out.len()` elements from `src` at byte `src_offset` into `out`, after all work
    /// submitted before (a kernel writing `src` included). Chunks of the read-back overlap: the
    /// GPU copies the next chunks while the CPU empties one.
    ///
    /// `src` needs `COPY_SRC` and `src_offset` must be a multiple of 4; wgpu copies whole 4-byte
    /// words, so `src` must hold the bytes rounded up to a multiple of 4.
    pub fn download_into<T: Pod>(
        &mut self,
        ctx: &GpuContext,
        src: &wgpu::Buffer,
        src_offset: u64,
        out: &mut [T],
    ) -> Result<(), GpuError> {
        self.download_into_on(ctx.gpu(), src, src_offset, out)
    }

    /// Reads `len` elements of `src` from byte `src_offset` without copying them out: the GPU
    /// copies them into one staging buffer, and the guard reads as `&[T]` straight from its
    /// mapped memory. Dropping the guard unmaps it; the `Transfer` cannot be used meanwhile.
    ///
    /// Sees all work submitted before. Same conditions on `src` as
    /// [`download_into`](Self::download_into). The staging buffer grows to the largest read so
    /// far (at most the device's `max_buffer_size`) and stays.
    pub fn download_mapped<T: Pod>(
        &mut self,
        ctx: &GpuContext,
        src: &wgpu::Buffer,
        src_offset: u64,
        len: usize,
    ) -> Result<MappedRead<'_, T>, GpuError> {
        self.download_mapped_on(ctx.gpu(), src, src_offset, len)
    }
}

impl GpuContext {
    /// The fast upload, through the context's [`Transfer`]: see [`Transfer::upload`]. Takes effect
    /// at the next submit; nothing waits for the GPU. The simple version is
    /// `ctx.queue.write_buffer(dst, offset, bytes)`.
    pub fn upload<T: Pod>(&self, dst: &wgpu::Buffer, dst_offset: u64, data: &[T]) -> Result<(), GpuError> {
        lock(&self.transfer).upload_on(self.gpu(), dst, dst_offset, data)
    }

    /// The fast read-back, through the context's [`Transfer`]: `out.len()` elements from the start
    /// of `src`, after all submitted work. The simple version is [`GpuContext::read_into`].
    pub fn download_into<T: Pod>(&self, src: &wgpu::Buffer, out: &mut [T]) -> Result<(), GpuError> {
        lock(&self.transfer).download_into_on(self.gpu(), src, 0, out)
    }

    /// [`GpuContext::download_into`] into a new `Vec` of `len` elements.
    pub fn download<T: Pod>(&self, src: &wgpu::Buffer, len: usize) -> Result<Vec<T>, GpuError> {
        let mut out = vec![T::zeroed(); len];
        self.download_into(src, &mut out)?;
        Ok(out)
    }

    /// A storage buffer holding `data`, filled by the fast upload (the simple version is
    /// [`GpuContext::storage_buffer`]). At least 4 bytes, a whole number of words.
    pub fn storage_buffer_uploaded<T: Pod>(&self, label: &str, data: &[T]) -> Result<wgpu::Buffer, GpuError> {
        let buffer = self.storage_buffer_empty(label, std::mem::size_of_val(data) as u64)?;
        self.upload(&buffer, 0, data)?;
        Ok(buffer)
    }
}
