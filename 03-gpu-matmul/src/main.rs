//! The stage 03 runner: validates every matmul kernel against the CPU, then times it.
//!
//! ```text
//! cargo run --release -p gpu-matmul                         # every kernel, default sizes
//! cargo run --release -p gpu-matmul -- 5 6 --sizes 4096     # kernels 5 and 6 at n = 4096
//! cargo run --release -p gpu-matmul -- --sizes 1024,2048,4096 --transposes
//! cargo run --release -p gpu-matmul -- --tune --sizes 4096  # every candidate tile, one table
//! cargo run --release -p gpu-matmul -- 7 8 --tune --transposes --sizes 4096,8192  # the sweep
//! cargo run --release -p gpu-matmul -- 5 8 --compiled      # registers, spills... per tile
//! ```
//!
//! Kernel 0 is the CPU (stage 02's best matmul). On a GPU the runner first times two probes
//! that only compute from registers (`gpu_matmul::PeakProbe`): the f32 FMA rate and the
//! cooperative-matrix rate through WGSL, the ceilings the kernels are measured against. For
//! each size it computes an f64 CPU reference (the whole product when it is cheap, otherwise
//! a sample of rows, and it says which), checks each kernel's result against it with the
//! kernel's tolerance, and only then times it: "kernel" is the median over passes of
//! back-to-back dispatches, timed by GPU timestamps after a warm-up (a GPU raises its clocks
//! under load), divided by the dispatches per pass; "end to end" is the wall-clock median of
//! upload A and B + kernel + download C. Each figure is also given as a share of cuBLAS on the
//! same GPU (FP32 for f32 kernels, FP16 inputs with FP32 accumulation for kernels 06 and 08),
//! read from the output of `reference/pytorch_matmul.py` (`--cublas`), and of the probe's
//! ceiling. Then it times the small products stage 04 runs, and kernels 03-05 compiled with
//! and without naga's runtime checks.

use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use common::{GpuContext, GpuTimer, median};
use cpu_matrix::Matrix;
use gpu_matmul::{
    Checks, GpuMatrix, Kernel, Matmul, MatmulCall, PeakProbe, Precision, TRANSPOSES, Transpose, coop_support, formula, matmul_cpu,
    product_dims, reference_rows,
};

#[derive(Parser, Debug)]
#[command(about = "Validate, then time, the stage 03 matmul kernels (0 = CPU)")]
struct Args {
    /// Kernels to run, by number (0 = CPU, 1.. = shaders/NN_*.wgsl). Default: all.
    kernels: Vec<u32>,
    /// Sizes: `n` for n x n x n, or `MxKxN`, comma-separated. Default: 128,256,512 on a
    /// software adapter, 1024,2048,4096 on a GPU.
    #[arg(long, value_delimiter = ',', value_parser = parse_shape)]
    sizes: Vec<(usize, usize, usize)>,
    /// Timed repetitions per kernel (median reported), 1 to 10000. Default: 3 on a software
    /// adapter, 20 on a GPU.
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=10_000))]
    reps: Option<usize>,
    /// Untimed runs before timing, 0 to 10000.
    #[arg(long, default_value_t = 2, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=10_000))]
    warmup: usize,
    /// Also time A^T * B and A * B^T (for the kernels that run; with --tune, tune each).
    #[arg(long)]
    transposes: bool,
    /// Try every candidate tile of each kernel (`Kernel::tune_tiles`) and print them all. Each
    /// is first checked on small awkward shapes in all three transpose modes.
    #[arg(long)]
    tune: bool,
    /// cuBLAS figures to compare with: the output of `reference/pytorch_matmul.py` on this GPU.
    /// Default: `results/h200-torch-matmul.txt` (committed) where its device is this adapter.
    #[arg(long)]
    cublas: Option<std::path::PathBuf>,
    /// Skip the ceiling probes (f32 FMA and cooperative-matrix rates from registers).
    #[arg(long)]
    no_probe: bool,
    /// Skip timing the CPU (kernel 0) even when it is asked for.
    #[arg(long)]
    no_cpu: bool,
    /// Skip the table of the small shapes stage 04 runs (MNIST, batch 64).
    #[arg(long)]
    no_mnist: bool,
    /// Compile every kernel with these runtime checks instead of its default:
    /// all (wgpu's default), bounds (index clamping only) or none.
    #[arg(long, value_parser = parse_checks)]
    checks: Option<Checks>,
    /// Skip the table that times kernels 03-05 with each setting of the runtime checks.
    #[arg(long)]
    no_checks_study: bool,
    /// Print what the driver compiled each kernel into (registers, spills, workgroup memory and
    /// whatever else it reports through Vulkan's VK_KHR_pipeline_executable_properties), then
    /// stop: each kernel's ladder of tiles, or with --tune every candidate tile; with
    /// --transposes all three products. `both` (the default) compiles each with wgpu's buffer
    /// robustness and without, `robust` and `plain` one of them.
    #[arg(long, num_args = 0..=1, default_missing_value = "both", value_name = "both|robust|plain",
          value_parser = common::compiled::Robustness::choice)]
    compiled: Option<common::compiled::Settings>,
    /// With --compiled: also write each text representation the driver offers (compiled code,
    /// if it gives any) into this folder, one file per kernel, tile, product and robustness.
    #[arg(long, requires = "compiled")]
    compiled_out: Option<std::path::PathBuf>,
}

fn parse_checks(s: &str) -> Result<Checks, String> {
    match s {
        "all" => Ok(Checks::All),
        "bounds" => Ok(Checks::BoundsOnly),
        "none" => Ok(Checks::None),
        _ => Err(format!("bad --checks {s:?}: choose all, bounds or none")),
    }
}

fn parse_shape(s: &str) -> Result<(usize, usize, usize), String> {
    let parts: Vec<&str> = s.trim().split('x').collect();
    let nums: Result<Vec<usize>, _> = parts.iter().map(|p| p.parse::<usize>()).collect();
    match *nums.map_err(|e| format!("bad size {s:?}: {e}"))?.as_slice() {
        [n] if n > 0 => Ok((n, n, n)),
        [m, k, n] if m > 0 && k > 0 && n > 0 => Ok((m, k, n)),
        _ => Err(format!("bad size {s:?}: give n (square) or MxKxN, all positive")),
    }
}

/// Above this many multiply-adds, validation compares a sample of rows instead of the whole
/// product (the f64 reference is single-pass CPU work).
const FULL_CHECK_LIMIT: usize = 1 << 27;
/// Seconds of back-to-back GPU work before timing (GPUs raise their clocks under load).
const WARM_UP_S: f64 = 0.25;
/// How many rows a sampled validation compares.
const SAMPLE_ROWS: usize = 48;
/// Seconds of timed passes per kernel, about (and of end-to-end runs): keeps slow kernels at
/// large sizes from taking minutes.
const TIMING_BUDGET_S: f64 = 0.5;
/// Workgroups of each ceiling probe: 16 per multiprocessor on the H200 (132).
const PROBE_WORKGROUPS: u32 = 2112;

/// Where the GPU results are compared, and the f64 reference values there.
struct Reference {
    rows: Vec<usize>,
    values: Vec<f32>,
    full: bool,
}

impl Reference {
    fn new(a: &Matrix, b: &Matrix, t: Transpose) -> Self {
        let (m, k, n) = product_dims(t, a.shape(), b.shape()).expect("shapes made to fit");
        let full = m * k * n <= FULL_CHECK_LIMIT;
        let rows: Vec<usize> = if full {
            (0..m).collect()
        } else {
            // The first and last rows, and rows spread evenly in between (odd offsets, so
            // they land at different positions inside the tiles).
            let mut r: Vec<usize> = (0..SAMPLE_ROWS).map(|i| (i * (m - 1)) / (SAMPLE_ROWS - 1)).map(|r| (r + r % 7).min(m - 1)).collect();
            r.extend([0, m - 1]);
            r.sort_unstable();
            r.dedup();
            r
        };
        // Rows are independent: spread them over the CPU cores.
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(rows.len().max(1));
        let chunk = rows.len().div_ceil(threads).max(1);
        let values = std::thread::scope(|s| {
            let handles: Vec<_> =
                rows.chunks(chunk).map(|c| s.spawn(move || reference_rows(a, b, t, c).expect("rows in range"))).collect();
            handles.into_iter().flat_map(|h| h.join().expect("reference thread")).collect()
        });
        Self { rows, values, full }
    }

    fn describe(&self) -> String {
        if self.full {
            "every element against the f64 CPU reference".into()
        } else {
            format!("{} sampled rows (first, last, spread) against the f64 CPU reference", self.rows.len())
        }
    }

    /// Compares `got [m, n]` at the reference rows; returns the largest error relative to
    /// the tolerance's scale, or the checker's report.
    fn check(&self, got: &Matrix, rel: f64, abs: f64) -> Result<f64, String> {
        let n = got.cols;
        let picked: Vec<f32> = self.rows.iter().flat_map(|&r| got.data[r * n..(r + 1) * n].iter().copied()).collect();
        common::check_close(&picked, &self.values, rel, abs).map(|s| s.max_abs_err).map_err(|e| e.to_string())
    }
}

/// One measured line of a table.
struct Row {
    label: String,
    ran: String,
    /// The precision of a GPU kernel (which cuBLAS figure and ceiling it is compared with).
    precision: Option<Precision>,
    kernel_s: Option<f64>,
    e2e_s: Option<f64>,
    note: String,
}

fn gflops(flop: f64, s: Option<f64>) -> String {
    s.map_or("-".into(), |s| format!("{:.1}", flop / s / 1e9))
}

/// What a table's rows are compared with, in TFLOP/s: cuBLAS at this size and product (FP32,
/// FP16 inputs) and the probes' ceilings (f32 FMA, cooperative matrices).
#[derive(Default, Clone, Copy)]
struct Yardsticks {
    cublas_f32: Option<f64>,
    cublas_f16: Option<f64>,
    peak_f32: Option<f64>,
    peak_f16: Option<f64>,
}

impl Yardsticks {
    fn share(&self, flop: f64, r: &Row) -> (String, String) {
        let (cublas, peak) = match r.precision {
            Some(Precision::F32) => (self.cublas_f32, self.peak_f32),
            Some(Precision::F16Inputs) => (self.cublas_f16, self.peak_f16),
            None => (None, None),
        };
        let pct = |of: Option<f64>| match (r.kernel_s, of) {
            (Some(s), Some(t)) => format!("{:.0}%", 100.0 * flop / s / (t * 1e12)),
            _ => "-".into(),
        };
        (pct(cublas), pct(peak))
    }
}

fn print_table(flop: f64, rows: &[Row], yard: &Yardsticks) {
    let best = rows.iter().filter_map(|r| r.kernel_s).fold(f64::INFINITY, f64::min);
    let w = rows.iter().map(|r| r.label.len()).max().unwrap_or(0).max(6);
    let wr = rows.iter().map(|r| r.ran.len()).max().unwrap_or(0).max(32);
    println!(
        "  {:<w$} {:<wr$} {:>15} {:>18} {:>10} {:>9} {:>7}  check",
        "kernel", "ran (tile bm x bn x bk / tm x tn)", "kernel GFLOP/s", "end-to-end GFLOP/s", "% of best", "% cuBLAS", "% peak"
    );
    for r in rows {
        let pct = r.kernel_s.map_or("-".into(), |s| format!("{:.0}%", 100.0 * best / s));
        let (cublas, peak) = yard.share(flop, r);
        println!(
            "  {:<w$} {:<wr$} {:>15} {:>18} {:>10} {:>9} {:>7}  {}",
            r.label,
            r.ran,
            gflops(flop, r.kernel_s),
            gflops(flop, r.e2e_s),
            pct,
            cublas,
            peak,
            r.note
        );
    }
}

/// cuBLAS through PyTorch on one GPU: the output of `reference/pytorch_matmul.py`.
struct Cublas {
    source: String,
    device: String,
    /// `(n, product, FP32, TF32, FP16 inputs -> FP32)` in TFLOP/s; product `None` where the
    /// file has only `A * B` (then it stands for all three).
    rows: Vec<(usize, Option<Transpose>, [f64; 3])>,
}

impl Cublas {
    /// Parses the script's output: a `device: NAME, torch VERSION` line, then lines of
    /// `n [product] FP32 TF32 FP16->FP32` (product `A*B`, `A^T*B` or `A*B^T`).
    fn parse(text: &str, source: &str) -> Result<Self, String> {
        let device = text
            .lines()
            .find_map(|l| l.strip_prefix("device: "))
            .and_then(|l| l.split(", torch").next())
            .ok_or_else(|| format!("{source}: no `device: ...` line; is it the output of reference/pytorch_matmul.py?"))?
            .trim()
            .to_string();
        let mut rows = Vec::new();
        for line in text.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            let Some(Ok(n)) = words.first().map(|w| w.parse::<usize>()) else { continue };
            let (product, nums) = match words.len() {
                4 => (None, &words[1..]),
                5 => {
                    let t = match words[1] {
                        "A*B" => Transpose::None,
                        "A^T*B" => Transpose::A,
                        "A*B^T" => Transpose::B,
                        other => return Err(format!("{source}: unknown product {other:?} in {line:?}")),
                    };
                    (Some(t), &words[2..])
                }
                _ => return Err(format!("{source}: cannot read {line:?}")),
            };
            let v: Vec<f64> = nums.iter().map(|w| w.parse::<f64>()).collect::<Result<_, _>>().map_err(|e| format!("{source}: {line:?}: {e}"))?;
            rows.push((n, product, [v[0], v[1], v[2]]));
        }
        if rows.is_empty() {
            return Err(format!("{source}: no measurements"));
        }
        Ok(Self { source: source.into(), device, rows })
    }

    /// `[FP32, TF32, FP16->FP32]` for an `n x n x n` product `t`.
    fn get(&self, (m, k, n): (usize, usize, usize), t: Transpose) -> Option<[f64; 3]> {
        if m != k || k != n {
            return None;
        }
        let exact = self.rows.iter().find(|r| r.0 == n && r.1 == Some(t));
        exact.or_else(|| self.rows.iter().find(|r| r.0 == n && r.1.is_none())).map(|r| r.2)
    }
}

/// The cuBLAS figures for this adapter: `--cublas FILE`, or the committed H200 measurement
/// where this adapter is the one it was measured on.
fn load_cublas(ctx: &GpuContext, path: Option<&std::path::Path>) -> Result<Option<Cublas>, Box<dyn std::error::Error>> {
    const COMMITTED: &str = include_str!("../results/h200-torch-matmul.txt");
    let cublas = match path {
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| format!("--cublas {}: {e}", p.display()))?;
            Cublas::parse(&text, &p.display().to_string())?
        }
        None => Cublas::parse(COMMITTED, "03-gpu-matmul/results/h200-torch-matmul.txt (committed)")?,
    };
    if !ctx.info.name.contains(&cublas.device) {
        if path.is_some() {
            println!("note: {} was measured on {:?}, not on this adapter ({}); comparing anyway", cublas.source, cublas.device, ctx.info.name);
        } else {
            return Ok(None);
        }
    }
    println!("cuBLAS through PyTorch on {}, from {} (TFLOP/s; FP32 / TF32 / FP16 inputs -> FP32):", cublas.device, cublas.source);
    for (n, t, [f32_, tf32, f16]) in &cublas.rows {
        let what = t.map_or("A * B (stands for all three products)".to_string(), |t| formula(t).to_string());
        println!("  n = {n:>5}, {what}: {f32_:.1} / {tf32:.1} / {f16:.1}");
    }
    Ok(Some(cublas))
}

/// Random operands for `op(a) [m, k] * op(b) [k, n]`, stored as `t` says.
fn operands(m: usize, k: usize, n: usize, t: Transpose, seed: u64) -> (Matrix, Matrix) {
    let (sa, sb) = match t {
        Transpose::None => ((m, k), (k, n)),
        Transpose::A => ((k, m), (k, n)),
        Transpose::B => ((m, k), (n, k)),
    };
    (Matrix::random_uniform(sa.0, sa.1, -1.0, 1.0, seed), Matrix::random_uniform(sb.0, sb.1, -1.0, 1.0, seed + 1))
}

/// One product's operands on the CPU and the GPU, its output buffer and its reference: made
/// once and shared by every kernel that runs the product.
struct Operands {
    a: Matrix,
    b: Matrix,
    t: Transpose,
    reference: Reference,
    ga: GpuMatrix,
    gb: GpuMatrix,
    out: GpuMatrix,
}

impl Operands {
    /// Random operands for `op(a) [m, k] * op(b) [k, n]`, uploaded, and their reference.
    fn new(ctx: &GpuContext, (m, k, n): (usize, usize, usize), t: Transpose, seed: u64) -> Result<Self, common::GpuError> {
        let (a, b) = operands(m, k, n, t, seed);
        let reference = Reference::new(&a, &b, t);
        let (ga, gb) = (GpuMatrix::upload(ctx, &a)?, GpuMatrix::upload(ctx, &b)?);
        let out = GpuMatrix::zeros(ctx, m, n)?;
        Ok(Self { a, b, t, reference, ga, gb, out })
    }

    /// `(m, k, n)`.
    fn dims(&self) -> (usize, usize, usize) {
        product_dims(self.t, self.a.shape(), self.b.shape()).expect("shapes made to fit")
    }
}

struct Bench<'a> {
    ctx: &'a GpuContext,
    timer: GpuTimer,
    reps: usize,
    warmup: usize,
}

impl Bench<'_> {
    /// Validates `mm` on `a`, `b` against `reference`, then times it. A failed check gives a
    /// row with no timings and the checker's report.
    ///
    /// For kernel 08 (conversion passes, then the product) a second row times the product
    /// alone, on the f16 copies the checked run made.
    fn gpu(&self, mm: &Matmul, ops: &Operands) -> Result<Vec<Row>, Box<dyn std::error::Error>> {
        let ctx = self.ctx;
        let (m, k, n) = ops.dims();
        let (call, result) = self.run_checked(mm, ops)?;
        let (used, tile) = call.kernel();
        let mut row = Row {
            label: format!("{:02} {}", mm.kernel().number(), mm.kernel().name()),
            ran: if used == mm.kernel() { format!("{tile}") } else { format!("as {used} {tile}") },
            precision: Some(used.precision()),
            kernel_s: None,
            e2e_s: None,
            note: String::new(),
        };
        match result {
            Ok(err) => row.note = format!("ok (max abs err {err:.1e})"),
            Err(report) => {
                row.note = "FAILED: not timed".into();
                eprintln!("kernel {} ({}) m={m} k={k} n={n}: {report}", mm.kernel(), formula(ops.t));
                return Ok(vec![row]);
            }
        }
        let kernel_s = self.time_kernel(|pass| call.record(pass))?;
        row.kernel_s = Some(kernel_s);
        let product_only = if call.dispatches() > 1 {
            let s = self.time_kernel(|pass| call.record_product(pass))?;
            Some(Row {
                label: format!("{} product only", row.label),
                ran: format!("on the f16 copies ({:.0}% of the time above)", 100.0 * s / kernel_s),
                precision: row.precision,
                kernel_s: Some(s),
                e2e_s: None,
                note: "copies from the checked run".into(),
            })
        } else {
            None
        };

        // End to end: new inputs go up, the product comes back; buffers and pipeline exist.
        // Up to 5 runs, fewer where they take more than about TIMING_BUDGET_S in all.
        let mut e2e = Vec::new();
        let mut result = Matrix::zeros(m, n);
        let started = Instant::now();
        while e2e.len() < self.reps.clamp(1, 5) && (e2e.is_empty() || started.elapsed().as_secs_f64() < TIMING_BUDGET_S) {
            let start = Instant::now();
            ctx.queue.write_buffer(&ops.ga.buffer, 0, bytemuck::cast_slice(&ops.a.data));
            ctx.queue.write_buffer(&ops.gb.buffer, 0, bytemuck::cast_slice(&ops.b.data));
            submit(ctx, &call)?;
            ctx.read_into(&ops.out.buffer, &mut result.data)?;
            e2e.push(start.elapsed().as_secs_f64());
        }
        row.e2e_s = Some(median(&mut e2e));
        Ok([row].into_iter().chain(product_only).collect())
    }

    /// Runs `mm` once on the operands into a poisoned output and checks the result against
    /// the reference with the tolerance of the kernel that ran: the prepared call, and the
    /// largest error or the checker's report.
    fn run_checked(&self, mm: &Matmul, ops: &Operands) -> Result<(MatmulCall, Result<f64, String>), Box<dyn std::error::Error>> {
        let ctx = self.ctx;
        let call = mm.prepare(ctx, &ops.ga, &ops.gb, &ops.out, ops.t)?;
        ctx.poison(&ops.out.buffer);
        submit(ctx, &call)?;
        let got = ops.out.download(ctx)?;
        let (rel, abs) = call.kernel().0.tolerance(ops.dims().1);
        let result = ops.reference.check(&got, rel, abs);
        Ok((call, result))
    }

    /// Kernel-only seconds per run of `record`. A GPU lowers its clocks when idle, so first
    /// warm up with back-to-back runs for at least `WARM_UP_S` (and `warmup` passes); then
    /// each of `reps` timed passes holds `batch` back-to-back runs (enough for about a
    /// millisecond) and counts as its timestamp difference / batch. The median is reported.
    /// On a GPU, slow kernels get fewer passes, so that timing one takes about
    /// `TIMING_BUDGET_S`; a kernel whose first timed run alone takes that long (after the
    /// checked run just before it) is reported from that run.
    fn time_kernel(&self, record: impl Fn(&mut wgpu::ComputePass<'_>)) -> Result<f64, common::GpuError> {
        let ctx = self.ctx;
        let once = self.timer.time_pass(ctx, "first", &record)?;
        if !ctx.is_software() && once >= TIMING_BUDGET_S {
            return Ok(once);
        }
        let batch = if ctx.is_software() { 1 } else { (1e-3 / once.max(1e-7)).ceil().clamp(1.0, 64.0) as usize };
        let warm_for = if ctx.is_software() { 0.0 } else { WARM_UP_S };
        let start = Instant::now();
        let mut passes = 0;
        while passes < self.warmup || start.elapsed().as_secs_f64() < warm_for {
            self.timer.time_pass(ctx, "warm-up", |pass| (0..batch).for_each(|_| record(pass)))?;
            passes += 1;
        }
        let reps = if ctx.is_software() { self.reps } else { self.reps.min((TIMING_BUDGET_S / (once * batch as f64)).ceil() as usize).max(1) };
        let mut times = Vec::with_capacity(reps);
        for _ in 0..reps {
            times.push(self.timer.time_pass(ctx, "matmul", |pass| (0..batch).for_each(|_| record(pass)))? / batch as f64);
        }
        Ok(median(&mut times))
    }

    /// The ceiling probes: TFLOP/s of each (median of the timed passes, after warm-up).
    fn probe(&self, probe: &PeakProbe) -> Result<f64, common::GpuError> {
        let s = self.time_kernel(|pass| probe.record(pass))?;
        Ok(probe.flop / s / 1e12)
    }

    /// Kernel 0: stage 02's best CPU matmul, checked against the same reference.
    fn cpu(&self, ops: &Operands, flop: f64) -> Result<Row, Box<dyn std::error::Error>> {
        let (a, b, t, reference) = (&ops.a, &ops.b, ops.t, &ops.reference);
        let k = ops.dims().1;
        let reps = if flop > 2e10 { 1 } else { self.reps.clamp(1, 3) };
        let mut times = Vec::new();
        let mut got = Matrix::zeros(0, 0);
        for _ in 0..reps {
            let start = Instant::now();
            got = matmul_cpu(a, b, t)?;
            times.push(start.elapsed().as_secs_f64());
        }
        let (rel, abs) = Kernel::BEST.tolerance(k);
        let note = match reference.check(&got, rel, abs) {
            Ok(err) => format!("ok (max abs err {err:.1e})"),
            Err(report) => {
                eprintln!("CPU matmul: {report}");
                "FAILED".into()
            }
        };
        let s = median(&mut times);
        Ok(Row {
            label: "00 cpu".into(),
            ran: format!("cpu-matrix best, {} threads", cpu_matrix::num_threads()),
            precision: None,
            kernel_s: Some(s),
            e2e_s: Some(s),
            note,
        })
    }
}

fn submit(ctx: &GpuContext, call: &MatmulCall) -> Result<(), common::GpuError> {
    ctx.submit_pass("matmul", |pass| call.record(pass));
    ctx.wait()
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let ctx = GpuContext::new()?;
    ctx.print_banner();
    let software = ctx.is_software();
    let sizes = if args.sizes.is_empty() {
        if software { vec![(128, 128, 128), (256, 256, 256), (512, 512, 512)] } else { vec![(1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096)] }
    } else {
        args.sizes.clone()
    };
    // Refuse sizes this device cannot hold before making any operand or CPU reference (a
    // typo such as `--sizes 1000000` would otherwise run out of host memory first).
    for &(m, k, n) in &sizes {
        for (name, rows, cols) in [("A", m, k), ("B", k, n), ("C", m, n)] {
            let bytes = rows.checked_mul(cols).and_then(|e| e.checked_mul(4)).map_or(u64::MAX, |b| b as u64);
            ctx.check_storage_size(&format!("--sizes {m}x{k}x{n}: {name} ({rows} x {cols} f32)"), bytes)?;
        }
    }
    let reps = args.reps.unwrap_or(if software { 3 } else { 20 }).max(1);
    let mut numbers = args.kernels.clone();
    if numbers.is_empty() {
        numbers = std::iter::once(0).chain(Kernel::ALL.iter().map(|k| k.number())).collect();
    }
    let mut kernels = Vec::new();
    let mut want_cpu = false;
    for n in numbers {
        match n {
            0 => want_cpu = true,
            n => match Kernel::from_number(n) {
                Some(k) => kernels.push(k),
                None => {
                    let valid: Vec<String> = Kernel::ALL.iter().map(|k| format!("{} ({})", k.number(), k.name())).collect();
                    return Err(format!("no kernel {n}: choose 0 (CPU) or {}", valid.join(", ")).into());
                }
            },
        }
    }
    want_cpu &= !args.no_cpu && !args.tune;

    let cublas = load_cublas(&ctx, args.cublas.as_deref())?;
    let mut usable = Vec::new();
    for k in kernels {
        match coop_support(&ctx) {
            Err(why) if k.needs_cooperative_matrix() => println!("kernel {k}: skipped: {why}"),
            _ => usable.push(k),
        }
    }
    if let Some(settings) = &args.compiled {
        let transposes: &[Transpose] = if args.transposes { &TRANSPOSES } else { &[Transpose::None] };
        return compiled(&ctx, &settings.0, &usable, args.tune, transposes, args.compiled_out.as_deref());
    }
    println!(
        "timing: {}; kernel = median of up to {reps} passes (about {TIMING_BUDGET_S} s in all; one where a single run takes that long) \
         of back-to-back dispatches (~1 ms each on a GPU), after {} warm-up passes{}; end to end = wall-clock median of up to 5 runs \
         (about {TIMING_BUDGET_S} s) of upload A, B + kernel + download C",
        GpuTimer::new(&ctx).source(),
        args.warmup,
        if software { String::new() } else { format!(" and at least {WARM_UP_S} s of warm-up") }
    );
    let bench = Bench { ctx: &ctx, timer: GpuTimer::new(&ctx), reps, warmup: args.warmup };
    let mut yard = Yardsticks::default();
    if !args.no_probe && !software {
        (yard.peak_f32, yard.peak_f16) = probes(&bench)?;
    }

    if args.tune {
        let transposes: &[Transpose] = if args.transposes { &TRANSPOSES } else { &[Transpose::None] };
        return tune(&bench, &usable, &sizes, transposes, args.checks, &yard, cublas.as_ref());
    }
    if let Some(c) = args.checks {
        println!("every kernel compiled with: {c}");
    }
    let matmuls: Vec<Matmul> =
        usable.iter().map(|&k| Matmul::with_options(&ctx, k, k.tile_ladder(), args.checks)).collect::<Result<_, _>>()?;
    let transposes: &[Transpose] = if args.transposes { &TRANSPOSES } else { &[Transpose::None] };
    for &(m, k, n) in &sizes {
        let size_started = Instant::now();
        for &t in transposes {
            let started = Instant::now();
            let flop = 2.0 * (m * k * n) as f64;
            let ops = Operands::new(&ctx, (m, k, n), t, 42)?;
            let yard = yard.with_cublas(cublas.as_ref(), (m, k, n), t);
            println!("\n{} with m = {m}, k = {k}, n = {n} ({:.2} GFLOP); check: {}", formula(t), flop / 1e9, ops.reference.describe());
            let mut rows = Vec::new();
            if want_cpu {
                rows.push(bench.cpu(&ops, flop)?);
            }
            for mm in &matmuls {
                rows.extend(bench.gpu(mm, &ops)?);
            }
            print_table(flop, &rows, &yard);
            println!("  ({:.1} s for this table)", started.elapsed().as_secs_f64());
        }
        println!("(m = {m}, k = {k}, n = {n}: {:.1} s in all)", size_started.elapsed().as_secs_f64());
    }
    if !args.no_mnist {
        mnist_shapes(&bench, &matmuls)?;
    }
    if !args.no_checks_study {
        let study: Vec<Kernel> = usable.iter().copied().filter(|k| (3..=5).contains(&k.number())).collect();
        let largest = sizes.iter().copied().max_by_key(|&(m, k, n)| m * k * n).expect("at least one size");
        // Capped at 2048: with every check on, kernel 03 runs at a few hundred GFLOP/s.
        let (m, k, n) = (largest.0.min(2048), largest.1.min(2048), largest.2.min(2048));
        checks_study(&bench, &study, (m, k, n))?;
    }
    Ok(())
}

impl Yardsticks {
    /// These yardsticks with the cuBLAS figures for one size and product, where measured.
    fn with_cublas(&self, cublas: Option<&Cublas>, shape: (usize, usize, usize), t: Transpose) -> Self {
        let figures = cublas.and_then(|c| c.get(shape, t));
        Self { cublas_f32: figures.map(|f| f[0]), cublas_f16: figures.map(|f| f[2]), ..*self }
    }
}

/// `--compiled`: what the driver made of each kernel's tiles (`common::compiled`), one line per
/// tile, product and robustness setting, with the statistics as the driver names them.
fn compiled(
    ctx: &GpuContext,
    settings: &[common::compiled::Robustness],
    kernels: &[Kernel],
    every_tile: bool,
    transposes: &[Transpose],
    out: Option<&std::path::Path>,
) -> Result<(), Box<dyn std::error::Error>> {
    if ctx.info.backend != common::wgpu::Backend::Vulkan {
        return Err(format!("--compiled reads Vulkan's pipeline statistics; {} is not a Vulkan adapter", ctx.adapter_line()).into());
    }
    let mut sources = Vec::new();
    for &k in kernels {
        for tile in if every_tile { k.tune_tiles() } else { k.tile_ladder() } {
            for &t in transposes {
                sources.push((format!("kernel {k} {tile} | {}", formula(t)), k.wgsl(tile, t, &ctx.limits)?));
            }
        }
    }
    Ok(common::compiled::report(&ctx.info.name, settings, sources, out)?)
}

/// Times the ceiling probes and prints them; returns the f32 and cooperative-matrix TFLOP/s.
fn probes(bench: &Bench) -> Result<(Option<f64>, Option<f64>), Box<dyn std::error::Error>> {
    let ctx = bench.ctx;
    println!("\nceilings through WGSL on this adapter: kernels that only compute from registers ({PROBE_WORKGROUPS} workgroups):");
    // The f32 ceiling is the faster of two forms of the same multiply-adds.
    let mut f32_peak: f64 = 0.0;
    for fma in [PeakProbe::fma(ctx, PROBE_WORKGROUPS)?, PeakProbe::fma_outer(ctx, PROBE_WORKGROUPS)?] {
        let t = bench.probe(&fma)?;
        println!("  {:<40} {:>8.1} TFLOP/s", fma.label, t);
        f32_peak = f32_peak.max(t);
    }
    let coop_peak = match PeakProbe::coop(ctx, PROBE_WORKGROUPS) {
        Ok(probe) => {
            let t = bench.probe(&probe)?;
            println!("  {:<40} {:>8.1} TFLOP/s", probe.label, t);
            Some(t)
        }
        Err(e) => {
            println!("  cooperative-matrix probe skipped: {e}");
            None
        }
    };
    Ok((Some(f32_peak), coop_peak))
}

/// Kernels 03-05 compiled with each setting of naga's runtime checks, at their default tile.
fn checks_study(bench: &Bench, kernels: &[Kernel], (m, k, n): (usize, usize, usize)) -> Result<(), Box<dyn std::error::Error>> {
    if kernels.is_empty() {
        return Ok(());
    }
    let flop = 2.0 * (m * k * n) as f64;
    let ops = Operands::new(bench.ctx, (m, k, n), Transpose::None, 42)?;
    println!("\nruntime checks: A * B with m = {m}, k = {k}, n = {n}, default tiles, each kernel compiled three ways; check: {}", ops.reference.describe());
    let quick = Bench { ctx: bench.ctx, timer: GpuTimer::new(bench.ctx), reps: bench.reps.min(5), warmup: 1 };
    let mut rows = Vec::new();
    for &kernel in kernels {
        for checks in [Checks::All, Checks::BoundsOnly, Checks::None] {
            let mm = Matmul::with_options(bench.ctx, kernel, vec![kernel.default_tile()], Some(checks))?;
            for mut row in quick.gpu(&mm, &ops)? {
                row.label = format!("{row_label} {checks}", row_label = row.label);
                rows.push(row);
            }
        }
    }
    print_table(flop, &rows, &Yardsticks::default());
    Ok(())
}

/// The products stage 04 runs for an MNIST network 784-128-10 at batch 64: forward, and the
/// two transposed products of backprop. Small, so launch overhead and idle SMs dominate.
fn mnist_shapes(bench: &Bench, matmuls: &[Matmul]) -> Result<(), Box<dyn std::error::Error>> {
    let shapes = [
        ("forward  x W1", Transpose::None, (64, 784, 128)),
        ("forward  h W2", Transpose::None, (64, 128, 10)),
        ("dW2 = h^T dY", Transpose::A, (128, 64, 10)),
        ("dH = dY W2^T", Transpose::B, (64, 10, 128)),
        ("dW1 = x^T dH", Transpose::A, (784, 64, 128)),
    ];
    println!("\nthe shapes stage 04 runs (MNIST 784-128-10, batch 64); kernel time only matters here:");
    for (name, t, (m, k, n)) in shapes {
        let flop = 2.0 * (m * k * n) as f64;
        let ops = Operands::new(bench.ctx, (m, k, n), t, 7)?;
        println!("\n{name}: {} with m = {m}, k = {k}, n = {n} ({:.1} MFLOP); check: {}", formula(t), flop / 1e6, ops.reference.describe());
        let mut rows = Vec::new();
        for mm in matmuls {
            rows.extend(bench.gpu(mm, &ops)?);
        }
        print_table(flop, &rows, &Yardsticks::default());
    }
    Ok(())
}

/// Shapes every tuning candidate is checked on first, in all three transpose modes, against the
/// whole f64 product: sizes that divide no tile, row strides multiples of 4 (so vec4 kernels
/// run themselves, not their scalar stand-in), several workgroups and k-steps.
const TUNE_CHECK_SHAPES: [(usize, usize, usize); 2] = [(260, 100, 196), (36, 516, 68)];

/// Every candidate tile of every kernel at every size and product: one table per kernel, size
/// and product, so one run on a new GPU shows which tiles to make the defaults. Before it is
/// timed, each candidate is checked on `TUNE_CHECK_SHAPES` in all three transpose modes, and on
/// the timed product itself (sampled rows at large sizes).
fn tune(
    bench: &Bench,
    kernels: &[Kernel],
    sizes: &[(usize, usize, usize)],
    transposes: &[Transpose],
    checks: Option<Checks>,
    yard: &Yardsticks,
    cublas: Option<&Cublas>,
) -> Result<(), Box<dyn std::error::Error>> {
    let ctx = bench.ctx;
    let small: Vec<Operands> = TUNE_CHECK_SHAPES
        .iter()
        .flat_map(|&shape| TRANSPOSES.map(move |t| (shape, t)))
        .map(|(shape, t)| Operands::new(ctx, shape, t, 99))
        .collect::<Result<_, _>>()?;
    // Candidates that compile and pass the small checks, per kernel.
    let mut candidates: Vec<(Kernel, Vec<Matmul>)> = Vec::new();
    for &kernel in kernels {
        let mut ok = Vec::new();
        for tile in kernel.tune_tiles() {
            let mm = match Matmul::with_options(ctx, kernel, vec![tile], checks) {
                Ok(mm) => mm,
                Err(e) => {
                    println!("tune: {kernel} {tile}: skipped: {e}");
                    continue;
                }
            };
            let mut failed = Vec::new();
            for ops in &small {
                if let (_, Err(report)) = bench.run_checked(&mm, ops)? {
                    let (m, k, n) = ops.dims();
                    failed.push(format!("{} m={m} k={k} n={n}: {report}", formula(ops.t)));
                }
            }
            if failed.is_empty() {
                ok.push(mm);
            } else {
                println!("tune: {kernel} {tile}: FAILED the small checks, not timed:\n    {}", failed.join("\n    "));
            }
        }
        candidates.push((kernel, ok));
    }
    for &(m, k, n) in sizes {
        for &t in transposes {
            let flop = 2.0 * (m * k * n) as f64;
            let ops = Operands::new(ctx, (m, k, n), t, 42)?;
            let yard = yard.with_cublas(cublas, (m, k, n), t);
            println!("\ntune: {} with m = {m}, k = {k}, n = {n}; check: {}", formula(t), ops.reference.describe());
            for (kernel, mms) in &candidates {
                let started = Instant::now();
                let mut rows = Vec::new();
                for mm in mms {
                    rows.extend(bench.gpu(mm, &ops)?);
                }
                print_table(flop, &rows, &yard);
                if let Some(best) = rows
                    .iter()
                    .filter(|r| r.kernel_s.is_some() && !r.label.ends_with("product only"))
                    .min_by(|x, y| x.kernel_s.unwrap_or(f64::INFINITY).total_cmp(&y.kernel_s.unwrap_or(f64::INFINITY)))
                {
                    println!(
                        "  best tile for {kernel} at this size: {} ({} GFLOP/s; {:.1} s for this table)",
                        best.ran,
                        gflops(flop, best.kernel_s),
                        started.elapsed().as_secs_f64()
                    );
                }
            }
        }
    }
    Ok(())
}
