//! `cargo run --release -p double --bin transfers`: every idea for moving data between the host
//! and the GPU, measured on its own, at 64 KiB .. 1 GiB.
//!
//! Each row is one way to move `size` bytes of u32s into (or out of) a storage buffer, timed on
//! the wall clock from the call until the data is there (GPU waited for), the median of `--reps`
//! rounds after one untimed round (which allocates staging buffers), every result checked.
//! The rows are what stage 01's chapter compares: the simple path (`queue.write_buffer`, one
//! staging buffer copied out by one thread), and `common::Transfer` one idea at a time: reused
//! mapped staging, chunks that overlap, threads, chunk size, and the read-back that copies
//! nothing. Two more rows show where the time goes: the GPU's copy alone (between staging and
//! storage memory), and how fast one thread reads mapped memory against a `Vec`.
//!
//! Prints GB/s (10^9 bytes per second) per row and size.

use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use common::{GpuContext, GpuError, Transfer, TransferConfig, median, wgpu};

#[derive(Parser, Debug)]
#[command(about = "Measure each way of moving data between the host and the GPU, at several sizes.")]
struct Args {
    /// Sizes in KiB (each a whole number of 4-byte words).
    #[arg(long, value_delimiter = ',', default_values_t = [64u64, 1024, 16 << 10, 64 << 10, 256 << 10, 1 << 20])]
    kib: Vec<u64>,
    /// Timed rounds per row and size (the median is printed), after one untimed round.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    reps: u32,
    /// Thread counts to try for the chunked paths.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 2, 4, 8, 16])]
    threads: Vec<usize>,
}

type AnyError = Box<dyn std::error::Error>;

fn main() -> ExitCode {
    match run(&Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One row of a table: a label and GB/s per size.
struct Row {
    label: String,
    gbs: Vec<f64>,
}

const MIB: u64 = 1 << 20;

fn run(args: &Args) -> Result<(), AnyError> {
    if args.kib.contains(&0) || args.threads.contains(&0) {
        return Err("--kib and --threads must be positive".into());
    }
    let ctx = GpuContext::new()?;
    ctx.print_banner();
    let largest = args.kib.iter().max().copied().unwrap_or(1) << 10;
    ctx.check_storage_size("the largest transfer", largest)?;
    if largest > ctx.limits.max_buffer_size {
        return Err(format!("{largest} bytes exceed this device's max_buffer_size").into());
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("transfers: host <-> GPU through wgpu, each idea alone; GB/s = bytes / wall time until the data is there");
    println!("gpu: {}{}", ctx.adapter_line(), if ctx.is_software() { "  [SOFTWARE adapter]" } else { "" });
    println!(
        "host: {cores} cores (rayon's pool); median of {} rounds after 1 untimed round; every result checked",
        args.reps
    );
    let default = TransferConfig::default();
    println!(
        "TransferConfig::default() here: chunks of {} MiB, {} in flight, {} threads, write_buffer below {} KiB",
        default.chunk_bytes / MIB,
        default.chunks_in_flight,
        default.threads,
        default.write_buffer_below >> 10
    );

    let target = ctx.storage_buffer_empty("transfer target", largest)?;
    let sizes: Vec<u64> = args.kib.iter().map(|k| k << 10).collect();
    let chunked = |chunk_mib: u64, threads: usize| TransferConfig {
        chunk_bytes: chunk_mib * MIB,
        chunks_in_flight: 3,
        threads,
        write_buffer_below: 0,
    };
    // The rows: a label and a Transfer configuration (None = the simple path or a special row).
    let mut transfer_rows: Vec<(String, TransferConfig)> = vec![(
        "one staging buffer as large as the data, 1 thread".into(),
        TransferConfig { chunk_bytes: largest, chunks_in_flight: 1, threads: 1, write_buffer_below: 0 },
    )];
    for &t in &args.threads {
        transfer_rows.push((format!("16 MiB chunks x3 in flight, {t} thread{}", if t == 1 { "" } else { "s" }), chunked(16, t)));
    }
    for chunk in [4, 64] {
        transfer_rows.push((format!("{chunk} MiB chunks x3 in flight, 8 threads"), chunked(chunk, 8)));
    }

    // ---- Uploads ----
    let mut up = vec![
        Row { label: "1 queue.write_buffer (the simple path)".into(), gbs: vec![] },
        Row { label: "  a new buffer per upload (create_buffer_init)".into(), gbs: vec![] },
    ];
    up.extend(transfer_rows.iter().map(|(l, _)| Row { label: format!("2 {l}"), gbs: vec![] }));
    up.push(Row { label: "  the GPU's copy alone, staging -> storage".into(), gbs: vec![] });
    let mut down = vec![Row { label: "1 read_into: one staging buffer, 1 thread copies out".into(), gbs: vec![] }];
    down.extend(transfer_rows.iter().map(|(l, _)| Row { label: format!("2 {l}"), gbs: vec![] }));
    down.push(Row { label: "3 mapped, not copied out (download_mapped)".into(), gbs: vec![] });
    down.push(Row { label: "  the GPU's copy alone, storage -> staging".into(), gbs: vec![] });
    let mut read = vec![
        Row { label: "1 thread sums a Vec".into(), gbs: vec![] },
        Row { label: "1 thread sums mapped read-back memory".into(), gbs: vec![] },
    ];

    for &bytes in &sizes {
        eprintln!("{} ...", size_name(bytes));
        let words = (bytes / 4) as usize;
        let data: Vec<u32> = (0..words as u32).map(|i| i.wrapping_mul(2_654_435_761) ^ 0x5bd1_e995).collect();
        let gbs = |seconds: f64| bytes as f64 / seconds / 1e9;
        let check_target = |what: &str| -> Result<(), AnyError> {
            let back: Vec<u32> = ctx.read(&target, words)?;
            if back != data { Err(format!("{}: {what} uploaded wrong data", size_name(bytes)).into()) } else { Ok(()) }
        };

        // Uploads. A row that fails (an allocation the device refuses, wrong data) prints its
        // error and shows NaN; the other rows go on.
        let mut r = 0;
        let push = |rows: &mut Vec<Row>, r: &mut usize, result: Result<f64, AnyError>| {
            let row = &mut rows[*r];
            row.gbs.push(result.map(gbs).unwrap_or_else(|e| {
                eprintln!("{}: {}: {e}", size_name(bytes), row.label.trim());
                f64::NAN
            }));
            *r += 1;
        };
        let result = (|| {
            let t = time(args.reps, || {
                ctx.queue.write_buffer(&target, 0, bytemuck::cast_slice(&data));
                ctx.queue.submit([]);
                ctx.wait()
            })?;
            check_target("write_buffer")?;
            Ok(t)
        })();
        push(&mut up, &mut r, result);
        let result = (|| {
            let mut made = None;
            let t = time(args.reps, || {
                made = Some(ctx.storage_buffer("fresh", &data)?);
                ctx.queue.submit([]);
                ctx.wait()
            })?;
            if ctx.read::<u32>(made.as_ref().expect("made above"), words)? != data {
                return Err("create_buffer_init uploaded wrong data".into());
            }
            Ok(t)
        })();
        push(&mut up, &mut r, result);
        for (label, config) in &transfer_rows {
            target_poison(&ctx, &target);
            let result = (|| {
                let mut transfer = Transfer::new(*config);
                let t = time(args.reps, || {
                    transfer.upload(&ctx, &target, 0, &data)?;
                    ctx.wait()
                })?;
                check_target(label)?;
                Ok(t)
            })();
            push(&mut up, &mut r, result);
        }
        let result = gpu_copy_up(&ctx, &target, &data, args.reps);
        push(&mut up, &mut r, result);

        // Downloads (of the data written into `target` here).
        ctx.queue.write_buffer(&target, 0, bytemuck::cast_slice(&data));
        let mut out = vec![0u32; words];
        let mut r = 0;
        let check_out = |out: &mut Vec<u32>, what: &str| -> Result<(), AnyError> {
            let ok = *out == data;
            out.fill(0);
            if ok { Ok(()) } else { Err(format!("{}: {what} read back wrong data", size_name(bytes)).into()) }
        };
        let result = (|| {
            let t = time(args.reps, || ctx.read_into(&target, &mut out))?;
            check_out(&mut out, "read_into")?;
            Ok(t)
        })();
        push(&mut down, &mut r, result);
        for (label, config) in &transfer_rows {
            let result = (|| {
                let mut transfer = Transfer::new(*config);
                let t = time(args.reps, || transfer.download_into(&ctx, &target, 0, &mut out))?;
                check_out(&mut out, label)?;
                Ok(t)
            })();
            push(&mut down, &mut r, result);
        }
        let mut transfer = Transfer::new(TransferConfig::default());
        let mut reading = [f64::NAN; 2];
        let result = (|| {
            let t = time(args.reps, || transfer.download_mapped::<u32>(&ctx, &target, 0, words).map(drop))?;
            let mapped = transfer.download_mapped::<u32>(&ctx, &target, 0, words)?;
            if mapped[..] != data[..] {
                return Err("download_mapped read back wrong data".into());
            }
            // One thread reading the whole read-back: a plain Vec against mapped memory.
            reading[0] = time(args.reps, || {
                black_box(sum(&data));
                Ok(())
            })?;
            reading[1] = time(args.reps, || {
                black_box(sum(&mapped));
                Ok(())
            })?;
            Ok(t)
        })();
        push(&mut down, &mut r, result);
        let result = gpu_copy_down(&ctx, &target, bytes, args.reps);
        push(&mut down, &mut r, result);
        let mut r = 0;
        for t in reading {
            push(&mut read, &mut r, Ok(t));
        }
    }

    for (title, rows) in [
        ("upload (host -> GPU), GB/s", &up),
        ("download (GPU -> host), GB/s", &down),
        ("reading the result on the host, GB/s", &read),
    ] {
        println!();
        print!("{title:<58}");
        for &b in &sizes {
            print!(" {:>9}", size_name(b));
        }
        println!();
        println!("{}", "-".repeat(58 + 10 * sizes.len()));
        for row in rows {
            print!("{:<58}", row.label);
            for g in &row.gbs {
                print!(" {g:>9.2}");
            }
            println!();
        }
    }
    Ok(())
}

/// Median seconds of `reps` calls of `f`, after one untimed call.
fn time(reps: u32, mut f: impl FnMut() -> Result<(), GpuError>) -> Result<f64, GpuError> {
    f()?;
    let mut samples = Vec::with_capacity(reps as usize);
    for _ in 0..reps {
        let start = Instant::now();
        f()?;
        samples.push(start.elapsed().as_secs_f64());
    }
    Ok(median(&mut samples))
}

/// Fills `target` with 0xFF bytes and waits, so a row that uploads nothing fails its check.
fn target_poison(ctx: &GpuContext, target: &wgpu::Buffer) {
    ctx.poison(target);
    ctx.queue.submit([]);
    let _ = ctx.wait();
}

/// The GPU copying `data` from a filled `MAP_WRITE` staging buffer into `target`: submit + wait,
/// median seconds. Fast (device memory speed) if the staging memory sits on the GPU, bus speed
/// if it sits in host memory.
fn gpu_copy_up(ctx: &GpuContext, target: &wgpu::Buffer, data: &[u32], reps: u32) -> Result<f64, AnyError> {
    let bytes = std::mem::size_of_val(data) as u64;
    let staging = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("copy-alone staging"),
        size: bytes,
        usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: true,
    });
    staging.slice(..).get_mapped_range_mut()?.copy_from_slice(bytemuck::cast_slice(data));
    staging.unmap();
    let t = time(reps, || copy(ctx, &staging, target, bytes))?;
    if ctx.read::<u32>(target, data.len())? != data {
        return Err("the GPU's staging -> storage copy moved wrong data".into());
    }
    Ok(t)
}

/// The GPU copying `bytes` of `target` into a `MAP_READ` staging buffer: submit + wait, median
/// seconds (no mapping, no copy on the host).
fn gpu_copy_down(ctx: &GpuContext, target: &wgpu::Buffer, bytes: u64, reps: u32) -> Result<f64, AnyError> {
    let staging = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("copy-alone read-back"),
        size: bytes,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    Ok(time(reps, || copy(ctx, target, &staging, bytes))?)
}

fn copy(ctx: &GpuContext, from: &wgpu::Buffer, to: &wgpu::Buffer, bytes: u64) -> Result<(), GpuError> {
    let mut encoder = ctx.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("copy") });
    encoder.copy_buffer_to_buffer(from, 0, to, 0, bytes);
    ctx.queue.submit([encoder.finish()]);
    ctx.wait()
}

/// A sum the compiler cannot skip: reads every word once.
fn sum(words: &[u32]) -> u32 {
    black_box(words).iter().fold(0u32, |a, &w| a.wrapping_add(w))
}

fn size_name(bytes: u64) -> String {
    if bytes >= 1 << 30 {
        format!("{} GiB", bytes >> 30)
    } else if bytes >= MIB {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{} KiB", bytes >> 10)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_read_as_units() {
        assert_eq!(super::size_name(64 << 10), "64 KiB");
        assert_eq!(super::size_name(16 << 20), "16 MiB");
        assert_eq!(super::size_name(1 << 30), "1 GiB");
    }
}
