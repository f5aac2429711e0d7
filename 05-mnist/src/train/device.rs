//! Which processor trains: the [`DeviceChoice`] a user makes (`--device`, or the page's
//! `"device"`), and [`select_device`], which turns it into a [`Device`]. The command line and
//! `mnist serve` both pick through [`select_device_with`]; they differ only in where the GPU
//! context comes from (a new one, or the server's kept one) and in how they word a fallback.

use std::sync::Arc;

use common::{GpuContext, GpuError};

use crate::error::Result;

/// Which processor trains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceChoice {
    /// A real GPU if there is one, else the CPU (a software adapter counts as no GPU).
    Auto,
    /// The best GPU adapter, even a software one (with a loud warning).
    Gpu,
    /// The CPU trainer (stage 04's reference implementation).
    Cpu,
}

/// The processor a run uses.
#[derive(Clone)]
pub enum Device {
    Cpu,
    Gpu(Arc<GpuContext>),
}

impl Device {
    /// `CPU (threads, vector instructions)` or the adapter line (`NVIDIA H200 (Vulkan, DiscreteGpu, ...)`).
    pub fn describe(&self) -> String {
        match self {
            Device::Cpu => {
                let n = rayon::current_num_threads();
                format!("CPU ({n} thread{}, {})", if n == 1 { "" } else { "s" }, gpu_layers::cpu::fast::instruction_set())
            }
            Device::Gpu(ctx) => ctx.adapter_line(),
        }
    }
}

/// Why `auto` chose the CPU.
#[derive(Debug, Clone)]
pub enum Fallback {
    /// The only adapter is a software renderer (GPU code run on the CPU); its name.
    Software { adapter: String },
    /// There is no GPU adapter at all.
    NoGpu(GpuError),
}

/// The device picked for a [`DeviceChoice`], and why `auto` fell back to the CPU (if it did).
/// For the GPU, call `ctx.print_banner()` (it warns about software adapters).
pub struct Selected {
    pub device: Device,
    pub fallback: Option<Fallback>,
}

impl Selected {
    /// The command line's note about a fallback to the CPU.
    pub fn notice(&self) -> Option<String> {
        self.fallback.as_ref().map(|f| match f {
            Fallback::Software { adapter } => format!(
                "note: the only GPU adapter is '{adapter}', a software renderer running on the CPU; \
                 training on the CPU instead (use --device gpu to train on it anyway)"
            ),
            Fallback::NoGpu(e) => format!("note: no GPU found ({e}); training on the CPU"),
        })
    }
}

/// Opens the device for `choice` with a new GPU context. `Gpu` fails when there is no adapter
/// at all; `Auto` then (and when the only adapter is a software one) chooses the CPU and says why.
/// (Native targets; a browser page makes its WebGPU context with `GpuContext::new_async`.)
/// `limits` are those the context asks the adapter for (`--gpu-limits`).
#[cfg(not(target_arch = "wasm32"))]
pub fn select_device(choice: DeviceChoice, limits: &common::GpuLimits) -> Result<Selected> {
    Ok(select_device_with(choice, || GpuContext::with_gpu_limits(limits).map(Arc::new))?)
}

/// [`select_device`] with the GPU context from `gpu` (called only when the choice needs one).
pub fn select_device_with(
    choice: DeviceChoice,
    gpu: impl FnOnce() -> Result<Arc<GpuContext>, GpuError>,
) -> Result<Selected, GpuError> {
    let chosen = |device| Selected { device, fallback: None };
    match choice {
        DeviceChoice::Cpu => Ok(chosen(Device::Cpu)),
        DeviceChoice::Gpu => Ok(chosen(Device::Gpu(gpu()?))),
        DeviceChoice::Auto => Ok(match gpu() {
            Ok(ctx) if !ctx.is_software() => chosen(Device::Gpu(ctx)),
            Ok(ctx) => Selected { device: Device::Cpu, fallback: Some(Fallback::Software { adapter: ctx.info.name.clone() }) },
            Err(e) => Selected { device: Device::Cpu, fallback: Some(Fallback::NoGpu(e)) },
        }),
    }
}
