//! A prepared dispatch ([`Dispatch`]: a pipeline, a bind group and a workgroup grid, made once,
//! then only recorded) and what preparing one reads: the store's buffers ([`StoreBuffers`]) and,
//! for a gathering dispatch, its byte images ([`ByteImages`]). The `prepare*.rs` files build them.

use common::{GpuContext, GpuError};
use gpu_matmul::MatmulCall;

use crate::LayersError;
use crate::gpu::buffers::BufferManager;
use crate::gpu::kernels::{KernelId, Kernels};
use crate::tape::{Dim, TensorId, View};

/// Byte images on the GPU that the first layer's forward dispatch gathers its batches from by
/// itself (`shaders/forward_input_gather.wgsl`), instead of a separate gather dispatch per step:
/// stage 05's MNIST training and test sets. Batch `s` is rows `order[slot_s.first ..][..slot_s.count]`.
#[derive(Debug, Clone, Copy)]
pub struct ByteImages<'a> {
    /// `[n, ceil(inputs / 4)]` u32: the pixels, 4 to a word (little-endian), each image
    /// starting on a word.
    pub images: &'a wgpu::Buffer,
    /// `[ceil(n / 4)]` u32: the labels, 4 to a word.
    pub labels: &'a wgpu::Buffer,
    /// `[n]` u32: which image each row of the epoch takes.
    pub order: &'a wgpu::Buffer,
    /// One [`GatherSlot`](crate::GatherSlot) per batch, `stride` bytes apart (a multiple of the
    /// device's `min_uniform_buffer_offset_alignment`).
    pub slots: &'a wgpu::Buffer,
    pub stride: u64,
}

/// What a dispatch binds of a tensor store (`GpuStore::buffers_for_prepare`): one buffer per
/// tensor, the shared batch uniform, the placeholders bound where a kernel has bindings the op
/// does not use (one read-only and three writable, so no buffer is bound twice), the manager that
/// makes the dispatch's uniforms and bind groups, and the largest batch (buffers and grids are
/// sized for it).
#[derive(Clone, Copy)]
pub(crate) struct StoreBuffers<'a> {
    pub manager: &'a BufferManager,
    pub buffers: &'a [wgpu::Buffer],
    pub batch_uniform: &'a wgpu::Buffer,
    pub placeholder: &'a wgpu::Buffer,
    pub placeholders_rw: &'a [wgpu::Buffer; 3],
    pub max_batch: usize,
}

impl<'a> StoreBuffers<'a> {
    /// Tensor `t`'s buffer.
    pub fn buf(&self, t: TensorId) -> &'a wgpu::Buffer {
        &self.buffers[t.0]
    }

    /// The rows of `v` at the largest batch.
    pub fn rows(&self, v: &View) -> usize {
        v.rows.at(self.max_batch)
    }

    /// A dispatch of kernel `id` over `groups`, binding `bound` (binding number, buffer; the
    /// kernel's uniform last); an optimizer's or an update's uniform is kept, for its learning
    /// rate.
    pub fn kernel(
        &self,
        ctx: &GpuContext,
        kernels: &Kernels,
        name: &str,
        id: KernelId,
        bound: &[(u32, &wgpu::Buffer)],
        groups: (u32, u32, u32),
    ) -> Result<Dispatch, LayersError> {
        let pipeline = kernels.pipeline(ctx, id)?;
        let bind_group = self.manager.bind_group_at(ctx, name, &pipeline, bound)?;
        let updates = matches!(id, KernelId::Sgd | KernelId::Adam) || id.is_update();
        let opt_uniform = bound.last().filter(|_| updates).map(|&(_, u)| u.clone());
        Ok(Dispatch::Kernel { pipeline, bind_group, groups, opt_uniform })
    }
}

/// `bound` at bindings 0, 1, ..., then `uniform`.
pub(crate) fn in_order<'b>(bound: &[&'b wgpu::Buffer], uniform: &'b wgpu::Buffer) -> Vec<(u32, &'b wgpu::Buffer)> {
    (0..).zip(bound.iter().copied().chain([uniform])).collect()
}

// ANCHOR: dispatch
/// One prepared op: everything a recording needs, made once.
pub(crate) enum Dispatch {
    Kernel {
        pipeline: wgpu::ComputePipeline,
        bind_group: wgpu::BindGroup,
        groups: (u32, u32, u32),
        /// The optimizer uniform of an update op (its `lr` sits at byte [`crate::wgsl::Opt::LR_OFFSET`]).
        opt_uniform: Option<wgpu::Buffer>,
    },
    /// Stage 03's matmul; `dims` are its `(m, k, n)`, some of which follow the batch.
    Matmul { call: MatmulCall, dims: (Dim, Dim, Dim) },
    /// A dispatch that reads a batch of a gathering source (the gathering forward, the split
    /// step's update): its `slot` uniform is bound at `slot * stride`.
    Gathered {
        pipeline: wgpu::ComputePipeline,
        bind_group: wgpu::BindGroup,
        groups: (u32, u32, u32),
        stride: u64,
        /// As for `Kernel`: the split step's update has one.
        opt_uniform: Option<wgpu::Buffer>,
    },
}
// ANCHOR_END: dispatch

impl Dispatch {
    /// The optimizer uniform of an update dispatch, whose learning rate the host rewrites.
    pub fn opt_uniform(&self) -> Option<&wgpu::Buffer> {
        match self {
            Dispatch::Kernel { opt_uniform, .. } | Dispatch::Gathered { opt_uniform, .. } => opt_uniform.as_ref(),
            Dispatch::Matmul { .. } => None,
        }
    }

    /// Records the dispatch; a gathering one reads batch `slot` of its source.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, slot: usize) {
        match self {
            Dispatch::Kernel { pipeline, bind_group, groups, .. } => {
                pass.set_pipeline(pipeline);
                pass.set_bind_group(0, bind_group, &[]);
                pass.dispatch_workgroups(groups.0, groups.1, groups.2);
            }
            Dispatch::Matmul { call, .. } => call.record(pass),
            Dispatch::Gathered { pipeline, bind_group, groups, stride, .. } => {
                pass.set_pipeline(pipeline);
                pass.set_bind_group(0, bind_group, &[(slot as u64 * stride) as u32]);
                pass.dispatch_workgroups(groups.0, groups.1, groups.2);
            }
        }
    }
}

/// Errors if a dispatch needs more workgroups in one dimension than the device allows.
pub(crate) fn check_groups(ctx: &GpuContext, what: &str, groups: usize) -> Result<(), GpuError> {
    let max = ctx.limits.max_compute_workgroups_per_dimension as usize;
    if groups > max {
        return Err(GpuError::TooLarge {
            what: format!("{what}: {groups} workgroups in one dimension (use a smaller batch or layer)"),
            bytes: groups as u64,
            limit: max as u64,
            limit_name: "max_compute_workgroups_per_dimension",
        });
    }
    Ok(())
}
