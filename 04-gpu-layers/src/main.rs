//! `cargo run --release -p gpu-layers`: train small networks on the GPU and on the CPU side by
//! side, with the same starting weights and the same batches, and watch both losses fall.
//!
//! 1. XOR (4 points, 2-8-2 ReLU, Adam): the smallest problem a linear model cannot solve.
//! 2. Two spirals (2-D points on two interleaved spirals, 2-32-32-2 tanh, Adam, batches of 64
//!    with a smaller last batch each epoch).
//! 3. XOR with the original devlog's loss: sigmoid outputs and mean squared error
//!    (2-8-tanh-2-sigmoid, composed tapes on the GPU: the fused kernels do softmax-CE).
//!
//! `--bench` then times a training step of the MNIST shape (784-128-10 ReLU, batch 64, SGD with
//! momentum; 938 steps = one epoch recorded into ONE compute pass) with the fused and the
//! composed tapes: dispatches per step, GPU time per epoch and per step (timestamps), and the
//! wall clock of record + submit + wait; then the same network with a dropout layer, which only
//! the composed tapes run. Random data stands in for MNIST: the timing does not depend on the
//! values. Stage 05 adds one gather dispatch per step.

use std::f32::consts::PI;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use clap::Parser;
use common::GpuContext;
use cpu_matrix::Matrix;
use gpu_layers::{Activation, CpuTrainer, Fusion, GpuTrainer, Kernels, LayersError, Loss, Metrics, Network, NetworkSpec, Optimizer};
use rand::SeedableRng;
use rand::seq::SliceRandom;

use crate::args::{AnyError, Args};
use crate::bench::bench;

mod args;
mod bench;
mod sweep;

fn main() -> ExitCode {
    let args = Args::parse();
    println!("gpu-layers: layers, losses and optimizers on the GPU, checked against the CPU");
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<(), AnyError> {
    let ctx = GpuContext::with_gpu_limits(&args.gpu_limits)?;
    ctx.print_banner();
    if let Some(line) = args.gpu_limits.banner(&ctx.limits) {
        eprintln!("{line}");
    }
    let kernels = Kernels::new();
    if let Some(settings) = &args.compiled {
        return compiled(&ctx, &settings.0);
    }
    if args.sweep {
        return sweep::sweep(&ctx, args);
    }
    if !args.bench_only {
        xor(&ctx, &kernels, args.xor_steps as usize)?;
        spirals(&ctx, &kernels, args.spiral_epochs as usize, args.spiral_points as usize)?;
        xor_mse(&ctx, &kernels, args.xor_steps as usize)?;
    }
    if args.bench || args.bench_only {
        bench(&ctx, args)?;
    }
    Ok(())
}

/// `--compiled`: what the driver made of each kernel (`common::compiled`): the default tiles,
/// those of big batches and of 784-512-256-10 at batch 64, then each variant of `--sweep`, a
/// kernel shown again only where its source differs from the default's.
fn compiled(ctx: &GpuContext, settings: &[common::compiled::Robustness]) -> Result<(), AnyError> {
    use gpu_layers::{FusedTiles, KernelId, DeviceFit};
    if ctx.info.backend != common::wgpu::Backend::Vulkan {
        return Err(format!("--compiled reads Vulkan's pipeline statistics; {} is not a Vulkan adapter", ctx.adapter_line()).into());
    }
    let fit = DeviceFit::for_limits(&ctx.limits);
    let deep = FusedTiles::for_network(64, &[(784, 512), (512, 256), (256, 10)]);
    let mut sets = vec![
        ("default".to_string(), FusedTiles::DEFAULT),
        ("big batches".to_string(), FusedTiles::for_batch(256)),
        ("784-512-256-10".to_string(), deep),
    ];
    sets.extend(gpu_layers::sweep_variants().into_iter().filter(|(what, _)| what != "default"));
    let defaults: Vec<String> = KernelId::ALL.iter().map(|id| id.source(&FusedTiles::DEFAULT, fit)).collect();
    let mut sources = Vec::new();
    for (tiles_name, tiles) in &sets {
        for (id, default) in KernelId::ALL.iter().zip(&defaults) {
            let wgsl = id.source(tiles, fit);
            if tiles_name == "default" || wgsl != *default {
                sources.push((format!("{:<33} | {tiles_name:<24}", id.name()), wgsl));
            }
        }
    }
    Ok(common::compiled::report(&ctx.info.name, settings, sources, None)?)
}

/// One GPU trainer and one CPU trainer with the same seed: same starting weights.
fn pair(
    ctx: &GpuContext,
    kernels: &Arc<Kernels>,
    spec: &NetworkSpec,
    opt: Optimizer,
    max_batch: usize,
) -> Result<(GpuTrainer, CpuTrainer), LayersError> {
    let seed = 42;
    let gpu = GpuTrainer::with_options(ctx, kernels, spec, opt, max_batch, seed, Fusion::Fused)?;
    let cpu = CpuTrainer::new(spec, opt, max_batch, seed)?;
    Ok((gpu, cpu))
}

fn header(title: &str, spec: &NetworkSpec, opt: Optimizer, gpu: &GpuTrainer, unit: &str) {
    println!();
    println!("== {title}: {}, {}", spec.describe(), opt.describe());
    println!(
        "   GPU: {} dispatches per step, {} buffers and {} bind groups ({:.1} KiB) allocated once",
        gpu.dispatches_per_step(),
        gpu.allocations().buffers,
        gpu.allocations().bind_groups,
        gpu.allocations().bytes as f64 / 1024.0
    );
    println!("{unit:>7} | {:>10} {:>10} | {:>8} {:>8}", "GPU loss", "CPU loss", "GPU acc", "CPU acc");
}

fn row(at: usize, g: Metrics, c: Metrics) {
    println!(
        "{at:>7} | {:>10.6} {:>10.6} | {:>7.1}% {:>7.1}%",
        g.mean_loss(),
        c.mean_loss(),
        100.0 * g.accuracy(),
        100.0 * c.accuracy()
    );
}

fn xor(ctx: &GpuContext, kernels: &Arc<Kernels>, steps: usize) -> Result<(), AnyError> {
    let (gpu, cpu, x) = train_xor(ctx, kernels, "XOR", &NetworkSpec::new(2, &[8], 2)?, steps)?;
    let probs = gpu.predict_probs(ctx, &x)?;
    let answers: Vec<String> = probs.data.chunks(2).map(|p| format!("{:.3}", p[1])).collect();
    println!("   P(xor = 1) on the GPU for 00, 01, 10, 11: {}", answers.join(", "));
    print_difference(ctx, &gpu, &cpu)
}

/// XOR again, the way the original devlog trained it: sigmoid outputs and mean squared error
/// (`2-8-tanh-2-sigmoid`, MSE against the one-hot label). The fused kernels compute softmax
/// cross-entropy, so this network runs the composed tapes on the GPU.
fn xor_mse(ctx: &GpuContext, kernels: &Arc<Kernels>, steps: usize) -> Result<(), AnyError> {
    let spec = NetworkSpec::parse("2-8-tanh-2-sigmoid", Loss::Mse)?;
    let (gpu, cpu, x) = train_xor(ctx, kernels, "XOR with MSE", &spec, steps)?;
    let out = gpu.predict_probs(ctx, &x)?;
    let answers: Vec<String> = out.data.chunks(2).map(|p| format!("({:.3}, {:.3})", p[0], p[1])).collect();
    println!("   sigmoid outputs on the GPU for 00, 01, 10, 11: {}", answers.join(", "));
    print_difference(ctx, &gpu, &cpu)
}

/// Trains `spec` on XOR's four points (Adam, one batch of 4) for `steps` steps on both devices,
/// printing both losses ten times; returns the two trainers and the points.
fn train_xor(
    ctx: &GpuContext,
    kernels: &Arc<Kernels>,
    title: &str,
    spec: &NetworkSpec,
    steps: usize,
) -> Result<(GpuTrainer, CpuTrainer, Matrix), AnyError> {
    let opt = Optimizer::adam(0.05);
    let (gpu, mut cpu) = pair(ctx, kernels, spec, opt, 4)?;
    let x = Matrix::new(4, 2, vec![0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0])?;
    let labels = [0u8, 1, 1, 0];
    header(title, spec, opt, &gpu, "step");
    if let Some(why) = Network::fused_blocker(spec) {
        println!("   composed tapes: {why}");
    }
    gpu.write_batch(ctx, &x, &labels)?;
    let every = (steps / 10).max(1);
    for step in 1..=steps {
        gpu.train_steps(ctx, 1)?;
        cpu.train_step(&x, &labels)?;
        if step % every == 0 || step == 1 {
            // The loss of the batch just trained on (before this step's update).
            row(step, gpu.take_metrics(ctx)?, cpu.take_metrics()?);
        }
    }
    gpu.take_metrics(ctx)?;
    Ok((gpu, cpu, x))
}

/// Prints how far apart the two devices' parameters ended up.
fn print_difference(ctx: &GpuContext, gpu: &GpuTrainer, cpu: &CpuTrainer) -> Result<(), AnyError> {
    let (g, c) = (gpu.parameters(ctx)?, cpu.parameters());
    let most = g.iter().zip(&c).flat_map(|(a, b)| a.data.iter().zip(&b.data).map(|(x, y)| (x - y).abs())).fold(0.0, f32::max);
    println!("   largest |GPU - CPU| parameter difference: {most:.2e}");
    Ok(())
}

/// `points` per arm: arm k at angle t + k*pi, radius growing with t (up to 3), plus a little
/// noise. Coordinates of a few units keep tanh units out of their flat tails at the start.
fn two_spirals(points: usize, seed: u64) -> (Matrix, Vec<u8>) {
    use rand::Rng;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut data = Vec::with_capacity(4 * points);
    let mut labels = Vec::with_capacity(2 * points);
    for arm in 0..2u8 {
        for i in 0..points {
            let t = 0.25 + 3.0 * PI * i as f32 / points as f32; // one and a half turns
            let r = t / PI;
            let angle = t + arm as f32 * PI;
            data.push(r * angle.cos() + rng.random_range(-0.06..0.06));
            data.push(r * angle.sin() + rng.random_range(-0.06..0.06));
            labels.push(arm);
        }
    }
    (Matrix { rows: 2 * points, cols: 2, data }, labels)
}

fn spirals(ctx: &GpuContext, kernels: &Arc<Kernels>, epochs: usize, points: usize) -> Result<(), AnyError> {
    let spec = NetworkSpec::new(2, &[32, 32], 2)?.with_activation(Activation::Tanh);
    let opt = Optimizer::adam(0.03);
    let batch = 64;
    let (gpu, mut cpu) = pair(ctx, kernels, &spec, opt, batch)?;
    let (x, labels) = two_spirals(points, 7);
    let n = x.rows;
    header(
        &format!("two spirals, {n} points, batches of {batch} (last one {})", if n % batch == 0 { batch } else { n % batch }),
        &spec,
        opt,
        &gpu,
        "epoch",
    );
    let mut order: Vec<usize> = (0..n).collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let every = (epochs / 10).max(1);
    let start = Instant::now();
    for epoch in 1..=epochs {
        order.shuffle(&mut rng);
        for chunk in order.chunks(batch) {
            let xb = Matrix { rows: chunk.len(), cols: 2, data: chunk.iter().flat_map(|&i| [x.data[2 * i], x.data[2 * i + 1]]).collect() };
            let lb: Vec<u8> = chunk.iter().map(|&i| labels[i]).collect();
            // A smaller last batch only changes the batch uniform: no new buffers.
            gpu.write_batch(ctx, &xb, &lb)?;
            gpu.train_steps(ctx, 1)?;
            cpu.train_step(&xb, &lb)?;
        }
        let (g, c) = (gpu.take_metrics(ctx)?, cpu.take_metrics()?);
        if epoch % every == 0 || epoch == 1 {
            row(epoch, g, c);
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let g = gpu.predict_probs(ctx, &x)?;
    let c = cpu.predict_probs(&x)?;
    let accuracy = |p: &Matrix| p.data.chunks(2).zip(&labels).filter(|(p, l)| (p[1] > p[0]) == (**l == 1)).count() as f64 / n as f64;
    println!(
        "   final accuracy over all points: GPU {:.1}%, CPU {:.1}% ({seconds:.1} s for both, one submit per step)",
        100.0 * accuracy(&g),
        100.0 * accuracy(&c)
    );
    print_difference(ctx, &gpu, &cpu)
}

