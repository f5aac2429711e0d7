//! The buffer manager: the one place this crate creates GPU buffers and bind groups.
//!
//! A GPU kernel cannot allocate: `y = x + 2` needs `y` to exist, bound to the kernel, before the
//! dispatch is recorded. And creating a buffer is slow (a driver call, memory bookkeeping, often
//! a page-table update) next to a dispatch that runs for microseconds. So a trainer asks the
//! manager for every tensor once, sized for its largest batch, builds every bind group once, and
//! then only *records* dispatches. The manager counts what it made, so a test can prove that
//! steady-state training allocates nothing.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use common::{GpuContext, GpuError};

/// What a [`BufferManager`] has created so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Allocations {
    pub buffers: usize,
    pub bind_groups: usize,
    /// Bytes of all buffers made (storage and uniform).
    pub bytes: u64,
}

/// Creates and counts buffers and bind groups. Every GPU allocation of this crate goes through
/// one (the counts include the uniform and bind group that stage 03's `Matmul::prepare` makes
/// for each product, reported through [`BufferManager::note_external`]).
#[derive(Debug, Default)]
pub struct BufferManager {
    buffers: AtomicUsize,
    bind_groups: AtomicUsize,
    bytes: AtomicU64,
}

impl BufferManager {
    pub fn new() -> Self {
        Self::default()
    }

    /// A zeroed storage buffer of at least `bytes`, rounded up to 16 bytes so that kernels may
    /// read it as `vec4<f32>` (stage 03's matmuls do). Errors if the device cannot hold it.
    pub fn storage(&self, ctx: &GpuContext, label: &str, bytes: u64) -> Result<wgpu::Buffer, GpuError> {
        let size = bytes.next_multiple_of(16).max(16);
        let buffer = ctx.storage_buffer_empty(label, size)?;
        self.count(1, 0, size);
        Ok(buffer)
    }

    /// A uniform buffer holding `value`, rewritable through the queue.
    pub fn uniform<T: bytemuck::Pod>(&self, ctx: &GpuContext, label: &str, value: &T) -> wgpu::Buffer {
        let buffer = ctx.uniform_buffer(label, value);
        self.count(1, 0, buffer.size());
        buffer
    }

    /// A bind group for `pipeline`, `buffers[i]` at `@binding(i)`.
    pub fn bind_group(
        &self,
        ctx: &GpuContext,
        label: &str,
        pipeline: &wgpu::ComputePipeline,
        buffers: &[&wgpu::Buffer],
    ) -> Result<wgpu::BindGroup, GpuError> {
        let numbered: Vec<(u32, &wgpu::Buffer)> = buffers.iter().enumerate().map(|(i, b)| (i as u32, *b)).collect();
        self.bind_group_at(ctx, label, pipeline, &numbered)
    }

    /// Like [`BufferManager::bind_group`], each buffer at the `@binding` number beside it.
    pub fn bind_group_at(
        &self,
        ctx: &GpuContext,
        label: &str,
        pipeline: &wgpu::ComputePipeline,
        buffers: &[(u32, &wgpu::Buffer)],
    ) -> Result<wgpu::BindGroup, GpuError> {
        let group = ctx.bind_group_at(label, pipeline, 0, buffers)?;
        self.count(0, 1, 0);
        Ok(group)
    }

    /// Counts allocations another crate made on our behalf.
    pub fn note_external(&self, buffers: usize, bind_groups: usize, bytes: u64) {
        self.count(buffers, bind_groups, bytes);
    }

    pub fn allocations(&self) -> Allocations {
        Allocations {
            buffers: self.buffers.load(Ordering::Relaxed),
            bind_groups: self.bind_groups.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
        }
    }

    fn count(&self, buffers: usize, bind_groups: usize, bytes: u64) {
        self.buffers.fetch_add(buffers, Ordering::Relaxed);
        self.bind_groups.fetch_add(bind_groups, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }
}
