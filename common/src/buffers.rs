//! Buffer helpers: storage buffers from slices, poisoning, and reading results back.
//!
//! A GPU buffer lives in GPU memory; the CPU cannot read it directly. To read a result we copy
//! it into a *staging* buffer (`MAP_READ | COPY_DST`), wait for the GPU, map the staging buffer
//! and copy the bytes out. Staging buffers are expensive to create, so the context keeps one
//! and grows it when a larger read comes along. Waiting is written once, as `read_async`
//! (see `wait.rs`); `read` blocks on it natively.

use bytemuck::Pod;

use crate::device::staging_size;
use crate::lock::lock;
use crate::{GpuContext, GpuError};

/// Usage of every storage buffer made here: bound to shaders, written by `write_buffer`,
/// copied out for reading.
pub const STORAGE_USAGE: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::COPY_SRC)
    .union(wgpu::BufferUsages::COPY_DST);

impl GpuContext {
    /// Checks that a storage buffer of `bytes` fits this device: one binding may be at most
    /// `max_storage_buffer_binding_size`, one buffer at most `max_buffer_size`.
    pub fn check_storage_size(&self, what: &str, bytes: u64) -> Result<(), GpuError> {
        let binding = self.limits.max_storage_buffer_binding_size;
        if bytes > binding {
            return Err(GpuError::TooLarge {
                what: what.to_string(),
                bytes,
                limit: binding,
                limit_name: "max_storage_buffer_binding_size",
            });
        }
        if bytes > self.limits.max_buffer_size {
            return Err(GpuError::TooLarge {
                what: what.to_string(),
                bytes,
                limit: self.limits.max_buffer_size,
                limit_name: "max_buffer_size",
            });
        }
        Ok(())
    }

    /// A storage buffer holding a copy of `data`. An empty slice gets a 4-byte buffer, since
    /// zero-sized bindings are not allowed.
    pub fn storage_buffer<T: Pod>(&self, label: &str, data: &[T]) -> Result<wgpu::Buffer, GpuError> {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        self.check_storage_size(label, bytes.len() as u64)?;
        let padded;
        let contents = if bytes.len().is_multiple_of(4) && !bytes.is_empty() {
            bytes
        } else {
            padded = pad_to_4(bytes);
            &padded
        };
        self.buffer_init(label, contents, STORAGE_USAGE)
    }

    /// A buffer of `usage` holding `contents` (a non-zero multiple of 4 bytes), mapped at
    /// creation and filled, inside the error scope. `wgpu::util::DeviceExt::create_buffer_init`
    /// does the same but panics when the device refuses the buffer (a lost device, no memory);
    /// here that is an `Err`.
    pub fn buffer_init(&self, label: &str, contents: &[u8], usage: wgpu::BufferUsages) -> Result<wgpu::Buffer, GpuError> {
        let buffer = self.scoped(|| {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: contents.len() as u64,
                usage,
                mapped_at_creation: true,
            })
        })?;
        {
            let mut mapped = buffer
                .get_mapped_range_mut(..)
                .map_err(|e| GpuError::Device(format!("{label}: the new buffer cannot be filled ({e:?})")))?;
            mapped.copy_from_slice(contents);
        }
        buffer.unmap();
        Ok(buffer)
    }

    /// An uninitialised (zeroed by wgpu) storage buffer of `bytes` bytes (at least 4).
    pub fn storage_buffer_empty(&self, label: &str, bytes: u64) -> Result<wgpu::Buffer, GpuError> {
        self.check_storage_size(label, bytes)?;
        let size = bytes.max(4).next_multiple_of(4);
        self.scoped(|| {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage: STORAGE_USAGE,
                mapped_at_creation: false,
            })
        })
    }

    /// A uniform buffer holding `value` (shape constants, sizes), writable later.
    ///
    /// Made empty and then written through the queue (the value lands before the next
    /// submission), so that a device that refuses it (lost, out of memory) reports an error at
    /// the next wait instead of panicking here, as `create_buffer_init` would.
    pub fn uniform_buffer<T: Pod>(&self, label: &str, value: &T) -> wgpu::Buffer {
        let bytes = pad_to_4(bytemuck::bytes_of(value));
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: bytes.len() as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        self.queue.write_buffer(&buffer, 0, &bytes);
        buffer
    }

    /// Fills `buffer` with 0xFF bytes: NaN as f32, `u32::MAX` as u32. Tests poison outputs before
    /// a kernel runs, so an element the kernel forgot to write shows up (and NaN fails the checker).
    pub fn poison(&self, buffer: &wgpu::Buffer) {
        let bytes = vec![0xFFu8; buffer.size() as usize];
        self.queue.write_buffer(buffer, 0, &bytes);
    }

    /// Reads the first `len` elements of `buffer` back to the CPU. Waits for all submitted work.
    /// (Native targets; in a browser use [`GpuContext::read_async`].)
    #[cfg(not(target_arch = "wasm32"))]
    pub fn read<T: Pod>(&self, buffer: &wgpu::Buffer, len: usize) -> Result<Vec<T>, GpuError> {
        crate::block_on(self.read_async(buffer, len))
    }

    /// Reads `out.len()` elements from the start of `buffer` into `out`, through the context's
    /// reused staging buffer. (Native targets; in a browser use [`GpuContext::read_into_async`].)
    #[cfg(not(target_arch = "wasm32"))]
    pub fn read_into<T: Pod>(&self, buffer: &wgpu::Buffer, out: &mut [T]) -> Result<(), GpuError> {
        crate::block_on(self.read_into_async(buffer, out))
    }

    /// [`GpuContext::read`] on every target: completes when the data is back.
    pub async fn read_async<T: Pod>(&self, buffer: &wgpu::Buffer, len: usize) -> Result<Vec<T>, GpuError> {
        let mut out = vec![T::zeroed(); len];
        self.read_into_async(buffer, &mut out).await?;
        Ok(out)
    }

    /// [`GpuContext::read_into`] on every target. The copy into the staging buffer is queued
    /// behind all submitted work, so the data is what that work left in `buffer`.
    pub async fn read_into_async<T: Pod>(&self, buffer: &wgpu::Buffer, out: &mut [T]) -> Result<(), GpuError> {
        let bytes = std::mem::size_of_val(out) as u64;
        if bytes == 0 {
            return Ok(());
        }
        if bytes > buffer.size() {
            return Err(GpuError::Validation(format!(
                "asked to read {bytes} bytes from a buffer of {} bytes",
                buffer.size()
            )));
        }
        // wgpu copies and maps in multiples of 4 bytes.
        let copy_bytes = bytes.next_multiple_of(4).min(buffer.size());
        // Take the staging buffer out of the context while it is mapped (no lock is held across
        // the wait); a second read in flight meanwhile makes its own, and the larger is kept.
        let taken = lock(&self.staging).take();
        let staging = match taken {
            Some(s) if s.size() >= copy_bytes => s,
            // Grown to the next power of two, but never past the device's largest buffer (the
            // H200's is 4094 MiB, not a power of two). `copy_bytes` itself fits: it is at most
            // the size of an existing buffer.
            _ => self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("staging (read-back)"),
                size: staging_size(copy_bytes, self.limits.max_buffer_size),
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }),
        };
        self.gpu().copy("read-back", buffer, 0, &staging, 0, copy_bytes);

        let slice = staging.slice(..copy_bytes);
        self.map_read(slice).await?;
        {
            let view = slice.get_mapped_range().map_err(|e| GpuError::Device(e.to_string()))?;
            bytemuck::cast_slice_mut::<T, u8>(out).copy_from_slice(&view[..bytes as usize]);
        }
        staging.unmap();
        let mut slot = lock(&self.staging);
        if slot.as_ref().is_none_or(|s| s.size() < staging.size()) {
            *slot = Some(staging);
        }
        Ok(())
    }
}

fn pad_to_4(bytes: &[u8]) -> Vec<u8> {
    let mut v = bytes.to_vec();
    v.resize(bytes.len().next_multiple_of(4).max(4), 0);
    v
}

/// In a browser the upload is `Queue::write_buffer`, the simple path: the browser stages the
/// bytes itself, and nothing here may wait for a mapping, as the fast path of `transfer.rs`
/// (native only) does. Same checks and padding as there.
#[cfg(target_arch = "wasm32")]
impl GpuContext {
    /// Queues a copy of `data` into `dst` at byte `dst_offset` (a multiple of 4); later submits
    /// see it. `dst` must hold `data`'s bytes rounded up to a whole number of 4-byte words.
    pub fn upload<T: Pod>(&self, dst: &wgpu::Buffer, dst_offset: u64, data: &[T]) -> Result<(), GpuError> {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let end = dst_offset + (bytes.len() as u64).next_multiple_of(4);
        if !dst_offset.is_multiple_of(4) || end > dst.size() {
            return Err(GpuError::Validation(format!(
                "upload into bytes {dst_offset}..{end} of a buffer of {} bytes (copies are whole 4-byte words)",
                dst.size()
            )));
        }
        self.gpu().write_words(dst, dst_offset, bytes);
        Ok(())
    }

    /// A storage buffer holding `data`: [`GpuContext::storage_buffer`] in a browser.
    pub fn storage_buffer_uploaded<T: Pod>(&self, label: &str, data: &[T]) -> Result<wgpu::Buffer, GpuError> {
        self.storage_buffer(label, data)
    }
}
