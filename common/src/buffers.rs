//! Buffer helpers: storage buffers from slices, poisoning, and reading results back.
//!
//! A GPU buffer lives in GPU memory; the CPU cannot read it directly. To read a result we copy
//! it into a *staging* buffer (`MAP_READ | COPY_DST`), wait for the GPU, map the staging buffer
//! and copy the bytes out. Staging buffers are expensive to create, so the context keeps one
//! and grows it when a larger read comes along.

use bytemuck::Pod;
use wgpu::util::DeviceExt;

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
        self.scoped(|| {
            self.device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents,
                usage: STORAGE_USAGE,
            })
        })
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
    pub fn uniform_buffer<T: Pod>(&self, label: &str, value: &T) -> wgpu::Buffer {
        self.device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some(label),
            contents: bytemuck::bytes_of(value),
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        })
    }

    /// Fills `buffer` with 0xFF bytes: NaN as f32, `u32::MAX` as u32. Tests poison outputs before
    /// a kernel runs, so an element the kernel forgot to write shows up (and NaN fails the checker).
    pub fn poison(&self, buffer: &wgpu::Buffer) {
        let bytes = vec![0xFFu8; buffer.size() as usize];
        self.queue.write_buffer(buffer, 0, &bytes);
    }

    /// Reads the first `len` elements of `buffer` back to the CPU. Waits for all submitted work.
    pub fn read<T: Pod>(&self, buffer: &wgpu::Buffer, len: usize) -> Result<Vec<T>, GpuError> {
        let mut out = vec![T::zeroed(); len];
        self.read_into(buffer, &mut out)?;
        Ok(out)
    }

    /// Reads `out.len()` elements from the start of `buffer` into `out`, through the context's
    /// reused staging buffer.
    pub fn read_into<T: Pod>(&self, buffer: &wgpu::Buffer, out: &mut [T]) -> Result<(), GpuError> {
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
        let mut guard = self.staging.lock().unwrap_or_else(|p| p.into_inner());
        if guard.as_ref().is_none_or(|s| s.size() < copy_bytes) {
            // Grow to the next power of two so a sequence of growing reads allocates rarely, but
            // never past the device's largest buffer (the H200's is 4094 MiB, not a power of two).
            // `copy_bytes` itself fits: it is at most the size of an existing buffer.
            let size = copy_bytes.next_power_of_two().max(256).min(self.limits.max_buffer_size.max(copy_bytes));
            *guard = Some(self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("staging (read-back)"),
                size,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }));
        }
        let staging = guard.as_ref().expect("staging buffer was just created");
        let mut encoder = self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("read-back") });
        encoder.copy_buffer_to_buffer(buffer, 0, staging, 0, copy_bytes);
        self.queue.submit([encoder.finish()]);

        let slice = staging.slice(..copy_bytes);
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        // map_async only completes once the device is polled.
        self.wait()?;
        rx.recv()
            .map_err(|e| GpuError::Device(format!("map callback dropped: {e}")))?
            .map_err(|e| GpuError::Device(format!("mapping the staging buffer failed: {e}")))?;
        {
            let view = slice.get_mapped_range().map_err(|e| GpuError::Device(e.to_string()))?;
            bytemuck::cast_slice_mut::<T, u8>(out).copy_from_slice(&view[..bytes as usize]);
        }
        staging.unmap();
        Ok(())
    }
}

fn pad_to_4(bytes: &[u8]) -> Vec<u8> {
    let mut v = bytes.to_vec();
    v.resize(bytes.len().next_multiple_of(4).max(4), 0);
    v
}
