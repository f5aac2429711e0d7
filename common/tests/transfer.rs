//! The fast transfer path (`common::Transfer`) against the simple one, on a real adapter (the
//! software one in CI): every size class a chunked copy can get wrong, both directions, the
//! zero-copy read-back, ordering against kernels, and bad arguments.
//!
//! The chunk is 3 MiB here and three threads share it (parts of 1 MiB, the smallest a thread
//! takes), so inputs of a few MiB exercise chunk edges, ring reuse and the multi-threaded fill
//! and copy-out.

use common::{GpuContext, Transfer, TransferConfig, test_context, wgpu};

const CHUNK: usize = 3 << 20;

/// Chunks of 3 MiB, two in flight (so five chunks reuse each staging buffer), three threads, and
/// no `write_buffer` shortcut: every size takes the staging path.
fn config() -> TransferConfig {
    TransferConfig { chunk_bytes: CHUNK as u64, chunks_in_flight: 2, threads: 3, write_buffer_below: 0 }
}

/// The sizes the fast path must get right, in bytes: nothing, one byte, one chunk, three bytes
/// past a chunk, and many chunks with a ragged end.
const SIZES: [usize; 5] = [0, 1, CHUNK, CHUNK + 3, 5 * CHUNK + 12_345];

/// Deterministic bytes that are never all one value (xorshift).
fn bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// A storage buffer of `n` bytes (rounded up to whole words) plus `extra` bytes, all 0xFF.
fn poisoned(ctx: &GpuContext, n: usize, extra: usize) -> wgpu::Buffer {
    let buffer = ctx.storage_buffer_empty("transfer test", (n.next_multiple_of(4) + extra) as u64).unwrap();
    ctx.poison(&buffer);
    buffer
}

#[test]
fn upload_matches_write_buffer_at_every_size() {
    let ctx = test_context();
    let mut transfer = Transfer::new(config());
    for (seed, &n) in SIZES.iter().enumerate() {
        let data = bytes(n, seed as u64);
        // 8 bytes of room before and 16 after: the upload must touch only its own words.
        let buffer = poisoned(ctx, n, 24);
        transfer.upload(ctx, &buffer, 8, &data).unwrap();
        let back: Vec<u8> = ctx.read(&buffer, buffer.size() as usize).unwrap();
        assert!(back[..8].iter().all(|&b| b == 0xFF), "n = {n}: wrote before the offset");
        assert!(back[8..8 + n] == data[..], "n = {n}: the uploaded bytes differ");
        let pad = n.next_multiple_of(4) - n;
        assert!(back[8 + n..8 + n + pad].iter().all(|&b| b == 0), "n = {n}: the last word's padding is not zero");
        assert!(back[8 + n + pad..].iter().all(|&b| b == 0xFF), "n = {n}: wrote past the last word");
    }
}

#[test]
fn download_into_matches_the_data_at_every_size() {
    let ctx = test_context();
    let mut transfer = Transfer::new(config());
    for (seed, &n) in SIZES.iter().enumerate() {
        let data = bytes(n + 4, 100 + seed as u64);
        let buffer = ctx.storage_buffer("download source", &data).unwrap();
        // From the start, and from byte 4 (a chunk boundary that is not the buffer's).
        let mut out = vec![0u8; n];
        transfer.download_into(ctx, &buffer, 0, &mut out).unwrap();
        assert!(out[..] == data[..n], "n = {n}: download from 0 differs");
        out.fill(0);
        transfer.download_into(ctx, &buffer, 4, &mut out).unwrap();
        assert!(out[..] == data[4..4 + n], "n = {n}: download from byte 4 differs");
    }
}

#[test]
fn mapped_read_back_matches_the_data_at_every_size() {
    let ctx = test_context();
    let mut transfer = Transfer::new(config());
    for (seed, &n) in SIZES.iter().enumerate() {
        let data = bytes(n, 200 + seed as u64);
        let buffer = ctx.storage_buffer("mapped source", &data).unwrap();
        let mapped = transfer.download_mapped::<u8>(ctx, &buffer, 0, n).unwrap();
        assert_eq!(mapped.len(), n);
        assert!(mapped[..] == data[..], "n = {n}: the mapped bytes differ");
        // Dropping the guard unmaps, so the next read (the next size) can map again.
    }
    // Floats read in place, and a later, smaller read through the same (larger) staging buffer.
    let floats: Vec<f32> = (0..1000).map(|i| i as f32 * -0.5 + 3.25).collect();
    let buffer = ctx.storage_buffer("mapped floats", &floats).unwrap();
    assert_eq!(&transfer.download_mapped::<f32>(ctx, &buffer, 0, 1000).unwrap()[..], &floats[..]);
    assert_eq!(&transfer.download_mapped::<f32>(ctx, &buffer, 40, 7).unwrap()[..], &floats[10..17]);
}

#[test]
fn round_trips_through_one_transfer_many_times() {
    // Upload buffers stay mapped between calls and download buffers are reused: ten calls in a
    // row, with sizes that grow and shrink, must all land.
    let ctx = test_context();
    let mut transfer = Transfer::new(config());
    let buffer = poisoned(ctx, 3 * CHUNK, 0);
    for round in 0..10u64 {
        let n = [3 * CHUNK, 17, CHUNK + 1, 2 * CHUNK - 5][round as usize % 4];
        let data: Vec<u8> = bytes(n, 300 + round);
        transfer.upload(ctx, &buffer, 0, &data).unwrap();
        let mut out = vec![0u8; n];
        transfer.download_into(ctx, &buffer, 0, &mut out).unwrap();
        assert!(out == data, "round {round}, n = {n}");
    }
}

/// `out[i] = in[i] * 2 + seed`, over u32s: each element depends on the input and on the run.
const DOUBLE_PLUS: &str = r#"
@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@group(0) @binding(2) var<uniform> seed: vec4<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if i < arrayLength(&dst) { dst[i] = src[i] * 2u + seed.x; }
}
"#;

#[test]
fn read_back_waits_for_the_kernel_that_writes_the_buffer() {
    // Upload, dispatch and read back without waiting in between: the read-backs must see the
    // kernel's output (submission order), and the kernel must see the upload.
    let ctx = test_context();
    let mut transfer = Transfer::new(config());
    let n = (3 * CHUNK + 40) / 4;
    let input: Vec<u32> = bytes(4 * n, 400).chunks(4).map(|w| u32::from_le_bytes(w.try_into().unwrap()) >> 2).collect();
    let src = ctx.storage_buffer_empty("kernel input", 4 * n as u64).unwrap();
    let dst = poisoned(ctx, 4 * n, 0);
    let pipeline = ctx.compute_pipeline("double plus", DOUBLE_PLUS, "main").unwrap();
    let (x, y, z) = ctx.workgroups_1d(n as u64, 64).unwrap();
    for seed in [7u32, 11] {
        let uniform = ctx.uniform_buffer("seed", &[seed, 0, 0, 0]);
        let bind = ctx.bind_group("double plus", &pipeline, 0, &[&src, &dst, &uniform]).unwrap();
        transfer.upload(ctx, &src, 0, &input).unwrap();
        let mut encoder = ctx.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bind, &[]);
            pass.dispatch_workgroups(x, y, z);
        }
        ctx.queue.submit([encoder.finish()]);
        let expected: Vec<u32> = input.iter().map(|v| v * 2 + seed).collect();
        let mut out = vec![0u32; n];
        transfer.download_into(ctx, &dst, 0, &mut out).unwrap();
        assert!(out == expected, "seed {seed}: download_into missed the kernel's writes");
        assert!(transfer.download_mapped::<u32>(ctx, &dst, 0, n).unwrap()[..] == expected[..], "seed {seed}: mapped");
    }
}

#[test]
fn the_context_path_uploads_and_downloads() {
    // GpuContext::upload / download use the context's own Transfer (default configuration),
    // including its write_buffer shortcut for small uploads.
    let ctx = test_context();
    for n in [5usize, 1000, 300_000] {
        let data: Vec<f32> = (0..n).map(|i| (i as f32).sin() * 1e3).collect();
        let buffer = ctx.storage_buffer_uploaded("context upload", &data).unwrap();
        assert_eq!(ctx.download::<f32>(&buffer, n).unwrap(), data, "n = {n}");
        let again: Vec<f32> = data.iter().map(|v| -v).collect();
        ctx.upload(&buffer, 0, &again).unwrap();
        let mut out = vec![0.0f32; n];
        ctx.download_into(&buffer, &mut out).unwrap();
        assert_eq!(out, again, "n = {n}");
    }
}

#[test]
fn bad_ranges_are_errors_not_panics() {
    let ctx = test_context();
    let mut transfer = Transfer::new(config());
    let buffer = ctx.storage_buffer_empty("small", 16).unwrap();
    assert!(transfer.upload(ctx, &buffer, 2, &[1u8; 4]).is_err(), "an offset that is not a multiple of 4");
    assert!(transfer.upload(ctx, &buffer, 8, &[1u8; 9]).is_err(), "9 bytes (12 with padding) at 8 of 16");
    assert!(transfer.download_into(ctx, &buffer, 0, &mut [0u32; 5]).is_err(), "20 bytes of 16");
    assert!(transfer.download_mapped::<u32>(ctx, &buffer, 4, 4).is_err(), "bytes 4..20 of 16");
    let uniform = ctx.uniform_buffer("not a copy source", &[0u32; 4]);
    let err = transfer.download_into(ctx, &uniform, 0, &mut [0u32; 4]).unwrap_err();
    assert!(err.to_string().contains("COPY_SRC"), "{err}");
    // Still usable after the errors.
    transfer.upload(ctx, &buffer, 0, &[9u32; 4]).unwrap();
    assert_eq!(ctx.read::<u32>(&buffer, 4).unwrap(), [9; 4]);
}
