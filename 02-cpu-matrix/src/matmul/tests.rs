//! Every variant, plain and transposed, against the f64 reference on random inputs and awkward
//! shapes; shape errors; each micro-kernel, forced and as chosen, seen to run; odd thread
//! counts.
//!
//! Tolerance: every output is a sum of `k` products of values in [-1, 1), each rounded in f32
//! (unit roundoff 6e-8). Summed in any order the error stays far below `k * 1e-6`, which is the
//! absolute tolerance, plus 1e-5 relative; NaN fails (the shared checker).

use super::blocked::{KC, MR, MicroKernel, NR, TILES, gemm_blocked};
use super::parallel::gemm_parallel;
use super::*;
use common::assert_close;

/// `(m, k, n)`: 1x1, a row vector, a column vector, odd sizes around the tile sizes (8 x 32; a
/// last tile 26 columns wide puts its edge inside the second vector of the micro-kernel),
/// shapes that cross the KC = 256 and MC = 192 block edges, one past NC = 4096 columns, the
/// MNIST layer shapes, and empty ones.
const SHAPES: &[(usize, usize, usize)] = &[
    (1, 1, 1),
    (1, 63, 65),
    (65, 63, 1),
    (1, 1, 257),
    (17, 63, 65),
    (129, 257, 3),
    (7, 9, 31),
    (19, 40, 90),
    (9, 129, 33),
    (200, 300, 70),
    (3, 5, 4100),
    (64, 784, 128),
    (0, 5, 7),
    (5, 0, 7),
    (5, 7, 0),
];

fn tolerance(k: usize) -> (f64, f64) {
    (1e-5, 1e-6 * k.max(1) as f64)
}

/// Random operands for `op(a) * op(b)` of logical shape `m x k * k x n`, stored as `t` says,
/// and the f64 reference computed on explicit transposes.
fn case(t: Transpose, (m, k, n): (usize, usize, usize), seed: u64) -> (Matrix, Matrix, Matrix) {
    let a = Matrix::random_uniform(m, k, -1.0, 1.0, seed);
    let b = Matrix::random_uniform(k, n, -1.0, 1.0, seed + 1);
    let expected = matmul_f64_reference_full(&a, &b, Transpose::None).unwrap();
    match t {
        Transpose::None => (a, b, expected),
        Transpose::A => (a.transpose(), b, expected),
        Transpose::B => (a, b.transpose(), expected),
    }
}

#[test]
fn every_variant_matches_the_f64_reference() {
    for t in [Transpose::None, Transpose::A, Transpose::B] {
        for (s, &shape) in SHAPES.iter().enumerate() {
            let (a, b, expected) = case(t, shape, 100 * s as u64);
            for kernel in CpuKernel::ALL {
                // Poison: an element a kernel forgets to write shows up as NaN.
                let mut out = Matrix::new(shape.0, shape.2, vec![f32::NAN; shape.0 * shape.2]).unwrap();
                matmul_t_into(kernel, t, &a, &b, &mut out).unwrap();
                let (rel, abs) = tolerance(shape.1);
                if let Err(e) = common::check_close(&out.data, &expected.data, rel, abs) {
                    panic!("variant {kernel:?}, {t:?}, shape {shape:?}: {e}");
                }
            }
        }
    }
}

#[test]
fn public_shortcuts_compute_the_right_products() {
    let (a, b, expected) = case(Transpose::A, (33, 70, 45), 1);
    let (rel, abs) = tolerance(70);
    assert_close(&matmul_at_b(&a, &b).unwrap().data, &expected.data, rel, abs);
    let mut out = Matrix::zeros(33, 45);
    matmul_at_b_into(&a, &b, &mut out).unwrap();
    assert_close(&out.data, &expected.data, rel, abs);

    let (a, b, expected) = case(Transpose::B, (33, 70, 45), 2);
    assert_close(&matmul_a_bt(&a, &b).unwrap().data, &expected.data, rel, abs);
    matmul_a_bt_into(&a, &b, &mut out).unwrap();
    assert_close(&out.data, &expected.data, rel, abs);

    let (a, b, expected) = case(Transpose::None, (33, 70, 45), 3);
    assert_close(&matmul(&a, &b).unwrap().data, &expected.data, rel, abs);
    matmul_into(&a, &b, &mut out).unwrap();
    assert_close(&out.data, &expected.data, rel, abs);
    assert_close(&matmul_with(CpuKernel::Naive, &a, &b).unwrap().data, &expected.data, rel, abs);
}

#[test]
fn portable_micro_kernel_and_odd_thread_counts_match() {
    for t in [Transpose::None, Transpose::A, Transpose::B] {
        for &shape in &[(17, 63, 65), (19, 40, 90), (129, 257, 3), (200, 300, 70), (3, 5, 4100)] {
            let (a, b, expected) = case(t, shape, 7);
            let (av, bv) = match t {
                Transpose::None => (MatRef::of(&a), MatRef::of(&b)),
                Transpose::A => (MatRef::of(&a).t(), MatRef::of(&b)),
                Transpose::B => (MatRef::of(&a), MatRef::of(&b).t()),
            };
            let (rel, abs) = tolerance(shape.1);
            // A guard band after the output: the masked edge stores must not write past it.
            let len = shape.0 * shape.2;
            let mut out = vec![f32::NAN; len + GUARD];
            let check = |out: &[f32], what: &str| {
                assert_close(&out[..len], &expected.data, rel, abs);
                assert!(out[len..].iter().all(|x| x.is_nan()), "{what} {t:?} {shape:?} wrote past the output");
            };
            gemm_blocked(av, bv, &mut out, shape.2, MicroKernel::Portable);
            check(&out, "portable kernel");
            for threads in [1, 2, 3, 5] {
                for kernel in [MicroKernel::Portable, MicroKernel::detect()] {
                    out.fill(f32::NAN);
                    // Cut-off 0: split even the small shapes, so every strip edge is exercised.
                    gemm_parallel(av, bv, &mut out[..len], threads, 0, kernel);
                    check(&out, &format!("{kernel:?} on {threads} threads"));
                }
            }
        }
    }
}

/// Floats after the output that must stay untouched.
const GUARD: usize = 64;

/// Whether this CPU has AVX-512F, read from the kernel's `/proc/cpuinfo` flags where it exists:
/// a second opinion, independent of the `is_x86_feature_detected!` that
/// [`MicroKernel::detect`] asks.
fn cpu_has_avx512f() -> bool {
    match std::fs::read_to_string("/proc/cpuinfo") {
        Ok(info) => info.lines().filter(|l| l.starts_with("flags")).any(|l| l.split_whitespace().any(|f| f == "avx512f")),
        #[cfg(target_arch = "x86_64")]
        Err(_) => std::arch::is_x86_feature_detected!("avx512f"),
        #[cfg(not(target_arch = "x86_64"))]
        Err(_) => false,
    }
}

/// Runs `f` and returns the tiles each micro-kernel computed meanwhile on this thread:
/// `[avx512, portable]`.
fn tiles_during(f: impl FnOnce()) -> [usize; 2] {
    let before = TILES.with(|t| t.get());
    f();
    let after = TILES.with(|t| t.get());
    [after[0] - before[0], after[1] - before[1]]
}

/// Says on the terminal, even when the test passes (a direct write to stderr is not captured
/// by the test harness), that the AVX-512 micro-kernel was not tested here.
fn say_loudly(message: &str) {
    use std::io::Write;
    let line = "!".repeat(78);
    let _ = writeln!(std::io::stderr(), "\n{line}\n!! cpu-matrix: {message}\n{line}");
}

#[test]
fn each_micro_kernel_runs_when_forced_and_detect_picks_avx512_where_the_cpu_has_it() {
    let has_avx512 = cpu_has_avx512f();
    // Edge tiles in both directions, two depth blocks (k > KC).
    let (m, k, n): (usize, usize, usize) = (19, 300, 70);
    let tiles = k.div_ceil(KC) * m.div_ceil(MR) * n.div_ceil(NR);
    let (a, b, expected) = case(Transpose::None, (m, k, n), 11);
    let (rel, abs) = tolerance(k);
    #[cfg(target_arch = "x86_64")]
    let avx512 = has_avx512.then_some((MicroKernel::Avx512, [tiles, 0]));
    #[cfg(not(target_arch = "x86_64"))]
    let avx512 = None;
    for (kernel, want) in std::iter::once((MicroKernel::Portable, [0, tiles])).chain(avx512) {
        let mut out = vec![f32::NAN; m * n];
        let ran = tiles_during(|| gemm_blocked(MatRef::of(&a), MatRef::of(&b), &mut out, n, kernel));
        assert_eq!(ran, want, "forcing {kernel:?}: tiles computed by [AVX-512, portable]");
        assert_close(&out, &expected.data, rel, abs);
    }

    // What runs by default: variant 3 through the public API, on this thread.
    let default = if has_avx512 { [tiles, 0] } else { [0, tiles] };
    let mut out = Matrix::zeros(m, n);
    let ran = tiles_during(|| matmul_t_into(CpuKernel::Blocked, Transpose::None, &a, &b, &mut out).unwrap());
    assert_eq!(ran, default, "variant 3 by default on a CPU {} AVX-512F: tiles by [AVX-512, portable]", if has_avx512 { "with" } else { "without" });
    assert_close(&out.data, &expected.data, rel, abs);
    if has_avx512 {
        assert_eq!(format!("{:?}", MicroKernel::detect()), "Avx512");
    } else {
        assert_eq!(MicroKernel::detect(), MicroKernel::Portable);
        say_loudly("this CPU lacks AVX-512F: the AVX-512 micro-kernel was NOT tested, only the portable one");
    }
}

#[test]
fn shape_mismatches_are_errors_naming_both_shapes() {
    let a = Matrix::zeros(2, 3);
    let b = Matrix::zeros(4, 5);
    for kernel in CpuKernel::ALL {
        let err = matmul_with(kernel, &a, &b).unwrap_err();
        assert_eq!(err, MatrixError::Shape { op: "matmul (a: [m, k], b: [k, n])", left: (2, 3), right: (4, 5) });
        assert!(err.to_string().contains("2x3 and 4x5"), "{err}");
    }
    let err = matmul_at_b(&a, &b).unwrap_err();
    assert_eq!(err.to_string(), "matmul_at_b (a: [k, m], b: [k, n]): shapes 2x3 and 4x5 do not fit");
    let err = matmul_a_bt(&a, &b).unwrap_err();
    assert_eq!(err.to_string(), "matmul_a_bt (a: [m, k], b: [n, k]): shapes 2x3 and 4x5 do not fit");
    let mut wrong = Matrix::zeros(3, 3);
    let err = matmul_into(&a, &Matrix::zeros(3, 4), &mut wrong).unwrap_err();
    assert_eq!(err.to_string(), "matmul (a: [m, k], b: [k, n]): the output must be 2x4, got 3x3");
    assert_eq!(wrong, Matrix::zeros(3, 3), "a failed call leaves the output alone");
    assert!(matmul_f64_reference(&a, &b, Transpose::None, &[0]).is_err());
    assert!(matmul_f64_reference(&a, &Matrix::zeros(3, 1), Transpose::None, &[2]).is_err(), "row 2 of a 2-row product");
}

#[test]
fn the_reference_reads_transposes_in_place_and_any_rows() {
    let a = Matrix::random_uniform(5, 3, -1.0, 1.0, 1);
    let b = Matrix::random_uniform(3, 4, -1.0, 1.0, 2);
    let ab = matmul_f64_reference_full(&a, &b, Transpose::None).unwrap();
    for t in [Transpose::None, Transpose::A, Transpose::B] {
        let (aa, bb) = match t {
            Transpose::None => (a.clone(), b.clone()),
            Transpose::A => (a.transpose(), b.clone()),
            Transpose::B => (a.clone(), b.transpose()),
        };
        assert_eq!(matmul_f64_reference_full(&aa, &bb, t).unwrap(), ab, "{t:?}");
        let rows = matmul_f64_reference(&aa, &bb, t, &[4, 0, 2]).unwrap();
        let expect: Vec<f32> = [4, 0, 2].iter().flat_map(|&r| ab.data[r * 4..r * 4 + 4].to_vec()).collect();
        assert_eq!(rows, expect, "{t:?}");
    }
}

#[test]
fn kernel_numbers_round_trip() {
    for (i, kernel) in CpuKernel::ALL.into_iter().enumerate() {
        assert_eq!(kernel.number() as usize, i);
        assert_eq!(CpuKernel::from_number(i as u32), Some(kernel));
    }
    assert_eq!(CpuKernel::from_number(5), None);
    assert!(num_threads() >= 1);
}
