//! `common`: what every stage shares, so no stage repeats the wgpu boilerplate.
//!
//! - [`GpuContext`] (`context.rs`): instance, adapter, device and queue, made once; limits,
//!   features, error scopes, and the waits; `limits.rs` (native) picks the limits it asks for
//!   (`--gpu-limits`: the adapter's own, WebGPU's defaults, or lowered ones). Under it: adapter
//!   choice and the software-adapter warning (`adapter.rs`, with `web.rs` in a browser), and
//!   the device's error slots and the parts of a context that lower files work on (`device.rs`).
//! - buffer helpers (`buffers.rs`): storage buffers from slices, poisoning, read-back through a
//!   reused staging buffer, size checks against the device limits.
//! - pipelines (`pipeline.rs`): WGSL to compute pipeline, bind groups, dispatch sizes that go
//!   past 65,535 workgroups.
//! - fast transfers (`transfer.rs`, native): `Transfer`, through reused mapped staging buffers,
//!   in overlapping chunks, on several threads; its methods on a context and
//!   `GpuContext::upload` / `download` are in `context_transfer.rs`.
//! - waiting (`wait.rs`): read-backs and waits written once as `async fn`s, for native targets
//!   (where `read`, `wait` block on them) and browsers (WebGPU, where nothing may block).
//! - timing (`timing.rs`): GPU timestamps, or the wall clock where there are none.
//! - what the driver compiled (`compiled.rs`, native): registers, spills and other statistics
//!   of a kernel, through Vulkan's `VK_KHR_pipeline_executable_properties`.
//! - the checker (`check.rs`): `abs + |expected| * rel` tolerances where NaN always fails.
//! - the flag tables (`flags.rs`, native): the loop every runner's `tests/flags.rs` runs its
//!   table of boundary values with, each case a real run of the binary.
//! - what runners print (`report.rs`): the CPU model, times with units, and (feature `plot`)
//!   the embedded font for plots.
//!
//! Stage 01 (`double`) shows every one of these steps written out by hand first.

mod adapter;
mod buffers;
pub mod check;
#[cfg(not(target_arch = "wasm32"))]
pub mod compiled;
mod context;
#[cfg(not(target_arch = "wasm32"))]
mod context_transfer;
mod device;
mod error;
#[cfg(not(target_arch = "wasm32"))]
mod limits;
#[cfg(not(target_arch = "wasm32"))]
pub mod flags;
mod lock;
mod pipeline;
mod report;
pub mod timing;
#[cfg(not(target_arch = "wasm32"))]
mod transfer;
mod wait;
#[cfg(target_arch = "wasm32")]
mod web;

pub use buffers::STORAGE_USAGE;
pub use check::{CheckError, CloseStats, assert_close, assert_same, check_close};
pub use adapter::{ADAPTER_ENV, is_software_name, software_warning};
pub use context::GpuContext;
#[cfg(not(target_arch = "wasm32"))]
pub use context::test_context;
pub use error::GpuError;
#[cfg(not(target_arch = "wasm32"))]
pub use limits::{GpuLimits, LimitKey};
pub use pipeline::workgroups_1d;
#[cfg(feature = "plot")]
pub use report::register_fonts;
pub use report::{cpu_model, cpuinfo, fmt_time};
#[cfg(not(target_arch = "wasm32"))]
pub use timing::GpuTimer;
pub use timing::{TimeSource, median};
#[cfg(not(target_arch = "wasm32"))]
pub use transfer::{MappedRead, Transfer, TransferConfig};
#[cfg(not(target_arch = "wasm32"))]
pub use wait::block_on;
pub use wait::QueueMark;
pub use wgpu;
