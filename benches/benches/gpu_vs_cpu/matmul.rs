//! Matrix multiplication (stages 02 and 03): three CPU variants against the naive and the best
//! GPU kernel, each GPU kernel alone and end to end.
//!
//! Groups (throughput = 2 m k n FLOP per product, so criterion's "elem/s" reads as FLOP/s):
//! - `matmul`, parameter n: square n x n times n x n, from 16 up to where the curves have
//!   crossed (software sweep: up to 512; quick: up to 1024; `BENCH_FULL=1`: up to 8192).
//! - `matmul_mnist`, parameter `m x k x n`: the products one training step of the MNIST
//!   784-128-10 network does at batch 64 (and the first layer at batch 1024, except in the
//!   software sweep), with the transposes backpropagation uses (`AtB`: `A^T * B`, a stored
//!   `[k, m]`; `ABt`: `A * B^T`, b stored `[n, k]`).
//!
//! Only these groups: `cargo bench -- matmul`.
//!
//! Functions:
//! - `cpu_naive` (stage 02 variant 1), `cpu_best` (`CpuKernel::BEST`, all cores),
//!   `cpu_library` (variant 0, the `matrixmultiply` crate; threads from `MATMUL_NUM_THREADS`);
//! - `gpu_naive_kernel` / `gpu_best_kernel`: `Kernel::Naive` / `Kernel::BEST` with A and B
//!   already on the GPU, up to 1024 products per compute pass, GPU timestamps;
//! - `gpu_naive_e2e` / `gpu_best_e2e`: write A and B, multiply, read C back, wait (wall clock),
//!   with the simple transfers (`queue.write_buffer` up, `GpuContext::read_into` down);
//! - `gpu_best_fast_e2e`: the same with the fast ones (`GpuMatrix::write`, which is
//!   `GpuContext::upload`, and `GpuContext::download_into`: stage 01's `common::Transfer`).
//!
//! Buffers, pipelines and bind groups are made before timing in all of them.
//!
//! Every function's result is checked once, before it is timed, against stage 03's f64
//! reference (every row for small products, 16 rows spread over large ones, and all of C
//! for NaN), with stage 03's `Kernel::tolerance(k)` (the naive kernel's for the CPU variants).

use std::cell::OnceCell;
use std::hint::black_box;

use benches::harness::{self, Bench, Sweep, must, time_kernels, time_wall};
use common::{GpuContext, GpuTimer, check_close};
use cpu_matrix::{CpuKernel, Matrix};
use criterion::{BenchmarkGroup, BenchmarkId, Throughput, measurement::WallTime};
use gpu_matmul::{GpuMatrix, Kernel, Matmul, MatmulCall, Transpose, reference_rows};

/// One product to time: `op(a) * op(b)`, `(m, k, n)`.
struct Problem {
    label: String,
    t: Transpose,
    m: usize,
    k: usize,
    n: usize,
    a: Matrix,
    b: Matrix,
    /// The rows of C the check compares, and their f64-accumulated values.
    rows: Vec<usize>,
    expected: Vec<f32>,
}

impl Problem {
    fn new(label: String, m: usize, k: usize, n: usize, t: Transpose) -> Problem {
        let (ar, ac) = if t == Transpose::A { (k, m) } else { (m, k) };
        let (br, bc) = if t == Transpose::B { (n, k) } else { (k, n) };
        let seed = (m * 1_000_003 + k * 1009 + n) as u64;
        let a = Matrix::random_uniform(ar, ac, -1.0, 1.0, seed);
        let b = Matrix::random_uniform(br, bc, -1.0, 1.0, seed + 1);
        // Whole products while they are cheap; 16 rows spread over C (first and last among
        // them) beyond that, plus the NaN scan of all of C in `check`.
        let rows: Vec<usize> = if m * k * n <= 1 << 24 { (0..m).collect() } else { (0..16).map(|i| i * (m - 1) / 15).collect() };
        let expected = must(reference_rows(&a, &b, t, &rows), "the f64 reference");
        Problem { label, t, m, k, n, a, b, rows, expected }
    }

    /// Panics unless `c: [m, n]` is finite everywhere and matches the reference rows within
    /// `kernel`'s tolerance (the CPU variants use the f32 naive kernel's).
    fn check(&self, who: &str, kernel: Kernel, c: &[f32]) {
        if let Some(i) = c.iter().position(|v| !v.is_finite()) {
            panic!("{who} on {}: C[{}, {}] = {} (unwritten or overflowed)", self.label, i / self.n, i % self.n, c[i]);
        }
        let got: Vec<f32> = self.rows.iter().flat_map(|&r| c[r * self.n..(r + 1) * self.n].iter().copied()).collect();
        let (rel, abs) = kernel.tolerance(self.k);
        if let Err(e) = check_close(&got, &self.expected, rel, abs) {
            panic!("{who} on {} disagrees with the f64 reference:\n{e}", self.label);
        }
    }

    fn cpu_transpose(&self) -> cpu_matrix::Transpose {
        match self.t {
            Transpose::None => cpu_matrix::Transpose::None,
            Transpose::A => cpu_matrix::Transpose::A,
            Transpose::B => cpu_matrix::Transpose::B,
        }
    }
}

/// A GPU kernel prepared for one problem: A, B and C on the device, the call recorded per
/// product, and a host buffer for C.
struct GpuSetup {
    a: GpuMatrix,
    b: GpuMatrix,
    c: GpuMatrix,
    call: MatmulCall,
    host_c: Vec<f32>,
}

impl GpuSetup {
    fn new(ctx: &GpuContext, mm: &Matmul, p: &Problem) -> GpuSetup {
        let a = must(GpuMatrix::upload(ctx, &p.a), "uploading A");
        let b = must(GpuMatrix::upload(ctx, &p.b), "uploading B");
        let c = must(GpuMatrix::zeros(ctx, p.m, p.n), "allocating C");
        let call = must(mm.prepare(ctx, &a, &b, &c, p.t), "preparing the product");
        GpuSetup { a, b, c, call, host_c: vec![0.0; p.m * p.n] }
    }

    /// Upload A and B, multiply, download C (waits for the GPU), with the simple transfers or
    /// the fast ones.
    fn round_trip(&mut self, ctx: &GpuContext, p: &Problem, fast: bool) {
        if fast {
            must(self.a.write(ctx, &p.a), "writing A");
            must(self.b.write(ctx, &p.b), "writing B");
        } else {
            ctx.queue.write_buffer(&self.a.buffer, 0, bytemuck::cast_slice(&p.a.data));
            ctx.queue.write_buffer(&self.b.buffer, 0, bytemuck::cast_slice(&p.b.data));
        }
        ctx.submit_pass("matmul", |pass| self.call.record(pass));
        if fast {
            must(ctx.download_into(&self.c.buffer, &mut self.host_c), "reading C");
        } else {
            must(ctx.read_into(&self.c.buffer, &mut self.host_c), "reading C");
        }
    }
}

/// The largest square n each function runs at, per sweep: the slow variants stop early so
/// the quick sweep fits a 2-core machine and the full one a few minutes on a real GPU.
fn max_square(function: &str, sweep: Sweep) -> usize {
    match (function, sweep) {
        ("cpu_naive" | "gpu_naive", Sweep::Software) => 256,
        ("cpu_naive", _) => 512,
        ("gpu_naive", Sweep::Full) => 4096,
        ("gpu_naive", _) => 512,
        ("cpu_library", Sweep::Full) => 2048,
        ("cpu_best", Sweep::Full) => 4096,
        (_, Sweep::Full) => 8192,
        (_, Sweep::Software) => 512,
        _ => 1024,
    }
}

struct Ctx<'a> {
    ctx: &'a GpuContext,
    timer: &'a GpuTimer,
    sweep: Sweep,
    /// `(name, compiled kernel)`: `gpu_naive`, and `gpu_best` unless BEST is the naive kernel.
    gpus: &'a [(&'static str, Matmul)],
}

/// A product to time, before its matrices exist: label, `(m, k, n)` and which operand is
/// transposed.
#[derive(Clone, Copy)]
struct Shape {
    label: &'static str,
    m: usize,
    k: usize,
    n: usize,
    t: Transpose,
}

/// Benchmarks every function on `shape` in group `g`; `square` applies [`max_square`].
///
/// The matrices, the reference and the GPU buffers are made when the first benchmark that
/// needs them runs, so a criterion filter that skips a size builds nothing for it.
fn bench_problem(g: &mut BenchmarkGroup<'_, WallTime>, env: &Ctx<'_>, shape: Shape, square: bool) {
    let Shape { label, m, k, n, t } = shape;
    g.throughput(Throughput::Elements(2 * (m * k * n) as u64));
    let runs = |f: &str| !square || n <= max_square(f, env.sweep);
    let problem: OnceCell<Problem> = OnceCell::new();
    let problem = || problem.get_or_init(|| Problem::new(label.to_string(), m, k, n, t));
    let mut c: Option<Matrix> = None;
    for (name, kernel) in [("cpu_naive", CpuKernel::Naive), ("cpu_best", CpuKernel::BEST), ("cpu_library", CpuKernel::Library)] {
        if !runs(name) {
            continue;
        }
        let mut checked = false;
        g.bench_function(BenchmarkId::new(name, label), |bch| {
            let p = problem();
            let c = c.get_or_insert_with(|| Matrix::zeros(m, n));
            let product = |c: &mut Matrix| must(cpu_matrix::matmul_t_into(kernel, p.cpu_transpose(), &p.a, &p.b, c), name);
            if !checked {
                c.data.fill(f32::NAN);
                product(c);
                p.check(name, Kernel::Naive, &c.data);
                checked = true;
            }
            bch.iter(|| product(black_box(&mut *c)))
        });
    }
    for (name, mm) in env.gpus {
        if !runs(name) {
            continue;
        }
        let limit = env.ctx.limits.max_storage_buffer_binding_size;
        let biggest = 4 * [m * k, k * n, m * n].into_iter().max().unwrap_or(0) as u64;
        if biggest > limit {
            eprintln!("{name} on {label}: a matrix of {biggest} bytes exceeds this device's {limit}-byte binding; skipped");
            continue;
        }
        // Shared by the kernel-only and the end-to-end benchmark; each checks its first result.
        let mut setup: Option<GpuSetup> = None;
        let mut checked = false;
        g.bench_function(BenchmarkId::new(format!("{name}_kernel"), label), |bch| {
            let p = problem();
            let s = setup.get_or_insert_with(|| GpuSetup::new(env.ctx, mm, p));
            if !checked {
                env.ctx.poison(&s.c.buffer);
                time_kernels(env.ctx, env.timer, 1, |pass| s.call.record(pass));
                must(env.ctx.read_into(&s.c.buffer, &mut s.host_c), "reading C");
                p.check(&format!("{name}_kernel"), mm.kernel(), &s.host_c);
                checked = true;
            }
            bch.iter_custom(|iters| time_kernels(env.ctx, env.timer, iters, |pass| s.call.record(pass)))
        });
        // The fast transfers only for the best kernel: the naive one is slow enough that its
        // transfers hardly show.
        let fast: &[bool] = if *name == "gpu_best" { &[false, true] } else { &[false] };
        for &fast in fast {
            let function = format!("{name}{}_e2e", if fast { "_fast" } else { "" });
            let mut checked = false;
            g.bench_function(BenchmarkId::new(&function, label), |bch| {
                let p = problem();
                let s = setup.get_or_insert_with(|| GpuSetup::new(env.ctx, mm, p));
                if !checked {
                    env.ctx.poison(&s.c.buffer);
                    s.round_trip(env.ctx, p, fast);
                    p.check(&function, mm.kernel(), &s.host_c);
                    checked = true;
                }
                bch.iter_custom(|iters| time_wall(iters, || s.round_trip(env.ctx, p, fast)))
            });
        }
    }
}

pub fn run(bench: &mut Bench) {
    let (ctx, timer, sweep, criterion) = (&bench.ctx, &bench.timer, bench.sweep, &mut bench.criterion);
    let mut gpus = vec![("gpu_naive", must(Matmul::new(ctx, Kernel::Naive), "compiling the naive kernel"))];
    if Kernel::BEST != Kernel::Naive {
        gpus.push(("gpu_best", must(Matmul::new(ctx, Kernel::BEST), "compiling the best kernel")));
    }
    eprintln!(
        "matmul: gpu_best = kernel {} ({}){}; cpu_best = CPU variant {} ({}, {} threads); cpu_library = matrixmultiply",
        Kernel::BEST.number(),
        Kernel::BEST.name(),
        if gpus.len() == 1 { ", the naive one, so only gpu_naive runs" } else { "" },
        CpuKernel::BEST as u32,
        CpuKernel::BEST.name(),
        cpu_matrix::num_threads(),
    );
    let env = Ctx { ctx, timer, sweep, gpus: &gpus };

    let squares: [(&str, usize); 10] = [
        ("16", 16),
        ("32", 32),
        ("64", 64),
        ("128", 128),
        ("256", 256),
        ("512", 512),
        ("1024", 1024),
        ("2048", 2048),
        ("4096", 4096),
        ("8192", 8192),
    ];
    let squares = sweep.pick(&squares[..1], &squares[..6], &squares[..7], &squares);
    let mut g = harness::group(criterion, "matmul");
    for (label, n) in squares {
        bench_problem(&mut g, &env, Shape { label, m: n, k: n, n, t: Transpose::None }, true);
    }
    g.finish();

    // One training step of 784-128-10 at batch 64: forward x W1, h W2; backward h^T dY (as
    // the second layer's weight gradient), dY W2^T; the first layer's x^T dH; and the first
    // layer at batch 1024.
    let shape = |label, m, k, n, t| Shape { label, m, k, n, t };
    let all = [
        shape("64x784x128", 64, 784, 128, Transpose::None),
        shape("64x128x10", 64, 128, 10, Transpose::None),
        shape("AtB_784x64x128", 784, 64, 128, Transpose::A),
        shape("ABt_64x10x128", 64, 10, 128, Transpose::B),
        shape("1024x784x128", 1024, 784, 128, Transpose::None),
    ];
    let shapes = sweep.pick(&all[2..4], &all[..4], &all, &all);
    let mut g = harness::group(criterion, "matmul_mnist");
    for s in shapes {
        bench_problem(&mut g, &env, s, false);
    }
    g.finish();
}
