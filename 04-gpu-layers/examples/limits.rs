fn main() {
    let ctx = common::GpuContext::new().unwrap();
    let l = &ctx.limits;
    println!("storage/stage {} uniform/stage {} wg storage {} invocations {} features {:?}", l.max_storage_buffers_per_shader_stage, l.max_uniform_buffers_per_shader_stage, l.max_compute_workgroup_storage_size, l.max_compute_invocations_per_workgroup, ctx.features);
}
