//! `cargo run --release -p double --bin dispatch_timing`: why one timed dispatch can take several
//! times longer than the same dispatch back to back.
//!
//! Times the doubling kernel (2^26 floats by default) with GPU timestamps at the start and end of
//! each compute pass, in the situations a program meets, in this order:
//!
//! - A: the first dispatches on freshly made buffers, right after start-up (cold GPU);
//! - B: the same dispatch, 32 times in one submission, each its own timestamped pass, after the
//!   GPU idled 1 s: how the time per dispatch changes while the GPU is kept busy;
//! - C: single dispatches (submit, wait) right after `--warm-ms` of back-to-back work;
//! - D: a single dispatch after the GPU idled 1 .. 1000 ms, following a warm-up (3 times each);
//! - E: B again right after a warm-up, and 64 dispatches in one pass (the benchmarks' way);
//! - F: new buffers made after a warm-up: their first dispatches (first touch with warm clocks),
//!   once with the output never written before and once with it written first.
//!
//! Each line starts with the seconds since start, to line up with a clock log such as
//! `nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem --format=csv -lms 20`; the start is
//! printed as Unix time. The output is checked against the CPU at the end.

use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use common::{GpuContext, GpuError, median, wgpu};
use double::{BYTES_PER_ELEMENT, DoubleGpu, Path, double_cpu, sample_input};

#[derive(Parser, Debug)]
#[command(about = "Time one doubling dispatch cold, warm, after idling, and back to back (GPU timestamps).")]
struct Args {
    /// Size as a power of two: 2^POW floats.
    #[arg(long, default_value_t = 26, value_parser = clap::value_parser!(u32).range(10..=29))]
    pow: u32,
    /// Milliseconds of back-to-back dispatches that count as a warm-up.
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    warm_ms: u64,
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

/// Times up to `MAX_PASSES` compute passes recorded into one submission, each with its own pair of
/// timestamps.
struct PassTimer {
    set: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    period_ns: f64,
}

const MAX_PASSES: u32 = 64;

impl PassTimer {
    fn new(ctx: &GpuContext) -> Result<Self, GpuError> {
        if !ctx.has_timestamps() {
            return Err(GpuError::MissingFeature("timestamp queries"));
        }
        let set = ctx.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("per-pass timestamps"),
            ty: wgpu::QueryType::Timestamp,
            count: 2 * MAX_PASSES,
        });
        let resolve = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("per-pass resolve"),
            size: 16 * MAX_PASSES as u64,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        Ok(Self { set, resolve, period_ns: ctx.queue.get_timestamp_period() as f64 })
    }

    /// `passes` passes of `per_pass` dispatches each, in one submission; waits; the seconds each
    /// pass took.
    fn time(&self, ctx: &GpuContext, gpu: &DoubleGpu, passes: u32, per_pass: u32) -> Result<Vec<f64>, GpuError> {
        let passes = passes.clamp(1, MAX_PASSES);
        let mut encoder = ctx.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("timed") });
        for p in 0..passes {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("double"),
                timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                    query_set: &self.set,
                    beginning_of_pass_write_index: Some(2 * p),
                    end_of_pass_write_index: Some(2 * p + 1),
                }),
            });
            for _ in 0..per_pass {
                gpu.record(&mut pass);
            }
        }
        encoder.resolve_query_set(&self.set, 0..2 * passes, &self.resolve, 0);
        ctx.queue.submit([encoder.finish()]);
        ctx.wait()?;
        let ticks: Vec<u64> = ctx.read(&self.resolve, 2 * passes as usize)?;
        Ok(ticks.chunks(2).map(|t| t[1].saturating_sub(t[0]) as f64 * self.period_ns * 1e-9).collect())
    }

    /// One pass with one dispatch, submitted and waited for alone.
    fn single(&self, ctx: &GpuContext, gpu: &DoubleGpu) -> Result<f64, GpuError> {
        Ok(self.time(ctx, gpu, 1, 1)?[0])
    }

    /// Back-to-back submissions of 16 passes for at least `ms` milliseconds.
    fn warm_up(&self, ctx: &GpuContext, gpu: &DoubleGpu, ms: u64) -> Result<(), GpuError> {
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(ms) {
            self.time(ctx, gpu, 16, 1)?;
        }
        Ok(())
    }
}

fn run(args: &Args) -> Result<(), AnyError> {
    let start = Instant::now();
    let unix = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs_f64();
    let ctx = GpuContext::new()?;
    ctx.print_banner();
    let n = 1usize << args.pow;
    let bytes = BYTES_PER_ELEMENT * n as u64;
    let timer = PassTimer::new(&ctx)?;
    println!("dispatch_timing: the doubling kernel on 2^{} floats ({} MiB in, {} MiB out)", args.pow, n >> 18, n >> 18);
    println!("gpu: {}", ctx.adapter_line());
    println!("start: Unix time {unix:.3} s; each line: seconds since start, then the pass times by GPU timestamps");
    println!("warm-up = back-to-back submissions of 16 timestamped passes for {} ms", args.warm_ms);
    let at = || format!("{:>7.3}s", start.elapsed().as_secs_f64());
    let show = |t: f64| format!("{:.1} µs ({:.0} GB/s)", t * 1e6, bytes as f64 / t / 1e9);
    let list = |ts: &[f64]| ts.iter().map(|t| format!("{:.0}", t * 1e6)).collect::<Vec<_>>().join(" ");

    let input = sample_input(n, 1);
    let mut gpu = DoubleGpu::new(&ctx, n)?;
    gpu.upload(&ctx, Path::Simple, &input)?;
    println!();
    println!("{} A  first dispatch on new buffers, cold: {}", at(), show(timer.single(&ctx, &gpu)?));
    println!("{} A  second dispatch, right after:       {}", at(), show(timer.single(&ctx, &gpu)?));
    let singles: Vec<f64> = (0..5).map(|_| timer.single(&ctx, &gpu)).collect::<Result<_, _>>()?;
    println!("{} A  5 more single dispatches (µs):      {}", at(), list(&singles));

    std::thread::sleep(Duration::from_secs(1));
    let stream = timer.time(&ctx, &gpu, 32, 1)?;
    println!("{} B  after 1 s idle, 32 passes in one submission (µs): {}", at(), list(&stream));

    timer.warm_up(&ctx, &gpu, args.warm_ms)?;
    let singles: Vec<f64> = (0..5).map(|_| timer.single(&ctx, &gpu)).collect::<Result<_, _>>()?;
    println!("{} C  right after a warm-up, 5 single dispatches (µs): {}", at(), list(&singles));

    for idle_ms in [1u64, 3, 10, 30, 100, 300, 1000] {
        let mut times = Vec::new();
        for _ in 0..3 {
            timer.warm_up(&ctx, &gpu, 100)?;
            std::thread::sleep(Duration::from_millis(idle_ms));
            times.push(timer.single(&ctx, &gpu)?);
        }
        let m = median(&mut times.clone());
        println!("{} D  warm, then idle {idle_ms:>4} ms, one dispatch: {} (3 runs, µs: {})", at(), show(m), list(&times));
    }

    timer.warm_up(&ctx, &gpu, args.warm_ms)?;
    let stream = timer.time(&ctx, &gpu, 32, 1)?;
    println!("{} E  right after a warm-up, 32 passes in one submission (µs): {}", at(), list(&stream));
    let one_pass = timer.time(&ctx, &gpu, 1, 64)?[0] / 64.0;
    println!("{} E  64 dispatches in one pass, per dispatch: {}", at(), show(one_pass));

    for written in [false, true] {
        let mut fresh = DoubleGpu::new(&ctx, n)?;
        fresh.upload(&ctx, Path::Simple, &input)?;
        if written {
            fresh.poison_output(&ctx);
            ctx.queue.submit([]);
            ctx.wait()?;
        }
        timer.warm_up(&ctx, &gpu, args.warm_ms)?;
        let first = timer.single(&ctx, &fresh)?;
        let second = timer.single(&ctx, &fresh)?;
        let what = if written { "output written first" } else { "output never written" };
        println!("{} F  new buffers after a warm-up ({what}): first {}, second {}", at(), show(first), show(second));
    }

    let mut out = vec![0.0f32; n];
    gpu.download(&ctx, Path::Simple, &mut out)?;
    common::check_close(&out, &double_cpu(&input), 0.0, 0.0).map_err(|e| format!("the kernel's output is wrong: {e}"))?;
    println!("{} output checked against the CPU: exact", at());
    Ok(())
}
