//! Fast host <-> GPU copies: reused mapped staging buffers, chunks that overlap, several threads.
//!
//! The first version of every wgpu program (stage 01's walkthrough, [`GpuContext::read`]) moves
//! data the simple way: `queue.write_buffer` up, one `MAP_READ` staging buffer copied out by one
//! thread down. On the H200 that reached 4.6 GB/s up and about 8 GB/s down, where the bus carries
//! 55 GB/s each way. [`Transfer`] is the next step:
//!
//! - **Staging buffers made once and kept.** `write_buffer` allocates fresh staging memory on every
//!   call, and fresh memory is page-faulted in. A [`Transfer`] keeps a few `MAP_WRITE | COPY_SRC`
//!   buffers for uploads and `MAP_READ | COPY_DST` buffers for read-backs, and reuses them.
//! - **Writing straight into mapped memory.** An upload buffer waits mapped; the data is copied
//!   into it once (not into a Vec and then into wgpu's staging belt), then it is unmapped and the
//!   GPU copies it into the destination.
//! - **Chunks that overlap.** A transfer larger than [`TransferConfig::chunk_bytes`] goes in
//!   chunks through a ring of [`TransferConfig::chunks_in_flight`] staging buffers: while the GPU
//!   copies chunk i, the CPU fills (or empties) another one.
//! - **Several threads per chunk.** One core cannot stream memory at bus speed; the chunk is cut
//!   into [`TransferConfig::threads`] parts, filled or emptied on rayon's pool. Each part is its
//!   own mapped view (`BufferViewMut` is `Send`; the `WriteOnly<[u8]>` inside it is not).
//! - **No copy at all on the way down.** [`Transfer::download_mapped`] hands out the mapped
//!   staging memory itself, as a guard that reads as `&[T]` and unmaps when dropped.
//!
//! [`GpuContext::upload`], [`GpuContext::download`] and [`GpuContext::download_into`] use one
//! `Transfer` the context keeps, with [`TransferConfig::default`]. Stage 01's chapter has the
//! measurements behind each choice (`cargo run --release -p double --bin transfers`).
//!
//! This file works on a device, queue and limits (`device.rs`'s `Gpu`), not on the context
//! that keeps a `Transfer`: the methods that take a `&GpuContext` are in `context_transfer.rs`.

use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use bytemuck::Pod;
use rayon::prelude::*;

use crate::device::{Gpu, staging_size};
use crate::error::GpuError;

/// How a [`Transfer`] moves data. [`TransferConfig::default`] is what the H200 measurements
/// chose; the fields are public so that the transfer sweep (and tests) can try others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransferConfig {
    /// Bytes per staging buffer. A larger transfer goes in chunks of this size. Rounded up to a
    /// multiple of 256 bytes.
    pub chunk_bytes: u64,
    /// Staging buffers per direction: while the CPU works on one, the GPU copies the others.
    pub chunks_in_flight: usize,
    /// Threads that fill or empty one chunk (parts of at least 1 MiB, on rayon's pool); 1 keeps
    /// the work on the calling thread.
    pub threads: usize,
    /// Uploads smaller than this go through `queue.write_buffer`, which needs no submit and no
    /// wait: for a few kilobytes that is cheaper than a staging round.
    pub write_buffer_below: u64,
}

impl Default for TransferConfig {
    /// 16 MiB chunks, three in flight, one thread per core, `write_buffer` below 1 MiB.
    ///
    /// Measured on the H200 host (16 cores; `cargo run --release -p double --bin transfers`, stage
    /// 01's chapter): at 256 MiB, 16 threads uploaded at 27.4 GB/s and read back at 41.5, 8 threads
    /// at 26.1 and 24.9, one thread at 9.5 and 6.4; 64 MiB chunks did no better than 16, 4 MiB
    /// chunks worse. Below about 1 MiB `write_buffer` was as fast or faster (no staging round).
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self { chunk_bytes: 16 << 20, chunks_in_flight: 3, threads: cores, write_buffer_below: 1 << 20 }
    }
}

/// The smallest part one thread fills or empties, so chunks up to 1 MiB stay on the calling
/// thread. On the H200 host, with 64 KiB parts, a 128 KiB read-back in two parts took 158 µs
/// against 75 µs for one thread's copy (`double`'s first run there); waking rayon's sleeping
/// threads is the likely cost.
const MIN_PART_BYTES: usize = 1 << 20;

/// How long a mapping may stay pending once the GPU has finished the work before it: the
/// callback may be running on another thread's `poll` (see `Staging::wait_mapped`).
const MAP_CALLBACK_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

// The states of a staging buffer's mapping, set by the `map_async` callback.
const UNMAPPED: u8 = 0;
const PENDING: u8 = 1;
const MAPPED: u8 = 2;
const FAILED: u8 = 3;

/// One staging buffer and where its mapping stands.
struct Staging {
    buffer: wgpu::Buffer,
    state: Arc<AtomicU8>,
    /// The submission that last used the buffer, to wait for just that one.
    submission: Option<wgpu::SubmissionIndex>,
}

impl Staging {
    fn new(device: &wgpu::Device, label: &str, size: u64, usage: wgpu::BufferUsages, mapped: bool) -> Self {
        let buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage,
            mapped_at_creation: mapped,
        });
        Self { buffer, state: Arc::new(AtomicU8::new(if mapped { MAPPED } else { UNMAPPED })), submission: None }
    }

    /// Asks for `0..bytes` to be mapped once `submission` (which uses the buffer) is done.
    fn map_after(&mut self, mode: wgpu::MapMode, bytes: u64, submission: wgpu::SubmissionIndex) {
        self.state.store(PENDING, Ordering::Release);
        let state = Arc::clone(&self.state);
        self.buffer.slice(..bytes).map_async(mode, move |r| {
            state.store(if r.is_ok() { MAPPED } else { FAILED }, Ordering::Release);
        });
        self.submission = Some(submission);
    }

    /// Blocks until the mapping asked for by [`map_after`](Self::map_after) is done. Waits for the
    /// submission that used the buffer, not for everything queued after it.
    fn wait_mapped(&mut self, device: &wgpu::Device) -> Result<(), GpuError> {
        // The map callback runs inside a `poll` once the submission has finished: ours, or one
        // another thread of the same device is in (tests share one device). In the second case
        // our `poll` can return while that thread is still running the callback, so a mapping
        // still pending after the GPU is done is waited for a little longer, polling without
        // blocking on work queued since.
        let mut waited: Option<std::time::Instant> = None;
        loop {
            match self.state.load(Ordering::Acquire) {
                MAPPED => return Ok(()),
                FAILED => return Err(GpuError::Device("mapping a staging buffer failed".into())),
                UNMAPPED => return Err(GpuError::Device("waiting on a staging buffer that was never mapped".into())),
                _ => {}
            }
            let poll = match (self.submission.take(), waited) {
                (Some(index), _) => wgpu::PollType::Wait { submission_index: Some(index), timeout: None },
                (None, None) => wgpu::PollType::wait_indefinitely(),
                (None, Some(since)) if since.elapsed() > MAP_CALLBACK_GRACE => {
                    return Err(GpuError::Device(format!(
                        "a staging buffer was still not mapped {} s after the GPU finished",
                        MAP_CALLBACK_GRACE.as_secs()
                    )));
                }
                (None, Some(_)) => {
                    std::thread::sleep(std::time::Duration::from_micros(200));
                    wgpu::PollType::Poll
                }
            };
            device.poll(poll).map_err(|e| GpuError::Device(e.to_string()))?;
            waited.get_or_insert_with(std::time::Instant::now);
        }
    }
}

/// Host <-> GPU copies through reused staging buffers. Make one and reuse it (or use the one in
/// the context: [`GpuContext::upload`], [`GpuContext::download`]); it allocates its staging
/// buffers on first use and keeps them.
///
/// [`GpuContext::upload`]: crate::GpuContext::upload
/// [`GpuContext::download`]: crate::GpuContext::download
pub struct Transfer {
    config: TransferConfig,
    /// `MAP_WRITE | COPY_SRC`; idle ones wait mapped, ready to be filled.
    up: Vec<Staging>,
    /// The upload buffer to use next (the one used longest ago).
    next_up: usize,
    /// `MAP_READ | COPY_DST`; idle ones are unmapped.
    down: Vec<Staging>,
    /// One `MAP_READ | COPY_DST` buffer as large as the largest mapped read-back so far.
    whole: Option<Staging>,
}

impl Transfer {
    /// A transfer with `config` (nothing is allocated until the first copy).
    pub fn new(config: TransferConfig) -> Self {
        let config = TransferConfig {
            chunk_bytes: config.chunk_bytes.max(256).next_multiple_of(256),
            chunks_in_flight: config.chunks_in_flight.max(1),
            threads: config.threads.max(1),
            ..config
        };
        Self { config, up: Vec::new(), next_up: 0, down: Vec::new(), whole: None }
    }

    /// The configuration in use (after rounding).
    pub fn config(&self) -> TransferConfig {
        self.config
    }

    /// [`Transfer::upload`] on the parts of a context that a transfer works on.
    pub(crate) fn upload_on<T: Pod>(
        &mut self,
        gpu: Gpu<'_>,
        dst: &wgpu::Buffer,
        dst_offset: u64,
        data: &[T],
    ) -> Result<(), GpuError> {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        check_range("upload into", dst, wgpu::BufferUsages::COPY_DST, dst_offset, bytes.len())?;
        if bytes.is_empty() {
            return Ok(());
        }
        if (bytes.len() as u64) < self.config.write_buffer_below {
            gpu.write_words(dst, dst_offset, bytes);
            return Ok(());
        }
        let chunk = self.config.chunk_bytes as usize;
        let ring = self.config.chunks_in_flight;
        for (i, piece) in bytes.chunks(chunk).enumerate() {
            let slot = self.next_up;
            self.next_up = (slot + 1) % ring;
            let padded = piece.len().next_multiple_of(4) as u64;
            let staging = staging_slot(gpu, &mut self.up, slot, padded, self.config.chunk_bytes, Direction::Up)?;
            staging.wait_mapped(gpu.device)?;
            fill(&staging.buffer, piece, self.config.threads)?;
            staging.buffer.unmap();
            staging.state.store(UNMAPPED, Ordering::Release);
            let submission = gpu.copy("upload chunk", &staging.buffer, 0, dst, dst_offset + (i * chunk) as u64, padded);
            // Map it again as soon as the GPU has copied it, ready for the next chunk or call.
            let size = staging.buffer.size();
            staging.map_after(wgpu::MapMode::Write, size, submission);
        }
        Ok(())
    }

    /// [`Transfer::download_into`] on the parts of a context that a transfer works on.
    pub(crate) fn download_into_on<T: Pod>(
        &mut self,
        gpu: Gpu<'_>,
        src: &wgpu::Buffer,
        src_offset: u64,
        out: &mut [T],
    ) -> Result<(), GpuError> {
        let out: &mut [u8] = bytemuck::cast_slice_mut(out);
        check_range("download from", src, wgpu::BufferUsages::COPY_SRC, src_offset, out.len())?;
        if out.is_empty() {
            return Ok(());
        }
        let chunk = self.config.chunk_bytes as usize;
        let total = out.len();
        let pieces = total.div_ceil(chunk);
        let ring = self.config.chunks_in_flight.min(pieces);
        let piece_len = |i: usize| chunk.min(total - i * chunk);
        for i in 0..ring {
            self.start_download(gpu, src, src_offset, i, piece_len(i), i)?;
        }
        for (i, piece) in out.chunks_mut(chunk).enumerate() {
            let slot = i % ring;
            let padded = piece.len().next_multiple_of(4) as u64;
            let staging = &mut self.down[slot];
            staging.wait_mapped(gpu.device)?;
            {
                let view =
                    staging.buffer.slice(..padded).get_mapped_range().map_err(|e| GpuError::Device(e.to_string()))?;
                empty(&view[..piece.len()], piece, self.config.threads);
            }
            staging.buffer.unmap();
            staging.state.store(UNMAPPED, Ordering::Release);
            if i + ring < pieces {
                self.start_download(gpu, src, src_offset, i + ring, piece_len(i + ring), slot)?;
            }
        }
        Ok(())
    }

    /// Copies chunk `i` (`len` bytes) of `src` into download slot `slot` and asks for it mapped.
    fn start_download(
        &mut self,
        gpu: Gpu<'_>,
        src: &wgpu::Buffer,
        src_offset: u64,
        i: usize,
        len: usize,
        slot: usize,
    ) -> Result<(), GpuError> {
        let padded = len.next_multiple_of(4) as u64;
        let staging = staging_slot(gpu, &mut self.down, slot, padded, self.config.chunk_bytes, Direction::Down)?;
        let offset = src_offset + (i as u64) * self.config.chunk_bytes;
        let submission = gpu.copy("download chunk", src, offset, &staging.buffer, 0, padded);
        staging.map_after(wgpu::MapMode::Read, padded, submission);
        Ok(())
    }

    /// [`Transfer::download_mapped`] on the parts of a context that a transfer works on.
    pub(crate) fn download_mapped_on<T: Pod>(
        &mut self,
        gpu: Gpu<'_>,
        src: &wgpu::Buffer,
        src_offset: u64,
        len: usize,
    ) -> Result<MappedRead<'_, T>, GpuError> {
        let bytes = len * std::mem::size_of::<T>();
        check_range("download from", src, wgpu::BufferUsages::COPY_SRC, src_offset, bytes)?;
        if bytes == 0 {
            return Ok(MappedRead { view: None, buffer: None, len: 0, _borrow: PhantomData });
        }
        let padded = bytes.next_multiple_of(4) as u64;
        if self.whole.as_ref().is_none_or(|s| s.buffer.size() < padded) {
            let max = gpu.limits.max_buffer_size;
            if padded > max {
                return Err(GpuError::TooLarge {
                    what: "a mapped read-back".into(),
                    bytes: padded,
                    limit: max,
                    limit_name: "max_buffer_size",
                });
            }
            let size = staging_size(padded, max);
            let usage = wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST;
            self.whole = Some(gpu.scoped(|| Staging::new(gpu.device, "staging (mapped read-back)", size, usage, false))?);
        }
        let staging = self.whole.as_mut().expect("created above");
        let submission = gpu.copy("mapped read-back", src, src_offset, &staging.buffer, 0, padded);
        staging.map_after(wgpu::MapMode::Read, padded, submission);
        staging.wait_mapped(gpu.device)?;
        let view = staging.buffer.slice(..padded).get_mapped_range().map_err(|e| GpuError::Device(e.to_string()))?;
        if !(view.as_ptr() as usize).is_multiple_of(std::mem::align_of::<T>()) {
            drop(view);
            staging.buffer.unmap();
            staging.state.store(UNMAPPED, Ordering::Release);
            return Err(GpuError::Device(format!(
                "the mapped staging memory is not aligned for {}; use download_into instead",
                std::any::type_name::<T>()
            )));
        }
        staging.state.store(UNMAPPED, Ordering::Release);
        Ok(MappedRead { view: Some(view), buffer: Some(staging.buffer.clone()), len, _borrow: PhantomData })
    }
}

/// A read-back that has not been copied out: `len` elements of mapped staging memory, read as
/// `&[T]`. Unmaps the staging buffer when dropped. Made by [`Transfer::download_mapped`].
pub struct MappedRead<'a, T> {
    view: Option<wgpu::BufferView>,
    buffer: Option<wgpu::Buffer>,
    len: usize,
    /// Holds the `Transfer` borrowed, so its staging buffer is not reused while this lives.
    _borrow: PhantomData<(&'a mut Transfer, T)>,
}

impl<T: Pod> std::ops::Deref for MappedRead<'_, T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        match &self.view {
            // Alignment was checked when the guard was made; the length fits the mapped range.
            Some(view) => bytemuck::cast_slice(&view[..self.len * std::mem::size_of::<T>()]),
            None => &[],
        }
    }
}

impl<T> Drop for MappedRead<'_, T> {
    fn drop(&mut self) {
        // The view must go before the buffer is unmapped.
        self.view.take();
        if let Some(buffer) = self.buffer.take() {
            buffer.unmap();
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Direction {
    Up,
    Down,
}

/// Slot `slot` of `ring`, made (or remade larger) so that it holds `bytes`: sizes grow in powers
/// of two up to `chunk`, so small transfers do not reserve whole chunks.
fn staging_slot<'r>(
    gpu: Gpu<'_>,
    ring: &'r mut Vec<Staging>,
    slot: usize,
    bytes: u64,
    chunk: u64,
    direction: Direction,
) -> Result<&'r mut Staging, GpuError> {
    let too_small = ring.get(slot).is_none_or(|s| s.buffer.size() < bytes);
    if too_small {
        let size = staging_size(bytes, chunk);
        let (label, usage, mapped) = match direction {
            Direction::Up => ("staging (upload)", wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC, true),
            Direction::Down => {
                ("staging (download)", wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST, false)
            }
        };
        let staging = gpu.scoped(|| Staging::new(gpu.device, label, size, usage, mapped))?;
        // Slots are used in order, so a missing slot is always the next one.
        if slot < ring.len() {
            ring[slot] = staging;
        } else {
            ring.push(staging);
        }
    }
    Ok(&mut ring[slot])
}

/// Checks a copy of `len` bytes at `offset` of `buffer` before wgpu does (wgpu would panic).
fn check_range(
    what: &str,
    buffer: &wgpu::Buffer,
    usage: wgpu::BufferUsages,
    offset: u64,
    len: usize,
) -> Result<(), GpuError> {
    if !buffer.usage().contains(usage) {
        return Err(GpuError::Validation(format!("{what} a buffer without {usage:?} usage")));
    }
    if !offset.is_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT) {
        return Err(GpuError::Validation(format!("{what} byte offset {offset}: copies start at multiples of 4")));
    }
    let end = offset + (len as u64).next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT);
    if end > buffer.size() {
        return Err(GpuError::Validation(format!(
            "{what} bytes {offset}..{end} (the data rounded up to whole 4-byte words) of a buffer of {} bytes",
            buffer.size()
        )));
    }
    Ok(())
}

/// The byte ranges `threads` threads take of `len` bytes: equal parts of whole 4 KiB pages, at
/// least [`MIN_PART_BYTES`] each (so each part starts on wgpu's 8-byte map alignment).
fn parts(len: usize, threads: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    let part = len.div_ceil(threads.max(1)).next_multiple_of(4096).max(MIN_PART_BYTES);
    (0..len.div_ceil(part)).map(move |p| p * part..(p * part + part).min(len))
}

/// Copies `src` into the mapped upload buffer `buffer` (from byte 0), zero-padding to a whole
/// word, with up to `threads` threads, each through its own mapped view.
fn fill(buffer: &wgpu::Buffer, src: &[u8], threads: usize) -> Result<(), GpuError> {
    let padded = src.len().next_multiple_of(4);
    let mut jobs = Vec::new();
    for range in parts(src.len(), threads) {
        // The last part also covers the padding.
        let end = if range.end == src.len() { padded } else { range.end };
        let view = buffer
            .slice(range.start as u64..end as u64)
            .get_mapped_range_mut()
            .map_err(|e| GpuError::Device(e.to_string()))?;
        jobs.push((view, &src[range]));
    }
    let write = |(mut view, part): (wgpu::BufferViewMut, &[u8])| {
        let (mut data, mut pad) = view.slice(..).split_at(part.len());
        data.copy_from_slice(part);
        pad.fill(0);
    };
    if jobs.len() == 1 {
        jobs.into_iter().for_each(write);
    } else {
        jobs.into_par_iter().for_each(write);
    }
    Ok(())
}

/// Copies the mapped bytes `src` into `out` with up to `threads` threads.
fn empty(src: &[u8], out: &mut [u8], threads: usize) {
    let part = parts(src.len(), threads).next().map_or(1, |r| r.len());
    if part >= src.len() {
        out.copy_from_slice(src);
    } else {
        out.par_chunks_mut(part).zip(src.par_chunks(part)).for_each(|(o, s)| o.copy_from_slice(s));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_cover_every_byte_once_on_map_alignment() {
        for len in [1usize, 4095, 65_536, 65_537, 16 << 20, (16 << 20) + 3] {
            for threads in [1usize, 2, 3, 8, 16] {
                let ranges: Vec<_> = parts(len, threads).collect();
                assert!(ranges.len() <= threads, "len {len}, {threads} threads: {} parts", ranges.len());
                assert_eq!(ranges[0].start, 0);
                assert_eq!(ranges.last().unwrap().end, len);
                for w in ranges.windows(2) {
                    assert_eq!(w[0].end, w[1].start, "len {len}, {threads} threads: a gap or an overlap");
                }
                assert!(ranges.iter().all(|r| (r.start as u64).is_multiple_of(wgpu::MAP_ALIGNMENT) && !r.is_empty()));
            }
        }
        // Small chunks stay on one thread; big ones use them all.
        assert_eq!(parts(1 << 20, 8).count(), 1);
        assert_eq!(parts((1 << 20) + 1, 8).count(), 2);
        assert_eq!(parts(16 << 20, 8).count(), 8);
        assert_eq!(parts(16 << 20, 16).count(), 16);
    }
}
