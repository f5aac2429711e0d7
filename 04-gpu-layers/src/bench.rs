//! `gpu-layers --bench`: a training step of the MNIST shape timed with the fused and the composed
//! tapes (dispatches per step, GPU time per step and per 938-step epoch, wall clock), then with a
//! dropout after every hidden layer, each also as the split step gathering its batches from
//! bytes where it applies, then any `--layers` lists; and the timing helpers `--sweep` shares.

use std::sync::Arc;
use std::time::Instant;

use common::{GpuContext, GpuTimer, median};
use cpu_matrix::Matrix;
use gpu_layers::{
    ByteImages, CpuTrainer, Fusion, FusedTiles, GatherSlot, GpuTrainer, Kernels, Loss, Network, NetworkSpec, Optimizer, Precision,
};
use rand::SeedableRng;
use rand::seq::SliceRandom;

use crate::args::{AnyError, Args};

/// Times `steps` training steps recorded into one pass, for both fusions, then with dropout,
/// with the tiles a trainer of this network and batch takes (`FusedTiles::for_network`).
pub(crate) fn bench(ctx: &GpuContext, args: &Args) -> Result<(), AnyError> {
    let hidden: Vec<usize> = args.hidden.iter().map(|&h| h as usize).collect();
    bench_network(ctx, args, &hidden)?;
    if args.deeper {
        bench_network(ctx, args, &DEEPER)?;
    }
    for text in &args.layers {
        let spec = NetworkSpec::parse(text, Loss::CrossEntropy).map_err(|e| format!("--layers {text}: {e}"))?;
        if (spec.input(), spec.output()) != (784, 10) {
            return Err(format!("--layers {text}: the benchmark's batches are MNIST-shaped: start at 784 and end at 10").into());
        }
        let kernels = &Kernels::with_options(FusedTiles::for_network(args.batch as usize, &spec.layer_shapes()), precision(args));
        for opt in [Optimizer::sgd(0.01, 0.9), Optimizer::adam(1e-3)] {
            bench_one(ctx, kernels, args, &spec, opt)?;
        }
    }
    Ok(())
}

/// The hidden layers `--deeper` also times: 784-512-relu-256-relu-10, with and without dropout.
const DEEPER: [usize; 2] = [512, 256];

/// `bench` for 784-`hidden`-10 (ReLU after every hidden layer), without and with dropout.
fn bench_network(ctx: &GpuContext, args: &Args, hidden: &[usize]) -> Result<(), AnyError> {
    let spec = NetworkSpec::new(784, hidden, 10)?;
    let precision = precision(args);
    let kernels = &Kernels::with_options(FusedTiles::for_network(args.batch as usize, &spec.layer_shapes()), precision);
    if precision == Precision::F16Inputs && !kernels.coop_on(ctx) {
        println!("   --matmul f16-inputs: this adapter has no cooperative matrices for it; the products stay f32");
    }
    for opt in [Optimizer::sgd(0.01, 0.9), Optimizer::adam(1e-3)] {
        bench_one(ctx, kernels, args, &spec, opt)?;
    }
    // The same network with dropout after every hidden layer: fused into the same kernels (the
    // composed tape has two more dispatches per dropout layer).
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
        gpu.keep_gradients(ctx, true)?;
        gpu.train_steps(ctx, 1)?;
        cpu.train_step(&x, &labels)?;
        let (g, c) = (gpu.gradients(ctx)?.concat_data(), cpu.gradients().concat_data());
        gpu.keep_gradients(ctx, false)?; // the timed steps run as training does
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
        "   (fused+chk: the fused kernels with naga's bounds checks; gathered: the fused kernels gathering each batch\n    \
         from bytes, as mnist train runs them; split: gathered, the update writing the next batch's x W1 (one\n    \
         prologue dispatch per pass, not in the count);\n    \
         GPU ms/pass: timestamps around the one pass; record ms: CPU time to record it; wall ms: record + submit + wait;\n    \
         wall ms /{}: the same steps submitted {} at a time, so recording overlaps the GPU)",
        args.chunk, args.chunk
    );
    Ok(())
}

/// `--matmul`, as the kernels take it.
pub(crate) fn precision(args: &Args) -> Precision {
    if args.matmul == "f16-inputs" { Precision::F16Inputs } else { Precision::F32 }
}

/// The check of a step whose products take f16 inputs: its gradient `gpu` against the CPU's
/// `cpu` by `|gpu - cpu| / |cpu|` over the whole vectors (L2 norms), which must be at most 5%.
/// Inputs rounded to f16 (a relative 2^-11 each) move every gradient a little, and a ReLU whose
/// input changes sign moves some a lot; a wrong tile or fragment gives errors of order 1, a
/// skipped round of a batch of 256 about 10%. Returns the error; NaN fails.
pub(crate) fn check_f16_gradients(what: &str, gpu: &[f32], cpu: &[f32]) -> Result<f64, String> {
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

/// A trainer running the gathering steps (split where the device allows it) on [`BenchBytes`],
/// checked against the CPU: for the `split` (or `gathered`) row of `--bench` and the split
/// column of `--sweep`.
pub(crate) struct GatheredRun {
    gpu: GpuTrainer,
    gathered: gpu_layers::Gathered,
    /// Whether the steps run split ([`GpuTrainer::gathered_split`]).
    pub(crate) split: bool,
    // Bound by the gathered tapes: kept alive with them.
    _bytes: BenchBytes,
}

impl GatheredRun {
    /// `None` where the network cannot gather, or where the steps would not run split unless
    /// `unsplit` (the steps `mnist train` runs on such a network).
    pub(crate) fn new(
        ctx: &GpuContext,
        kernels: &Arc<Kernels>,
        spec: &NetworkSpec,
        opt: Optimizer,
        batch: usize,
        steps: usize,
        unsplit: bool,
    ) -> Result<Option<Self>, AnyError> {
        let bytes = BenchBytes::new(ctx, batch, steps)?;
        let mut gpu = GpuTrainer::with_options(ctx, kernels, spec, opt, batch, 1, Fusion::Fused)?;
        if !gpu.can_gather() {
            return Ok(None);
        }
        let gathered = gpu.add_gathered(ctx, kernels, &bytes.source())?;
        let split = gpu.gathered_split(gathered);
        if !split && !unsplit {
            return Ok(None);
        }
        // Validate before timing, against the CPU: split, three steps in one pass (the prologue,
        // then two hand-overs) and their parameters; unsplit, one step and its gradients, as
        // `bench_one` checks the fused tape (and, but for Adam, its parameters).
        let checked = if split { VALIDATION_STEPS } else { 1 };
        let mut cpu = CpuTrainer::new(spec, opt, batch, 1)?;
        gpu.set_batch(ctx, batch)?;
        gpu.keep_gradients(ctx, !split)?;
        ctx.submit_pass("gathered steps", |pass| gpu.record_gathered_steps(gathered, 0..checked, pass));
        for s in 0..checked {
            let (x, labels) = bytes.batch(s, batch)?;
            cpu.train_step(&x, &labels)?;
        }
        if !split {
            common::check_close(&gpu.gradients(ctx)?.concat_data(), &cpu.gradients().concat_data(), 1e-3, 1e-6)
                .map_err(|e| format!("the gathered step's gradients differ from the CPU's: {e}"))?;
            gpu.keep_gradients(ctx, false)?;
        }
        if split || !matches!(opt, Optimizer::Adam { .. }) {
            common::check_close(&gpu.parameters(ctx)?.concat_data(), &cpu.parameters().concat_data(), 1e-4, 1e-5)
                .map_err(|e| format!("the gathered steps differ from the CPU: {e}"))?;
        }
        gpu.take_metrics(ctx)?;
        ctx.submit_pass("gathered steps", |pass| gpu.record_gathered_steps(gathered, 0..steps, pass)); // warm-up
        ctx.wait()?;
        Ok(Some(Self { gpu, gathered, split, _bytes: bytes }))
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
/// form where the device allows it (`GpuStore::add_split_tape`), each step on the next batch;
/// the `gathered` row where it does not split (the steps `mnist train` runs).
fn bench_split(
    ctx: &GpuContext,
    kernels: &Arc<Kernels>,
    args: &Args,
    spec: &NetworkSpec,
    opt: Optimizer,
    timer: &GpuTimer,
) -> Result<(), AnyError> {
    let (steps, batch, reps) = (args.steps as usize, args.batch as usize, args.reps as usize);
    let Some(run) = GatheredRun::new(ctx, kernels, spec, opt, batch, steps, true)? else {
        println!("{:>9} | does not gather: its first layer is not a fused linear_forward", "gathered");
        return Ok(());
    };
    let before = run.gpu.allocations();
    let times = time_steps(ctx, timer, steps, args, |slots, pass| run.record(slots, pass))?;
    let parts = run.alone(ctx, timer, steps, reps.min(3))?;
    run.check_loss(ctx)?;
    if run.gpu.allocations() != before {
        return Err("the timed steps allocated GPU memory".into());
    }
    print_bench_row(if run.split { "split" } else { "gathered" }, run.gpu.step_kernels(Some(run.gathered)).len(), times, steps, &parts);
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
pub(crate) trait ConcatData {
    fn concat_data(&self) -> Vec<f32>;
}

impl ConcatData for Vec<Matrix> {
    fn concat_data(&self) -> Vec<f32> {
        self.iter().flat_map(|m| m.data.iter().copied()).collect()
    }
}
