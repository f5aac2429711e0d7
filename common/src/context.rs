//! The GPU context: instance, adapter, device and queue, made once and shared by every stage.
//!
//! Stage 01 writes these steps out by hand so you see each one; every later stage calls
//! [`GpuContext::new`] instead. What it does for you:
//! - picks the fastest adapter (a discrete GPU over an integrated one over a software one),
//!   or the one whose name contains `WGPU_ADAPTER_NAME` (`WGPU_BACKEND` picks the API);
//! - asks for the adapter's own limits instead of wgpu's conservative defaults (the default
//!   storage binding is 128 MiB; MNIST as f32 is 188 MB), and for timestamps, f16, subgroups
//!   and cooperative matrices where the adapter has them;
//! - tells you which adapter runs your code, and warns loudly when it is a CPU pretending to
//!   be a GPU (Mesa's llvmpipe/lavapipe, SwiftShader, WARP).
//!
//! The same code runs in a browser (`wasm32-unknown-unknown`, wgpu's WebGPU backend): there
//! [`GpuContext::new_async`] asks the browser for its adapter (it offers one, chosen by the
//! browser), names it from the browser's adapter info (`google swiftshader` is Chromium's
//! software renderer), and requests the limits that adapter offers, which may be no more than
//! WebGPU's defaults (128 MiB per storage binding, 16 KiB of workgroup memory, 256 invocations
//! per workgroup). Nothing may block in a browser, so only the async constructor exists there.

use std::sync::Mutex;

use crate::adapter::{is_software_name, software_warning};
#[cfg(not(target_arch = "wasm32"))]
use crate::adapter::{ADAPTER_ENV, choose_adapter};
use crate::device::{DeviceErrors, Gpu};
use crate::error::GpuError;
#[cfg(not(target_arch = "wasm32"))]
use crate::limits::GpuLimits;
#[cfg(not(target_arch = "wasm32"))]
use crate::transfer::{Transfer, TransferConfig};
use crate::wait::{self, QueueMark};

/// Everything a stage needs to run GPU work. Make one per program and pass `&GpuContext` around.
pub struct GpuContext {
    pub instance: wgpu::Instance,
    pub adapter: wgpu::Adapter,
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    /// Name, backend, device type and driver of the adapter in use.
    pub info: wgpu::AdapterInfo,
    /// The limits the device was created with (the adapter's own, unless the constructor lowered them).
    pub limits: wgpu::Limits,
    /// The optional features the device was created with.
    pub features: wgpu::Features,
    /// A staging buffer reused by every read-back (see `buffers.rs`), grown on demand.
    pub(crate) staging: Mutex<Option<wgpu::Buffer>>,
    /// The staging buffers of the fast path (`transfer.rs`): `upload`, `download`.
    #[cfg(not(target_arch = "wasm32"))]
    pub(crate) transfer: Mutex<Transfer>,
    /// What the device reported outside any call: the first GPU error no scope caught (see
    /// [`GpuContext::check_errors`]) and why it was lost, once it was.
    errors: DeviceErrors,
}

impl GpuContext {
    /// Creates the context on the best adapter (or the one `WGPU_ADAPTER_NAME` names).
    ///
    /// This does not print anything: call [`GpuContext::print_banner`] in programs.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn new() -> Result<Self, GpuError> {
        crate::block_on(Self::new_async())
    }

    /// [`GpuContext::new`] as a future: the only constructor in a browser, where the adapter
    /// and the device arrive through the event loop.
    pub async fn new_async() -> Result<Self, GpuError> {
        let (instance, adapter, info) = Self::adapter().await?;
        Self::with_adapter(instance, adapter, info, None).await
    }

    /// [`GpuContext::new`] with the device limited to `limits` instead of the adapter's own:
    /// `wgpu::Limits::defaults()` are WebGPU's, what a browser may offer and no more, so a
    /// program that runs on such a context fits every browser. Fails when the adapter offers
    /// less than `limits`.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn with_limits(limits: wgpu::Limits) -> Result<Self, GpuError> {
        crate::block_on(async {
            let (instance, adapter, info) = Self::adapter().await?;
            Self::with_adapter(instance, adapter, info, Some(limits)).await
        })
    }

    /// [`GpuContext::new`] with the limits `choice` picks from those the adapter offers (the
    /// runners' `--gpu-limits`); a lowered limit above the adapter's own is an error.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn with_gpu_limits(choice: &GpuLimits) -> Result<Self, GpuError> {
        crate::block_on(async {
            let (instance, adapter, info) = Self::adapter().await?;
            let limits = choice.resolve(&adapter.limits()).map_err(GpuError::Limits)?;
            Self::with_adapter(instance, adapter, info, Some(limits)).await
        })
    }

    /// Natively: every adapter of every API, ranked (or the one `WGPU_ADAPTER_NAME` names).
    #[cfg(not(target_arch = "wasm32"))]
    async fn adapter() -> Result<(wgpu::Instance, wgpu::Adapter, wgpu::AdapterInfo), GpuError> {
        // `from_env` reads WGPU_BACKEND (vulkan, metal, dx12, gl) and the debug flags.
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapters = instance.enumerate_adapters(wgpu::Backends::all()).await;
        let wanted = std::env::var(ADAPTER_ENV).ok().filter(|s| !s.trim().is_empty());
        let adapter = choose_adapter(adapters, wanted.as_deref())?;
        let info = adapter.get_info();
        Ok((instance, adapter, info))
    }

    /// In a browser: the one adapter WebGPU gives (high performance preferred), named from the
    /// browser's `GPUAdapterInfo`, which wgpu does not fully pass on.
    #[cfg(target_arch = "wasm32")]
    async fn adapter() -> Result<(wgpu::Instance, wgpu::Adapter, wgpu::AdapterInfo), GpuError> {
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
        desc.backends = wgpu::Backends::BROWSER_WEBGPU;
        let instance = wgpu::Instance::new(desc);
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                ..Default::default()
            })
            .await
            .map_err(|_| GpuError::NoAdapter)?;
        let mut info = adapter.get_info();
        if let Some(web) = crate::web::adapter_info().await {
            if info.name.trim().is_empty() {
                info.name = web.name;
            }
            if web.software {
                info.device_type = wgpu::DeviceType::Cpu;
            }
        }
        if info.name.trim().is_empty() {
            info.name = "WebGPU adapter (the browser gave no name)".into();
        }
        Ok((instance, adapter, info))
    }

    /// The device on `adapter`, with `limits` or (None) the adapter's own.
    async fn with_adapter(
        instance: wgpu::Instance,
        adapter: wgpu::Adapter,
        info: wgpu::AdapterInfo,
        limits: Option<wgpu::Limits>,
    ) -> Result<Self, GpuError> {

        // Optional features, each taken only where the adapter has it.
        let wanted_features = wgpu::Features::TIMESTAMP_QUERY
            | wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES
            | wgpu::Features::SHADER_F16
            | wgpu::Features::SUBGROUP
            | wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX;
        let features = adapter.features() & wanted_features;
        // The adapter's own limits: the largest buffers, bindings and workgroups it can do.
        let limits = limits.unwrap_or_else(|| adapter.limits());
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("gpu-context device"),
                required_features: features,
                required_limits: limits.clone(),
                // SAFETY: cooperative matrices are an experimental wgpu feature. We only use them
                // in kernels that are validated against a CPU reference before use, and only
                // where the adapter reports them.
                experimental_features: if features.contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX) {
                    unsafe { wgpu::ExperimentalFeatures::enabled() }
                } else {
                    wgpu::ExperimentalFeatures::disabled()
                },
                memory_hints: wgpu::MemoryHints::Performance,
                trace: wgpu::Trace::Off,
            })
            .await
            .map_err(|e| GpuError::RequestDevice(e.to_string()))?;
        let errors = DeviceErrors::watch(&device);
        Ok(Self {
            instance,
            adapter,
            device,
            queue,
            info,
            limits,
            features,
            staging: Mutex::new(None),
            #[cfg(not(target_arch = "wasm32"))]
            transfer: Mutex::new(Transfer::new(TransferConfig::default())),
            errors,
        })
    }

    /// One line that names the adapter: `NVIDIA H200 (Vulkan, DiscreteGpu, driver NVIDIA 580.x)`.
    pub fn adapter_line(&self) -> String {
        let i = &self.info;
        let driver = [i.driver.as_str(), i.driver_info.as_str()]
            .iter()
            .filter(|s| !s.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join(" ");
        format!(
            "{} ({:?}, {:?}{})",
            i.name,
            i.backend,
            i.device_type,
            if driver.is_empty() { String::new() } else { format!(", driver {driver}") }
        )
    }

    /// True for adapters that run "GPU" code on the CPU: llvmpipe/lavapipe, SwiftShader, WARP.
    pub fn is_software(&self) -> bool {
        self.info.device_type == wgpu::DeviceType::Cpu || is_software_name(&self.info.name)
    }

    /// Prints the adapter to stderr, with a loud warning when it is a software adapter.
    pub fn print_banner(&self) {
        eprintln!("adapter: {}", self.adapter_line());
        if self.is_software() {
            eprintln!("{}", software_warning(&self.info.name));
        }
    }

    /// Whether GPU timestamps can time compute passes on this device.
    pub fn has_timestamps(&self) -> bool {
        self.features.contains(wgpu::Features::TIMESTAMP_QUERY)
    }

    /// Whether `enable f16;` shaders run on this device.
    pub fn has_f16(&self) -> bool {
        self.features.contains(wgpu::Features::SHADER_F16)
    }

    /// Whether cooperative matrices (tensor cores, through WGSL `enable wgpu_cooperative_matrix;`)
    /// are available, together with the f16 they need.
    pub fn has_cooperative_matrix(&self) -> bool {
        self.features.contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX) && self.has_f16()
    }

    /// The cooperative-matrix shapes and types the adapter supports (empty if none).
    pub fn cooperative_matrix_properties(&self) -> Vec<wgpu::CooperativeMatrixProperties> {
        if self.has_cooperative_matrix() { self.adapter.cooperative_matrix_properties() } else { Vec::new() }
    }

    /// Runs `f` inside a validation and out-of-memory error scope, so that a rejected call
    /// (bad WGSL, a binding mismatch, an allocation the device refuses) becomes an `Err`
    /// instead of wgpu's default behaviour of panicking.
    ///
    /// In a browser the answer of an error scope arrives through the event loop, so it cannot
    /// be waited for here: `f` runs without a scope, the device's error handler keeps the first
    /// error, and this call (or the next wait: `wait_async`, `read_async`) reports it.
    pub fn scoped<T>(&self, f: impl FnOnce() -> T) -> Result<T, GpuError> {
        self.gpu().scoped(f)
    }

    /// A lost device, or the first GPU error since the last check that no error scope caught,
    /// as an `Err`. In a browser that is every error; natively, calls made through
    /// [`GpuContext::scoped`] report theirs at once, and this catches the rest. Every wait and
    /// read-back calls it.
    pub fn check_errors(&self) -> Result<(), GpuError> {
        self.errors.check()
    }

    /// True once wgpu has reported the device lost: nothing more can run on this context, and
    /// a program that wants to go on makes a new one.
    pub fn is_lost(&self) -> bool {
        self.errors.is_lost()
    }

    /// The parts of this context that the code under it works on (`device.rs`): device, queue,
    /// limits and the errors the device kept.
    pub(crate) fn gpu(&self) -> Gpu<'_> {
        Gpu {
            device: &self.device,
            queue: &self.queue,
            #[cfg(not(target_arch = "wasm32"))]
            limits: &self.limits,
            errors: &self.errors,
        }
    }

    /// Completes when all work submitted so far has finished on the GPU (on every target).
    /// In a browser this also reports a GPU error that happened since the last check.
    pub async fn wait_async(&self) -> Result<(), GpuError> {
        wait::work_done(&self.device, &self.queue).await?;
        self.check_errors()
    }

    /// Blocks until all submitted GPU work has finished (native targets; in a browser use
    /// [`GpuContext::wait_async`]), then reports a lost device or an error no scope caught.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn wait(&self) -> Result<(), GpuError> {
        wait::drive(&self.device)?;
        self.check_errors()
    }

    /// Marks the work submitted so far (`index` is the last submission) so that it can be
    /// waited for later with [`GpuContext::wait_for_async`] while more work queues behind it.
    pub fn mark(&self, index: wgpu::SubmissionIndex) -> QueueMark {
        QueueMark::new(&self.queue, index)
    }

    /// Completes when the work up to `mark` has finished on the GPU, whatever was submitted
    /// after it (on every target). A loop that submits one piece, then waits for the piece
    /// before it, keeps the GPU busy and at most two pieces in the queue: a stop flag it checks
    /// between pieces takes effect within two pieces' time, not a whole queue's.
    pub async fn wait_for_async(&self, mark: QueueMark) -> Result<(), GpuError> {
        mark.reached(&self.device).await?;
        self.check_errors()
    }

    /// Maps `slice` of a `MAP_READ` buffer and completes when it is mapped (see `wait.rs`).
    pub(crate) async fn map_read(&self, slice: wgpu::BufferSlice<'_>) -> Result<(), GpuError> {
        wait::map_read(&self.device, slice).await?;
        self.check_errors()
    }
}

#[cfg(not(target_arch = "wasm32"))]
/// One context shared by all the tests of a test binary (creating a device per test is slow on
/// the software adapter). Panics with the setup instructions when there is no adapter: tests
/// must fail loudly, never skip silently.
pub fn test_context() -> &'static GpuContext {
    static CTX: std::sync::OnceLock<GpuContext> = std::sync::OnceLock::new();
    CTX.get_or_init(|| match GpuContext::new() {
        Ok(ctx) => {
            eprintln!("test adapter: {}", ctx.adapter_line());
            ctx
        }
        Err(e) => panic!("GPU tests need an adapter: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_outside_a_scope_is_reported_not_a_panic() {
        let ctx = GpuContext::new().expect("an adapter (lavapipe in tests)");
        let small = ctx.storage_buffer_empty("small", 16).unwrap();
        // 32 bytes into a 16-byte buffer, not through `scoped`: wgpu's default handler panicked.
        ctx.queue.write_buffer(&small, 0, &[0u8; 32]);
        let err = ctx.wait().unwrap_err().to_string();
        assert!(err.contains("validation"), "{err}");
        ctx.wait().unwrap();
    }

    #[test]
    fn a_lost_device_is_reported_and_nothing_panics() {
        let ctx = GpuContext::new().expect("an adapter (lavapipe in tests)");
        let buffer = ctx.storage_buffer("b", &[1.0f32; 4]).unwrap();
        assert!(!ctx.is_lost());
        ctx.device.destroy();
        let err = ctx.wait().unwrap_err().to_string();
        assert!(ctx.is_lost());
        assert!(err.contains("was lost"), "{err}");
        // Everything after that is an error too, not a panic.
        assert!(ctx.storage_buffer("c", &[1.0f32; 4]).is_err());
        let _uniform = ctx.uniform_buffer("u", &7u32);
        assert!(ctx.wait().is_err());
        assert!(ctx.read::<f32>(&buffer, 4).is_err());
        assert!(ctx.scoped(|| ctx.submit_pass("after", |_| {})).is_err());
    }
}
