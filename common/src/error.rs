//! One error type for everything that can go wrong between the program and the GPU.
//!
//! Every message says what happened *and* what to do about it, because the person reading it
//! is usually a learner on a machine we have never seen.

use std::fmt;

/// Errors from GPU setup and GPU work. Library code returns these instead of panicking.
#[derive(Debug, Clone, PartialEq)]
pub enum GpuError {
    /// No adapter at all: no driver, or a driver that wgpu cannot load.
    NoAdapter,
    /// `WGPU_ADAPTER_NAME` matched none of the adapters that exist.
    AdapterNotFound { wanted: String, available: Vec<String> },
    /// The adapter refused to create a device.
    RequestDevice(String),
    /// Limits asked of the adapter that it does not offer (`--gpu-limits`); the message says which.
    Limits(String),
    /// A buffer larger than this device allows.
    TooLarge { what: String, bytes: u64, limit: u64, limit_name: &'static str },
    /// A feature (timestamps, f16, cooperative matrices...) that this adapter does not have.
    MissingFeature(&'static str),
    /// wgpu rejected a call (bad WGSL, wrong binding, ...). The message is wgpu's own.
    Validation(String),
    /// The device ran out of memory.
    OutOfMemory(String),
    /// Mapping a buffer for reading failed, or waiting for the device failed.
    Device(String),
}

impl fmt::Display for GpuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            #[cfg(not(target_arch = "wasm32"))]
            GpuError::NoAdapter => write!(
                f,
                "no GPU adapter found. Install a GPU driver with Vulkan support, or, on a machine \
                 without a GPU, Mesa's software Vulkan driver (Debian/Ubuntu: \
                 `sudo apt-get install mesa-vulkan-drivers`). `WGPU_BACKEND=vulkan|gl|metal|dx12` \
                 chooses the API wgpu tries."
            ),
            #[cfg(target_arch = "wasm32")]
            GpuError::NoAdapter => write!(
                f,
                "this browser offers no WebGPU adapter (WebGPU is missing, turned off, or the GPU \
                 is blocklisted). Chrome and Edge 113+ have it on Windows, macOS and ChromeOS, \
                 Safari 26+ on macOS and iOS, Firefox 141+ on Windows; on Linux Chrome needs \
                 --enable-unsafe-webgpu. Train on the CPU (WebAssembly) instead."
            ),
            GpuError::AdapterNotFound { wanted, available } => write!(
                f,
                "WGPU_ADAPTER_NAME={wanted:?} matches none of the adapters on this machine: {}. \
                 Set it to part of one of these names, or unset it to pick the fastest.",
                if available.is_empty() { "(none)".to_string() } else { available.join("; ") }
            ),
            GpuError::RequestDevice(msg) => write!(f, "the adapter refused to create a device: {msg}"),
            GpuError::Limits(msg) => write!(f, "{msg}"),
            GpuError::TooLarge { what, bytes, limit, limit_name } => write!(
                f,
                "{what} needs {bytes} bytes ({:.1} MiB), but this device allows at most {limit} \
                 bytes ({:.1} MiB, `{limit_name}`). Use smaller sizes, or a device with a larger limit.",
                *bytes as f64 / 1048576.0,
                *limit as f64 / 1048576.0
            ),
            GpuError::MissingFeature(name) => {
                write!(f, "this adapter does not support {name}; choose another adapter with WGPU_ADAPTER_NAME")
            }
            GpuError::Validation(msg) => write!(f, "wgpu validation error: {msg}"),
            GpuError::OutOfMemory(msg) => {
                write!(f, "the GPU ran out of memory: {msg}. Use smaller sizes or batches.")
            }
            GpuError::Device(msg) => write!(f, "GPU device error: {msg}"),
        }
    }
}

impl std::error::Error for GpuError {}

impl From<wgpu::Error> for GpuError {
    fn from(e: wgpu::Error) -> Self {
        match e {
            wgpu::Error::OutOfMemory { .. } => GpuError::OutOfMemory(e.to_string()),
            other => GpuError::Validation(other.to_string()),
        }
    }
}
