//! Compute pipelines from WGSL, bind groups from buffer lists, and dispatch sizes.
//!
//! Every kernel in this project binds its buffers at `@group(0) @binding(0..n)` in the order
//! the Rust side lists them, so one helper can build every bind group.

use crate::{GpuContext, GpuError};

impl GpuContext {
    /// Compiles `wgsl` and builds a compute pipeline for `entry`, with the layout wgpu derives
    /// from the shader. A WGSL error comes back as `GpuError::Validation` with naga's message.
    pub fn compute_pipeline(&self, label: &str, wgsl: &str, entry: &str) -> Result<wgpu::ComputePipeline, GpuError> {
        self.scoped(|| {
            let module = self.device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(label),
                source: wgpu::ShaderSource::Wgsl(wgsl.into()),
            });
            self.pipeline_from_module(label, &module, entry)
        })
    }

    /// Like [`GpuContext::compute_pipeline`], with the runtime checks chosen by the caller and
    /// workgroup memory left uninitialised.
    ///
    /// naga wraps every array access in a bounds check (and every loop in a forced bound) by
    /// default. In matmul inner loops that cost 13-36x on the H200 (stage 03's checks table), so
    /// the fast kernels turn them off with `wgpu::ShaderRuntimeChecks::unchecked()`. wgpu also
    /// zero-fills workgroup memory before every workgroup runs; kernels that write their shared
    /// tiles before reading them do not need that.
    ///
    /// # Safety
    /// With checks off, an out-of-range index is undefined behaviour on the GPU. The shader must
    /// keep every index in range itself (guarding each access against the shape), must write
    /// workgroup memory before reading it, and must be tested on awkward shapes against a CPU
    /// reference, as every kernel of this project is.
    pub unsafe fn compute_pipeline_trusted(
        &self,
        label: &str,
        wgsl: &str,
        entry: &str,
        checks: wgpu::ShaderRuntimeChecks,
    ) -> Result<wgpu::ComputePipeline, GpuError> {
        self.scoped(|| {
            let desc = wgpu::ShaderModuleDescriptor { label: Some(label), source: wgpu::ShaderSource::Wgsl(wgsl.into()) };
            // SAFETY: forwarded to the caller (see `# Safety`).
            let module = unsafe { self.device.create_shader_module_trusted(desc, checks) };
            self.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(label),
                layout: None,
                module: &module,
                entry_point: Some(entry),
                compilation_options: wgpu::PipelineCompilationOptions {
                    constants: &[],
                    zero_initialize_workgroup_memory: false,
                },
                cache: None,
            })
        })
    }

    fn pipeline_from_module(&self, label: &str, module: &wgpu::ShaderModule, entry: &str) -> wgpu::ComputePipeline {
        self.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(label),
            layout: None,
            module,
            entry_point: Some(entry),
            compilation_options: Default::default(),
            cache: None,
        })
    }

    /// A bind group for `pipeline`'s group `group`, binding `buffers[i]` at `@binding(i)`.
    pub fn bind_group(
        &self,
        label: &str,
        pipeline: &wgpu::ComputePipeline,
        group: u32,
        buffers: &[&wgpu::Buffer],
    ) -> Result<wgpu::BindGroup, GpuError> {
        let numbered: Vec<(u32, &wgpu::Buffer)> = buffers.iter().enumerate().map(|(i, b)| (i as u32, *b)).collect();
        self.bind_group_at(label, pipeline, group, &numbered)
    }

    /// Like [`GpuContext::bind_group`], with each buffer at the `@binding` number beside it, for
    /// a shader whose bindings have gaps (a variant that leaves some out).
    pub fn bind_group_at(
        &self,
        label: &str,
        pipeline: &wgpu::ComputePipeline,
        group: u32,
        buffers: &[(u32, &wgpu::Buffer)],
    ) -> Result<wgpu::BindGroup, GpuError> {
        let entries: Vec<wgpu::BindGroupEntry> =
            buffers.iter().map(|&(binding, b)| wgpu::BindGroupEntry { binding, resource: b.as_entire_binding() }).collect();
        self.scoped(|| {
            self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some(label),
                layout: &pipeline.get_bind_group_layout(group),
                entries: &entries,
            })
        })
    }

    /// Workgroup counts `(x, y, 1)` that cover `len` invocations with `workgroup_size` each.
    ///
    /// One dispatch dimension holds at most `max_compute_workgroups_per_dimension` (65,535)
    /// workgroups, so 2^24 elements at 256 per workgroup need a second dimension. The shader
    /// rebuilds a flat index with
    /// `let i = gid.x + gid.y * (num_workgroups.x * WORKGROUP_SIZE);` and returns if `i >= len`.
    pub fn workgroups_1d(&self, len: u64, workgroup_size: u32) -> Result<(u32, u32, u32), GpuError> {
        workgroups_1d(len, workgroup_size, self.limits.max_compute_workgroups_per_dimension)
    }

    /// The encoder -> compute pass -> submit block: records `record` into one compute pass of a
    /// new command encoder (both labelled `label`) and submits it. Does not wait for the GPU;
    /// wrap it in [`GpuContext::scoped`] to turn a validation error into an `Err`.
    pub fn submit_pass(&self, label: &str, record: impl FnOnce(&mut wgpu::ComputePass<'_>)) -> wgpu::SubmissionIndex {
        let mut encoder = self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(label) });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some(label), timestamp_writes: None });
            record(&mut pass);
        }
        self.queue.submit([encoder.finish()])
    }
}

/// See [`GpuContext::workgroups_1d`]; `max_per_dim` is the device's per-dimension limit.
pub fn workgroups_1d(len: u64, workgroup_size: u32, max_per_dim: u32) -> Result<(u32, u32, u32), GpuError> {
    let groups = len.div_ceil(workgroup_size as u64).max(1);
    let max = max_per_dim as u64;
    // Fewest rows first, then spread the groups evenly over them: 2^24 elements at 256 a
    // group become (32768, 2), not (65535, 2) with half of the second row idle.
    let y = groups.div_ceil(max);
    let x = groups.div_ceil(y);
    if y > max {
        return Err(GpuError::TooLarge {
            what: format!("a dispatch of {len} invocations"),
            bytes: len,
            limit: max * max * workgroup_size as u64,
            limit_name: "max_compute_workgroups_per_dimension squared",
        });
    }
    Ok((x as u32, y as u32, 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_lengths_fit_one_dimension() {
        assert_eq!(workgroups_1d(0, 256, 65535).unwrap(), (1, 1, 1));
        assert_eq!(workgroups_1d(1, 256, 65535).unwrap(), (1, 1, 1));
        assert_eq!(workgroups_1d(257, 256, 65535).unwrap(), (2, 1, 1));
    }

    #[test]
    fn large_lengths_spill_into_y_and_cover_everything() {
        let len = 65_535u64 * 256 + 1;
        let (x, y, z) = workgroups_1d(len, 256, 65535).unwrap();
        assert_eq!((x, y, z), (32768, 2, 1));
        assert!(x as u64 * y as u64 * 256 >= len);
        let len = 1u64 << 26;
        let (x, y, _) = workgroups_1d(len, 256, 65535).unwrap();
        assert!(x as u64 * y as u64 * 256 >= len && x <= 65535 && y <= 65535);
        // Balanced: the idle groups are fewer than one row.
        assert!(x as u64 * y as u64 - len.div_ceil(256) < y as u64);
    }

    #[test]
    fn impossible_dispatch_is_an_error() {
        assert!(workgroups_1d(u64::MAX / 2, 256, 65535).is_err());
    }
}
