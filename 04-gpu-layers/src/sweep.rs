//! `gpu-layers --sweep`: where the time of a fused training step goes, one change at a time.
//!
//! 1. The floor: a dispatch that does almost nothing (`bias_add` on one number), recorded
//!    `--steps` times back to back, each depending on the one before. No step of d dependent
//!    dispatches can take less than d times this.
//! 2. Every variant of [`gpu_layers::sweep_variants_of`] (the network's tiles,
//!    `FusedTiles::for_network`, with ONE tile size changed): each of
//!    the step's dispatches alone (`--steps` copies of it in one pass, GPU timestamps
//!    around the pass) and the whole step (`--steps` steps in one pass). Each variant is first
//!    checked against the CPU: one step, same weights. Where the variant runs the split step
//!    (gathering from random bytes, `GpuStore::add_split_tape`), the same for it on the line
//!    below, checked against the CPU over three steps.
//! 3. The default step with a timestamp after every dispatch (where the adapter can write
//!    timestamps inside a pass): what each dispatch costs in the middle of a real step, waiting
//!    for the one before included.
//!
//! 4. Wide layers: a step with the hidden layer in the fused kernels (its forward in
//!    `linear_forward` and in `linear_forward_tiled`), against the same step with its products
//!    through stage 03's matmul (f32, and f16 inputs on tensor cores where the adapter has
//!    cooperative matrices), for widths 128-2048 and batches 64-1024, and each fused dispatch
//!    alone for widths of 512 and more: the measurements behind `FusedTiles::tiled_min` and
//!    `routes_by_shape`.
//!
//! Parts 1-3 use the MNIST shape (784-HIDDEN-10, or 784-512-256-10 with `--hidden 512,256`,
//! batch BATCH, SGD lr 0.1), all random data.

use std::sync::Arc;

use common::{GpuContext, GpuTimer, median};
use cpu_matrix::Matrix;
use gpu_layers::{
    CpuTrainer, Dim, Elem, Fusion, FusedTiles, GpuStore, GpuTrainer, Kernels, NetworkSpec, Op, Optimizer, Precision, Routing, TensorId,
    TensorInfo, View,
};
use gpu_matmul::Kernel;

use crate::args::{AnyError, Args};
use crate::bench::{ConcatData, GatheredRun, dispatches_alone};

pub fn sweep(ctx: &GpuContext, args: &Args) -> Result<(), AnyError> {
    let (steps, batch, reps) = (args.steps as usize, args.batch as usize, args.reps as usize);
    let hidden: Vec<usize> = args.hidden.iter().map(|&h| h as usize).collect();
    let spec = NetworkSpec::new(784, &hidden, 10)?;
    if args.grid {
        return wide(ctx, (steps / 8).max(10), reps);
    }
    let variants = gpu_layers::sweep_variants_of(FusedTiles::for_network(batch, &spec.layer_shapes()));
    let names: Vec<String> = variants.iter().map(|(what, _)| what.clone()).collect();
    if let Some(unknown) = args.variants.iter().find(|v| !names.iter().any(|n| n.contains(v.as_str()))) {
        return Err(format!("--variants: no variant's name contains {unknown:?}; the variants are: {}", names.join(", ")).into());
    }
    let timer = GpuTimer::new(ctx);
    let per_dispatch = |seconds: f64, count: usize| seconds * 1e6 / count as f64;
    println!();
    println!(
        "== sweep: {}, batch {batch}, {steps} dispatches (or steps) per pass, median of {reps}",
        spec.describe()
    );
    println!("   adapter: {}; GPU time from {}", ctx.adapter_line(), timer.source());

    // 1. The floor.
    let floor = {
        let tensors = [
            TensorInfo { name: "y".into(), rows: Dim::Fixed(1), cols: 1, elem: Elem::F32 },
            TensorInfo { name: "bias".into(), rows: Dim::Fixed(1), cols: 1, elem: Elem::F32 },
        ];
        let mut store = GpuStore::new(ctx, &tensors, 1)?;
        let y = View { tensor: TensorId(0), rows: Dim::Fixed(1), cols: 1 };
        let id = store.add_tape(ctx, &Kernels::new(), &[Op::BiasAdd { y, bias: TensorId(1), offset: 0 }])?;
        timer.time_pass(ctx, "warm-up", |pass| (0..steps).for_each(|_| store.record_one(id, 0, pass)))?;
        let mut t: Vec<f64> = (0..reps)
            .map(|_| timer.time_pass(ctx, "floor", |pass| (0..steps).for_each(|_| store.record_one(id, 0, pass))))
            .collect::<Result<_, _>>()?;
        per_dispatch(median(&mut t), steps)
    };
    println!("   floor: {floor:.2} us per dependent dispatch (bias_add on one number, {steps} in a row)");

    // 2. The variants.
    let x = Matrix::random_uniform(batch, 784, 0.0, 1.0, 5);
    let labels: Vec<u32> = (0..batch as u32).map(|i| i % 10).collect();
    let opt = Optimizer::sgd(0.1, 0.0);
    println!(
        "{:>24} | {:>9} | each dispatch alone, us | tiles (forward TN KS TR U, output WG rows, update batch slices T R; merged TN CB KS TR)",
        "variant", "us/step"
    );
    let mut default_kernels = None;
    let picked = |what: &str| what == "default" || args.variants.is_empty() || args.variants.iter().any(|v| what.contains(v.as_str()));
    let precision = crate::bench::precision(args);
    for (what, tiles) in variants.into_iter().filter(|(what, _)| picked(what)) {
        let kernels = Kernels::with_options(tiles, precision);
        let gpu = GpuTrainer::with_options(ctx, &kernels, &spec, opt, batch, 1, Fusion::Fused)?;
        let mut cpu = CpuTrainer::new(&spec, opt, batch, 1)?;
        gpu.write_batch(ctx, &x, &labels)?;
        // f16 inputs: the whole gradient is checked, as --bench checks it; else the parameters.
        let f16 = kernels.coop_on(ctx);
        gpu.keep_gradients(ctx, f16)?;
        gpu.train_steps(ctx, 1)?;
        cpu.train_step(&x, &labels)?;
        if f16 {
            crate::bench::check_f16_gradients(&what, &gpu.gradients(ctx)?.concat_data(), &cpu.gradients().concat_data())?;
            gpu.keep_gradients(ctx, false)?;
        } else {
            common::check_close(&gpu.parameters(ctx)?.concat_data(), &cpu.parameters().concat_data(), 1e-4, 1e-5)
                .map_err(|e| format!("{what}: a step differs from the CPU: {e}"))?;
        }
        gpu.take_metrics(ctx)?;
        gpu.train_steps(ctx, steps)?; // warm-up
        ctx.wait()?;
        let (store, train) = gpu.store();
        let alone = dispatches_alone(ctx, &timer, store, train, steps, reps)?;
        let mut t: Vec<f64> = (0..reps)
            .map(|_| timer.time_pass(ctx, "steps", |pass| (0..steps).for_each(|_| gpu.record_step(pass))))
            .collect::<Result<_, _>>()?;
        let step = per_dispatch(median(&mut t), steps);
        gpu.take_metrics(ctx)?;
        let t = tiles.fitted(ctx.limits.max_compute_invocations_per_workgroup);
        let parts: Vec<String> = alone.iter().map(|(n, us)| format!("{n} {us:.2}")).collect();
        let merged = if t.merge { format!("{} {} {} {}", t.merged_tn, t.merged_cb, t.merged_ks, t.merged_tr) } else { "off".into() };
        println!(
            "{what:>24} | {step:>9.2} | {} | {} {} {} {}, {} {}, {} {} {}{}; {merged}",
            parts.join(", "),
            t.forward_tn,
            t.forward_ks,
            t.forward_tr,
            t.forward_u,
            t.output_wg,
            t.output_rows,
            t.update_batch_slices,
            t.update_t,
            t.update_r,
            if t.update_preload { "" } else { " late" }
        );
        if let Some(run) = GatheredRun::new(ctx, &kernels, &spec, opt, batch, steps, false)? {
            let mut t: Vec<f64> = (0..reps)
                .map(|_| timer.time_pass(ctx, "split steps", |pass| run.record(0..steps, pass)))
                .collect::<Result<_, _>>()?;
            let step = per_dispatch(median(&mut t), steps);
            let parts: Vec<String> = run.alone(ctx, &timer, steps, reps)?.iter().map(|(n, us)| format!("{n} {us:.2}")).collect();
            run.check_loss(ctx)?;
            println!("{:>24} | {step:>9.2} | {}", "(split)", parts.join(", "));
        }
        if what == "default" {
            default_kernels = Some(kernels);
        }
    }

    if !args.variants.is_empty() {
        return Ok(());
    }
    // 3. Inside the default step.
    let kernels = default_kernels.ok_or("no default variant")?;
    for opt in [Optimizer::sgd(0.1, 0.0), Optimizer::adam(1e-3)] {
        in_step(ctx, &kernels, &spec, opt, &x, &labels, steps.min(1000), reps)?;
    }

    // 4. Wide layers: the fused layer kernels against stage 03's matmul.
    wide(ctx, (steps / 8).max(10), reps)
}

/// One SGD step of 784-HIDDEN-10 for a grid of widths and batches, with the hidden layer in the
/// fused kernels (k split, tiled), through stage 03's f32 matmul, through its f16-input one
/// (tensor cores, where the adapter has them), and in the fused tensor-core kernels
/// (`linear_forward_coop`, `linear_update_coop`; f16 inputs): the data behind
/// `FusedTiles::tiled_min` and `routes_by_shape`, and where the tensor cores pay.
fn wide(ctx: &GpuContext, steps: usize, reps: usize) -> Result<(), AnyError> {
    let timer = GpuTimer::new(ctx);
    let f16_kernel = Kernel::fastest(ctx, Precision::F16Inputs);
    println!();
    println!("== wide layers: us per SGD step of 784-HIDDEN-10 ({steps} steps per pass, median of {reps})");
    println!(
        "   matmul: stage 03's kernel {} (f32) and kernel {} ({}), with separate bias, activation, column-sum and SGD dispatches",
        Kernel::BEST.number(),
        f16_kernel.number(),
        if f16_kernel.precision() == Precision::F16Inputs { "f16 inputs" } else { "f32: no cooperative matrices here" }
    );
    println!("   fused: the hidden layer's forward in linear_forward (k split) or in linear_forward_tiled (tiled), then output_layer and linear_update");
    let coop = Kernels::with_matmul_precision(Precision::F16Inputs).coop_on(ctx);
    println!(
        "   tensor cores: linear_forward_coop split 2 ways, output_wide (sums) and linear_update_coop (f16 inputs){}",
        if coop { "" } else { ": no cooperative matrices here" }
    );
    println!(
        "{:>6} {:>7} | {:>10} {:>10} {:>12} {:>12} {:>12} | {:>8}",
        "batch", "hidden", "k split", "tiled", "matmul f32", "matmul f16", "tensor cores", "GFLOP/step"
    );
    let opt = Optimizer::sgd(0.1, 0.0);
    let mut alone_lines = Vec::new();
    for batch in [64usize, 128, 256, 512, 1024] {
        // The tiles a trainer of this batch uses (FusedTiles::for_batch), with the tiled forward
        // never and always.
        let tiles = FusedTiles::for_batch(batch);
        let split = Kernels::with_tiles(FusedTiles { tiled_min: u32::MAX, ..tiles });
        let tiled = Kernels::with_tiles(FusedTiles { tiled_min: 1, ..tiles });
        let f16 = Kernels::with_options(tiles, Precision::F16Inputs);
        let cores = Kernels::with_options(FusedTiles { tiled_min: 1, k_splits: 2, coop_min: 1, ..tiles }, Precision::F16Inputs);
        let kernels = &split;
        for hidden in [128usize, 256, 512, 1024, 2048] {
            let spec = NetworkSpec::new(784, &[hidden], 10)?;
            let x = Matrix::random_uniform(batch, 784, 0.0, 1.0, 7);
            let labels: Vec<u32> = (0..batch as u32).map(|i| i % 10).collect();
            let mut cells = Vec::new();
            let mut columns = vec![(Routing::Never, kernels), (Routing::Never, &tiled), (Routing::Always, kernels), (Routing::Always, &f16)];
            if coop {
                columns.push((Routing::Never, &cores));
            }
            for (c, (routing, k)) in columns.into_iter().enumerate() {
                let gpu = GpuTrainer::with_routing(ctx, k, &spec, opt, batch, 1, Fusion::Fused, routing)?;
                gpu.write_batch(ctx, &x, &labels)?;
                if c == 1 {
                    // The tiled column: checked against the CPU first (one step, same weights).
                    let mut cpu = CpuTrainer::new(&spec, opt, batch, 1)?;
                    gpu.train_steps(ctx, 1)?;
                    cpu.train_step(&x, &labels)?;
                    common::check_close(&gpu.parameters(ctx)?.concat_data(), &cpu.parameters().concat_data(), 1e-4, 1e-5)
                        .map_err(|e| format!("{hidden} x {batch} tiled: a step differs from the CPU: {e}"))?;
                }
                if c == 4 {
                    // The tensor cores: the whole gradient, as --bench checks it (f16 inputs).
                    let mut cpu = CpuTrainer::new(&spec, opt, batch, 1)?;
                    gpu.keep_gradients(ctx, true)?;
                    gpu.train_steps(ctx, 1)?;
                    cpu.train_step(&x, &labels)?;
                    let what = format!("{hidden} x {batch} tensor cores");
                    crate::bench::check_f16_gradients(&what, &gpu.gradients(ctx)?.concat_data(), &cpu.gradients().concat_data())?;
                    gpu.keep_gradients(ctx, false)?;
                }
                gpu.train_steps(ctx, steps)?; // warm-up
                let mut t: Vec<f64> = (0..reps)
                    .map(|_| timer.time_pass(ctx, "wide steps", |pass| (0..steps).for_each(|_| gpu.record_step(pass))))
                    .collect::<Result<_, _>>()?;
                let m = gpu.take_metrics(ctx)?;
                if !m.mean_loss().is_finite() {
                    return Err(format!("{hidden} x {batch} {routing:?}: the loss is not finite").into());
                }
                cells.push(median(&mut t) * 1e6 / steps as f64);
                if c != 2 && c != 3 && hidden >= 512 {
                    // Each dispatch of the two fused steps alone, for the wide layers.
                    let (store, train) = gpu.store();
                    let mut parts = Vec::new();
                    for (i, name) in store.dispatch_names(train).into_iter().enumerate() {
                        let mut t: Vec<f64> = (0..reps)
                            .map(|_| timer.time_pass(ctx, "one dispatch", |pass| (0..steps).for_each(|_| store.record_one(train, i, pass))))
                            .collect::<Result<_, _>>()?;
                        parts.push(format!("{name} {:.2}", median(&mut t) * 1e6 / steps as f64));
                    }
                    alone_lines.push(format!("{batch:>6} {hidden:>7} | {}", parts.join(", ")));
                }
            }
            // Two products of 2 * batch * 784 * hidden flops, the output layer's two of 10 columns.
            let gflop = 2.0 * 2.0 * (batch * hidden * (784 + 10)) as f64 * 1e-9;
            let cores = cells.get(4).map_or("-".to_string(), |t| format!("{t:.2}"));
            println!(
                "{batch:>6} {hidden:>7} | {:>10.2} {:>10.2} {:>12.2} {:>12.2} {cores:>12} | {gflop:>8.3}",
                cells[0], cells[1], cells[2], cells[3]
            );
        }
    }
    println!("   each dispatch of the k-split, tiled and tensor-core steps alone, us (hidden >= 512):");
    alone_lines.iter().for_each(|l| println!("{l}"));
    Ok(())
}

/// The default step with a GPU timestamp after each dispatch, `steps` steps in one pass.
#[allow(clippy::too_many_arguments)]
fn in_step(
    ctx: &GpuContext,
    kernels: &Arc<Kernels>,
    spec: &NetworkSpec,
    opt: Optimizer,
    x: &Matrix,
    labels: &[u32],
    steps: usize,
    reps: usize,
) -> Result<(), AnyError> {
    if !ctx.device.features().contains(wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES) {
        println!("   (this adapter cannot write timestamps inside a pass: no per-dispatch times in the step)");
        return Ok(());
    }
    let gpu = GpuTrainer::with_options(ctx, kernels, spec, opt, x.rows, 1, Fusion::Fused)?;
    gpu.write_batch(ctx, x, labels)?;
    let d = gpu.dispatches_per_step();
    let count = (steps * d + 1).min(4096);
    let steps = (count - 1) / d;
    let set = ctx.device.create_query_set(&wgpu::QuerySetDescriptor {
        label: Some("per-dispatch timestamps"),
        ty: wgpu::QueryType::Timestamp,
        count: count as u32,
    });
    let resolve = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("per-dispatch resolve"),
        size: 8 * count as u64,
        usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let (store, train) = gpu.store();
    let period = ctx.queue.get_timestamp_period() as f64;
    let mut per: Vec<Vec<f64>> = vec![Vec::new(); d];
    gpu.train_steps(ctx, steps)?; // warm-up
    for _ in 0..reps {
        let mut encoder = ctx.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            pass.write_timestamp(&set, 0);
            for s in 0..steps {
                for i in 0..d {
                    store.record_one(train, i, &mut pass);
                    pass.write_timestamp(&set, (s * d + i + 1) as u32);
                }
            }
        }
        encoder.resolve_query_set(&set, 0..count as u32, &resolve, 0);
        ctx.queue.submit([encoder.finish()]);
        let ticks: Vec<u64> = ctx.read(&resolve, count)?;
        // Mean over the steps of each dispatch's interval, then the median over repetitions.
        for (i, slot) in per.iter_mut().enumerate() {
            let sum: f64 = (0..steps).map(|s| ticks[s * d + i + 1].saturating_sub(ticks[s * d + i]) as f64).sum();
            slot.push(sum * period * 1e-3 / steps as f64);
        }
    }
    gpu.take_metrics(ctx)?;
    let parts: Vec<String> =
        store.dispatch_names(train).iter().zip(per.iter_mut()).map(|(name, t)| format!("{name} {:.2}", median(t))).collect();
    println!("   inside the default step, {}, {steps} steps: us per dispatch {}", opt.describe(), parts.join(", "));
    Ok(())
}
