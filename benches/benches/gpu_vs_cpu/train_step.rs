//! One training step of the MNIST network (stage 04): 784-128-10, ReLU, softmax cross-entropy,
//! SGD (lr 0.1, no momentum), on the CPU and on the GPU, per batch size 16 .. 4096 (quick
//! sweep: 16 .. 1024; software sweep: 16 .. 256). Only this group: `cargo bench -- train_step`.
//!
//! Group `train_step`, parameter = batch, throughput = batch images, so criterion reports
//! images per second.
//! - `cpu`: `CpuTrainer::train_step` + `take_metrics` (forward, loss, backward, update).
//! - `gpu_kernels`: `GpuTrainer::record_step` (the fused kernels, as `GpuTrainer::new` uses) with the batch already on the GPU, up to 1024
//!   steps per compute pass (as a training loop records them), GPU timestamps. The steps
//!   repeat on the same batch, which costs the same as fresh batches.
//! - `gpu_e2e`: what a plain training loop pays per step: upload the batch and its labels
//!   (`write_batch`), one step, read the loss back (`take_metrics` waits), wall clock.
//!
//! Before timing, one step from the same initial weights on both devices must give the same
//! weights (stage 04's tolerance: 1e-4 relative + 1e-5 absolute).

use benches::harness::{self, Bench, must, time_kernels, time_wall};
use std::sync::Arc;

use common::{GpuContext, check_close};
use cpu_matrix::Matrix;
use criterion::{BenchmarkId, Throughput};
use gpu_layers::{CpuTrainer, Fusion, GpuTrainer, Kernels, NetworkSpec, Optimizer};

const SEED: u64 = 42;
/// Stage 04's tolerance for weights after GPU and CPU steps (tests/training.rs).
const PARAM_TOL: (f64, f64) = (1e-4, 1e-5);

/// A CPU and a GPU trainer from the same initial weights, for batches of `x: [batch, 784]`,
/// after one step each on `x`, checked to give the same weights.
fn checked_trainers(
    ctx: &GpuContext,
    kernels: &Arc<Kernels>,
    spec: &NetworkSpec,
    optimizer: Optimizer,
    x: &Matrix,
    labels: &[u8],
) -> (CpuTrainer, GpuTrainer) {
    let batch = x.rows;
    let mut cpu = must(CpuTrainer::new(spec, optimizer, batch, SEED), "CPU trainer");
    let gpu = must(GpuTrainer::with_options(ctx, kernels, spec, optimizer, batch, SEED, Fusion::Fused), "GPU trainer");
    must(cpu.train_step(x, labels), "CPU step");
    must(gpu.write_batch(ctx, x, labels), "uploading the batch");
    ctx.submit_pass("train step", |pass| gpu.record_step(pass));
    must(gpu.take_metrics(ctx), "GPU metrics");
    must(cpu.take_metrics(), "CPU metrics");
    for (i, (gp, cp)) in must(gpu.parameters(ctx), "GPU parameters").iter().zip(cpu.parameters()).enumerate() {
        if let Err(e) = check_close(&gp.data, &cp.data, PARAM_TOL.0, PARAM_TOL.1) {
            panic!("train_step at batch {batch}: parameter {i} after one step differs between GPU and CPU:\n{e}");
        }
    }
    (cpu, gpu)
}

pub fn run(bench: &mut Bench) {
    let (ctx, timer, sweep, criterion) = (&bench.ctx, &bench.timer, bench.sweep, &mut bench.criterion);
    let spec = must(NetworkSpec::new(784, &[128], 10), "network spec");
    let optimizer = Optimizer::sgd(0.1, 0.0);
    eprintln!("train_step: {}, {}", spec.describe(), optimizer.describe());
    let batches = sweep.pick(&[16], &[16, 64, 256], &[16, 64, 256, 1024], &[16, 32, 64, 128, 256, 512, 1024, 2048, 4096]);

    // Compiled once, shared by the trainers of every batch size.
    let kernels = Kernels::new();
    let mut g = harness::group(criterion, "train_step");
    for batch in batches {
        g.throughput(Throughput::Elements(batch as u64));
        let x = Matrix::random_uniform(batch, 784, 0.0, 1.0, batch as u64);
        let labels: Vec<u8> = (0..batch).map(|i| ((i * 7 + 3) % 10) as u8).collect();

        // Built and checked when the first benchmark of this batch runs (not at all when a
        // criterion filter skips them).
        let mut trainers: Option<(CpuTrainer, GpuTrainer)> = None;
        let make = || checked_trainers(ctx, &kernels, &spec, optimizer, &x, &labels);
        g.bench_function(BenchmarkId::new("cpu", batch), |b| {
            let (cpu, _) = trainers.get_or_insert_with(make);
            b.iter(|| {
                must(cpu.train_step(&x, &labels), "CPU step");
                must(cpu.take_metrics(), "CPU metrics")
            })
        });
        g.bench_function(BenchmarkId::new("gpu_kernels", batch), |b| {
            let (_, gpu) = trainers.get_or_insert_with(make);
            b.iter_custom(|iters| {
                let t = time_kernels(ctx, timer, iters, |pass| gpu.record_step(pass));
                // Keep the loss sums from growing without end; outside the timed passes.
                must(gpu.take_metrics(ctx), "GPU metrics");
                t
            })
        });
        g.bench_function(BenchmarkId::new("gpu_e2e", batch), |b| {
            let (_, gpu) = trainers.get_or_insert_with(make);
            b.iter_custom(|iters| {
                time_wall(iters, || {
                    must(gpu.write_batch(ctx, &x, &labels), "uploading the batch");
                    ctx.submit_pass("train step", |pass| gpu.record_step(pass));
                    must(gpu.take_metrics(ctx), "GPU metrics");
                })
            })
        });
    }
    g.finish();
}
