//! What the driver made of a kernel: registers, spills, workgroup memory and whatever else it
//! reports, read through Vulkan's `VK_KHR_pipeline_executable_properties`.
//!
//! A kernel's speed often turns on numbers that WGSL never shows: how many registers each
//! invocation takes (which caps how many workgroups share a multiprocessor), and whether the
//! compiler had to spill registers to memory. Vulkan drivers that implement this extension
//! report them for a pipeline created with `CAPTURE_STATISTICS`, and some add the compiled code
//! as text (`CAPTURE_INTERNAL_REPRESENTATIONS`). wgpu does not expose the extension, so
//! [`Inspector`] opens its own Vulkan device beside wgpu's, on the same GPU:
//!
//! 1. the WGSL is parsed and validated by naga and written as SPIR-V for the one entry point,
//!    with the options wgpu uses for a pipeline made by `compute_pipeline_trusted` (no bounds
//!    checks, no loop bounding, no zero-filled workgroup memory, SPIR-V 1.6 on Vulkan 1.3);
//! 2. a pipeline layout is built from the module's own bindings (`@group(0) @binding(n)`);
//! 3. the driver compiles the pipeline, and each executable's statistics (and text
//!    representations, if any) are read back.
//!
//! The device enables what wgpu's does where it matters to code generation:
//! `robustBufferAccess` and `robustBufferAccess2` (wgpu turns both on where the adapter has
//! them, which makes the driver check buffer bounds itself). [`Robustness::Off`] compiles the
//! same kernel without them, to see what those checks cost.

use std::ffi::{CStr, CString};

use ash::vk;

use crate::GpuError;

/// Whether the inspecting device enables the buffer robustness wgpu enables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Robustness {
    /// `robustBufferAccess` and `robustBufferAccess2` where the device has them, as wgpu does.
    AsWgpu,
    /// Neither: the driver may assume every access is in bounds.
    Off,
}

/// The settings a runner's `--compiled` compiles each kernel with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings(pub Vec<Robustness>);

impl Robustness {
    /// A runner's `--compiled` value: `both` (the default), `robust` (as wgpu) or `plain`.
    pub fn choice(s: &str) -> Result<Settings, String> {
        match s {
            "both" => Ok(Settings(vec![Robustness::AsWgpu, Robustness::Off])),
            "robust" => Ok(Settings(vec![Robustness::AsWgpu])),
            "plain" => Ok(Settings(vec![Robustness::Off])),
            _ => Err(format!("bad --compiled {s:?}: choose both, robust (buffer robustness as wgpu enables it) or plain")),
        }
    }

    /// `robust` or `plain`, as the reports print it.
    pub fn label(self) -> &'static str {
        match self {
            Robustness::AsWgpu => "robust",
            Robustness::Off => "plain",
        }
    }
}

/// Prints what the driver made of each `(label, wgsl)` kernel (entry point `main`): a line of
/// statistics per kernel and robustness setting, after one line per statistic saying what it
/// means. With `out`, each text representation the driver offers is written there as a file.
/// A runner's `--compiled` calls this. Each setting gets a device of its own; a driver may
/// still reuse code it compiled for another device of the same process, so compare the two
/// settings in two processes (`--compiled robust`, `--compiled plain`) with its shader cache
/// off (NVIDIA: `__GL_SHADER_DISK_CACHE=0`).
pub fn report(
    adapter_name: &str,
    settings: &[Robustness],
    kernels: impl IntoIterator<Item = (String, String)>,
    out: Option<&std::path::Path>,
) -> Result<(), GpuError> {
    let inspectors: Vec<Inspector> = settings.iter().map(|&r| Inspector::open(adapter_name, r)).collect::<Result<_, _>>()?;
    if let Some(dir) = out {
        std::fs::create_dir_all(dir).map_err(|e| GpuError::Device(format!("--compiled-out {}: {e}", dir.display())))?;
    }
    println!(
        "\ncompiled by the driver of {} (Vulkan, VK_KHR_pipeline_executable_properties), entry point `main`, naga's runtime \
         checks off; `robust`: the device enables robustBufferAccess(2) as wgpu's does, `plain`: it does not",
        inspectors.first().map_or(adapter_name, |i| i.adapter.as_str())
    );
    let mut described = false;
    for (label, wgsl) in kernels {
        for inspector in &inspectors {
            let which = inspector.robustness.label();
            for e in inspector.inspect(&wgsl, "main")? {
                if !described {
                    for s in &e.statistics {
                        println!("  {}: {}", s.name, s.description);
                    }
                    described = true;
                }
                let stats: Vec<String> = e.statistics.iter().map(|s| format!("{}={}", s.name, s.value)).collect();
                println!("{label} | {which} | {}", stats.join(", "));
                for (name, text) in &e.representations {
                    let Some(dir) = out else {
                        println!("    ({name}: {} lines; --compiled-out DIR writes it)", text.lines().count());
                        continue;
                    };
                    let file: String = format!("{label} {which} {name}.txt")
                        .chars()
                        .map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '_' })
                        .collect();
                    std::fs::write(dir.join(&file), text).map_err(|e| GpuError::Device(format!("writing {file}: {e}")))?;
                }
            }
        }
    }
    Ok(())
}

/// One statistic of an executable, as the driver names it.
#[derive(Clone, Debug, PartialEq)]
pub struct Statistic {
    pub name: String,
    pub description: String,
    pub value: String,
}

/// One compiled executable of a pipeline (a compute pipeline usually has one).
#[derive(Clone, Debug, PartialEq)]
pub struct Executable {
    pub name: String,
    pub description: String,
    pub subgroup_size: u32,
    pub statistics: Vec<Statistic>,
    /// Text representations the driver offers (name, text); binary ones are left out.
    pub representations: Vec<(String, String)>,
}

/// A Vulkan device of its own, opened to read what the driver compiles (see the module notes).
pub struct Inspector {
    _entry: ash::Entry,
    instance: ash::Instance,
    device: ash::Device,
    executables: ash::khr::pipeline_executable_properties::Device,
    /// The physical device's name, as Vulkan reports it.
    pub adapter: String,
    api_version: u32,
    /// Whether this device enabled the robustness features (they may be missing).
    pub robustness: Robustness,
}

fn vk_err(what: &str) -> impl Fn(vk::Result) -> GpuError + '_ {
    move |e| GpuError::Device(format!("{what}: {e}"))
}

impl Inspector {
    /// Opens a device on the Vulkan physical device whose name contains `adapter_name` (case
    /// insensitive; wgpu's adapter name is a good choice), with or without wgpu's robustness.
    /// Errors if there is no Vulkan loader, no such device, or the device lacks
    /// `VK_KHR_pipeline_executable_properties`.
    pub fn open(adapter_name: &str, robustness: Robustness) -> Result<Inspector, GpuError> {
        // SAFETY: loading the system's Vulkan loader; every call below follows the Vulkan spec's
        // valid usage (handles from this instance and device, structures built by ash).
        unsafe {
            let entry = ash::Entry::load().map_err(|e| {
                GpuError::Device(format!("cannot load the Vulkan loader (libvulkan.so.1): {e}; install libvulkan1"))
            })?;
            let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_3);
            let instance = entry
                .create_instance(&vk::InstanceCreateInfo::default().application_info(&app), None)
                .map_err(vk_err("vkCreateInstance"))?;
            let built = Self::open_device(&instance, adapter_name, robustness);
            match built {
                Ok((device, adapter, api_version, robustness)) => {
                    let executables = ash::khr::pipeline_executable_properties::Device::new(&instance, &device);
                    Ok(Inspector { _entry: entry, instance, device, executables, adapter, api_version, robustness })
                }
                Err(e) => {
                    instance.destroy_instance(None);
                    Err(e)
                }
            }
        }
    }

    unsafe fn open_device(
        instance: &ash::Instance,
        adapter_name: &str,
        robustness: Robustness,
    ) -> Result<(ash::Device, String, u32, Robustness), GpuError> {
        // SAFETY: see `open`.
        unsafe {
            let wanted = adapter_name.to_lowercase();
            let mut seen = Vec::new();
            let mut found = None;
            for pd in instance.enumerate_physical_devices().map_err(vk_err("vkEnumeratePhysicalDevices"))? {
                let props = instance.get_physical_device_properties(pd);
                let name = props.device_name_as_c_str().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                if found.is_none() && name.to_lowercase().contains(&wanted) {
                    found = Some((pd, name.clone(), props.api_version));
                }
                seen.push(name);
            }
            let Some((pd, name, api_version)) = found else {
                return Err(GpuError::AdapterNotFound { wanted: adapter_name.to_string(), available: seen });
            };
            let extensions = instance.enumerate_device_extension_properties(pd).map_err(vk_err("vkEnumerateDeviceExtensionProperties"))?;
            let has = |ext: &CStr| extensions.iter().any(|e| e.extension_name_as_c_str() == Ok(ext));
            if !has(ash::khr::pipeline_executable_properties::NAME) {
                return Err(GpuError::MissingFeature("VK_KHR_pipeline_executable_properties (the driver does not report what it compiled)"));
            }
            let family = instance
                .get_physical_device_queue_family_properties(pd)
                .iter()
                .position(|q| q.queue_flags.contains(vk::QueueFlags::COMPUTE))
                .ok_or_else(|| GpuError::Device(format!("{name} has no compute queue")))? as u32;

            // Ask what the device has, then enable all of it (but robustness as requested).
            let mut f11 = vk::PhysicalDeviceVulkan11Features::default();
            let mut f12 = vk::PhysicalDeviceVulkan12Features::default();
            let mut f13 = vk::PhysicalDeviceVulkan13Features::default();
            let mut fexec = vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR::default();
            let mut fcoop = vk::PhysicalDeviceCooperativeMatrixFeaturesKHR::default();
            let mut frob2 = vk::PhysicalDeviceRobustness2FeaturesEXT::default();
            let coop = has(ash::khr::cooperative_matrix::NAME);
            let rob2 = has(ash::ext::robustness2::NAME);
            let vk13 = api_version >= vk::API_VERSION_1_3;
            {
                let mut query = vk::PhysicalDeviceFeatures2::default().push_next(&mut f11).push_next(&mut f12).push_next(&mut fexec);
                if vk13 {
                    query = query.push_next(&mut f13);
                }
                if coop {
                    query = query.push_next(&mut fcoop);
                }
                if rob2 {
                    query = query.push_next(&mut frob2);
                }
                instance.get_physical_device_features2(pd, &mut query);
                let mut core = query.features;
                let robust = robustness == Robustness::AsWgpu;
                core.robust_buffer_access &= robust as u32;
                frob2.robust_buffer_access2 &= robust as u32;
                frob2.robust_image_access2 &= robust as u32;
                frob2.null_descriptor = 0;
                if fexec.pipeline_executable_info == 0 {
                    return Err(GpuError::MissingFeature("pipelineExecutableInfo"));
                }
                let enabled = if robust && core.robust_buffer_access != 0 { Robustness::AsWgpu } else { Robustness::Off };
                let mut names = vec![ash::khr::pipeline_executable_properties::NAME.as_ptr()];
                if coop {
                    names.push(ash::khr::cooperative_matrix::NAME.as_ptr());
                }
                if rob2 {
                    names.push(ash::ext::robustness2::NAME.as_ptr());
                }
                let mut enable = vk::PhysicalDeviceFeatures2::default().features(core);
                // The queried structures carry the device's answers; their p_next links are
                // rebuilt by push_next below.
                f11.p_next = std::ptr::null_mut();
                f12.p_next = std::ptr::null_mut();
                f13.p_next = std::ptr::null_mut();
                fexec.p_next = std::ptr::null_mut();
                fcoop.p_next = std::ptr::null_mut();
                frob2.p_next = std::ptr::null_mut();
                enable = enable.push_next(&mut f11).push_next(&mut f12).push_next(&mut fexec);
                if vk13 {
                    enable = enable.push_next(&mut f13);
                }
                if coop {
                    enable = enable.push_next(&mut fcoop);
                }
                if rob2 {
                    enable = enable.push_next(&mut frob2);
                }
                let priorities = [1.0f32];
                let queues = [vk::DeviceQueueCreateInfo::default().queue_family_index(family).queue_priorities(&priorities)];
                let info = vk::DeviceCreateInfo::default()
                    .queue_create_infos(&queues)
                    .enabled_extension_names(&names)
                    .push_next(&mut enable);
                let device = instance.create_device(pd, &info, None).map_err(vk_err("vkCreateDevice"))?;
                Ok((device, name, api_version, enabled))
            }
        }
    }

    /// Compiles entry point `entry` of `wgsl` (as wgpu would with its runtime checks off) and
    /// returns what the driver reports about each executable.
    pub fn inspect(&self, wgsl: &str, entry: &str) -> Result<Vec<Executable>, GpuError> {
        let (module, info) = parse(wgsl)?;
        let words = spirv(&module, &info, entry, self.api_version)?;
        let bindings = bindings(&module)?;
        let entry_name = CString::new(entry).map_err(|_| GpuError::Validation(format!("entry point {entry:?} has a NUL")))?;
        // SAFETY: handles created here from `self.device` and destroyed before returning; the
        // SPIR-V comes from naga's validated module.
        unsafe {
            let d = &self.device;
            let module = d
                .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&words), None)
                .map_err(vk_err("vkCreateShaderModule"))?;
            let set = d
                .create_descriptor_set_layout(&vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings), None)
                .map_err(vk_err("vkCreateDescriptorSetLayout"))?;
            let sets = [set];
            let layout = d
                .create_pipeline_layout(&vk::PipelineLayoutCreateInfo::default().set_layouts(&sets), None)
                .map_err(vk_err("vkCreatePipelineLayout"))?;
            let stage = vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::COMPUTE)
                .module(module)
                .name(&entry_name);
            let info = vk::ComputePipelineCreateInfo::default()
                .flags(vk::PipelineCreateFlags::CAPTURE_STATISTICS_KHR | vk::PipelineCreateFlags::CAPTURE_INTERNAL_REPRESENTATIONS_KHR)
                .stage(stage)
                .layout(layout);
            let made = d.create_compute_pipelines(vk::PipelineCache::null(), &[info], None);
            let result = match made {
                Ok(pipelines) => {
                    let out = self.read(pipelines[0]);
                    d.destroy_pipeline(pipelines[0], None);
                    out
                }
                Err((_, e)) => Err(GpuError::Device(format!("vkCreateComputePipelines ({entry}): {e}"))),
            };
            d.destroy_pipeline_layout(layout, None);
            d.destroy_descriptor_set_layout(set, None);
            d.destroy_shader_module(module, None);
            result
        }
    }

    unsafe fn read(&self, pipeline: vk::Pipeline) -> Result<Vec<Executable>, GpuError> {
        // SAFETY: `pipeline` was created by this device with the capture flags.
        unsafe {
            let x = &self.executables;
            let props = x
                .get_pipeline_executable_properties(&vk::PipelineInfoKHR::default().pipeline(pipeline))
                .map_err(vk_err("vkGetPipelineExecutablePropertiesKHR"))?;
            let mut out = Vec::new();
            for (index, p) in props.iter().enumerate() {
                let which = vk::PipelineExecutableInfoKHR::default().pipeline(pipeline).executable_index(index as u32);
                let stats = x.get_pipeline_executable_statistics(&which).map_err(vk_err("vkGetPipelineExecutableStatisticsKHR"))?;
                let statistics = stats
                    .iter()
                    .map(|s| Statistic {
                        name: text(s.name_as_c_str()),
                        description: text(s.description_as_c_str()),
                        value: match s.format {
                            vk::PipelineExecutableStatisticFormatKHR::BOOL32 => (s.value.b32 != 0).to_string(),
                            vk::PipelineExecutableStatisticFormatKHR::INT64 => s.value.i64.to_string(),
                            vk::PipelineExecutableStatisticFormatKHR::UINT64 => s.value.u64.to_string(),
                            vk::PipelineExecutableStatisticFormatKHR::FLOAT64 => s.value.f64.to_string(),
                            other => format!("(format {other:?})"),
                        },
                    })
                    .collect();
                out.push(Executable {
                    name: text(p.name_as_c_str()),
                    description: text(p.description_as_c_str()),
                    subgroup_size: p.subgroup_size,
                    statistics,
                    representations: self.representations(&which)?,
                });
            }
            Ok(out)
        }
    }

    /// The text representations of one executable: a call for the sizes, then one for the data.
    unsafe fn representations(&self, which: &vk::PipelineExecutableInfoKHR) -> Result<Vec<(String, String)>, GpuError> {
        let get = self.executables.fp().get_pipeline_executable_internal_representations_khr;
        let handle = self.device.handle();
        let mut count = 0u32;
        // SAFETY: the two-call idiom of vkGetPipelineExecutableInternalRepresentationsKHR, with
        // buffers of the sizes the first call returned.
        unsafe {
            get(handle, which, &mut count, std::ptr::null_mut()).result().map_err(vk_err("vkGetPipelineExecutableInternalRepresentationsKHR"))?;
            let mut reps = vec![vk::PipelineExecutableInternalRepresentationKHR::default(); count as usize];
            get(handle, which, &mut count, reps.as_mut_ptr()).result().map_err(vk_err("vkGetPipelineExecutableInternalRepresentationsKHR"))?;
            let mut data: Vec<Vec<u8>> = reps.iter().map(|r| vec![0u8; r.data_size]).collect();
            for (r, buf) in reps.iter_mut().zip(data.iter_mut()) {
                r.p_data = buf.as_mut_ptr().cast();
            }
            get(handle, which, &mut count, reps.as_mut_ptr()).result().map_err(vk_err("vkGetPipelineExecutableInternalRepresentationsKHR"))?;
            Ok(reps
                .iter()
                .zip(data)
                .filter(|(r, _)| r.is_text != 0)
                .map(|(r, bytes)| {
                    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
                    (text(r.name_as_c_str()), String::from_utf8_lossy(&bytes[..end]).into_owned())
                })
                .collect())
        }
    }
}

impl Drop for Inspector {
    fn drop(&mut self) {
        // SAFETY: nothing created from these handles outlives `inspect`.
        unsafe {
            self.device.destroy_device(None);
            self.instance.destroy_instance(None);
        }
    }
}

fn text(s: Result<&CStr, std::ffi::FromBytesUntilNulError>) -> String {
    s.map(|c| c.to_string_lossy().into_owned()).unwrap_or_default()
}

fn parse(wgsl: &str) -> Result<(naga::Module, naga::valid::ModuleInfo), GpuError> {
    let module = naga::front::wgsl::parse_str(wgsl).map_err(|e| GpuError::Validation(e.emit_to_string(wgsl)))?;
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::all())
        .validate(&module)
        .map_err(|e| GpuError::Validation(e.emit_to_string(wgsl)))?;
    Ok((module, info))
}

/// SPIR-V for one compute entry point, with the options of wgpu's Vulkan backend for a pipeline
/// whose runtime checks are off (`wgpu::ShaderRuntimeChecks::unchecked()`) and whose workgroup
/// memory is not zero-filled.
fn spirv(module: &naga::Module, info: &naga::valid::ModuleInfo, entry: &str, api_version: u32) -> Result<Vec<u32>, GpuError> {
    use naga::back::spv;
    let lang_version = match api_version {
        v if v >= vk::API_VERSION_1_3 => (1, 6),
        v if v >= vk::API_VERSION_1_2 => (1, 5),
        _ => (1, 3),
    };
    let options = spv::Options {
        lang_version,
        flags: spv::WriterFlags::empty(),
        bounds_check_policies: naga::proc::BoundsCheckPolicies::default(),
        zero_initialize_workgroup_memory: spv::ZeroInitializeWorkgroupMemoryMode::None,
        force_loop_bounding: false,
        emit_int_div_checks: false,
        ..spv::Options::default()
    };
    let pipeline = spv::PipelineOptions { shader_stage: naga::ShaderStage::Compute, entry_point: entry.to_string() };
    spv::write_vec(module, info, &options, Some(&pipeline)).map_err(|e| GpuError::Validation(format!("SPIR-V for {entry}: {e}")))
}

/// The descriptor bindings of group 0 as the module declares them.
fn bindings(module: &naga::Module) -> Result<Vec<vk::DescriptorSetLayoutBinding<'static>>, GpuError> {
    let mut out = Vec::new();
    for (_, var) in module.global_variables.iter() {
        let Some(binding) = &var.binding else { continue };
        let kind = match var.space {
            naga::AddressSpace::Storage { .. } => vk::DescriptorType::STORAGE_BUFFER,
            naga::AddressSpace::Uniform => vk::DescriptorType::UNIFORM_BUFFER,
            other => return Err(GpuError::Validation(format!("binding {} in {other:?}: only buffers are inspected", binding.binding))),
        };
        if binding.group != 0 {
            return Err(GpuError::Validation(format!("binding in group {}: only group 0 is inspected", binding.group)));
        }
        out.push(
            vk::DescriptorSetLayoutBinding::default()
                .binding(binding.binding)
                .descriptor_type(kind)
                .descriptor_count(1)
                .stage_flags(vk::ShaderStageFlags::COMPUTE),
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KERNEL: &str = "
        @group(0) @binding(0) var<storage, read> x: array<f32>;
        @group(0) @binding(1) var<storage, read_write> y: array<f32>;
        @group(0) @binding(2) var<uniform> n: u32;
        @compute @workgroup_size(64)
        fn main(@builtin(global_invocation_id) id: vec3<u32>) {
            if id.x < n { y[id.x] = 2.0 * x[id.x]; }
        }
        @compute @workgroup_size(64)
        fn other(@builtin(global_invocation_id) id: vec3<u32>) {
            if id.x < n { y[id.x] = x[id.x] + 1.0; }
        }";

    #[test]
    fn the_runners_choice_of_settings() {
        assert_eq!(Robustness::choice("both"), Ok(Settings(vec![Robustness::AsWgpu, Robustness::Off])));
        assert_eq!(Robustness::choice("robust"), Ok(Settings(vec![Robustness::AsWgpu])));
        assert_eq!(Robustness::choice("plain"), Ok(Settings(vec![Robustness::Off])));
        let err = Robustness::choice("Plain").unwrap_err();
        assert!(err.contains("--compiled") && err.contains("both, robust"), "{err}");
        assert_eq!((Robustness::AsWgpu.label(), Robustness::Off.label()), ("robust", "plain"));
    }

    #[test]
    fn bindings_come_from_the_module() {
        let b = bindings(&parse(KERNEL).unwrap().0).unwrap();
        let got: Vec<_> = b.iter().map(|b| (b.binding, b.descriptor_type)).collect();
        assert_eq!(
            got,
            [(0, vk::DescriptorType::STORAGE_BUFFER), (1, vk::DescriptorType::STORAGE_BUFFER), (2, vk::DescriptorType::UNIFORM_BUFFER)]
        );
    }

    #[test]
    fn spirv_has_only_the_entry_point_asked_for() {
        let (module, info) = parse(KERNEL).unwrap();
        let words = spirv(&module, &info, "other", vk::API_VERSION_1_3).unwrap();
        assert_eq!(words[0], 0x0723_0203, "SPIR-V magic number");
        assert_eq!(words[1], 0x0001_0600, "SPIR-V 1.6 for Vulkan 1.3");
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let has = |s: &str| bytes.windows(s.len()).any(|w| w == s.as_bytes());
        assert!(has("other") && !has("main\0"), "only the entry point asked for");
        assert!(matches!(parse("fn broken("), Err(GpuError::Validation(_))));
    }
}
