//! The GPU must match the CPU bit for bit: doubling is exact in binary floating point.
//!
//! These run on whatever adapter `common::test_context()` finds (lavapipe in CI), with one
//! shared context per test binary.

use common::{assert_same, test_context};
use rand::{Rng, SeedableRng};

use super::*;

/// Random values in [-1e6, 1e6) with both signs, with the values doubling must keep put at
/// random places: +-infinity, NaN, -0.0, and +-f32::MAX (which overflows to +-infinity). Every
/// input of 6 or more elements holds all of them; shorter ones hold the first n.
fn awkward_input(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut v: Vec<f32> = (0..n).map(|_| rng.random_range(-1e6f32..1e6)).collect();
    let specials = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0, f32::MAX, -f32::MAX];
    let mut taken = Vec::new();
    for &special in specials.iter().take(n) {
        // Each special takes a slot no other special has taken.
        let slot = loop {
            let slot = rng.random_range(0..n);
            if !taken.contains(&slot) {
                break slot;
            }
        };
        taken.push(slot);
        v[slot] = special;
    }
    v
}

#[test]
fn shader_and_rust_agree_on_the_workgroup_size() {
    let line = format!("const WORKGROUP_SIZE: u32 = {WORKGROUP_SIZE}u;");
    assert!(SHADER.contains(&line), "shaders/double.wgsl must declare `{line}`");
}

#[test]
fn cpu_doubles_and_keeps_specials() {
    let out = double_cpu(&[1.5, -3.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, f32::MAX]);
    assert_same(&out, &[3.0, -6.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, f32::INFINITY]);
    assert!(double_cpu(&[]).is_empty());
}

#[test]
fn gpu_equals_cpu_on_awkward_lengths() {
    let ctx = test_context();
    for (seed, n) in [1usize, 17, 63, 65, 255, 256, 257, 1000, 4099].into_iter().enumerate() {
        let input = awkward_input(n, seed as u64);
        let out = double_gpu(ctx, &input).unwrap_or_else(|e| panic!("n = {n}: {e}"));
        assert_same(&out, &double_cpu(&input));
    }
}

#[test]
fn every_transfer_path_equals_cpu() {
    // Past one 16 MiB transfer chunk (4,194,304 floats) by 1,001, so the fast paths use two
    // chunks, the second one ragged; and small sizes, which go through `write_buffer`.
    let ctx = test_context();
    let n = (16 << 20) / 4 + 1001;
    let mut gpu = DoubleGpu::new(ctx, n).unwrap();
    for (seed, len) in [n, 1, 17, 4099, n - 5].into_iter().enumerate() {
        let input = awkward_input(len, 50 + seed as u64);
        let expected = double_cpu(&input);
        for path in Path::ALL {
            gpu.poison_output(ctx);
            let mut out = vec![0.0; len];
            gpu.round_trip(ctx, path, &input, &mut out).unwrap();
            assert_same(&out, &expected);

            gpu.poison_output(ctx);
            gpu.upload(ctx, path, &input).unwrap();
            gpu.run(ctx).unwrap();
            out.fill(0.0);
            gpu.download(ctx, path, &mut out).unwrap();
            assert_same(&out, &expected);
        }
        gpu.poison_output(ctx);
        assert_same(&gpu.round_trip_mapped(ctx, &input).unwrap(), &expected);
        assert_same(&gpu.download_mapped(ctx).unwrap(), &expected);
    }
}

#[test]
fn empty_input_does_not_crash() {
    let ctx = test_context();
    assert!(double_gpu(ctx, &[]).unwrap().is_empty());
    // A zero-capacity DoubleGpu works too: its buffers are 4-byte placeholders.
    let mut gpu = DoubleGpu::new(ctx, 0).unwrap();
    for path in Path::ALL {
        gpu.upload(ctx, path, &[]).unwrap();
        let seconds = gpu.run(ctx).unwrap();
        assert!(seconds.is_finite() && seconds >= 0.0);
        gpu.download(ctx, path, &mut []).unwrap();
        gpu.round_trip(ctx, path, &[], &mut []).unwrap();
    }
    assert!(gpu.round_trip_mapped(ctx, &[]).unwrap().is_empty());
}

#[test]
fn gpu_covers_more_than_one_dispatch_dimension() {
    let ctx = test_context();
    // 65,535 workgroups of 256 cover 16,776,960 elements; go past that, so y = 2.
    let n = 65_535 * 256 + 1000;
    let (x, y, _) = ctx.workgroups_1d(n as u64, WORKGROUP_SIZE).unwrap();
    assert!(y >= 2 && x as u64 <= ctx.limits.max_compute_workgroups_per_dimension as u64, "({x}, {y})");
    let input = awkward_input(n, 42);
    let mut gpu = DoubleGpu::new(ctx, n).unwrap();
    gpu.poison_output(ctx);
    gpu.upload(ctx, Path::Simple, &input).unwrap();
    gpu.run(ctx).unwrap();
    let mut out = vec![0.0; n];
    gpu.download(ctx, Path::Simple, &mut out).unwrap();
    // Poison is NaN; the tail past 65,535 x 256 (written only by the y = 1 row) must be real.
    assert_same(&out, &double_cpu(&input));
}

#[test]
fn reused_kernel_doubles_only_the_uploaded_length() {
    let ctx = test_context();
    let mut gpu = DoubleGpu::new(ctx, 1000).unwrap();
    assert_eq!(gpu.capacity(), 1000);
    let big = awkward_input(1000, 7);
    let mut out = vec![0.0; 1000];
    gpu.round_trip(ctx, Path::Simple, &big, &mut out).unwrap();
    assert_same(&out, &double_cpu(&big));

    // A shorter upload: the kernel must stop at 300 and leave the poisoned rest alone.
    let small = awkward_input(300, 8);
    gpu.poison_output(ctx);
    gpu.upload(ctx, Path::Fast, &small).unwrap();
    gpu.run(ctx).unwrap();
    let mut out = vec![0.0; 300];
    gpu.download(ctx, Path::Fast, &mut out).unwrap();
    assert_same(&out, &double_cpu(&small));
    let whole: Vec<u32> = ctx.read(&gpu.output, 1000).unwrap();
    assert!(whole[300..].iter().all(|&bits| bits == u32::MAX), "the kernel wrote past `len`");
}

#[test]
fn wrong_lengths_are_errors_not_panics() {
    let ctx = test_context();
    let mut gpu = DoubleGpu::new(ctx, 10).unwrap();
    for path in Path::ALL {
        let err = gpu.upload(ctx, path, &[1.0; 11]).unwrap_err();
        assert!(err.to_string().contains("DoubleGpu::new(ctx, 11)"), "{err}");
        gpu.upload(ctx, path, &[1.0; 4]).unwrap();
        assert!(gpu.download(ctx, path, &mut [0.0; 5]).is_err());
        assert!(gpu.round_trip(ctx, path, &[1.0; 3], &mut [0.0; 2]).is_err());
    }
    assert!(gpu.round_trip_mapped(ctx, &[1.0; 11]).is_err());
}

#[test]
fn capacity_over_the_device_limit_is_a_clear_error() {
    let ctx = test_context();
    let floats = (ctx.limits.max_storage_buffer_binding_size / 4 + 1) as usize;
    let err = DoubleGpu::new(ctx, floats).err().expect("a buffer over the limit must be refused");
    assert!(err.to_string().contains("max_storage_buffer_binding_size"), "{err}");
}

#[test]
fn walkthrough_doubles_a_small_input() {
    // This makes its own instance and device: the one test that does not share the context.
    let input = awkward_input(1000, 3);
    let (info, out) = double_walkthrough(&input).unwrap();
    assert!(!info.name.is_empty());
    assert_same(&out, &double_cpu(&input));
    let (_, empty) = double_walkthrough(&[]).unwrap();
    assert!(empty.is_empty());
}

#[test]
fn sample_input_is_random_and_nonzero() {
    let a = sample_input(1000, 1);
    assert_eq!(a, sample_input(1000, 1), "same seed, same values");
    assert_ne!(a, sample_input(1000, 2));
    assert!(a.iter().any(|&v| v < 0.0) && a.iter().any(|&v| v > 0.0));
    assert!(a.iter().all(|v| v.is_finite() && v.abs() < 1000.0));
}

#[test]
fn record_puts_many_dispatches_in_one_pass() {
    // `record` doubles `input` into `output`, so repeating it alone would change nothing. Between
    // its dispatches this test records the same kernel with the buffers swapped (`output` back
    // into `input`), in the same pass: three `record`s and two swapped dispatches double five
    // times, 32x the input. A `record` that did not run leaves 4x, 8x or 16x.
    let ctx = test_context();
    let input = awkward_input(777, 9);
    let mut gpu = DoubleGpu::new(ctx, 1000).unwrap();
    gpu.poison_output(ctx);
    gpu.upload(ctx, Path::Simple, &input).unwrap();
    let swapped = ctx.bind_group("double, swapped", &gpu.pipeline, 0, &[&gpu.output, &gpu.input, &gpu.len_buffer]).unwrap();
    let (x, y, z) = gpu.groups;
    let timer = common::GpuTimer::new(ctx);
    timer
        .time_pass(ctx, "five doublings", |pass| {
            for i in 0..3 {
                gpu.record(pass);
                if i < 2 {
                    pass.set_bind_group(0, &swapped, &[]);
                    pass.dispatch_workgroups(x, y, z);
                }
            }
        })
        .unwrap();
    let mut out = vec![0.0; 777];
    gpu.download(ctx, Path::Simple, &mut out).unwrap();
    let mut expected = input;
    for _ in 0..5 {
        expected = double_cpu(&expected);
    }
    assert_same(&out, &expected);
}
