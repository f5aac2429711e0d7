//! [`Dispatch`]: one prepared dispatch (pipeline, bind group, workgroup counts), made ready
//! once by `Matmul::prepare` and then only recorded.

/// One prepared dispatch: a pipeline, its bind group 0 and the workgroup counts `(x, y, z)`.
pub(crate) struct Dispatch {
    pub(crate) pipeline: wgpu::ComputePipeline,
    pub(crate) bind_group: wgpu::BindGroup,
    pub(crate) groups: (u32, u32, u32),
}

impl Dispatch {
    /// Records the dispatch into an open compute pass.
    pub(crate) fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &self.bind_group, &[]);
        pass.dispatch_workgroups(self.groups.0, self.groups.1, self.groups.2);
    }
}
