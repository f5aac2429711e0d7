//! `cargo run --release -p double`: when does the GPU beat the CPU at doubling an array?
//!
//! For each size 2^min-pow .. 2^max-pow floats (capped by the device's limits) it validates the
//! GPU against the CPU, warms up, then reports medians over `--reps` repetitions: the CPU time;
//! the GPU's upload, kernel (GPU timestamps), download and whole round trip; GB/s; and who wins
//! on kernel time alone and with the transfers counted. `--walkthrough` instead runs the
//! seven-step tutorial function (`src/walkthrough.rs`) on a few numbers.

use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use common::{GpuContext, median};
use double::{
    BYTES_PER_ELEMENT, DoubleGpu, WORKGROUP_SIZE, double_cpu, double_cpu_into, double_walkthrough, sample_input,
};

#[derive(Parser, Debug)]
#[command(about = "Double f32 arrays on the CPU and on the GPU, and see where the GPU starts to win.")]
struct Args {
    /// Smallest size, as a power of two: 2^MIN_POW floats.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(0..=31))]
    min_pow: u32,
    /// Largest size, as a power of two (lowered to what the device allows).
    #[arg(long, default_value_t = 26, value_parser = clap::value_parser!(u32).range(0..=31))]
    max_pow: u32,
    /// Timed repetitions per size; every column is the median over them.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    reps: u32,
    /// Untimed warm-up repetitions per size, after validation and before timing.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(0..=1000))]
    warmup: u32,
    /// Run the seven-step walkthrough on eight numbers instead, and print them.
    #[arg(long)]
    walkthrough: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let result = if args.walkthrough { walkthrough() } else { sweep(&args) };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

type AnyError = Box<dyn std::error::Error>;

/// `--walkthrough`: the tutorial function on eight numbers, checked against the CPU.
fn walkthrough() -> Result<(), AnyError> {
    let input = [1.0f32, 2.0, 3.0, -4.5, 0.1, 3.0e38, f32::INFINITY, f32::NAN];
    let (info, output) = double_walkthrough(&input)?;
    eprintln!("adapter (chosen by wgpu's request_adapter): {} ({:?}, {:?})", info.name, info.backend, info.device_type);
    if info.device_type == wgpu::DeviceType::Cpu {
        eprintln!("{}", common::software_warning(&info.name));
    }
    println!("input:  {input:?}");
    println!("output: {output:?}");
    let expected = double_cpu(&input);
    let same = output.iter().zip(&expected).all(|(a, e)| a == e || (a.is_nan() && e.is_nan()));
    if !same || output.len() != expected.len() {
        return Err(format!("the GPU result differs from the CPU's {expected:?}").into());
    }
    println!("matches the CPU exactly (3e38 doubled overflows to inf on both; NaN stays NaN)");
    Ok(())
}

/// Medians of one size, in seconds.
struct Row {
    pow: u32,
    n: usize,
    cpu: f64,
    upload: f64,
    kernel: f64,
    download: f64,
    round_trip: f64,
}

fn sweep(args: &Args) -> Result<(), AnyError> {
    if args.min_pow > args.max_pow {
        return Err(format!("--min-pow {} is larger than --max-pow {}", args.min_pow, args.max_pow).into());
    }
    let ctx = GpuContext::new()?;
    ctx.print_banner();

    // The largest size this device can hold in one binding (and one dispatch).
    let fits = |pow: u32| {
        ctx.check_storage_size("input", 4u64 << pow).is_ok() && ctx.workgroups_1d(1u64 << pow, WORKGROUP_SIZE).is_ok()
    };
    let max_pow = (args.min_pow..=args.max_pow).rev().find(|&p| fits(p)).ok_or_else(|| {
        format!(
            "2^{} floats ({} MiB) already exceed this device's storage binding of {} MiB: lower --min-pow",
            args.min_pow,
            (4u64 << args.min_pow) >> 20,
            ctx.limits.max_storage_buffer_binding_size >> 20
        )
    })?;

    let mut gpu = DoubleGpu::new(&ctx, 1 << max_pow)?;
    println!("double: y[i] = 2 * x[i] over f32 arrays; the CPU (one thread) against the GPU");
    println!(
        "gpu: {}{}",
        ctx.adapter_line(),
        if ctx.is_software() { "  [SOFTWARE adapter: runs on the CPU]" } else { "" }
    );
    println!("cpu: {} (one thread)", cpu_name());
    print!("sizes 2^{}..2^{max_pow}", args.min_pow);
    if max_pow < args.max_pow {
        print!(
            " (2^{} floats exceed this device's {} MiB storage binding)",
            max_pow + 1,
            ctx.limits.max_storage_buffer_binding_size >> 20
        );
    }
    println!(
        "; median of {} reps after {} warm-up; every size validated against the CPU first",
        args.reps, args.warmup
    );
    println!("kernel: {}; upload, download and round trip: wall clock including the wait", gpu.time_source());
    println!(
        "round trip = upload + kernel + download as one program does it (one wait); GB/s counts {BYTES_PER_ELEMENT} bytes per element"
    );
    println!();
    println!(
        "{:>5} {:>9} | {:>9} {:>7} | {:>9} {:>9} {:>9} {:>10} {:>7} | {:>12} {:>15}",
        "size",
        "bytes",
        "CPU",
        "GB/s",
        "upload",
        "kernel",
        "download",
        "round trip",
        "GB/s",
        "kernel only",
        "with transfers"
    );
    println!("{}", "-".repeat(122));

    let mut rows = Vec::new();
    for pow in args.min_pow..=max_pow {
        let row = measure(&ctx, &mut gpu, pow, args)?;
        print_row(&row);
        rows.push(row);
    }
    summarise(&rows);
    Ok(())
}

/// Validates size 2^pow, warms up, and returns the medians of `args.reps` repetitions.
fn measure(ctx: &GpuContext, gpu: &mut DoubleGpu, pow: u32, args: &Args) -> Result<Row, AnyError> {
    let n = 1usize << pow;
    let input = sample_input(n, pow as u64);
    let expected = double_cpu(&input);
    let mut out = vec![0.0f32; n];

    // Validate both GPU paths before timing anything: separate phases, and the round trip.
    gpu.poison_output(ctx);
    gpu.upload(ctx, &input)?;
    gpu.run(ctx)?;
    gpu.download(ctx, &mut out)?;
    common::check_close(&out, &expected, 0.0, 0.0)
        .map_err(|e| format!("2^{pow}: GPU (separate phases) is wrong: {e}"))?;
    gpu.poison_output(ctx);
    out.fill(0.0);
    gpu.round_trip(ctx, &input, &mut out)?;
    common::check_close(&out, &expected, 0.0, 0.0).map_err(|e| format!("2^{pow}: GPU (round trip) is wrong: {e}"))?;

    // The CPU finishes 2^10 floats in well under a microsecond, too short to time one call:
    // each CPU sample averages enough calls to cover about 2^20 elements.
    let cpu_calls = ((1usize << 20) / n).max(1);
    let mut cpu_out = vec![0.0f32; n];
    let mut samples: [Vec<f64>; 5] = Default::default();
    for rep in 0..args.warmup + args.reps {
        let start = Instant::now();
        for _ in 0..cpu_calls {
            double_cpu_into(black_box(&input), black_box(&mut cpu_out));
        }
        let cpu = start.elapsed().as_secs_f64() / cpu_calls as f64;

        let start = Instant::now();
        gpu.upload(ctx, &input)?;
        let upload = start.elapsed().as_secs_f64();
        let kernel = gpu.run(ctx)?;
        let start = Instant::now();
        gpu.download(ctx, &mut out)?;
        let download = start.elapsed().as_secs_f64();

        let start = Instant::now();
        gpu.round_trip(ctx, &input, &mut out)?;
        let round_trip = start.elapsed().as_secs_f64();

        if rep >= args.warmup {
            for (s, v) in samples.iter_mut().zip([cpu, upload, kernel, download, round_trip]) {
                s.push(v);
            }
        }
    }
    // The timed results must still be right (and this keeps the CPU loop from being skipped).
    common::check_close(&cpu_out, &expected, 0.0, 0.0).map_err(|e| format!("2^{pow}: CPU result changed: {e}"))?;
    common::check_close(&out, &expected, 0.0, 0.0).map_err(|e| format!("2^{pow}: GPU result changed: {e}"))?;
    let [cpu, upload, kernel, download, round_trip] = samples.map(|mut s| median(&mut s));
    Ok(Row { pow, n, cpu, upload, kernel, download, round_trip })
}

fn print_row(r: &Row) {
    let gbs = |seconds: f64| (BYTES_PER_ELEMENT * r.n as u64) as f64 / seconds / 1e9;
    println!(
        "{:>5} {:>9} | {:>9} {:>7.2} | {:>9} {:>9} {:>9} {:>10} {:>7.2} | {:>12} {:>15}",
        format!("2^{}", r.pow),
        bytes(4 * r.n as u64),
        time(r.cpu),
        gbs(r.cpu),
        time(r.upload),
        time(r.kernel),
        time(r.download),
        time(r.round_trip),
        gbs(r.kernel),
        winner(r.cpu, r.kernel),
        winner(r.cpu, r.round_trip),
    );
}

/// The crossover lines, and the transfer rates at the largest size.
fn summarise(rows: &[Row]) {
    let Some(last) = rows.last() else { return };
    println!();
    let first_win =
        |gpu_time: fn(&Row) -> f64| rows.iter().find(|r| gpu_time(r) < r.cpu).map(|r| format!("2^{}", r.pow));
    let until = format!("(up to 2^{})", last.pow);
    println!(
        "kernel only:    the GPU first wins at {}",
        first_win(|r| r.kernel).unwrap_or_else(|| format!("no size {until}"))
    );
    println!(
        "with transfers: the GPU first wins at {}",
        first_win(|r| r.round_trip).unwrap_or_else(|| format!("no size {until}"))
    );
    let bytes = 4.0 * last.n as f64;
    println!(
        "transfers at 2^{}: upload {:.2} GB/s, download {:.2} GB/s ({} each way)",
        last.pow,
        bytes / last.upload / 1e9,
        bytes / last.download / 1e9,
        self::bytes(4 * last.n as u64)
    );
}

/// "GPU 3.1x" when the GPU time is shorter than the CPU time, else "CPU 2.0x".
fn winner(cpu: f64, gpu: f64) -> String {
    if gpu < cpu { format!("GPU {:.1}x", cpu / gpu) } else { format!("CPU {:.1}x", gpu / cpu) }
}

fn time(seconds: f64) -> String {
    if seconds < 1e-6 {
        format!("{:.0} ns", seconds * 1e9)
    } else if seconds < 1e-3 {
        format!("{:.1} µs", seconds * 1e6)
    } else if seconds < 1.0 {
        format!("{:.2} ms", seconds * 1e3)
    } else {
        format!("{seconds:.2} s")
    }
}

fn bytes(b: u64) -> String {
    match b {
        b if b >= 1 << 30 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

/// The CPU model from /proc/cpuinfo (Linux), so the CPU column says what it measured.
fn cpu_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".to_string())
}
