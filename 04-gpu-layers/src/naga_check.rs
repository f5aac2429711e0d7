//! Test helpers: compiles a kernel's source with naga, as wgpu would, and measures what the
//! compiled kernel needs of a device, for the tests that check the Rust side's numbers.

use crate::routing::Needs;

/// Parses and validates `src` with naga, as wgpu would.
pub fn compile(name: &str, src: &str) -> naga::Module {
    let module = naga::front::wgsl::parse_str(src).unwrap_or_else(|e| panic!("{name}: {}", e.emit_to_string(src)));
    naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::all())
        .validate(&module)
        .unwrap_or_else(|e| panic!("{name}: {e:?}"));
    module
}

/// lavapipe's limits (the CI machine's adapter): 1,024 invocations, 32 KiB of workgroup
/// memory, storage buffers without a practical limit.
pub fn lavapipe_limits() -> wgpu::Limits {
    wgpu::Limits {
        max_compute_invocations_per_workgroup: 1024,
        max_compute_workgroup_storage_size: 32768,
        max_storage_buffers_per_shader_stage: 1 << 20,
        ..wgpu::Limits::defaults()
    }
}

/// What a compiled kernel needs: invocations per workgroup, bytes of workgroup memory, and
/// storage buffers bound.
pub fn needs(module: &naga::Module) -> Needs {
    let mut layouter = naga::proc::Layouter::default();
    layouter.update(module.to_ctx()).unwrap();
    let globals = || module.global_variables.iter().map(|(_, v)| v);
    Needs {
        invocations: module.entry_points.iter().map(|e| e.workgroup_size.iter().product::<u32>()).max().unwrap_or(0),
        workgroup_bytes: globals().filter(|v| v.space == naga::AddressSpace::WorkGroup).map(|v| layouter[v.ty].size).sum(),
        storage_buffers: globals().filter(|v| matches!(v.space, naga::AddressSpace::Storage { .. })).count() as u32,
    }
}

