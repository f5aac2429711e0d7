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
use common::{GpuContext, GpuTimer, median};
use cpu_matrix::Matrix;
use gpu_layers::{
    Activation, ByteImages, CpuTrainer, Fusion, FusedTiles, GatherSlot, GpuTrainer, Kernels, LayersError, Loss, Metrics, Network,
    NetworkSpec, Optimizer, Precision,
};
use rand::SeedableRng;
use rand::seq::SliceRandom;

#[derive(Parser, Debug)]
#[command(about = "Train XOR and two spirals on the GPU and the CPU side by side; --bench times the MNIST-shaped step.")]
struct Args {
    /// Training steps for XOR.
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    xor_steps: u32,
    /// Epochs over the spirals.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    spiral_epochs: u32,
    /// Points per spiral arm.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(2..=1_000_000))]
    spiral_points: u32,
    /// Also time the MNIST-shaped training step (784-HIDDEN-10, batch BATCH, STEPS per pass).
    #[arg(long)]
    bench: bool,
    /// Only the benchmark (skip XOR and the spirals).
    #[arg(long)]
    bench_only: bool,
    /// Time each fused kernel with other tile sizes, one change at a time, the dispatch floor,
    /// and each dispatch inside a step (skips XOR and the spirals).
    #[arg(long)]
    sweep: bool,
    /// With --sweep: time only the default and the variants whose name contains one of these
    /// comma-separated words (`--variants "k splits,update B"`), and skip the in-step
    /// timestamps and the wide-layer grid.
    #[arg(long, value_delimiter = ',')]
    variants: Vec<String>,
    /// With --sweep: only the wide-layer grid (widths 128-2048, batches 64-1024, each way of
    /// running the hidden layer).
    #[arg(long)]
    grid: bool,
    /// Steps recorded into one pass for --bench (938 = one MNIST epoch at batch 64).
    #[arg(long, default_value_t = 938, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    steps: u32,
    /// Batch size for --bench.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    batch: u32,
    /// Hidden widths for --bench, comma-separated (`512,256`: two hidden layers); --sweep takes one.
    #[arg(long, default_value = "128", value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=65_536))]
    hidden: Vec<u32>,
    /// The precision of the wide layers' products for --bench and --sweep: `f16-inputs` runs a
    /// forward split over k on the tensor cores (`linear_forward_coop`) where the adapter has
    /// cooperative matrices; --bench and --sweep then check a step against the CPU by the
    /// relative size of the whole gradient's error instead of element by element.
    #[arg(long, default_value = "f32", value_parser = ["f32", "f16-inputs"])]
    matmul: String,
    /// Timed repetitions for --bench (medians are reported).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    reps: u32,
    /// Steps per submission for the "chunked" wall-clock column of --bench: recording the next
    /// chunk overlaps the GPU running the previous one.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    chunk: u32,
    /// Print what the driver compiled each kernel into (registers, spills, workgroup memory and
    /// whatever else it reports through Vulkan's VK_KHR_pipeline_executable_properties), with
    /// the default tiles, those of big batches and those of each --sweep variant; then stop.
    /// `both` (the default) compiles each with wgpu's buffer robustness and without, `robust`
    /// and `plain` one of them.
    #[arg(long, num_args = 0..=1, default_missing_value = "both", value_name = "both|robust|plain",
          value_parser = common::compiled::Robustness::choice)]
    compiled: Option<common::compiled::Settings>,
}

mod sweep;

type AnyError = Box<dyn std::error::Error>;

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
    let ctx = GpuContext::new()?;
    ctx.print_banner();
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
/// those of big batches, then each variant of `--sweep`, a kernel shown again only where its
/// source differs from the default's.
fn compiled(ctx: &GpuContext, settings: &[common::compiled::Robustness]) -> Result<(), AnyError> {
    use gpu_layers::{FusedTiles, KernelId, DeviceFit};
    if ctx.info.backend != common::wgpu::Backend::Vulkan {
        return Err(format!("--compiled reads Vulkan's pipeline statistics; {} is not a Vulkan adapter", ctx.adapter_line()).into());
    }
    let fit = DeviceFit::for_limits(&ctx.limits);
    let mut sets = vec![("default".to_string(), FusedTiles::DEFAULT), ("big batches".to_string(), FusedTiles::for_batch(256))];
    sets.extend(gpu_layers::sweep_variants().into_iter().filter(|(what, _)| what != "default"));
    let defaults: Vec<String> = KernelId::ALL.iter().map(|id| id.source(&FusedTiles::DEFAULT, fit)).collect();
    let mut sources = Vec::new();
    for (tiles_name, tiles) in &sets {
        for (id, default) in KernelId::ALL.iter().zip(&defaults) {
            let wgsl = id.source(tiles, fit);
            if tiles_name == "default" || wgsl != *default {
                sources.push((format!("{:<26} | {tiles_name:<24}", id.name()), wgsl));
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

/// How far apart the two devices' parameters ended up.
fn max_difference(gpu: &[Matrix], cpu: &[Matrix]) -> f32 {
    gpu.iter().zip(cpu).flat_map(|(a, b)| a.data.iter().zip(&b.data).map(|(x, y)| (x - y).abs())).fold(0.0, f32::max)
}

fn xor(ctx: &GpuContext, kernels: &Arc<Kernels>, steps: usize) -> Result<(), AnyError> {
    let spec = NetworkSpec::new(2, &[8], 2)?;
    let opt = Optimizer::adam(0.05);
    let (gpu, mut cpu) = pair(ctx, kernels, &spec, opt, 4)?;
    let x = Matrix::new(4, 2, vec![0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0])?;
    let labels = [0u8, 1, 1, 0];
    header("XOR", &spec, opt, &gpu, "step");
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
    let probs = gpu.predict_probs(ctx, &x)?;
    let answers: Vec<String> = probs.data.chunks(2).map(|p| format!("{:.3}", p[1])).collect();
    println!("   P(xor = 1) on the GPU for 00, 01, 10, 11: {}", answers.join(", "));
    println!("   largest |GPU - CPU| parameter difference: {:.2e}", max_difference(&gpu.parameters(ctx)?, &cpu.parameters()));
    Ok(())
}

/// XOR again, the way the original devlog trained it: sigmoid outputs and mean squared error
/// (`2-8-tanh-2-sigmoid`, MSE against the one-hot label). The fused kernels compute softmax
/// cross-entropy, so this network runs the composed tapes on the GPU.
fn xor_mse(ctx: &GpuContext, kernels: &Arc<Kernels>, steps: usize) -> Result<(), AnyError> {
    let spec = NetworkSpec::parse("2-8-tanh-2-sigmoid", Loss::Mse)?;
    let opt = Optimizer::adam(0.05);
    let (gpu, mut cpu) = pair(ctx, kernels, &spec, opt, 4)?;
    let x = Matrix::new(4, 2, vec![0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0])?;
    let labels = [0u8, 1, 1, 0];
    header("XOR with MSE", &spec, opt, &gpu, "step");
    if let Some(why) = Network::fused_blocker(&spec) {
        println!("   composed tapes: {why}");
    }
    gpu.write_batch(ctx, &x, &labels)?;
    let every = (steps / 10).max(1);
    for step in 1..=steps {
        gpu.train_steps(ctx, 1)?;
        cpu.train_step(&x, &labels)?;
        if step % every == 0 || step == 1 {
            row(step, gpu.take_metrics(ctx)?, cpu.take_metrics()?);
        }
    }
    gpu.take_metrics(ctx)?;
    let out = gpu.predict_probs(ctx, &x)?;
    let answers: Vec<String> = out.data.chunks(2).map(|p| format!("({:.3}, {:.3})", p[0], p[1])).collect();
    println!("   sigmoid outputs on the GPU for 00, 01, 10, 11: {}", answers.join(", "));
    println!("   largest |GPU - CPU| parameter difference: {:.2e}", max_difference(&gpu.parameters(ctx)?, &cpu.parameters()));
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
    println!("   largest |GPU - CPU| parameter difference: {:.2e}", max_difference(&gpu.parameters(ctx)?, &cpu.parameters()));
    Ok(())
}

/// Times `steps` training steps recorded into one pass, for both fusions, then with dropout,
/// with the tiles a trainer of this network and batch takes (`FusedTiles::for_network`).
fn bench(ctx: &GpuContext, args: &Args) -> Result<(), AnyError> {
    let hidden: Vec<usize> = args.hidden.iter().map(|&h| h as usize).collect();
    let spec = NetworkSpec::new(784, &hidden, 10)?;
    let precision = precision(args);
    let kernels = &Kernels::with_options(FusedTiles::for_network(args.batch as usize, &spec.layer_shapes()), precision);
    if precision == Precision::F16Inputs && !kernels.coop_on(ctx) {
        println!("   --matmul f16-inputs: this adapter has no cooperative matrices for it; the products stay f32");
    }
    for opt in [Optimizer::sgd(0.01, 0.9), Optimizer::adam(1e-3)] {
        bench_one(ctx, kernels, args, &spec, opt)?;
    }
    // The same network with dropout after every hidden layer: not fused, so it costs what the
    // composed tape costs, plus the dropout's two dispatches per layer.
    let layers: String = hidden.iter().map(|h| format!("-{h}-relu-dropout0.2")).collect();
    let dropout = NetworkSpec::parse(&format!("784{layers}-10"), Loss::CrossEntropy)?;
    bench_one(ctx, kernels, args, &dropout, Optimizer::adam(1e-3))
}

fn bench_one(ctx: &GpuContext, kernels: &Arc<Kernels>, args: &Args, spec: &NetworkSpec, opt: Optimizer) -> Result<(), AnyError> {
    let (steps, batch, reps) = (args.steps as usize, args.batch as usize, args.reps as usize);
    let x = Matrix::random_uniform(batch, 784, 0.0, 1.0, 5);
    let labels: Vec<u32> = (0..batch as u32).map(|i| i % 10).collect();
    let timer = GpuTimer::new(ctx);
    println!();
    println!(
        "== speed: {}, batch {batch}, {}, {steps} steps recorded into one compute pass, median of {reps}",
        spec.describe(),
        opt.describe()
    );
    println!("   adapter: {}; GPU time from {}", ctx.adapter_line(), timer.source());
    println!(
        "{:>9} | {:>10} | {:>12} {:>9} | {:>10} {:>10} {:>12}",
        "tape",
        "dispatches",
        "GPU ms/pass",
        "us/step",
        "record ms",
        "wall ms",
        format!("wall ms /{}", args.chunk)
    );
    let checked = Kernels::with_bounds_checks();
    let mut tapes = vec![(Fusion::Fused, kernels, "fused"), (Fusion::Fused, &checked, "fused+chk"), (Fusion::Composed, kernels, "composed")];
    if let Some(why) = Network::fused_blocker(spec) {
        println!("{:>9} | composed only: {why}", "");
        tapes.drain(..2);
    }
    for (fusion, kernels, label) in tapes {
        let gpu = GpuTrainer::with_options(ctx, kernels, spec, opt, batch, 1, fusion)?;
        // Validate before timing: one step against the CPU reference, its gradients (Adam's first
        // step moves every parameter by about lr * sign(g), so a gradient of rounding size can
        // move a parameter either way) and, but for Adam, its parameters.
        let mut cpu = CpuTrainer::new(spec, opt, batch, 1)?;
        gpu.write_batch(ctx, &x, &labels)?;
        gpu.train_steps(ctx, 1)?;
        cpu.train_step(&x, &labels)?;
        let (g, c) = (gpu.gradients(ctx)?.concat_data(), cpu.gradients().concat_data());
        // f16 inputs: the fused tape's split forward, the composed tape's products (stage 03's kernel 08).
        let f16 = kernels.coop_on(ctx);
        if f16 {
            let err = check_f16_gradients(&format!("{fusion:?} step"), &g, &c)?;
            println!("   {label}: f16 inputs; the step's gradients are within {err:.2e} (relative, L2) of the CPU's");
        } else {
            common::check_close(&g, &c, 1e-3, 1e-6).map_err(|e| format!("{fusion:?} step's gradients differ from the CPU's: {e}"))?;
        }
        if !matches!(opt, Optimizer::Adam { .. }) && !f16 {
            common::check_close(&gpu.parameters(ctx)?.concat_data(), &cpu.parameters().concat_data(), 1e-4, 1e-5)
                .map_err(|e| format!("{fusion:?} step differs from the CPU: {e}"))?;
        }
        gpu.take_metrics(ctx)?;
        let before = gpu.allocations();
        // Warm up (first submission of this size), then time.
        gpu.train_steps(ctx, steps)?;
        ctx.wait()?;
        let times = time_steps(ctx, &timer, steps, args, |slots, pass| slots.for_each(|_| gpu.record_step(pass)))?;
        // Where the time goes: each dispatch of the step alone, `steps` times in one pass.
        let (store, train) = gpu.store();
        let parts = dispatches_alone(ctx, &timer, store, train, steps, reps.min(3))?;
        let m = gpu.take_metrics(ctx)?;
        if gpu.allocations() != before {
            return Err("the timed steps allocated GPU memory".into());
        }
        print_bench_row(label, gpu.dispatches_per_step(), times, steps, &parts);
        if !m.mean_loss().is_finite() {
            return Err("the benchmark loss is not finite".into());
        }
    }
    if Network::fused_blocker(spec).is_none() {
        bench_split(ctx, kernels, args, spec, opt, &timer)?;
    }
    println!(
        "   (fused+chk: the fused kernels with naga's bounds checks; split: the fused kernels gathering each batch\n    \
         from bytes, the update writing the next batch's x W1 (one prologue dispatch per pass, not in the count);\n    \
         GPU ms/pass: timestamps around the one pass; record ms: CPU time to record it; wall ms: record + submit + wait;\n    \
         wall ms /{}: the same steps submitted {} at a time, so recording overlaps the GPU)",
        args.chunk, args.chunk
    );
    Ok(())
}

/// `--matmul`, as the kernels take it.
fn precision(args: &Args) -> Precision {
    if args.matmul == "f16-inputs" { Precision::F16Inputs } else { Precision::F32 }
}

/// The check of a step whose products take f16 inputs: its gradient `gpu` against the CPU's
/// `cpu` by `|gpu - cpu| / |cpu|` over the whole vectors (L2 norms), which must be at most 5%.
/// Inputs rounded to f16 (a relative 2^-11 each) move every gradient a little, and a ReLU whose
/// input changes sign moves some a lot; a wrong tile or fragment gives errors of order 1, a
/// skipped round of a batch of 256 about 10%. Returns the error; NaN fails.
fn check_f16_gradients(what: &str, gpu: &[f32], cpu: &[f32]) -> Result<f64, String> {
    let diff: f64 = gpu.iter().zip(cpu).map(|(x, y)| (*x as f64 - *y as f64).powi(2)).sum();
    let norm: f64 = cpu.iter().map(|y| (*y as f64).powi(2)).sum();
    let err = if gpu.len() != cpu.len() { f64::NAN } else { (diff / norm.max(f64::MIN_POSITIVE)).sqrt() };
    if err.is_nan() || err > 5e-2 {
        return Err(format!("{what}: the gradients (f16 inputs) differ from the CPU's by {err:.2e} (relative, L2)"));
    }
    Ok(err)
}

/// Byte images for the gathering steps of `bench_split`: 16 batches of random pixels in a
/// shuffled order, batch `s` of an epoch is batch `s % 16` of them.
struct BenchBytes {
    images: wgpu::Buffer,
    labels: wgpu::Buffer,
    order: wgpu::Buffer,
    slots: wgpu::Buffer,
    stride: u64,
    pixels: Vec<u8>,
    label_bytes: Vec<u8>,
    order_host: Vec<u32>,
}

const BENCH_BATCHES: usize = 16;
/// Steps of `bench_split`'s check against the CPU: the prologue, then two hand-overs.
const VALIDATION_STEPS: usize = 3;

impl BenchBytes {
    fn new(ctx: &GpuContext, batch: usize, steps: usize) -> Result<Self, AnyError> {
        use rand::Rng;
        let n = batch * BENCH_BATCHES;
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let pixels: Vec<u8> = (0..n * 784).map(|_| rng.random()).collect();
        let label_bytes: Vec<u8> = (0..n).map(|i| (i % 10) as u8).collect();
        let mut order_host: Vec<u32> = (0..n as u32).collect();
        order_host.shuffle(&mut rng);
        let stride = (ctx.limits.min_uniform_buffer_offset_alignment as u64).max(16);
        let steps = steps.max(VALIDATION_STEPS);
        let mut slot_bytes = vec![0u8; steps * stride as usize];
        for s in 0..steps {
            let slot = GatherSlot { first: ((s % BENCH_BATCHES) * batch) as u32, count: batch as u32, scale: 1.0 / 255.0, shift: 0.0 };
            slot_bytes[s * stride as usize..][..16].copy_from_slice(bytemuck::bytes_of(&slot));
        }
        let storage = wgpu::BufferUsages::STORAGE;
        Ok(Self {
            images: ctx.buffer_init("bench images", &pixels, storage)?,
            labels: ctx.buffer_init("bench labels", &label_bytes, storage)?,
            order: ctx.buffer_init("bench order", bytemuck::cast_slice(&order_host), storage)?,
            slots: ctx.buffer_init("bench slots", &slot_bytes, wgpu::BufferUsages::UNIFORM)?,
            stride,
            pixels,
            label_bytes,
            order_host,
        })
    }

    fn source(&self) -> ByteImages<'_> {
        ByteImages { images: &self.images, labels: &self.labels, order: &self.order, slots: &self.slots, stride: self.stride }
    }

    /// Batch `s` as the CPU sees it.
    fn batch(&self, s: usize, batch: usize) -> Result<(Matrix, Vec<u32>), AnyError> {
        let rows = &self.order_host[(s % BENCH_BATCHES) * batch..][..batch];
        let x = rows.iter().flat_map(|&i| self.pixels[i as usize * 784..][..784].iter().map(|&p| p as f32 / 255.0)).collect();
        let labels = rows.iter().map(|&i| self.label_bytes[i as usize] as u32).collect();
        Ok((Matrix::new(batch, 784, x)?, labels))
    }
}

/// A trainer running the split step on [`BenchBytes`], checked against the CPU: for the
/// `split` row of `--bench` and the split column of `--sweep`.
pub(crate) struct SplitRun {
    gpu: GpuTrainer,
    gathered: gpu_layers::Gathered,
    // Bound by the gathered tapes: kept alive with them.
    _bytes: BenchBytes,
}

impl SplitRun {
    /// `None` where the network cannot gather or the device does not split.
    pub(crate) fn new(
        ctx: &GpuContext,
        kernels: &Arc<Kernels>,
        spec: &NetworkSpec,
        opt: Optimizer,
        batch: usize,
        steps: usize,
    ) -> Result<Option<Self>, AnyError> {
        let bytes = BenchBytes::new(ctx, batch, steps)?;
        let mut gpu = GpuTrainer::with_options(ctx, kernels, spec, opt, batch, 1, Fusion::Fused)?;
        if !gpu.can_gather() {
            return Ok(None);
        }
        let gathered = gpu.add_gathered(ctx, kernels, &bytes.source())?;
        if !gpu.gathered_split(gathered) {
            return Ok(None);
        }
        // Validate before timing: three steps in one pass (the prologue, then two hand-overs)
        // against the CPU.
        let mut cpu = CpuTrainer::new(spec, opt, batch, 1)?;
        gpu.set_batch(ctx, batch)?;
        ctx.submit_pass("split steps", |pass| gpu.record_gathered_steps(gathered, 0..VALIDATION_STEPS, pass));
        for s in 0..VALIDATION_STEPS {
            let (x, labels) = bytes.batch(s, batch)?;
            cpu.train_step(&x, &labels)?;
        }
        common::check_close(&gpu.parameters(ctx)?.concat_data(), &cpu.parameters().concat_data(), 1e-4, 1e-5)
            .map_err(|e| format!("split steps differ from the CPU: {e}"))?;
        gpu.take_metrics(ctx)?;
        ctx.submit_pass("split steps", |pass| gpu.record_gathered_steps(gathered, 0..steps, pass)); // warm-up
        ctx.wait()?;
        Ok(Some(Self { gpu, gathered, _bytes: bytes }))
    }

    pub(crate) fn record(&self, slots: std::ops::Range<usize>, pass: &mut wgpu::ComputePass<'_>) {
        self.gpu.record_gathered_steps(self.gathered, slots, pass);
    }

    /// Each dispatch of the step alone ([`dispatches_alone`]).
    pub(crate) fn alone(&self, ctx: &GpuContext, timer: &GpuTimer, steps: usize, reps: usize) -> Result<Vec<(&'static str, f64)>, AnyError> {
        let (store, _) = self.gpu.store();
        dispatches_alone(ctx, timer, store, self.gpu.gathered_train_tape(self.gathered), steps, reps)
    }

    /// Errors if the loss the steps summed is not finite; resets the metrics.
    pub(crate) fn check_loss(&self, ctx: &GpuContext) -> Result<(), AnyError> {
        if !self.gpu.take_metrics(ctx)?.mean_loss().is_finite() {
            return Err("the benchmark loss is not finite".into());
        }
        Ok(())
    }
}

/// The `split` row of `--bench`: the fused tape gathering its batches from bytes, in the split
/// form where the device allows it (`GpuStore::add_split_tape`), each step on the next batch.
fn bench_split(
    ctx: &GpuContext,
    kernels: &Arc<Kernels>,
    args: &Args,
    spec: &NetworkSpec,
    opt: Optimizer,
    timer: &GpuTimer,
) -> Result<(), AnyError> {
    let (steps, batch, reps) = (args.steps as usize, args.batch as usize, args.reps as usize);
    let Some(run) = SplitRun::new(ctx, kernels, spec, opt, batch, steps)? else {
        println!("{:>9} | not split on this device or network", "split");
        return Ok(());
    };
    let before = run.gpu.allocations();
    let times = time_steps(ctx, timer, steps, args, |slots, pass| run.record(slots, pass))?;
    let parts = run.alone(ctx, timer, steps, reps.min(3))?;
    run.check_loss(ctx)?;
    if run.gpu.allocations() != before {
        return Err("the timed steps allocated GPU memory".into());
    }
    print_bench_row("split", run.gpu.step_kernels(Some(run.gathered)).len(), times, steps, &parts);
    Ok(())
}

/// `--bench`'s timings of steps `0..steps`, recorded by `record(slots, pass)`, each the median
/// of `--reps` in ms: the GPU time of one pass (timestamps), the CPU time to record it, the
/// wall clock of record + submit + wait (what a training loop pays), and the wall clock of the
/// same steps in submissions of `--chunk` (the GPU runs one while the CPU records the next).
fn time_steps(
    ctx: &GpuContext,
    timer: &GpuTimer,
    steps: usize,
    args: &Args,
    record: impl Fn(std::ops::Range<usize>, &mut wgpu::ComputePass<'_>),
) -> Result<[f64; 4], AnyError> {
    let (mut gpu_s, mut record_s, mut wall_s, mut chunked_s) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..args.reps {
        gpu_s.push(timer.time_pass(ctx, "steps", |pass| record(0..steps, pass))?);
        let start = Instant::now();
        let mut encoder = ctx.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            record(0..steps, &mut pass);
        }
        let commands = encoder.finish();
        record_s.push(start.elapsed().as_secs_f64());
        ctx.queue.submit([commands]);
        ctx.wait()?;
        wall_s.push(start.elapsed().as_secs_f64());
        let start = Instant::now();
        for first in (0..steps).step_by(args.chunk as usize) {
            let slots = first..(first + args.chunk as usize).min(steps);
            ctx.scoped(|| ctx.submit_pass("steps", |pass| record(slots, pass)))?;
        }
        ctx.wait()?;
        chunked_s.push(start.elapsed().as_secs_f64());
    }
    Ok([&mut gpu_s, &mut record_s, &mut wall_s, &mut chunked_s].map(|t| median(t) * 1e3))
}

/// Each dispatch of `store`'s tape `id` alone, `steps` copies of it in one pass: `(kernel, us per
/// dispatch)`, median of `reps`.
pub(crate) fn dispatches_alone(
    ctx: &GpuContext,
    timer: &GpuTimer,
    store: &gpu_layers::GpuStore,
    id: gpu_layers::TapeId,
    steps: usize,
    reps: usize,
) -> Result<Vec<(&'static str, f64)>, AnyError> {
    let mut parts = Vec::new();
    for (i, name) in store.dispatch_names(id).into_iter().enumerate() {
        let mut t: Vec<f64> = (0..reps)
            .map(|_| timer.time_pass(ctx, name, |pass| (0..steps).for_each(|_| store.record_one(id, i, pass))))
            .collect::<Result<_, _>>()?;
        parts.push((name, median(&mut t) * 1e6 / steps as f64));
    }
    Ok(parts)
}

/// One tape's row of `--bench`: `ms` = GPU time of the pass, recording, wall clock, wall clock
/// in chunks (medians, ms), then each dispatch alone (us).
fn print_bench_row(label: &str, dispatches: usize, ms: [f64; 4], steps: usize, parts: &[(&str, f64)]) {
    let parts: Vec<String> = parts.iter().map(|(n, us)| format!("{n} {us:.2}")).collect();
    let [gpu_ms, record_ms, wall_ms, chunked_ms] = ms;
    println!(
        "{label:>9} | {dispatches:>10} | {gpu_ms:>12.3} {:>9.2} | {record_ms:>10.3} {wall_ms:>10.3} {chunked_ms:>12.3}",
        gpu_ms * 1e3 / steps as f64
    );
    println!("{:>9} | us per dispatch, each alone: {}", "", parts.join(", "));
}

/// All parameter values in one vector, for a single comparison.
trait ConcatData {
    fn concat_data(&self) -> Vec<f32>;
}

impl ConcatData for Vec<Matrix> {
    fn concat_data(&self) -> Vec<f32> {
        self.iter().flat_map(|m| m.data.iter().copied()).collect()
    }
}
