//! Whether this adapter can run the tensor-core kernels (06 and 08) and the cooperative-matrix
//! probe: [`coop_support`].

use common::GpuContext;

/// Why kernels 06 and 08 cannot run on this adapter, if they cannot: they need cooperative
/// matrices with 16x16x16 f16 inputs and f32 accumulators, and subgroups of exactly 32 (their
/// layout of subgroups over the tile assumes 32 invocations each).
pub fn coop_support(ctx: &GpuContext) -> Result<(), String> {
    if !ctx.has_cooperative_matrix() {
        return Err(format!("it needs cooperative matrices (tensor cores) and f16, which {} lacks", ctx.info.name));
    }
    let ok = ctx.cooperative_matrix_properties().iter().any(|p| {
        (p.m_size, p.n_size, p.k_size) == (16, 16, 16)
            && p.ab_type == wgpu::CooperativeScalarType::F16
            && p.cr_type == wgpu::CooperativeScalarType::F32
    });
    if !ok {
        return Err(format!("{} has cooperative matrices, but not 16x16x16 with f16 inputs and f32 results", ctx.info.name));
    }
    let (lo, hi) = (ctx.info.subgroup_min_size, ctx.info.subgroup_max_size);
    if !ctx.features.contains(wgpu::Features::SUBGROUP) || lo != 32 || hi != 32 {
        return Err(format!("it needs subgroups of exactly 32 invocations; {} has {lo} to {hi}", ctx.info.name));
    }
    Ok(())
}
