//! Every GPU kernel against the f64 CPU reference, on awkward shapes, in every transpose mode.
//!
//! Inputs are uniform in [-1, 1] (never zeros); the output is poisoned (NaN) before each run so
//! an element a kernel forgets to write fails; the tolerance is `Kernel::tolerance(k)`
//! (`abs + rel * |expected|`, NaN failing). Runs on whatever adapter `WGPU_ADAPTER_NAME` picks
//! (lavapipe in CI: keep sizes small).
//!
//! Kernels 06 and 08 need cooperative matrices, which lavapipe lacks: there the tests say on
//! stderr which kernels and tiles they skipped and why. With `REQUIRE_COOP_MATRIX=1` a skipped
//! kernel 06 or 08 (or one of their tiles) fails the tests instead: set it on a GPU that has
//! them, so that a run whose output is quoted has checked them.

use std::io::Write;
use std::sync::Once;

use common::{GpuContext, test_context};
use cpu_matrix::Matrix;
use gpu_matmul::{
    GpuMatrix, Kernel, Matmul, MatmulCall, MatmulError, PeakProbe, Precision, TRANSPOSES, Tile, Transpose, coop_support, formula,
    reference_rows,
};

/// The environment variable that turns skipped cooperative-matrix kernels into failures.
const REQUIRE_COOP_ENV: &str = "REQUIRE_COOP_MATRIX";

fn require_coop() -> bool {
    std::env::var(REQUIRE_COOP_ENV).is_ok_and(|v| v.trim() == "1")
}

/// Writes to the process's stderr directly: the test harness captures `eprintln!` of passing
/// tests, and what was skipped must show whether or not a test fails.
fn note(msg: &str) {
    let _ = writeln!(std::io::stderr(), "{msg}");
}

/// Stored shapes of a and b for `op(a) [m, k] * op(b) [k, n]`.
fn stored(m: usize, k: usize, n: usize, t: Transpose) -> ((usize, usize), (usize, usize)) {
    match t {
        Transpose::None => ((m, k), (k, n)),
        Transpose::A => ((k, m), (k, n)),
        Transpose::B => ((m, k), (n, k)),
    }
}

/// Random operands for `op(a) [m, k] * op(b) [k, n]` and their f64 reference product.
struct Case {
    a: Matrix,
    b: Matrix,
    t: Transpose,
    expected: Vec<f32>,
}

impl Case {
    fn new(m: usize, k: usize, n: usize, t: Transpose, seed: u64) -> Self {
        let ((ar, ac), (br, bc)) = stored(m, k, n, t);
        let a = Matrix::random_uniform(ar, ac, -1.0, 1.0, seed);
        let b = Matrix::random_uniform(br, bc, -1.0, 1.0, seed + 1);
        let expected = reference_rows(&a, &b, t, &(0..m).collect::<Vec<_>>()).unwrap();
        Self { a, b, t, expected }
    }

    /// Runs the product with `mm` into a poisoned output, checks every element, and returns
    /// the kernel and tile that `prepare` chose.
    fn check(&self, mm: &Matmul) -> (Kernel, Tile) {
        self.check_on(test_context(), mm)
    }

    /// [`Case::check`] on the device `ctx` (where `mm` was made).
    fn check_on(&self, ctx: &GpuContext, mm: &Matmul) -> (Kernel, Tile) {
        let t = self.t;
        let (m, k, n) = gpu_matmul::product_dims(t, self.a.shape(), self.b.shape()).unwrap();
        let (ga, gb) = (GpuMatrix::upload(ctx, &self.a).unwrap(), GpuMatrix::upload(ctx, &self.b).unwrap());
        let out = GpuMatrix::zeros(ctx, m, n).unwrap();
        ctx.poison(&out.buffer);
        let call = mm.prepare(ctx, &ga, &gb, &out, t).unwrap();
        ctx.submit_pass("matmul", |pass| call.record(pass));
        let got = out.download(ctx).unwrap();
        let (used, tile) = call.kernel();
        let (rel, abs) = used.tolerance(k);
        if let Err(e) = common::check_close(&got.data, &self.expected, rel, abs) {
            panic!("kernel {} (ran {used} tile {tile}) {} with m={m} k={k} n={n}: {e}", mm.kernel(), formula(t));
        }
        (used, tile)
    }
}

/// Checks one product of random inputs with `mm`; returns the kernel and tile it ran.
fn check(mm: &Matmul, m: usize, k: usize, n: usize, t: Transpose, seed: u64) -> (Kernel, Tile) {
    Case::new(m, k, n, t, seed).check(mm)
}

fn run(call: &MatmulCall) {
    test_context().submit_pass("matmul", |pass| call.record(pass));
}

/// Awkward shapes `(m, k, n)`: 1 x 1, 17 x 63 x 65, 129 x 257 x 3, and more; nothing divides a tile.
const SMALL_SHAPES: [(usize, usize, usize); 5] = [(1, 1, 1), (17, 63, 65), (129, 257, 3), (300, 1, 300), (2, 3, 1)];
/// Shapes whose stored widths are all multiples of 4 whichever operand is transposed.
const ALIGNED_SHAPES: [(usize, usize, usize); 3] = [(4, 4, 4), (36, 20, 132), (132, 260, 68)];

/// The kernels this adapter runs. The others are named on stderr (once per test binary) with
/// the reason; with `REQUIRE_COOP_MATRIX=1` any skipped kernel fails the calling test.
fn kernels_here() -> Vec<Kernel> {
    static SAID: Once = Once::new();
    let ctx = test_context();
    let mut here = Vec::new();
    for k in Kernel::ALL {
        match coop_support(ctx) {
            Err(why) if k.needs_cooperative_matrix() => {
                assert!(!require_coop(), "{REQUIRE_COOP_ENV}=1, but kernel {k} cannot run on {}: {why}", ctx.info.name);
                SAID.call_once(|| {
                    note(&format!(
                        "gpu-matmul tests: kernels 06 and 08 SKIPPED on {}: {why} (set {REQUIRE_COOP_ENV}=1 to make this an error)",
                        ctx.info.name
                    ))
                });
            }
            _ => here.push(k),
        }
    }
    here
}

#[test]
fn fastest_kernel_follows_the_adapter() {
    let ctx = test_context();
    assert_eq!(Kernel::fastest(ctx, Precision::F32), Kernel::BEST);
    let f16 = Kernel::fastest(ctx, Precision::F16Inputs);
    if coop_support(ctx).is_ok() {
        assert_eq!(f16, Kernel::BEST_F16_INPUTS);
    } else {
        assert!(!require_coop(), "{REQUIRE_COOP_ENV}=1, but {} has no cooperative matrices", ctx.info.name);
        assert_eq!(f16, Kernel::BEST);
    }
    assert_eq!(Kernel::BEST.precision(), Precision::F32);
    assert_eq!(Kernel::BEST_F16_INPUTS.precision(), Precision::F16Inputs);
}

/// Every f32 kernel builds and computes right on a device held to WebGPU's defaults (16 KiB of
/// workgroup memory, 256 invocations per workgroup: what a browser may offer and no more), where
/// `Matmul::new` keeps the tiles of each ladder that fit (kernel 05's 128 x 64 x 16 needs 24 KiB).
#[test]
fn every_f32_kernel_runs_within_webgpus_default_limits() {
    let ctx = GpuContext::with_limits(common::wgpu::Limits::defaults()).expect("an adapter that offers WebGPU's defaults");
    for kernel in Kernel::ALL.into_iter().filter(|k| !k.needs_cooperative_matrix()) {
        let mm = Matmul::new(&ctx, kernel).unwrap_or_else(|e| panic!("kernel {kernel} within WebGPU's defaults: {e}"));
        for (i, &(m, k, n)) in [(17, 63, 65), (129, 257, 3), (300, 20, 260)].iter().enumerate() {
            for t in TRANSPOSES {
                Case::new(m, k, n, t, 700 + i as u64).check_on(&ctx, &mm);
            }
        }
    }
}

/// `record_product` after `record` gives the same product (for kernel 08: the product alone,
/// on the f16 copies the full call made).
#[test]
fn product_alone_repeats_the_product() {
    let ctx = test_context();
    for kernel in kernels_here().into_iter().filter(|&k| k >= Kernel::Blocked2d) {
        let mm = Matmul::new(ctx, kernel).unwrap();
        let case = Case::new(36, 72, 20, Transpose::B, 40);
        case.check(&mm);
        let (ga, gb) = (GpuMatrix::upload(ctx, &case.a).unwrap(), GpuMatrix::upload(ctx, &case.b).unwrap());
        let out = GpuMatrix::zeros(ctx, 36, 20).unwrap();
        let call = mm.prepare(ctx, &ga, &gb, &out, Transpose::B).unwrap();
        assert_eq!(call.dispatches(), if kernel.converts_to_f16() { 3 } else { 1 });
        run(&call);
        ctx.poison(&out.buffer);
        ctx.submit_pass("product only", |pass| call.record_product(pass));
        let (rel, abs) = kernel.tolerance(72);
        common::assert_close(&out.download(ctx).unwrap().data, &case.expected, rel, abs);
    }
}

#[test]
fn every_kernel_every_transpose_on_awkward_shapes() {
    let ctx = test_context();
    for kernel in kernels_here() {
        let mm = Matmul::new(ctx, kernel).unwrap();
        for t in TRANSPOSES {
            for (i, &(m, k, n)) in SMALL_SHAPES.iter().enumerate() {
                check(&mm, m, k, n, t, 10 + i as u64);
            }
            // Every row stride a multiple of 4 (the vec4 kernels' own path), with m, k, n
            // that still do not divide any tile.
            for (i, &(m, k, n)) in ALIGNED_SHAPES.iter().enumerate() {
                let (used, _) = check(&mm, m, k, n, t, 20 + i as u64);
                assert_eq!(used, kernel, "aligned operands must run the kernel itself");
            }
            // A stride that is not a multiple of 4: vec4 kernels hand over to kernel 03.
            let (used, _) = check(&mm, 17, 63, 65, t, 30);
            let expect = if kernel.needs_vec4_rows() { Kernel::Blocked2d } else { kernel };
            assert_eq!(used, expect);
        }
    }
}

/// A large awkward shape, and one with aligned strides, for the kernels from 03 on
/// (01 and 02 are slow on the software adapter and are covered by the small shapes).
#[test]
fn large_awkward_shape() {
    let ctx = test_context();
    let kernels: Vec<Matmul> =
        kernels_here().into_iter().filter(|&k| k >= Kernel::Blocked2d).map(|k| Matmul::new(ctx, k).unwrap()).collect();
    for t in TRANSPOSES {
        for (m, k, n, seed) in [(1000, 777, 333, 7), (1000, 780, 332, 8)] {
            let case = Case::new(m, k, n, t, seed);
            for mm in &kernels {
                case.check(mm);
            }
        }
    }
}

#[test]
fn every_tune_tile_is_correct() {
    let ctx = test_context();
    let mut skipped = Vec::new();
    let mut ran = 0;
    for kernel in kernels_here() {
        for tile in kernel.tune_tiles() {
            let mm = match Matmul::with_tile(ctx, kernel, tile) {
                Ok(mm) => mm,
                // A tile for a bigger GPU than this one: it must be refused clearly.
                Err(MatmulError::Config { why, .. }) if why.contains("workgroup memory") || why.contains("invocations") => {
                    assert!(
                        !(require_coop() && kernel.needs_cooperative_matrix()),
                        "{REQUIRE_COOP_ENV}=1, but kernel {kernel} tile {tile} cannot run on {}: {why}",
                        ctx.info.name
                    );
                    skipped.push(format!("{kernel} {tile}: {why}"));
                    continue;
                }
                Err(e) => panic!("{e}"),
            };
            ran += 1;
            for t in TRANSPOSES {
                // Misaligned strides: the scalar stand-in for vec4 kernels.
                check(&mm, 67, 45, 71, t, 3);
                // Aligned strides: the kernel itself, over several workgroups and k-steps.
                let (used, _) = check(&mm, 260, 36, 132, t, 4);
                assert_eq!(used, kernel);
                // k a multiple of the depth, blocks wholly inside C: the interior loops (kernel
                // 05's unrolled by two), with an even and an odd number of k-steps.
                for (m, k, n, seed) in [(264, 48, 260, 5), (136, 40, 132, 6)] {
                    assert_eq!(check(&mm, m, k, n, t, seed).0, kernel);
                }
            }
        }
    }
    if !skipped.is_empty() {
        note(&format!(
            "every_tune_tile_is_correct: {ran} tiles checked, {} skipped on {} (too large for it):\n  {}",
            skipped.len(),
            ctx.info.name,
            skipped.join("\n  ")
        ));
    }
}

#[test]
fn shape_mismatches_are_errors_naming_the_shapes() {
    let ctx = test_context();
    let mm = Matmul::new(ctx, Kernel::BEST).unwrap();
    let z = |r, c| GpuMatrix::zeros(ctx, r, c).unwrap();
    let (a, b, out) = (z(4, 5), z(6, 7), z(4, 7));
    let err = mm.prepare(ctx, &a, &b, &out, Transpose::None).err().unwrap();
    let text = err.to_string();
    assert!(matches!(err, MatmulError::Shape { .. }) && text.contains("4x5") && text.contains("6x7"), "{text}");
    // Inner dimensions agree but out is wrong.
    let err = mm.prepare(ctx, &z(4, 6), &b, &z(4, 6), Transpose::None).err().unwrap();
    assert!(err.to_string().contains("out must be 4x7"), "{err}");
    // A^T * B: a is [k, m], so a.rows must equal b.rows.
    assert!(mm.prepare(ctx, &z(6, 3), &b, &z(3, 7), Transpose::A).is_ok());
    assert!(mm.prepare(ctx, &z(5, 3), &b, &z(3, 7), Transpose::A).is_err());
    // A * B^T: b is [n, k], so a.cols must equal b.cols.
    assert!(mm.prepare(ctx, &z(4, 7), &b, &z(4, 6), Transpose::B).is_ok());
    assert!(mm.prepare(ctx, &z(4, 6), &b, &z(4, 6), Transpose::B).is_err());
    // A buffer smaller than the shape claims.
    let small = GpuMatrix { buffer: z(1, 1).buffer, rows: 6, cols: 7 };
    assert!(mm.prepare(ctx, &a, &z(5, 7), &small, Transpose::None).is_err());
    // out may not alias an input.
    let sq = z(4, 4);
    assert!(mm.prepare(ctx, &sq, &z(4, 4), &sq, Transpose::None).is_err());
}

#[test]
fn set_dims_computes_the_corner_and_leaves_the_rest() {
    let ctx = test_context();
    for kernel in kernels_here() {
        let mm = Matmul::new(ctx, kernel).unwrap();
        for (t, (cm, ck, cn)) in TRANSPOSES.into_iter().flat_map(|t| [(t, (70, 50, 40)), (t, (72, 52, 40))]) {
            let (m, k, n) = (33, 17, 21);
            let ((ar, ac), (br, bc)) = stored(cm, ck, cn, t);
            let a = Matrix::random_uniform(ar, ac, -1.0, 1.0, 5);
            let b = Matrix::random_uniform(br, bc, -1.0, 1.0, 6);
            let (ga, gb) = (GpuMatrix::upload(ctx, &a).unwrap(), GpuMatrix::upload(ctx, &b).unwrap());
            let sentinel = Matrix::new(cm, cn, (0..cm * cn).map(|i| 1000.0 + i as f32).collect()).unwrap();
            let out = GpuMatrix::upload(ctx, &sentinel).unwrap();
            let call = mm.prepare(ctx, &ga, &gb, &out, t).unwrap();
            assert_eq!(call.capacity(), (cm, ck, cn));
            call.set_dims(ctx, m, k, n).unwrap();
            run(&call);
            let got = out.download(ctx).unwrap();
            if kernel.needs_vec4_rows() {
                let aligned = cm % 4 == 0 && ck % 4 == 0 && cn % 4 == 0;
                assert_eq!(call.kernel().0 == kernel, aligned, "{:?}", call.kernel());
            }
            // The logical operands are the top-left corners of the stored ones.
            let ((lar, lac), (lbr, lbc)) = stored(m, k, n, t);
            let corner = |x: &Matrix, r: usize, c: usize| {
                Matrix::new(r, c, (0..r).flat_map(|i| x.data[i * x.cols..i * x.cols + c].to_vec()).collect()).unwrap()
            };
            let expected = reference_rows(&corner(&a, lar, lac), &corner(&b, lbr, lbc), t, &(0..m).collect::<Vec<_>>()).unwrap();
            let got_corner: Vec<f32> = (0..m).flat_map(|i| got.data[i * cn..i * cn + n].to_vec()).collect();
            let (rel, abs) = kernel.tolerance(k);
            common::assert_close(&got_corner, &expected, rel, abs);
            for i in 0..cm {
                for j in 0..cn {
                    if i >= m || j >= n {
                        assert_eq!(got.data[i * cn + j], sentinel.data[i * cn + j], "kernel {kernel} {t:?}: ({i}, {j}) outside the logical shape changed");
                    }
                }
            }
            // Back to the full shape.
            call.set_dims(ctx, cm, ck, cn).unwrap();
            let err = call.set_dims(ctx, cm + 1, ck, cn).unwrap_err();
            assert!(matches!(err, MatmulError::Dims { .. }), "{err}");
        }
    }
}

#[test]
fn zero_inner_dimension_gives_zeros() {
    let ctx = test_context();
    for kernel in kernels_here() {
        let mm = Matmul::new(ctx, kernel).unwrap();
        let a = GpuMatrix::zeros(ctx, 5, 0).unwrap();
        let b = GpuMatrix::zeros(ctx, 0, 3).unwrap();
        let out = GpuMatrix::zeros(ctx, 5, 3).unwrap();
        ctx.poison(&out.buffer);
        gpu_matmul::matmul(ctx, &mm, &a, &b, &out, Transpose::None).unwrap();
        common::assert_same(&out.download(ctx).unwrap().data, &[0.0; 15]);
    }
}

#[test]
fn upload_download_round_trip() {
    let ctx = test_context();
    for (r, c) in [(1, 1), (3, 5), (4, 4), (0, 7)] {
        let m = Matrix::random_uniform(r, c, -1.0, 1.0, 9);
        let g = GpuMatrix::upload(ctx, &m).unwrap();
        assert_eq!(g.buffer.size() % 16, 0);
        assert_eq!(g.download(ctx).unwrap(), m);
        let m2 = Matrix::random_uniform(r, c, -1.0, 1.0, 10);
        g.write(ctx, &m2).unwrap();
        assert_eq!(g.download(ctx).unwrap(), m2);
    }
    let g = GpuMatrix::zeros(ctx, 2, 2).unwrap();
    assert!(g.write(ctx, &Matrix::zeros(2, 3)).is_err());
}

/// The f32 probes compute what their FLOP count says: one workgroup of each, every output
/// checked against the value its loop must reach (a loop the compiler dropped would leave the
/// inputs, and the runner would report an impossible rate).
#[test]
fn the_f32_probes_run_their_loops() {
    let ctx = test_context();
    // x = 0.5 x + 0.5 from 0.5 reaches 1 - 2^-(rounds + 1), which f32 rounds to 1: 8 chains
    // sum to 8. The outer product adds 0.25 a round to accumulators that start at 0.5: 16 of
    // them sum to 16 (0.5 + 0.25 rounds).
    let rounds = gpu_matmul::PEAK_ITERS as f64;
    let cases = [
        (PeakProbe::fma(ctx, 1).unwrap(), 8.0),
        (PeakProbe::fma_outer(ctx, 1).unwrap(), 16.0 * (0.5 + 0.25 * rounds)),
    ];
    for (probe, expected) in cases {
        ctx.submit_pass("probe", |pass| probe.record(pass));
        let got = common::block_on(probe.outputs(ctx)).unwrap();
        assert_eq!(got.len(), 256 * 4, "{}", probe.label);
        let want = vec![expected as f32; got.len()];
        common::assert_close(&got, &want, 0.0, 0.0);
        assert!(probe.flop > 0.0);
    }
}
