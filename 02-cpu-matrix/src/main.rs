//! The stage 02 runner: validates every CPU matmul variant against a reference, then times it
//! and prints GFLOP/s next to `matrixmultiply` and this CPU's peak.
//!
//! ```text
//! cargo run --release -p cpu-matrix                       # everything (about 1-2 minutes)
//! cargo run --release -p cpu-matrix -- --sizes 1024 --variants 0,3,4
//! cargo run --release -p cpu-matrix -- --threads 1        # variant 4 (and the library) on 1 core
//! ```
//!
//! Each measurement: one run that is checked (validate before timing: a wrong kernel is never
//! timed), then repeated runs for about `--budget-ms` (at least `--min-reps`), and the median.
//! Inputs go through `std::hint::black_box` and so does the output, so the compiler cannot skip
//! the work (a naive matmul once "ran in 63 nanoseconds" that way).
//!
//! Variant 0 reads `MATMUL_NUM_THREADS` once per process, so its single-threaded numbers come
//! from a child process of this binary started with `MATMUL_NUM_THREADS=1`.

mod peak;

use std::collections::HashMap;
use std::hint::black_box;
use std::process::{Command, ExitCode};
use std::time::Instant;

use clap::Parser;
use cpu_matrix::{CpuKernel, Matrix, Transpose, matmul_f64_reference_full, matmul_t_into};

#[derive(Parser, Debug, Clone)]
#[command(about = "CPU matmul variants 0-4: validate, time, compare with matrixmultiply and the peak")]
struct Args {
    /// Square sizes n (n x n * n x n).
    #[arg(long, value_delimiter = ',', default_value = "64,128,256,512,1024,2048")]
    sizes: Vec<usize>,
    /// Variants to run: 0 matrixmultiply, 1 naive, 2 ikj, 3 blocked, 4 blocked on all threads.
    #[arg(long, value_delimiter = ',', default_value = "0,1,2,3,4")]
    variants: Vec<u32>,
    /// Threads for variant 4 and for multi-threaded matrixmultiply (default: all cores).
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1024))]
    threads: Option<usize>,
    /// Largest n the naive variant 1 runs at (it takes seconds per run beyond 1024).
    #[arg(long, default_value_t = 1024)]
    naive_max: usize,
    /// Skip the MNIST layer shapes (64x784*784x128 and its two backward products).
    #[arg(long)]
    no_mnist: bool,
    /// Target time spent repeating each measurement, in milliseconds.
    #[arg(long, default_value_t = 400)]
    budget_ms: u64,
    /// Fewest timed runs per measurement (the median of these is reported), 1 to 200 (the
    /// most runs a measurement makes).
    #[arg(long, default_value_t = 3, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=MAX_REPS as u64))]
    min_reps: usize,
    /// Clock in GHz for the computed peak (default: measured with an FMA-only loop).
    #[arg(long, value_parser = positive)]
    ghz: Option<f64>,
    /// f32 flops per cycle per core for the computed peak (default: from ISA and CPU family).
    #[arg(long, value_parser = positive)]
    flops_per_cycle: Option<f64>,
    /// Internal: time only variant 0 and print machine-readable lines (run by the parent with
    /// MATMUL_NUM_THREADS=1).
    #[arg(long, hide = true)]
    library_child: bool,
}

/// `--ghz` / `--flops-per-cycle`: a finite number above zero (NaN, 0 or a negative value
/// would turn every "% of peak" into NaN or infinity).
fn positive(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        Ok(v) => Err(format!("{v} is not a positive number")),
        Err(e) => Err(format!("{s:?}: {e}")),
    }
}

/// The most timed runs one measurement makes.
const MAX_REPS: usize = 200;

/// Largest `--sizes` value accepted.
const MAX_SIZE: usize = 16384;

/// One product to time: `op(a) [m, k] * op(b) [k, n]`.
#[derive(Clone, Copy, Debug)]
struct Shape {
    label: &'static str,
    m: usize,
    k: usize,
    n: usize,
    t: Transpose,
}

impl Shape {
    fn name(&self) -> String {
        let body = format!("{}x{}x{}", self.m, self.k, self.n);
        if self.label.is_empty() { body } else { format!("{} {body}", self.label) }
    }

    fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.k as f64 * self.n as f64
    }

    /// Random operands stored as the transpose option says (`a [k, m]` for `A^T * B`, ...).
    fn operands(&self, seed: u64) -> (Matrix, Matrix) {
        let (ar, ac) = if self.t == Transpose::A { (self.k, self.m) } else { (self.m, self.k) };
        let (br, bc) = if self.t == Transpose::B { (self.n, self.k) } else { (self.k, self.n) };
        (Matrix::random_uniform(ar, ac, -1.0, 1.0, seed), Matrix::random_uniform(br, bc, -1.0, 1.0, seed + 1))
    }
}

fn shapes(args: &Args) -> Vec<Shape> {
    let mut v: Vec<Shape> =
        args.sizes.iter().map(|&n| Shape { label: "", m: n, k: n, n, t: Transpose::None }).collect();
    if !args.no_mnist {
        // The MNIST network's first layer at batch 64: forward x W, weight gradient x^T dy,
        // input gradient dy W^T.
        v.push(Shape { label: "MNIST fwd  x*W", m: 64, k: 784, n: 128, t: Transpose::None });
        v.push(Shape { label: "MNIST dW x^T*dy", m: 784, k: 64, n: 128, t: Transpose::A });
        v.push(Shape { label: "MNIST dx dy*W^T", m: 64, k: 128, n: 784, t: Transpose::B });
    }
    v
}

/// Median seconds of `kernel` on these operands: one untimed warm-up, then at least
/// `min_reps` runs and as many as fit in `budget_ms`.
fn time(kernel: CpuKernel, s: &Shape, a: &Matrix, b: &Matrix, out: &mut Matrix, args: &Args) -> f64 {
    let run = |out: &mut Matrix| {
        let start = Instant::now();
        matmul_t_into(kernel, s.t, black_box(a), black_box(b), out).expect("shapes were checked");
        black_box(&out.data);
        start.elapsed().as_secs_f64()
    };
    let first = run(out);
    let reps = ((args.budget_ms as f64 / 1e3 / first) as usize).clamp(args.min_reps.clamp(1, MAX_REPS), MAX_REPS);
    let mut times: Vec<f64> = (0..reps).map(|_| run(out)).collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// Tolerance: sums of `k` products of values in [-1, 1) (see the tests): abs `k * 1e-6`.
fn tolerance(k: usize) -> (f64, f64) {
    (1e-5, 1e-6 * k.max(1) as f64)
}

/// The child process: variant 0 only, one line per shape, `lib1 <index> <seconds>`.
fn library_child(args: &Args) {
    for (i, s) in shapes(args).iter().enumerate() {
        let (a, b) = s.operands(i as u64);
        let mut out = Matrix::zeros(s.m, s.n);
        println!("lib1 {i} {:e}", time(CpuKernel::Library, s, &a, &b, &mut out, args));
    }
}

/// Runs this binary again with `MATMUL_NUM_THREADS=1` for single-threaded variant 0 times.
fn library_single_threaded(args: &Args) -> Result<HashMap<usize, f64>, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let sizes: Vec<String> = args.sizes.iter().map(|n| n.to_string()).collect();
    let mut cmd = Command::new(exe);
    cmd.env("MATMUL_NUM_THREADS", "1")
        .arg("--library-child")
        .arg(format!("--sizes={}", sizes.join(",")))
        .arg(format!("--budget-ms={}", args.budget_ms))
        .arg(format!("--min-reps={}", args.min_reps));
    if args.no_mnist {
        cmd.arg("--no-mnist");
    }
    let output = cmd.output().map_err(|e| format!("cannot start the single-threaded child: {e}"))?;
    if !output.status.success() {
        return Err(format!("single-threaded child failed: {}", String::from_utf8_lossy(&output.stderr)));
    }
    let text = String::from_utf8_lossy(&output.stdout);
    Ok(text
        .lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            (f.next() == Some("lib1")).then_some(())?;
            Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
        })
        .collect())
}

fn main() -> ExitCode {
    let args = Args::parse();
    // Checked before the child's work too: `--library-child --sizes 0` is refused like the rest.
    let kernels = match check_args(&args) {
        Ok(kernels) => kernels,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    if args.library_child {
        library_child(&args);
        return ExitCode::SUCCESS;
    }
    let threads = Threads::set_up(&args);
    let p = print_machine(&args, &threads);

    let (pressure_start, wall_start) = (cpu_pressure_us(), Instant::now());
    let lib1 = if kernels.contains(&CpuKernel::Library) {
        library_single_threaded(&args).unwrap_or_else(|e| {
            eprintln!("warning: {e}; no single-threaded matrixmultiply column");
            HashMap::new()
        })
    } else {
        HashMap::new()
    };

    println!("| shape (m x k x n) | variant | threads | time | GFLOP/s | % of matrixmultiply | % of peak |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    let mut failed = false;
    let mut at_1024: HashMap<(CpuKernel, usize), f64> = HashMap::new();
    for (i, s) in shapes(&args).iter().enumerate() {
        let measured = measure_shape(&args, &kernels, &threads, s, i, lib1.get(&i).copied());
        failed |= measured.failed;
        print_rows(s, &measured, &p);
        if s.t == Transpose::None && s.n == 1024 && s.m == 1024 {
            for (kernel, kthreads, secs) in measured.timed() {
                at_1024.insert((kernel, kthreads), secs);
            }
        }
    }
    print_summary(&at_1024, threads.ours);
    print_pressure(pressure_start, wall_start);
    if failed {
        eprintln!("some variants gave wrong results (see above)");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// Checks `--sizes` and turns `--variants` into kernels.
fn check_args(args: &Args) -> Result<Vec<CpuKernel>, String> {
    if let Some(&bad) = args.sizes.iter().find(|&&n| !(1..=MAX_SIZE).contains(&n)) {
        return Err(format!("--sizes: {bad} is outside 1..={MAX_SIZE} (three {MAX_SIZE}^2 matrices already take 3 GiB)"));
    }
    args.variants
        .iter()
        .map(|&v| CpuKernel::from_number(v).ok_or_else(|| format!("--variants: there is no variant {v} (use 0 to 4)")))
        .collect()
}

/// How many threads each variant uses.
struct Threads {
    /// Cores the OS offers.
    cores: usize,
    /// Variant 4's threads (`--threads`, default all cores).
    ours: usize,
    /// matrixmultiply's threads (`MATMUL_NUM_THREADS`, which it caps at 4).
    library: usize,
}

impl Threads {
    /// Sets variant 4's thread count and `MATMUL_NUM_THREADS` (unless the caller set it).
    fn set_up(args: &Args) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let ours = args.threads.unwrap_or(cores).max(1);
        cpu_matrix::set_num_threads(ours);
        if std::env::var_os("MATMUL_NUM_THREADS").is_none() {
            // SAFETY: nothing else runs yet (no thread has been started), so no one reads the
            // environment concurrently. matrixmultiply reads this once, at its first call.
            unsafe { std::env::set_var("MATMUL_NUM_THREADS", ours.to_string()) };
        }
        let library = std::env::var("MATMUL_NUM_THREADS")
            .ok()
            .and_then(|s| s.parse().ok())
            .map_or(ours, |t: usize| t.clamp(1, 4));
        Self { cores, ours, library }
    }

    fn of(&self, kernel: CpuKernel) -> usize {
        match kernel {
            CpuKernel::Library => self.library,
            CpuKernel::Parallel => self.ours,
            _ => 1,
        }
    }
}

/// Prints the machine, its computed (and measured) peak and the thread counts; returns the peak.
fn print_machine(args: &Args, threads: &Threads) -> peak::Peak {
    let (cores, ours) = (threads.cores, threads.ours);
    let model = common::cpu_model().unwrap_or_else(|| "unknown CPU".into());
    let p = peak::detect(args.ghz, args.flops_per_cycle);
    println!("CPU: {model}, {cores} cores available; widest f32 SIMD: {} ({} lanes)", p.isa, p.lanes);
    println!(
        "peak per core = {} lanes x {} FMA/cycle ({}) x 2 flops x {:.2} GHz (clock from {}) = {:.1} GFLOP/s",
        p.lanes,
        p.fma_per_cycle,
        p.fma_note,
        p.ghz,
        p.clock_source,
        p.gflops(1)
    );
    println!("peak for {cores} cores = {:.1} GFLOP/s", p.gflops(cores));
    if let Some(g) = (ours > 1).then(|| peak::measure_fma(ours)).flatten() {
        println!(
            "measured: the FMA-only loop on {ours} threads runs {g:.1} GFLOP/s = {:.0}% of the computed {ours}-core peak{}",
            100.0 * g / p.gflops(ours),
            if g < 0.9 * p.gflops(ours) { " (other processes are using the cores: threaded numbers below suffer too)" } else { "" }
        );
    }
    println!(
        "variant 4 uses up to {ours} thread(s); matrixmultiply uses {} (MATMUL_NUM_THREADS) and 1 in a child process",
        threads.library
    );
    println!("times are medians of >= {} runs after one validated run; % of peak is for the cores used\n", args.min_reps);
    p
}

/// One shape's results: a row per variant (and thread count), in table order.
struct Measured {
    /// `(variant, label, threads, seconds)`; no seconds for a skipped variant.
    rows: Vec<(CpuKernel, String, usize, Option<f64>)>,
    /// matrixmultiply's seconds by thread count, the "% of matrixmultiply" column's reference.
    library: HashMap<usize, f64>,
    /// Some variant gave a wrong result (it is reported and not timed).
    failed: bool,
}

impl Measured {
    fn timed(&self) -> impl Iterator<Item = (CpuKernel, usize, f64)> + '_ {
        self.rows.iter().filter_map(|(k, _, t, secs)| secs.map(|s| (*k, *t, s)))
    }
}

/// Validates, then times, every variant on shape `s` (the `i`-th; `lib1` is the single-threaded
/// child's time for it).
fn measure_shape(args: &Args, kernels: &[CpuKernel], threads: &Threads, s: &Shape, i: usize, lib1: Option<f64>) -> Measured {
    let (a, b) = s.operands(i as u64);
    // The f64 reference up to 1024^3 multiply-adds; beyond, the library's own result (the
    // library is checked against f64 at every smaller size).
    let reference =
        ((s.m * s.k * s.n) <= 1 << 30).then(|| matmul_f64_reference_full(&a, &b, s.t).expect("shapes fit"));
    let mut measured = Measured { rows: Vec::new(), library: HashMap::new(), failed: false };
    let mut lib_out: Option<Matrix> = None;
    // Library first: it is the reference for the % column (and for validation at 2048).
    let mut order = kernels.to_vec();
    order.sort_by_key(|k| k.number());
    for kernel in order {
        let kthreads = threads.of(kernel);
        let label = format!("{} {}", kernel.number(), kernel.name());
        if kernel == CpuKernel::Naive && s.m.max(s.n).max(s.k) > args.naive_max {
            measured.rows.push((kernel, format!("{label} (skipped: > --naive-max {})", args.naive_max), 1, None));
            continue;
        }
        let mut out = Matrix::new(s.m, s.n, vec![f32::NAN; s.m * s.n]).expect("shape");
        matmul_t_into(kernel, s.t, &a, &b, &mut out).expect("shapes fit");
        if let Some(expected) = reference.as_ref().or(lib_out.as_ref()) {
            let (rel, abs) = tolerance(s.k);
            if let Err(e) = common::check_close(&out.data, &expected.data, rel, abs) {
                println!("| {} | {label} | {kthreads} | WRONG RESULT, not timed | | | |", s.name());
                eprintln!("variant {} at {}: {e}", kernel.number(), s.name());
                measured.failed = true;
                continue;
            }
        }
        let secs = time(kernel, s, &a, &b, &mut out, args);
        if kernel == CpuKernel::Library {
            measured.library.insert(threads.library, secs);
            if let Some(t1) = lib1 {
                measured.library.insert(1, t1);
            }
            lib_out = Some(out);
        }
        measured.rows.push((kernel, label, kthreads, Some(secs)));
    }
    // matrixmultiply single-threaded, from the child, right after the library's own row.
    if let Some(t1) = lib1
        && threads.library != 1
    {
        let pos = measured.rows.iter().position(|r| r.0 == CpuKernel::Library).map_or(0, |p| p + 1);
        let label = format!("0 {}", CpuKernel::Library.name());
        measured.rows.insert(pos, (CpuKernel::Library, label, 1, Some(t1)));
    }
    measured
}

/// The table rows of one shape.
fn print_rows(s: &Shape, measured: &Measured, p: &peak::Peak) {
    for (_, label, kthreads, secs) in &measured.rows {
        let Some(secs) = *secs else {
            println!("| {} | {label} | {kthreads} | | | | |", s.name());
            continue;
        };
        let gflops = s.flops() / secs / 1e9;
        let of_lib = measured.library.get(kthreads).map_or("-".into(), |&l| format!("{:.0}%", 100.0 * l / secs));
        let of_peak = 100.0 * gflops / p.gflops(*kthreads);
        println!("| {} | {label} | {kthreads} | {} | {gflops:.1} | {of_lib} | {of_peak:.0}% |", s.name(), common::fmt_time(secs));
    }
}

/// The stage's goals at n = 1024, where all the numbers exist.
fn print_summary(at_1024: &HashMap<(CpuKernel, usize), f64>, threads: usize) {
    let get = |k: CpuKernel, t: usize| at_1024.get(&(k, t)).copied();
    println!();
    if let (Some(v3), Some(l1)) = (get(CpuKernel::Blocked, 1), get(CpuKernel::Library, 1)) {
        println!("n=1024: variant 3 reaches {:.0}% of single-threaded matrixmultiply (target >= 70%)", 100.0 * l1 / v3);
    }
    if let (Some(v3), Some(v4)) = (get(CpuKernel::Blocked, 1), get(CpuKernel::Parallel, threads)) {
        println!("n=1024: variant 4 on {threads} threads is {:.2}x variant 3 (target >= 1.7x on 2 cores)", v3 / v4);
    }
    if let Some(naive) = get(CpuKernel::Naive, 1) {
        let best = [get(CpuKernel::Blocked, 1), get(CpuKernel::Parallel, threads)]
            .into_iter()
            .flatten()
            .fold(f64::INFINITY, f64::min);
        if best.is_finite() {
            println!("n=1024: the best variant is {:.0}x faster than naive (target >= 20x)", naive / best);
        }
    }
}

/// How much of the run other processes competed for the cores (Linux PSI), if known.
fn print_pressure(start: Option<u64>, wall_start: Instant) {
    if let (Some(p0), Some(p1)) = (start, cpu_pressure_us()) {
        let waited = (p1 - p0) as f64 / 1e6 / wall_start.elapsed().as_secs_f64();
        println!(
            "CPU pressure: some task waited for a core during {:.0}% of this run (Linux PSI){}",
            100.0 * waited,
            if waited > 0.05 { ": other processes competed for the cores, so the numbers are noisy" } else { "" }
        );
    }
}

/// Microseconds during which at least one runnable task waited for a CPU (Linux pressure stall
/// information), or `None` where the kernel does not expose it.
fn cpu_pressure_us() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/pressure/cpu").ok()?;
    let some = text.lines().find(|l| l.starts_with("some"))?;
    some.split_whitespace().find_map(|f| f.strip_prefix("total=")?.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_overrides_must_be_positive_numbers() {
        assert_eq!(positive("2.5"), Ok(2.5));
        for bad in ["nan", "NaN", "inf", "0", "-3", "fast", ""] {
            assert!(positive(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn bad_threads_are_refused_by_the_parser() {
        assert!(Args::try_parse_from(["cpu-matrix", "--threads", "0"]).is_err());
        assert!(Args::try_parse_from(["cpu-matrix", "--threads", "100000"]).is_err());
        assert_eq!(Args::try_parse_from(["cpu-matrix", "--threads", "2"]).unwrap().threads, Some(2));
        assert!(Args::try_parse_from(["cpu-matrix", "--ghz=nan"]).is_err());
    }
}
