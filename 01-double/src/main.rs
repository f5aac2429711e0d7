//! `cargo run --release -p double`: when does the GPU beat the CPU at doubling an array?
//!
//! For each size 2^min-pow .. 2^max-pow floats (capped by the device's limits) it validates the
//! GPU against the CPU along every transfer path, warms up, then reports medians over `--reps`
//! repetitions: the CPU time; upload and download GB/s along each path (1 simple, 2 fast,
//! 3 mapped); the kernel (one dispatch at a time, GPU timestamps, right after a second of
//! back-to-back work that brings the GPU's clock up); each path's round trip; and who wins on
//! kernel time alone and with each path's transfers counted.
//! `--walkthrough` instead runs the seven-step tutorial function (`src/walkthrough.rs`) on a few
//! numbers.

use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use common::{GpuContext, GpuError, TransferConfig, fmt_time, median};
use double::{
    BYTES_PER_ELEMENT, DoubleGpu, Path, WORKGROUP_SIZE, double_cpu, double_cpu_into, double_walkthrough, sample_input,
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
    /// Milliseconds of back-to-back dispatches (of the largest size) right before each size's
    /// timed kernels: the GPU raises its clock only under sustained load. None on a software
    /// adapter.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(0..=60_000))]
    kernel_warmup_ms: u64,
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

/// Medians of one size, in seconds. Transfers are indexed by `Path as usize - 1`.
struct Row {
    pow: u32,
    n: usize,
    cpu: f64,
    /// Upload along paths 1 and 2 (path 3 uploads like 2).
    upload: [f64; 2],
    kernel: f64,
    /// Download along paths 1, 2 and 3.
    download: [f64; 3],
    round_trip: [f64; 3],
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
    // A second kernel with the largest input, only to keep the GPU busy before kernels are timed.
    let mut heater = DoubleGpu::new(&ctx, 1 << max_pow)?;
    heater.upload(&ctx, Path::Simple, &sample_input(1 << max_pow, 0))?;
    println!("double: y[i] = 2 * x[i] over f32 arrays; the CPU (one thread) against the GPU");
    println!(
        "gpu: {}{}",
        ctx.adapter_line(),
        if ctx.is_software() { "  [SOFTWARE adapter: runs on the CPU]" } else { "" }
    );
    println!(
        "cpu: {} (one thread; {} cores for the fast transfers)",
        common::cpu_model().unwrap_or_else(|| "unknown CPU".into()),
        cores()
    );
    print!("sizes 2^{}..2^{max_pow}", args.min_pow);
    if max_pow < args.max_pow {
        print!(
            " (2^{} floats exceed this device's {} MiB storage binding)",
            max_pow + 1,
            ctx.limits.max_storage_buffer_binding_size >> 20
        );
    }
    println!(
        "; median of {} reps after {} warm-up; every size and path validated against the CPU first",
        args.reps, args.warmup
    );
    // A software adapter has no clock to raise, and its "GPU" is the CPU: no warm-up there.
    let kernel_warmup_ms = if ctx.is_software() { 0 } else { args.kernel_warmup_ms };
    println!(
        "kernel: one dispatch at a time (submit, wait), {}, {}",
        gpu.time_source(),
        if kernel_warmup_ms > 0 {
            format!(
                "right after {kernel_warmup_ms} ms of back-to-back dispatches of 2^{max_pow} floats \
                 (the GPU raises its clock only under sustained load)"
            )
        } else {
            "without a warm-up (none on a software adapter)".to_string()
        }
    );
    let config = TransferConfig::default();
    println!(
        "paths: 1 simple = queue.write_buffer up, one staging buffer copied out by one thread down; \
         2 fast = common::Transfer ({} MiB chunks, {} in flight, {} threads, write_buffer below {} KiB); \
         3 mapped = 2's upload, read-back lent from mapped memory, not copied",
        config.chunk_bytes >> 20,
        config.chunks_in_flight,
        config.threads,
        config.write_buffer_below >> 10
    );
    println!(
        "upload, download, round trip: wall clock until the data is there; round trip = upload + kernel + download \
         as a program does them (one wait)"
    );

    let mut rows = Vec::new();
    let start = Instant::now();
    for pow in args.min_pow..=max_pow {
        eprintln!("2^{pow} ... (at {:.1} s)", start.elapsed().as_secs_f64());
        rows.push(measure(&ctx, &mut gpu, &heater, kernel_warmup_ms, pow, args)?);
    }
    print_transfers(&rows);
    print_crossover(&rows);
    summarise(&rows);
    Ok(())
}

/// Validates size 2^pow along every path, warms up, and returns the medians of `args.reps`
/// repetitions. The kernel is timed last, after `heater` kept the GPU busy.
fn measure(
    ctx: &GpuContext,
    gpu: &mut DoubleGpu,
    heater: &DoubleGpu,
    kernel_warmup_ms: u64,
    pow: u32,
    args: &Args,
) -> Result<Row, AnyError> {
    let n = 1usize << pow;
    let input = sample_input(n, pow as u64);
    let expected = double_cpu(&input);
    let mut out = vec![0.0f32; n];

    // Validate every GPU path before timing anything: separate phases, and the round trip.
    for path in Path::ALL {
        let name = path.name();
        gpu.poison_output(ctx);
        gpu.upload(ctx, path, &input)?;
        gpu.run(ctx)?;
        gpu.download(ctx, path, &mut out)?;
        common::check_close(&out, &expected, 0.0, 0.0)
            .map_err(|e| format!("2^{pow}: GPU ({name}, separate phases) is wrong: {e}"))?;
        gpu.poison_output(ctx);
        out.fill(0.0);
        gpu.round_trip(ctx, path, &input, &mut out)?;
        common::check_close(&out, &expected, 0.0, 0.0)
            .map_err(|e| format!("2^{pow}: GPU ({name}, round trip) is wrong: {e}"))?;
    }
    gpu.poison_output(ctx);
    common::check_close(&gpu.round_trip_mapped(ctx, &input)?, &expected, 0.0, 0.0)
        .map_err(|e| format!("2^{pow}: GPU (mapped round trip) is wrong: {e}"))?;

    // The CPU finishes 2^10 floats in well under a microsecond, too short to time one call:
    // each CPU sample averages enough calls to cover about 2^20 elements.
    let cpu_calls = ((1usize << 20) / n).max(1);
    let mut cpu_out = vec![0.0f32; n];
    let mut samples: [Vec<f64>; 9] = Default::default();
    let timed = |f: &mut dyn FnMut() -> Result<(), GpuError>| -> Result<f64, GpuError> {
        let start = Instant::now();
        f()?;
        Ok(start.elapsed().as_secs_f64())
    };
    for rep in 0..args.warmup + args.reps {
        let start = Instant::now();
        for _ in 0..cpu_calls {
            double_cpu_into(black_box(&input), black_box(&mut cpu_out));
        }
        let cpu = start.elapsed().as_secs_f64() / cpu_calls as f64;

        let up1 = timed(&mut || gpu.upload(ctx, Path::Simple, &input))?;
        let up2 = timed(&mut || gpu.upload(ctx, Path::Fast, &input))?;
        let down1 = timed(&mut || gpu.download(ctx, Path::Simple, &mut out))?;
        let down2 = timed(&mut || gpu.download(ctx, Path::Fast, &mut out))?;
        let down3 = timed(&mut || gpu.download_mapped(ctx).map(drop))?;
        let rt1 = timed(&mut || gpu.round_trip(ctx, Path::Simple, &input, &mut out))?;
        let rt2 = timed(&mut || gpu.round_trip(ctx, Path::Fast, &input, &mut out))?;
        let rt3 = timed(&mut || gpu.round_trip_mapped(ctx, &input).map(drop))?;

        if rep >= args.warmup {
            for (s, v) in samples.iter_mut().zip([cpu, up1, up2, down1, down2, down3, rt1, rt2, rt3]) {
                s.push(v);
            }
        }
    }
    // The kernel alone, one dispatch at a time, with the GPU at the clock sustained work gets.
    warm_up(ctx, heater, kernel_warmup_ms)?;
    let mut kernels = (0..args.reps).map(|_| gpu.run(ctx)).collect::<Result<Vec<f64>, GpuError>>()?;
    let kernel = median(&mut kernels);
    // The timed results must still be right (and this keeps the CPU loop from being skipped).
    common::check_close(&cpu_out, &expected, 0.0, 0.0).map_err(|e| format!("2^{pow}: CPU result changed: {e}"))?;
    common::check_close(&out, &expected, 0.0, 0.0).map_err(|e| format!("2^{pow}: GPU result changed: {e}"))?;
    let [cpu, up1, up2, down1, down2, down3, rt1, rt2, rt3] = samples.map(|mut s| median(&mut s));
    Ok(Row {
        pow,
        n,
        cpu,
        upload: [up1, up2],
        kernel,
        download: [down1, down2, down3],
        round_trip: [rt1, rt2, rt3],
    })
}

/// Keeps the GPU busy with back-to-back doublings for at least `ms` milliseconds (whole passes of
/// 16 dispatches), so the kernels that follow run at the clock a busy program gets.
fn warm_up(ctx: &GpuContext, gpu: &DoubleGpu, ms: u64) -> Result<(), GpuError> {
    let start = Instant::now();
    while start.elapsed().as_secs_f64() * 1e3 < ms as f64 {
        ctx.submit_pass("warm-up", |pass| {
            for _ in 0..16 {
                gpu.record(pass);
            }
        });
        ctx.wait()?;
    }
    Ok(())
}

/// The transfer rates: GB/s of the 4n bytes each way, per path.
fn print_transfers(rows: &[Row]) {
    println!();
    println!("transfers, GB/s (4 bytes per element each way; 1 simple, 2 fast, 3 mapped):");
    println!(
        "{:>5} {:>9} | {:>9} {:>9} | {:>9} {:>9} {:>9}",
        "size", "bytes", "up 1", "up 2", "down 1", "down 2", "down 3"
    );
    println!("{}", "-".repeat(70));
    for r in rows {
        let gbs = |seconds: f64| 4.0 * r.n as f64 / seconds / 1e9;
        println!(
            "{:>5} {:>9} | {:>9.2} {:>9.2} | {:>9.2} {:>9.2} {:>9.2}",
            format!("2^{}", r.pow),
            bytes(4 * r.n as u64),
            gbs(r.upload[0]),
            gbs(r.upload[1]),
            gbs(r.download[0]),
            gbs(r.download[1]),
            gbs(r.download[2]),
        );
    }
}

/// The CPU against the kernel alone and against each path's round trip.
fn print_crossover(rows: &[Row]) {
    println!();
    println!("who wins: the CPU against the kernel alone, and against the round trip along each path");
    println!("(GB/s = 8 bytes per element / time: one f32 read, one written)");
    println!(
        "{:>5} | {:>9} {:>7} | {:>9} {:>7} | {:>10} {:>10} {:>10} | {:>10} {:>10} {:>10} {:>10}",
        "size", "CPU", "GB/s", "kernel", "GB/s", "rt 1", "rt 2", "rt 3", "kernel", "with 1", "with 2", "with 3"
    );
    println!("{}", "-".repeat(128));
    for r in rows {
        let gbs = |seconds: f64| (BYTES_PER_ELEMENT * r.n as u64) as f64 / seconds / 1e9;
        println!(
            "{:>5} | {:>9} {:>7.2} | {:>9} {:>7.1} | {:>10} {:>10} {:>10} | {:>10} {:>10} {:>10} {:>10}",
            format!("2^{}", r.pow),
            fmt_time(r.cpu),
            gbs(r.cpu),
            fmt_time(r.kernel),
            gbs(r.kernel),
            fmt_time(r.round_trip[0]),
            fmt_time(r.round_trip[1]),
            fmt_time(r.round_trip[2]),
            winner(r.cpu, r.kernel),
            winner(r.cpu, r.round_trip[0]),
            winner(r.cpu, r.round_trip[1]),
            winner(r.cpu, r.round_trip[2]),
        );
    }
}

/// The crossover lines, and the transfer rates at the largest size.
fn summarise(rows: &[Row]) {
    let Some(last) = rows.last() else { return };
    println!();
    let until = format!("no size (up to 2^{})", last.pow);
    let first_win = |gpu_time: &dyn Fn(&Row) -> f64| {
        rows.iter().find(|r| gpu_time(r) < r.cpu).map_or_else(|| until.clone(), |r| format!("2^{}", r.pow))
    };
    println!("kernel only:             the GPU first wins at {}", first_win(&|r| r.kernel));
    for path in Path::ALL {
        let i = path as usize - 1;
        println!(
            "with transfers, path {} ({:<6}): the GPU first wins at {}",
            path as usize,
            path.name(),
            first_win(&|r| r.round_trip[i])
        );
    }
    let gbs = |seconds: f64| 4.0 * last.n as f64 / seconds / 1e9;
    println!(
        "transfers at 2^{} ({} each way): upload {:.2} GB/s simple, {:.2} fast; download {:.2} simple, {:.2} fast, {:.2} mapped",
        last.pow,
        self::bytes(4 * last.n as u64),
        gbs(last.upload[0]),
        gbs(last.upload[1]),
        gbs(last.download[0]),
        gbs(last.download[1]),
        gbs(last.download[2]),
    );
}

/// "GPU 3.1x" when the GPU time is shorter than the CPU time, else "CPU 2.0x".
fn winner(cpu: f64, gpu: f64) -> String {
    if gpu < cpu { format!("GPU {:.1}x", cpu / gpu) } else { format!("CPU {:.1}x", gpu / cpu) }
}

fn bytes(b: u64) -> String {
    match b {
        b if b >= 1 << 30 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
