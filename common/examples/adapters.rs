//! Lists every adapter wgpu can see, and the one `GpuContext` picks, with the limits and
//! features this project cares about.
//!
//!     cargo run -p common --example adapters
//!
//! Use it when a stage runs on the wrong device: set `WGPU_ADAPTER_NAME` to part of a name
//! printed here, or `WGPU_BACKEND=vulkan` to hide the others.

use common::GpuContext;

fn main() {
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    let adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()));
    println!("{} adapter(s):", adapters.len());
    for a in &adapters {
        let i = a.get_info();
        println!("  - {} ({:?}, {:?}, driver {} {})", i.name, i.backend, i.device_type, i.driver, i.driver_info);
    }
    let ctx = match GpuContext::new() {
        Ok(ctx) => ctx,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    println!("\nchosen:");
    ctx.print_banner();
    let l = &ctx.limits;
    println!("  max_storage_buffer_binding_size: {} MiB", l.max_storage_buffer_binding_size >> 20);
    println!("  max_buffer_size:                 {} MiB", l.max_buffer_size >> 20);
    println!("  max_compute_workgroup_storage_size: {} KiB", l.max_compute_workgroup_storage_size >> 10);
    println!("  max_compute_invocations_per_workgroup: {}", l.max_compute_invocations_per_workgroup);
    println!("  max_compute_workgroups_per_dimension: {}", l.max_compute_workgroups_per_dimension);
    println!("  subgroup size: {}..{}", ctx.info.subgroup_min_size, ctx.info.subgroup_max_size);
    println!("  timestamps: {}, f16: {}, cooperative matrices: {}", ctx.has_timestamps(), ctx.has_f16(), ctx.has_cooperative_matrix());
    for p in ctx.cooperative_matrix_properties() {
        println!(
            "    {}x{}x{} {:?} x {:?} -> {:?}",
            p.m_size, p.n_size, p.k_size, p.ab_type, p.ab_type, p.cr_type
        );
    }
}
