//! The stage 03 runner: validates every matmul kernel against the CPU, then times it.
//!
//! ```text
//! cargo run --release -p gpu-matmul                         # every kernel, default sizes
//! cargo run --release -p gpu-matmul -- 5 6 --sizes 4096     # kernels 5 and 6 at n = 4096
//! cargo run --release -p gpu-matmul -- --sizes 1024,2048,4096 --transposes
//! cargo run --release -p gpu-matmul -- --tune --sizes 4096  # every candidate tile, one table
//! ```
//!
//! Kernel 0 is the CPU (stage 02's best matmul). For each size the runner computes an f64 CPU
//! reference (the whole product when it is cheap, otherwise a sample of rows, and it says
//! which), checks each kernel's result against it with the kernel's tolerance, and only then
//! times it: "kernel" is the median over passes of back-to-back dispatches, timed by GPU
//! timestamps after a warm-up (a GPU raises its clocks under load), divided by the dispatches
//! per pass; "end to end" is the wall-clock median of upload A and B + kernel + download C.
//! Then it times the small products stage 04 runs, and kernels 03-05 compiled with and
//! without naga's runtime checks.

use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use common::{GpuContext, GpuTimer, median};
use cpu_matrix::Matrix;
use gpu_matmul::{
    Checks, GpuMatrix, Kernel, Matmul, MatmulCall, TRANSPOSES, Transpose, formula, matmul_cpu, product_dims, reference_rows,
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
    /// Timed repetitions per kernel (median reported). Default: 3 on a software adapter, 20 on a GPU.
    #[arg(long)]
    reps: Option<usize>,
    /// Untimed runs before timing.
    #[arg(long, default_value_t = 2)]
    warmup: usize,
    /// Also time A^T * B and A * B^T (for the kernels that run).
    #[arg(long)]
    transposes: bool,
    /// Try every candidate tile of each kernel (`Kernel::tune_tiles`) and print them all.
    #[arg(long)]
    tune: bool,
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
    kernel_s: Option<f64>,
    e2e_s: Option<f64>,
    note: String,
}

fn gflops(flop: f64, s: Option<f64>) -> String {
    s.map_or("-".into(), |s| format!("{:.1}", flop / s / 1e9))
}

fn print_table(flop: f64, rows: &[Row]) {
    let best = rows.iter().filter_map(|r| r.kernel_s).fold(f64::INFINITY, f64::min);
    let w = rows.iter().map(|r| r.label.len()).max().unwrap_or(0).max(6);
    let wr = rows.iter().map(|r| r.ran.len()).max().unwrap_or(0).max(32);
    println!(
        "  {:<w$} {:<wr$} {:>15} {:>18} {:>10}  check",
        "kernel", "ran (tile bm x bn x bk / tm x tn)", "kernel GFLOP/s", "end-to-end GFLOP/s", "% of best"
    );
    for r in rows {
        let pct = r.kernel_s.map_or("-".into(), |s| format!("{:.0}%", 100.0 * best / s));
        println!(
            "  {:<w$} {:<wr$} {:>15} {:>18} {:>10}  {}",
            r.label,
            r.ran,
            gflops(flop, r.kernel_s),
            gflops(flop, r.e2e_s),
            pct,
            r.note
        );
    }
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

struct Bench<'a> {
    ctx: &'a GpuContext,
    timer: GpuTimer,
    reps: usize,
    warmup: usize,
}

impl Bench<'_> {
    /// Validates `mm` on `a`, `b` against `reference`, then times it. A failed check gives a
    /// row with no timings and the checker's report.
    fn gpu(&self, mm: &Matmul, a: &Matrix, b: &Matrix, t: Transpose, reference: &Reference) -> Result<Row, Box<dyn std::error::Error>> {
        let ctx = self.ctx;
        let (m, k, n) = product_dims(t, a.shape(), b.shape()).expect("shapes made to fit");
        let ga = GpuMatrix::upload(ctx, a)?;
        let gb = GpuMatrix::upload(ctx, b)?;
        let out = GpuMatrix::zeros(ctx, m, n)?;
        let call = mm.prepare(ctx, &ga, &gb, &out, t)?;
        let (used, tile) = call.kernel();
        let mut row = Row {
            label: format!("{:02} {}", mm.kernel().number(), mm.kernel().name()),
            ran: if used == mm.kernel() { format!("{tile}") } else { format!("as {used} {tile}") },
            kernel_s: None,
            e2e_s: None,
            note: String::new(),
        };
        ctx.poison(&out.buffer);
        submit(ctx, &call)?;
        let got = out.download(ctx)?;
        let (rel, abs) = used.tolerance(k);
        match reference.check(&got, rel, abs) {
            Ok(err) => row.note = format!("ok (max abs err {err:.1e})"),
            Err(report) => {
                row.note = "FAILED: not timed".into();
                eprintln!("kernel {} ({}) m={m} k={k} n={n}: {report}", mm.kernel(), formula(t));
                return Ok(row);
            }
        }
        row.kernel_s = Some(self.time_kernel(&call)?);

        // End to end: new inputs go up, the product comes back; buffers and pipeline exist.
        let mut e2e = Vec::new();
        let mut result = Matrix::zeros(m, n);
        for _ in 0..self.reps.clamp(1, 5) {
            let start = Instant::now();
            ctx.queue.write_buffer(&ga.buffer, 0, bytemuck::cast_slice(&a.data));
            ctx.queue.write_buffer(&gb.buffer, 0, bytemuck::cast_slice(&b.data));
            submit(ctx, &call)?;
            ctx.read_into(&out.buffer, &mut result.data)?;
            e2e.push(start.elapsed().as_secs_f64());
        }
        row.e2e_s = Some(median(&mut e2e));
        Ok(row)
    }

    /// Kernel-only seconds per product. A GPU lowers its clocks when idle, so first warm up
    /// with back-to-back products for at least `WARM_UP_S` (and `warmup` passes); then each of
    /// `reps` timed passes holds `batch` back-to-back dispatches (enough for about a
    /// millisecond) and counts as its timestamp difference / batch. The median is reported.
    fn time_kernel(&self, call: &MatmulCall) -> Result<f64, common::GpuError> {
        let ctx = self.ctx;
        let once = self.timer.time_pass(ctx, "first", |pass| call.record(pass))?;
        let batch = if ctx.is_software() { 1 } else { (1e-3 / once.max(1e-7)).ceil().clamp(1.0, 64.0) as usize };
        let warm_for = if ctx.is_software() { 0.0 } else { WARM_UP_S };
        let start = Instant::now();
        let mut passes = 0;
        while passes < self.warmup || start.elapsed().as_secs_f64() < warm_for {
            self.timer.time_pass(ctx, "warm-up", |pass| (0..batch).for_each(|_| call.record(pass)))?;
            passes += 1;
        }
        let mut times = Vec::with_capacity(self.reps);
        for _ in 0..self.reps {
            times.push(self.timer.time_pass(ctx, "matmul", |pass| (0..batch).for_each(|_| call.record(pass)))? / batch as f64);
        }
        Ok(median(&mut times))
    }

    /// Kernel 0: stage 02's best CPU matmul, checked against the same reference.
    fn cpu(&self, a: &Matrix, b: &Matrix, t: Transpose, reference: &Reference, flop: f64) -> Result<Row, Box<dyn std::error::Error>> {
        let (_, k, _) = product_dims(t, a.shape(), b.shape()).expect("shapes made to fit");
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
            kernel_s: Some(s),
            e2e_s: Some(s),
            note,
        })
    }
}

fn submit(ctx: &GpuContext, call: &MatmulCall) -> Result<(), common::GpuError> {
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        call.record(&mut pass);
    }
    ctx.queue.submit([encoder.finish()]);
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

    println!(
        "timing: {}; kernel = median of {reps} passes of back-to-back dispatches (~1 ms each on a GPU), after {} warm-up passes{}; \
         end to end = wall-clock median of upload A, B + kernel + download C",
        GpuTimer::new(&ctx).source(),
        args.warmup,
        if software { String::new() } else { format!(" and at least {WARM_UP_S} s of warm-up") }
    );
    if ctx.info.name.contains("H200") {
        println!("reference on this H200 (PyTorch, n = 4096): cuBLAS FP32 51.5 TFLOP/s, TF32 410 TFLOP/s");
    }
    let mut usable = Vec::new();
    for k in kernels {
        if k.needs_cooperative_matrix() && !ctx.has_cooperative_matrix() {
            println!("kernel {k}: skipped: {} has no cooperative matrices (tensor cores) with f16", ctx.info.name);
        } else {
            usable.push(k);
        }
    }
    let bench = Bench { ctx: &ctx, timer: GpuTimer::new(&ctx), reps, warmup: args.warmup };

    if args.tune {
        return tune(&bench, &usable, &sizes, args.checks);
    }
    if let Some(c) = args.checks {
        println!("every kernel compiled with: {c}");
    }
    let matmuls: Vec<Matmul> =
        usable.iter().map(|&k| Matmul::with_options(&ctx, k, k.tile_ladder(), args.checks)).collect::<Result<_, _>>()?;
    let transposes: &[Transpose] = if args.transposes { &TRANSPOSES } else { &[Transpose::None] };
    for &(m, k, n) in &sizes {
        for &t in transposes {
            let flop = 2.0 * (m * k * n) as f64;
            let (a, b) = operands(m, k, n, t, 42);
            let reference = Reference::new(&a, &b, t);
            println!("\n{} with m = {m}, k = {k}, n = {n} ({:.2} GFLOP); check: {}", formula(t), flop / 1e9, reference.describe());
            let mut rows = Vec::new();
            if want_cpu {
                rows.push(bench.cpu(&a, &b, t, &reference, flop)?);
            }
            for mm in &matmuls {
                rows.push(bench.gpu(mm, &a, &b, t, &reference)?);
            }
            print_table(flop, &rows);
        }
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

/// Kernels 03-05 compiled with each setting of naga's runtime checks, at their default tile.
fn checks_study(bench: &Bench, kernels: &[Kernel], (m, k, n): (usize, usize, usize)) -> Result<(), Box<dyn std::error::Error>> {
    if kernels.is_empty() {
        return Ok(());
    }
    let flop = 2.0 * (m * k * n) as f64;
    let (a, b) = operands(m, k, n, Transpose::None, 42);
    let reference = Reference::new(&a, &b, Transpose::None);
    println!("
runtime checks: A * B with m = {m}, k = {k}, n = {n}, default tiles, each kernel compiled three ways; check: {}", reference.describe());
    let quick = Bench { ctx: bench.ctx, timer: GpuTimer::new(bench.ctx), reps: bench.reps.min(5), warmup: 1 };
    let mut rows = Vec::new();
    for &kernel in kernels {
        for checks in [Checks::All, Checks::BoundsOnly, Checks::None] {
            let mm = Matmul::with_options(bench.ctx, kernel, vec![kernel.default_tile()], Some(checks))?;
            let mut row = quick.gpu(&mm, &a, &b, Transpose::None, &reference)?;
            row.label = format!("{row_label} {checks}", row_label = row.label);
            rows.push(row);
        }
    }
    print_table(flop, &rows);
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
        let (a, b) = operands(m, k, n, t, 7);
        let reference = Reference::new(&a, &b, t);
        println!("\n{name}: {} with m = {m}, k = {k}, n = {n} ({:.1} MFLOP); check: {}", formula(t), flop / 1e6, reference.describe());
        let mut rows = Vec::new();
        for mm in matmuls {
            rows.push(bench.gpu(mm, &a, &b, t, &reference)?);
        }
        print_table(flop, &rows);
    }
    Ok(())
}

/// Every candidate tile of every kernel at every size: one table per kernel and size, so one
/// run on a new GPU shows which tiles to make the defaults.
fn tune(bench: &Bench, kernels: &[Kernel], sizes: &[(usize, usize, usize)], checks: Option<Checks>) -> Result<(), Box<dyn std::error::Error>> {
    let ctx = bench.ctx;
    for &(m, k, n) in sizes {
        let flop = 2.0 * (m * k * n) as f64;
        let (a, b) = operands(m, k, n, Transpose::None, 42);
        let reference = Reference::new(&a, &b, Transpose::None);
        println!("\ntune: A * B with m = {m}, k = {k}, n = {n}; check: {}", reference.describe());
        for &kernel in kernels {
            let mut rows = Vec::new();
            for tile in kernel.tune_tiles() {
                match Matmul::with_options(ctx, kernel, vec![tile], checks) {
                    Ok(mm) => rows.push(bench.gpu(&mm, &a, &b, Transpose::None, &reference)?),
                    Err(e) => rows.push(Row {
                        label: format!("{:02} {}", kernel.number(), kernel.name()),
                        ran: format!("{tile}"),
                        kernel_s: None,
                        e2e_s: None,
                        note: format!("skipped: {e}"),
                    }),
                }
            }
            print_table(flop, &rows);
            if let Some(best) = rows.iter().filter(|r| r.kernel_s.is_some()).min_by(|x, y| x.kernel_s.unwrap_or(f64::INFINITY).total_cmp(&y.kernel_s.unwrap_or(f64::INFINITY))) {
                println!("  best tile for {kernel} at this size: {} ({} GFLOP/s)", best.ran, gflops(flop, best.kernel_s));
            }
        }
    }
    Ok(())
}
