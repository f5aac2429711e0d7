//! Doubling an array (stage 01): the CPU loop, the GPU kernel alone, and the GPU with the
//! upload and the download, over sizes 2^10 .. 2^26.
//!
//! Group `double`, parameter = elements, throughput = 8 bytes per element (one f32 read, one
//! written), so criterion reports GB/s for all three; for `gpu_e2e` that figure is the
//! doubling's effective rate, not the bus's.
//! - `cpu`: `double_cpu_into`, one thread, output buffer reused.
//! - `gpu_kernel`: the stage's shader with the data already on the GPU; up to 1024 dispatches
//!   per compute pass, timed by GPU timestamps (harness::time_kernels).
//! - `gpu_e2e`: `DoubleGpu::round_trip`: write the input, dispatch, copy back, wait (wall clock).
//!
//! `cargo bench --bench double` (quick sweep), `BENCH_FULL=1 cargo bench --bench double`.

use benches::harness::{self, Bench, must, time_kernels, time_wall};
use common::{GpuContext, GpuTimer, assert_same};
use criterion::{BenchmarkId, Throughput};
use double::{BYTES_PER_ELEMENT, DoubleGpu, SHADER, WORKGROUP_SIZE, double_cpu, double_cpu_into, sample_input};
use std::hint::black_box;

/// The doubling kernel with the input already on the GPU, for the kernel-only timing.
///
/// Built from the stage's own shader and binding order (input, output, len), because
/// `DoubleGpu` keeps its `record` private (requested in CONTRACTS.md): one timed pass must
/// hold many dispatches, or the per-pass submit and timestamp read-back dwarf a small kernel.
struct Resident {
    pipeline: common::wgpu::ComputePipeline,
    bind_group: common::wgpu::BindGroup,
    groups: (u32, u32, u32),
}

impl Resident {
    /// Uploads `input: [n]`, runs the kernel once and checks it against the CPU, bit for bit.
    fn new(ctx: &GpuContext, timer: &GpuTimer, pipeline: &common::wgpu::ComputePipeline, input: &[f32]) -> Self {
        let n = input.len();
        let input_buf = must(ctx.storage_buffer("double input", input), "uploading the input");
        let output = must(ctx.storage_buffer_empty("double output", 4 * n as u64), "allocating the output");
        let len = ctx.uniform_buffer("double len", &(n as u32));
        let bind_group = must(ctx.bind_group("double", pipeline, 0, &[&input_buf, &output, &len]), "binding");
        let groups = must(ctx.workgroups_1d(n as u64, WORKGROUP_SIZE), "dispatch size");
        let me = Resident { pipeline: pipeline.clone(), bind_group, groups };
        ctx.poison(&output);
        time_kernels(ctx, timer, 1, |pass| me.record(pass));
        let got: Vec<f32> = must(ctx.read(&output, n), "reading the result");
        assert_same(&got, &double_cpu(input));
        me
    }

    fn record(&self, pass: &mut common::wgpu::ComputePass<'_>) {
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &self.bind_group, &[]);
        pass.dispatch_workgroups(self.groups.0, self.groups.1, self.groups.2);
    }
}

fn main() {
    let Bench { ctx, timer, sweep, mut criterion } = Bench::start("double", &["double"]);
    let full: Vec<usize> = (10..=26).map(|p| 1 << p).collect();
    let quick: Vec<usize> = (10..=24).step_by(2).map(|p| 1 << p).collect();
    let limit = ctx.limits.max_storage_buffer_binding_size.min(ctx.limits.max_buffer_size) / 4;
    let (sizes, skipped): (Vec<usize>, Vec<usize>) =
        sweep.pick(&[1 << 10], &quick, &full).into_iter().partition(|&n| n as u64 <= limit);
    if !skipped.is_empty() {
        eprintln!("double: skipping {skipped:?} elements: more than this device's {limit}-float storage binding");
    }
    let pipeline = must(ctx.compute_pipeline("double", SHADER, "main"), "compiling the doubling shader");

    let mut g = harness::group(&mut criterion, "double");
    for n in sizes {
        g.throughput(Throughput::BytesDecimal(BYTES_PER_ELEMENT * n as u64));
        let input = sample_input(n, n as u64);
        let mut out = vec![0.0f32; n];

        g.bench_with_input(BenchmarkId::new("cpu", n), &n, |b, _| {
            b.iter(|| double_cpu_into(black_box(&input), black_box(&mut out)))
        });

        // Set up on first use, so a criterion filter that skips this one builds nothing.
        let mut resident: Option<Resident> = None;
        g.bench_with_input(BenchmarkId::new("gpu_kernel", n), &n, |b, _| {
            let r = resident.get_or_insert_with(|| Resident::new(&ctx, &timer, &pipeline, &input));
            b.iter_custom(|iters| time_kernels(&ctx, &timer, iters, |pass| r.record(pass)))
        });
        drop(resident);

        let mut gpu: Option<DoubleGpu> = None;
        g.bench_with_input(BenchmarkId::new("gpu_e2e", n), &n, |b, _| {
            let d = gpu.get_or_insert_with(|| {
                let mut d = must(DoubleGpu::new(&ctx, n), "building DoubleGpu");
                d.poison_output(&ctx);
                must(d.round_trip(&ctx, &input, &mut out), "round trip");
                assert_same(&out, &double_cpu(&input));
                d
            });
            b.iter_custom(|iters| time_wall(iters, || must(d.round_trip(&ctx, black_box(&input), &mut out), "round trip")))
        });
    }
    g.finish();
    criterion.final_summary();
}
