//! The device as the files under `GpuContext` see it: [`Gpu`] borrows the context's device,
//! queue and limits together with [`DeviceErrors`], what the device reported outside any call
//! (the first uncaught error, a lost device); [`Gpu::scoped`] runs calls inside an error scope.
//! Also what every upload and read-back path shares: one copy in its own submission, a write
//! padded to whole words, and the size a staging buffer grows to.

use std::sync::{Arc, Mutex};

use crate::error::GpuError;
use crate::lock::lock;

/// What a device reported through its callbacks rather than to a caller: the first GPU error
/// that happened outside an error scope and nobody has seen yet (in a browser every error,
/// natively those of calls not made through [`Gpu::scoped`]; wgpu's default would panic), and
/// why the device was lost (driver reset, GPU removed, `Device::destroy`), once it was.
pub(crate) struct DeviceErrors {
    errors: Arc<Mutex<Option<GpuError>>>,
    lost: Arc<Mutex<Option<String>>>,
}

impl DeviceErrors {
    /// Installs `device`'s uncaptured-error handler and device-lost callback, which fill the
    /// slots this returns.
    pub(crate) fn watch(device: &wgpu::Device) -> Self {
        // Errors outside an error scope go to this handler instead of wgpu's default, which
        // panics; the next wait or read reports them. In a browser nothing can block on an
        // error scope (see `Gpu::scoped`), so there every error comes this way.
        let errors = Arc::new(Mutex::new(None));
        let slot = errors.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            lock(&slot).get_or_insert(GpuError::from(e));
        }));
        // A lost device (driver reset, GPU removed, `destroy`) is noted here; wgpu calls this
        // when it notices (natively: in a poll).
        let lost = Arc::new(Mutex::new(None));
        let slot = lost.clone();
        device.set_device_lost_callback(move |reason, message| {
            *lock(&slot) = Some(format!("{reason:?}: {message}"));
        });
        Self { errors, lost }
    }

    /// A lost device, or the first error no scope caught since the last check, as an `Err`
    /// (the error is taken: the next check does not report it again).
    pub(crate) fn check(&self) -> Result<(), GpuError> {
        if let Some(why) = lock(&self.lost).as_ref() {
            return Err(GpuError::Device(format!(
                "the GPU device was lost ({why}); its buffers are gone. A new context (a new run of \
                 the program) makes a new device; if it keeps happening, check the GPU driver"
            )));
        }
        if let Some(e) = lock(&self.errors).take() {
            return Err(e);
        }
        Ok(())
    }

    /// True once wgpu has reported the device lost.
    pub(crate) fn is_lost(&self) -> bool {
        lock(&self.lost).is_some()
    }
}

/// The parts of a `GpuContext` that the code under it works on (the fast transfers of
/// `transfer.rs`), borrowed: made by `GpuContext::gpu`.
#[derive(Clone, Copy)]
pub(crate) struct Gpu<'a> {
    pub device: &'a wgpu::Device,
    pub queue: &'a wgpu::Queue,
    /// The limits the device was created with (the transfers, native only, read them).
    #[cfg(not(target_arch = "wasm32"))]
    pub limits: &'a wgpu::Limits,
    pub errors: &'a DeviceErrors,
}

impl Gpu<'_> {
    /// Runs `f` inside a validation and out-of-memory error scope, so that a rejected call
    /// becomes an `Err`; then reports a lost device or an error no scope caught. In a browser
    /// `f` runs without a scope (its answer would arrive through the event loop) and the
    /// device's error handler keeps the first error. `GpuContext::scoped` is this.
    pub(crate) fn scoped<T>(&self, f: impl FnOnce() -> T) -> Result<T, GpuError> {
        #[cfg(not(target_arch = "wasm32"))]
        {
            let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
            let validation = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
            let value = f();
            let validation = crate::block_on(validation.pop());
            let oom = crate::block_on(oom.pop());
            match validation.or(oom) {
                Some(e) => Err(e.into()),
                // A lost device reports nothing to scopes: it ignores what it is given.
                None => self.errors.check().map(|()| value),
            }
        }
        #[cfg(target_arch = "wasm32")]
        {
            let value = f();
            self.errors.check().map(|()| value)
        }
    }

    /// Submits one copy of `bytes` bytes from `src` at `src_offset` into `dst` at `dst_offset`,
    /// queued behind all work submitted before, in a command buffer labelled `label`.
    pub(crate) fn copy(
        &self,
        label: &str,
        src: &wgpu::Buffer,
        src_offset: u64,
        dst: &wgpu::Buffer,
        dst_offset: u64,
        bytes: u64,
    ) -> wgpu::SubmissionIndex {
        let mut encoder = self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(label) });
        encoder.copy_buffer_to_buffer(src, src_offset, dst, dst_offset, bytes);
        self.queue.submit([encoder.finish()])
    }

    /// `queue.write_buffer` of `bytes` into `dst` at byte `dst_offset`, zero-padded to a whole
    /// number of 4-byte words (wgpu writes whole words only).
    pub(crate) fn write_words(&self, dst: &wgpu::Buffer, dst_offset: u64, bytes: &[u8]) {
        if bytes.len().is_multiple_of(4) {
            self.queue.write_buffer(dst, dst_offset, bytes);
        } else {
            let mut padded = bytes.to_vec();
            padded.resize(bytes.len().next_multiple_of(4), 0);
            self.queue.write_buffer(dst, dst_offset, &padded);
        }
    }
}

/// The size of a staging buffer made to hold `bytes`: the next power of two, so a sequence of
/// growing transfers allocates rarely, at least 256 bytes, and at most `cap` (a chunk, the
/// device's largest buffer; `bytes` itself where that is larger).
pub(crate) fn staging_size(bytes: u64, cap: u64) -> u64 {
    bytes.next_power_of_two().max(256).min(cap.max(bytes))
}
