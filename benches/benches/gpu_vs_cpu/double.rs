//! Doubling an array (stage 01): the CPU loop, the GPU kernel alone, and the GPU with the
//! upload and the download, over sizes 2^10 .. 2^26 (software sweep: every third power up to
//! 2^22).
//!
//! Group `double`, parameter = elements, throughput = 8 bytes per element (one f32 read, one
//! written), so criterion reports GB/s for all of them; for the `*_e2e` functions that figure
//! is the doubling's effective rate, not the bus's.
//! - `cpu`: `double_cpu_into`, one thread, output buffer reused.
//! - `gpu_kernel`: `DoubleGpu::record` with the data already on the GPU; up to 1024
//!   dispatches per compute pass, timed by GPU timestamps (harness::time_kernels).
//! - `gpu_e2e`, `gpu_fast_e2e`, `gpu_mapped_e2e`: `DoubleGpu::round_trip` along stage 01's
//!   transfer paths 1 (simple: `write_buffer` up, one staging buffer copied out by one thread),
//!   2 (fast: `common::Transfer`) and 3 (`round_trip_mapped`: the fast upload, the result read
//!   in mapped memory and not copied out): write the input, dispatch, copy back, wait (wall
//!   clock).
//!
//! Only this group: `cargo bench -- double`.

use benches::harness::{self, Bench, must, time_kernels, time_wall};
use common::assert_same;
use criterion::{BenchmarkId, Throughput};
use double::{BYTES_PER_ELEMENT, DoubleGpu, Path, double_cpu, double_cpu_into, sample_input};
use std::hint::black_box;

pub fn run(bench: &mut Bench) {
    let (ctx, timer, sweep, criterion) = (&bench.ctx, &bench.timer, bench.sweep, &mut bench.criterion);
    let full: Vec<usize> = (10..=26).map(|p| 1 << p).collect();
    let quick: Vec<usize> = (10..=24).step_by(2).map(|p| 1 << p).collect();
    let software: Vec<usize> = (10..=22).step_by(3).map(|p| 1 << p).collect();
    let limit = ctx.limits.max_storage_buffer_binding_size.min(ctx.limits.max_buffer_size) / 4;
    let (sizes, skipped): (Vec<usize>, Vec<usize>) =
        sweep.pick(&[1 << 10], &software, &quick, &full).into_iter().partition(|&n| n as u64 <= limit);
    if !skipped.is_empty() {
        eprintln!("double: skipping {skipped:?} elements: more than this device's {limit}-float storage binding");
    }

    let mut g = harness::group(criterion, "double");
    for n in sizes {
        g.throughput(Throughput::BytesDecimal(BYTES_PER_ELEMENT * n as u64));
        let input = sample_input(n, n as u64);
        let mut out = vec![0.0f32; n];

        g.bench_with_input(BenchmarkId::new("cpu", n), &n, |b, _| {
            b.iter(|| double_cpu_into(black_box(&input), black_box(&mut out)))
        });

        // Built on first use (so a criterion filter that skips both builds nothing), shared by
        // the kernel-only and the end-to-end benchmark; each checks its first result.
        let mut gpu: Option<DoubleGpu> = None;
        let make = || must(DoubleGpu::new(ctx, n), "building DoubleGpu");
        let mut checked = false;
        g.bench_with_input(BenchmarkId::new("gpu_kernel", n), &n, |b, _| {
            let d = gpu.get_or_insert_with(make);
            if !checked {
                d.poison_output(ctx);
                must(d.upload(ctx, Path::Simple, &input), "upload");
                time_kernels(ctx, timer, 1, |pass| d.record(pass));
                must(d.download(ctx, Path::Simple, &mut out), "download");
                assert_same(&out, &double_cpu(&input));
                checked = true;
            }
            b.iter_custom(|iters| time_kernels(ctx, timer, iters, |pass| d.record(pass)))
        });
        for (function, path) in [("gpu_e2e", Path::Simple), ("gpu_fast_e2e", Path::Fast), ("gpu_mapped_e2e", Path::Mapped)] {
            // Path 3 reads the result in place: the round trip ends when the guard is dropped.
            let round_trip = |d: &mut DoubleGpu, input: &[f32], out: &mut [f32]| match path {
                Path::Mapped => must(d.round_trip_mapped(ctx, input).map(drop), "round trip"),
                _ => must(d.round_trip(ctx, path, input, out), "round trip"),
            };
            let mut checked = false;
            g.bench_with_input(BenchmarkId::new(function, n), &n, |b, _| {
                let d = gpu.get_or_insert_with(make);
                if !checked {
                    d.poison_output(ctx);
                    if path == Path::Mapped {
                        assert_same(&must(d.round_trip_mapped(ctx, &input), "round trip"), &double_cpu(&input));
                    } else {
                        must(d.round_trip(ctx, path, &input, &mut out), "round trip");
                        assert_same(&out, &double_cpu(&input));
                    }
                    checked = true;
                }
                b.iter_custom(|iters| time_wall(iters, || round_trip(d, black_box(&input), &mut out)))
            });
        }
    }
    g.finish();
}
