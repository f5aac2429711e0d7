//! Which adapter: the variable that picks one by name (`WGPU_ADAPTER_NAME`), the ranking that
//! picks the fastest otherwise, and the names of the software renderers (a CPU pretending to be
//! a GPU) with the warning printed for them. `context.rs` and (in a browser) `web.rs` use it.

#[cfg(not(target_arch = "wasm32"))]
use crate::error::GpuError;

/// The environment variable that selects an adapter by part of its name (case-insensitive).
pub const ADAPTER_ENV: &str = "WGPU_ADAPTER_NAME";

/// True when an adapter's name is one of the known software renderers (for adapters that do not
/// report their device type, such as a browser's WebGPU adapter).
pub fn is_software_name(name: &str) -> bool {
    let name = name.to_lowercase();
    ["llvmpipe", "lavapipe", "swiftshader", "softpipe", "microsoft basic render"]
        .iter()
        .any(|s| name.contains(s))
}

/// The warning every program prints when the adapter is a CPU.
pub fn software_warning(name: &str) -> String {
    let bar = "!".repeat(78);
    format!(
        "{bar}\n!! WARNING: '{name}' is a SOFTWARE adapter: it runs \"GPU\" code on your CPU cores.\n\
         !! Results are correct, but its timings are NOT GPU numbers. Install your GPU's\n\
         !! driver (or pick a real GPU with {ADAPTER_ENV}) to measure a GPU.\n{bar}"
    )
}

#[cfg(not(target_arch = "wasm32"))]
/// Ranks an adapter: bigger is preferred. Real GPUs first, then native APIs over GL.
fn rank(device_type: wgpu::DeviceType, backend: wgpu::Backend) -> (u8, u8) {
    let device = match device_type {
        wgpu::DeviceType::DiscreteGpu => 4,
        wgpu::DeviceType::IntegratedGpu => 3,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Cpu => 1,
        wgpu::DeviceType::Other => 0,
    };
    let backend = match backend {
        wgpu::Backend::Vulkan | wgpu::Backend::Metal | wgpu::Backend::Dx12 => 2,
        wgpu::Backend::Gl => 1,
        _ => 0,
    };
    (device, backend)
}

#[cfg(not(target_arch = "wasm32"))]
/// Picks the adapter whose name contains `wanted` (case-insensitive), or the best-ranked one.
pub(crate) fn choose_adapter(adapters: Vec<wgpu::Adapter>, wanted: Option<&str>) -> Result<wgpu::Adapter, GpuError> {
    if adapters.is_empty() {
        return Err(GpuError::NoAdapter);
    }
    if let Some(wanted) = wanted {
        let needle = wanted.to_lowercase();
        let names: Vec<String> = adapters
            .iter()
            .map(|a| {
                let i = a.get_info();
                format!("{} ({:?})", i.name, i.backend)
            })
            .collect();
        return adapters
            .into_iter()
            .enumerate()
            .filter(|(_, a)| a.get_info().name.to_lowercase().contains(&needle))
            .max_by_key(|(i, a)| (rank(a.get_info().device_type, a.get_info().backend), std::cmp::Reverse(*i)))
            .map(|(_, a)| a)
            .ok_or(GpuError::AdapterNotFound { wanted: wanted.to_string(), available: names });
    }
    adapters
        .into_iter()
        .enumerate()
        .max_by_key(|(i, a)| (rank(a.get_info().device_type, a.get_info().backend), std::cmp::Reverse(*i)))
        .map(|(_, a)| a)
        .ok_or(GpuError::NoAdapter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discrete_beats_software_and_vulkan_beats_gl() {
        let gpu = rank(wgpu::DeviceType::DiscreteGpu, wgpu::Backend::Gl);
        let cpu = rank(wgpu::DeviceType::Cpu, wgpu::Backend::Vulkan);
        assert!(gpu > cpu);
        let vk = rank(wgpu::DeviceType::Cpu, wgpu::Backend::Vulkan);
        let gl = rank(wgpu::DeviceType::Cpu, wgpu::Backend::Gl);
        assert!(vk > gl);
    }

    #[test]
    fn software_renderers_are_known_by_name() {
        assert!(is_software_name("google swiftshader"));
        assert!(is_software_name("llvmpipe (LLVM 15.0.6, 256 bits)"));
        assert!(!is_software_name("NVIDIA H200"));
        assert!(!is_software_name("apple m2"));
    }

    #[test]
    fn warning_names_the_adapter_and_says_software() {
        let w = software_warning("llvmpipe (LLVM 15.0.6, 256 bits)");
        assert!(w.contains("llvmpipe") && w.contains("SOFTWARE"));
    }
}
