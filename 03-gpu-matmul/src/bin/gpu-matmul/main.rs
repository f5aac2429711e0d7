//! The stage 03 runner: validates every matmul kernel against the CPU, then times it.
//!
//! ```text
//! cargo run --release -p gpu-matmul                         # every kernel, default sizes
//! cargo run --release -p gpu-matmul -- 5 6 --sizes 4096     # kernels 5 and 6 at n = 4096
//! cargo run --release -p gpu-matmul -- --sizes 1024,2048,4096 --transposes
//! cargo run --release -p gpu-matmul -- --tune --sizes 4096  # every candidate tile, one table
//! cargo run --release -p gpu-matmul -- 7 8 --tune --transposes --sizes 4096,8192  # the sweep
//! cargo run --release -p gpu-matmul -- 5 8 --compiled      # registers, spills... per tile
//! ```
//!
//! `0` on the command line is the CPU reference (stage 02's best matmul). On a GPU the runner first times two probes
//! that only compute from registers (`gpu_matmul::PeakProbe`): the f32 FMA rate and the
//! cooperative-matrix rate through WGSL, the ceilings the kernels are measured against. For
//! each size it computes an f64 CPU reference (the whole product when it is cheap, otherwise
//! a sample of rows, and it says which), checks each kernel's result against it with the
//! kernel's tolerance, and only then times it: "kernel" is the median over passes of
//! back-to-back dispatches, timed by GPU timestamps after a warm-up (a GPU raises its clocks
//! under load), divided by the dispatches per pass; "end to end" is the wall-clock median of
//! upload A and B + kernel + download C. Each figure is also given as a share of cuBLAS on the
//! same GPU (FP32 for f32 kernels, FP16 inputs with FP32 accumulation for kernels 06 and 08),
//! read from the output of `reference/pytorch_matmul.py` (`--cublas`), and of the probe's
//! ceiling. Then it times the small products stage 04 runs, and kernels 03-05 compiled with
//! and without naga's runtime checks. `--csv FILE` also writes every figure of the main
//! tables, the probes and cuBLAS as one CSV row each (`csv.rs`), for the book's tables.
//!
//! The files, from the bottom up: `cli.rs` (the flags), `operands.rs` (operands and the f64
//! reference), `cublas.rs` (the cuBLAS figures), `tables.rs` (rows and printed tables),
//! `csv.rs` (`--csv`), `timing.rs` (check, then time), `probes.rs` (the ceilings), `tune.rs`
//! (`--tune`), `studies.rs` (the MNIST shapes and the checks study), `compiled.rs`
//! (`--compiled`). This file runs them in order.

mod cli;
mod compiled;
mod csv;
mod cublas;
mod operands;
mod probes;
mod studies;
mod tables;
mod timing;
mod tune;

use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use common::{GpuContext, GpuTimer};
use gpu_matmul::{Kernel, Matmul, coop_support, formula};

use crate::cli::Args;
use crate::csv::Csv;
use crate::operands::Operands;
use crate::tables::{Yardsticks, print_table};
use crate::timing::{Bench, TIMING_BUDGET_S, WARM_UP_S};

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let ctx = GpuContext::new()?;
    ctx.print_banner();
    let software = ctx.is_software();
    let sizes = args.sizes(software);
    // Refuse sizes this device cannot hold before making any operand or CPU reference (a
    // typo such as `--sizes 1000000` would otherwise run out of host memory first).
    for &(m, k, n) in &sizes {
        for (name, rows, cols) in [("A", m, k), ("B", k, n), ("C", m, n)] {
            let bytes = rows.checked_mul(cols).and_then(|e| e.checked_mul(4)).map_or(u64::MAX, |b| b as u64);
            ctx.check_storage_size(&format!("--sizes {m}x{k}x{n}: {name} ({rows} x {cols} f32)"), bytes)?;
        }
    }
    let reps = args.reps(software);
    let (kernels, want_cpu) = args.kernels()?;
    let transposes = args.transposes();

    let cublas = cublas::load_cublas(&ctx, args.cublas.as_deref())?;
    let mut usable = Vec::new();
    for k in kernels {
        match coop_support(&ctx) {
            Err(why) if k.needs_cooperative_matrix() => println!("kernel {k}: skipped: {why}"),
            _ => usable.push(k),
        }
    }
    if let Some(settings) = &args.compiled {
        return compiled::compiled(&ctx, &settings.0, &usable, args.tune, transposes, args.compiled_out.as_deref());
    }
    let mut csv = args.csv.as_deref().map(|path| Csv::create(path, &ctx.info.name)).transpose()?;
    if let (Some(csv), Some(cublas)) = (&mut csv, &cublas) {
        csv.cublas(cublas)?;
    }
    println!(
        "timing: {}; kernel = median of up to {reps} passes (about {TIMING_BUDGET_S} s in all; one where a single run takes that long) \
         of back-to-back dispatches (~1 ms each on a GPU), after {} warm-up passes{}; end to end = wall-clock median of up to 5 runs \
         (about {TIMING_BUDGET_S} s) of upload A, B + kernel + download C",
        GpuTimer::new(&ctx).source(),
        args.warmup,
        if software { String::new() } else { format!(" and at least {WARM_UP_S} s of warm-up") }
    );
    let bench = Bench { ctx: &ctx, timer: GpuTimer::new(&ctx), reps, warmup: args.warmup };
    let mut yard = Yardsticks::default();
    if !args.no_probe && !software {
        let ceilings = probes::probes(&bench)?;
        (yard.peak_f32, yard.peak_f16) = probes::peaks(&ceilings);
        if let Some(csv) = &mut csv {
            csv.ceilings(&ceilings)?;
        }
    }

    if args.tune {
        return tune::tune(&bench, &usable, &sizes, transposes, args.checks, &yard, cublas.as_ref());
    }
    if let Some(c) = args.checks {
        println!("every kernel compiled with: {c}");
    }
    let matmuls: Vec<Matmul> =
        usable.iter().map(|&k| Matmul::with_options(&ctx, k, k.tile_ladder(), args.checks)).collect::<Result<_, _>>()?;
    for &(m, k, n) in &sizes {
        let size_started = Instant::now();
        for &t in transposes {
            let started = Instant::now();
            let flop = 2.0 * (m * k * n) as f64;
            let ops = Operands::new(&ctx, (m, k, n), t, 42)?;
            let yard = yard.with_cublas(cublas.as_ref(), (m, k, n), t);
            println!("\n{} with m = {m}, k = {k}, n = {n} ({:.2} GFLOP); check: {}", formula(t), flop / 1e9, ops.reference.describe());
            let mut rows = Vec::new();
            if want_cpu {
                rows.push(bench.cpu(&ops, flop)?);
            }
            for mm in &matmuls {
                rows.extend(bench.gpu(mm, &ops)?);
            }
            print_table(flop, &rows, &yard);
            if let Some(csv) = &mut csv {
                csv.table(&rows, flop, (m, k, n), t, &yard)?;
            }
            println!("  ({:.1} s for this table)", started.elapsed().as_secs_f64());
        }
        println!("(m = {m}, k = {k}, n = {n}: {:.1} s in all)", size_started.elapsed().as_secs_f64());
    }
    if !args.no_mnist {
        studies::mnist_shapes(&bench, &matmuls)?;
    }
    if !args.no_checks_study {
        let study: Vec<Kernel> = usable.iter().copied().filter(|k| (3..=5).contains(&k.number())).collect();
        let largest = sizes.iter().copied().max_by_key(|&(m, k, n)| m * k * n).expect("at least one size");
        // Capped at 2048: with every check on, kernel 03 runs at a few hundred GFLOP/s.
        let (m, k, n) = (largest.0.min(2048), largest.1.min(2048), largest.2.min(2048));
        studies::checks_study(&bench, &study, (m, k, n))?;
    }
    Ok(())
}
