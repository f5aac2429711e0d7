//! The arithmetic ceilings a matmul kernel could approach through WGSL on this adapter.
//!
//! Probes that compute only from registers, so that their speed is the GPU's arithmetic
//! rate as wgpu and the driver deliver it, not a datasheet figure: `shaders/peak_fma.wgsl`
//! (f32 vec4 `fma` chains) and `shaders/peak_fma_outer.wgsl` (the same multiply-adds in a
//! matmul's form, an 8 x 8 outer product per round): the ceiling of kernels 01-05 and 07,
//! the faster of the two; `shaders/peak_coop.wgsl`
//! (cooperative-matrix multiply-adds, 16x16x16 f16 -> f32: the ceiling of kernels 06 and 08).
//! The runner (`gpu-matmul --probe`) times them like a kernel and prints each kernel's share.

use common::{GpuContext, GpuError};

use crate::coop::coop_support;
use crate::error::MatmulError;
use crate::kernel::Kernel;
use crate::wgsl::specialize;

/// One ceiling probe, ready to record: a pipeline, its buffers, and the FLOP one dispatch does.
pub struct PeakProbe {
    pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
    groups: u32,
    /// What the probe writes, and where in it its results start (in floats), so that a test can
    /// check that the loop was run rather than compiled away.
    out: wgpu::Buffer,
    out_first: usize,
    /// Floating-point operations per dispatch (a multiply-add counts 2).
    pub flop: f64,
    /// What it measures, for tables.
    pub label: &'static str,
}

/// Iterations of each probe's loop (written into the shaders).
pub const PEAK_ITERS: u32 = 4096;

impl PeakProbe {
    /// The f32 ceiling: `workgroups` x 256 invocations, each running 8 independent vec4 `fma`
    /// chains for [`PEAK_ITERS`] rounds (`shaders/peak_fma.wgsl`: every multiply-add reads
    /// three different registers). Use enough workgroups to fill the GPU (16 per
    /// multiprocessor: 2,112 on the H200's 132).
    pub fn fma(ctx: &GpuContext, workgroups: u32) -> Result<Self, MatmulError> {
        // x * y + z with every input 0.5 converges to 1: no overflow, no denormals.
        Self::f32_probe(ctx, workgroups, include_str!("../shaders/peak_fma.wgsl"), 8, "f32 fma (vec4, 8 chains)")
    }

    /// The f32 ceiling in a matmul's form: `workgroups` x 256 invocations, each adding the
    /// outer product of 8 values of A and 8 of B into 16 vec4 accumulators for [`PEAK_ITERS`]
    /// rounds (`shaders/peak_fma_outer.wgsl`: each value of A feeds 8 multiply-adds in a row,
    /// as in kernels 05 and 07).
    pub fn fma_outer(ctx: &GpuContext, workgroups: u32) -> Result<Self, MatmulError> {
        // Every input 0.5: each accumulator grows by 0.25 a round, to about 1,000: finite.
        Self::f32_probe(ctx, workgroups, include_str!("../shaders/peak_fma_outer.wgsl"), 16, "f32 fma (8 x 8 outer product)")
    }

    /// An f32 probe whose invocations (256 per workgroup, indexed by `gid.x` alone) read
    /// `buf[0 .. 64]`, update `vec4s` vec4 values by `fma` each round and write one vec4 to
    /// `buf[64 + id]`; every input is 0.5.
    fn f32_probe(ctx: &GpuContext, workgroups: u32, shader: &str, vec4s: u32, label: &'static str) -> Result<Self, MatmulError> {
        const THREADS: u32 = 256;
        const INPUTS: usize = 64;
        let workgroups = check_groups(ctx, workgroups)?;
        let src = specialize(shader, &[("ITERS", format!("{PEAK_ITERS}u"))]).map_err(config)?;
        let data = vec![0.5f32; 4 * (INPUTS + (workgroups * THREADS) as usize)];
        let buffer = ctx.storage_buffer(label, &data)?;
        // SAFETY: the probe reads buf[0 .. 64] and writes buf[64 + id] for its own invocation
        // id, all inside `data`; it has no workgroup memory. (With naga's default checks its
        // loop gets a hidden bound that would be measured too.)
        let pipeline = unsafe { ctx.compute_pipeline_trusted(label, &src, "main", wgpu::ShaderRuntimeChecks::unchecked()) }?;
        let bind_group = ctx.bind_group(label, &pipeline, 0, &[&buffer])?;
        let flop = workgroups as f64 * THREADS as f64 * PEAK_ITERS as f64 * vec4s as f64 * 4.0 * 2.0;
        Ok(Self { pipeline, bind_group, groups: workgroups, flop, label, out: buffer, out_first: 4 * INPUTS })
    }

    /// The tensor-core ceiling: `workgroups` x 4 subgroups, each running 4 independent
    /// 16x16x16 f16 -> f32 `coopMultiplyAdd`s for [`PEAK_ITERS`] rounds. Errors where
    /// kernels 06 and 08 cannot run ([`coop_support`]).
    pub fn coop(ctx: &GpuContext, workgroups: u32) -> Result<Self, MatmulError> {
        const SUBGROUPS: u32 = 4;
        coop_support(ctx).map_err(|why| MatmulError::Unsupported { kernel: Kernel::CoopF16, why })?;
        let src = specialize(include_str!("../shaders/peak_coop.wgsl"), &[("ITERS", format!("{PEAK_ITERS}u"))]).map_err(config)?;
        // Five 16x16 fragments of f16 (0x2148 is about 0.0101: finite, no overflow).
        let halves = vec![0x2148u16; 5 * 256];
        let src_buf = ctx.storage_buffer("peak coop inputs", &halves)?;
        let dst_buf = ctx.storage_buffer_empty("peak coop accumulators", workgroups as u64 * SUBGROUPS as u64 * 1024 * 4)?;
        // SAFETY: every index in the probe is a constant or the workgroup's and subgroup's own
        // block of `dst`, which is sized for `workgroups` x SUBGROUPS blocks; it has no
        // workgroup memory.
        let pipeline = unsafe { ctx.compute_pipeline_trusted("peak coop", &src, "main", wgpu::ShaderRuntimeChecks::unchecked()) }?;
        let bind_group = ctx.bind_group("peak coop", &pipeline, 0, &[&src_buf, &dst_buf])?;
        let flop = workgroups as f64 * SUBGROUPS as f64 * PEAK_ITERS as f64 * 4.0 * 2.0 * 16f64.powi(3);
        let groups = check_groups(ctx, workgroups)?;
        Ok(Self { pipeline, bind_group, groups, flop, label: "coopMultiplyAdd 16x16x16 f16 -> f32", out: dst_buf, out_first: 0 })
    }

    /// What the last dispatch wrote: for the f32 probes one vec4 per invocation (4 floats each),
    /// for the cooperative-matrix probe one 16 x 16 f32 block per subgroup.
    pub async fn outputs(&self, ctx: &GpuContext) -> Result<Vec<f32>, GpuError> {
        let all: Vec<f32> = ctx.read_async(&self.out, (self.out.size() / 4) as usize).await?;
        Ok(all[self.out_first..].to_vec())
    }

    /// Records one dispatch into an open compute pass.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &self.bind_group, &[]);
        pass.dispatch_workgroups(self.groups, 1, 1);
    }
}

fn config(why: String) -> MatmulError {
    MatmulError::Gpu(GpuError::Validation(why))
}

fn check_groups(ctx: &GpuContext, workgroups: u32) -> Result<u32, MatmulError> {
    let max = ctx.limits.max_compute_workgroups_per_dimension;
    if workgroups == 0 || workgroups > max {
        return Err(config(format!("a probe takes 1 to {max} workgroups, not {workgroups}")));
    }
    Ok(workgroups)
}
