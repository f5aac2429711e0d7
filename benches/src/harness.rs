//! What every bench shares: how big a sweep to run, criterion's settings, where criterion
//! writes, the adapter note the crossover report titles its plots with, and the two ways a
//! GPU operation is timed.
//!
//! Timing rules (../shared/STYLE.md): pipelines and buffers are built before the clock starts;
//! every GPU result is validated against the CPU once before it is timed; the clock stops only
//! after the GPU has finished.
//! - "kernel only" (`gpu_*_kernel`): [`time_kernels`] records `iters` repetitions into compute
//!   passes and sums the passes' GPU timestamps ([`GpuTimer`]). Adapters without timestamps
//!   fall back to the wall clock around submit + wait, and the bench says so at start.
//! - "end to end" (`gpu_*_e2e`): [`time_wall`], the wall clock around upload (`write_buffer`),
//!   dispatch, and download (`read_into` waits for the GPU), repeated `iters` times.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use common::{GpuContext, GpuTimer, wgpu};
use criterion::{BenchmarkGroup, Criterion, SamplingMode, measurement::WallTime};

use crate::results::Note;

/// Set to `1` to run the full sweep (sizes for a real GPU); unset runs the quick sweep on a
/// real GPU and the software sweep on a software adapter.
pub const FULL_ENV: &str = "BENCH_FULL";

/// How many sizes a bench runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sweep {
    /// Criterion's test mode (`cargo test`, or `-- --test`): each benchmark runs once, with its
    /// correctness check, so only the smallest sizes are set up.
    Test,
    /// The default on a software adapter (llvmpipe): fewer and smaller sizes and shorter
    /// measurements, so that `cargo bench` fits in 5 minutes on a 2-core machine. Its "GPU"
    /// runs on the same cores as the CPU side, so only the shape of the curves matters there.
    Software,
    /// The default on a real GPU: sizes up to where the curves usually cross.
    Quick,
    /// `BENCH_FULL=1`: sizes up to where a real GPU has clearly overtaken the CPU.
    Full,
}

impl Sweep {
    /// Reads the command line (criterion's `--bench` / `--test`) and `BENCH_FULL`; `software`
    /// is whether the adapter is a software one.
    pub fn from_env(software: bool) -> Self {
        let args: Vec<String> = std::env::args().collect();
        let full = std::env::var(FULL_ENV).is_ok_and(|v| !v.is_empty() && v != "0");
        Self::from_parts(&args, full, software)
    }

    /// Criterion's rule: without `--bench` (as under `cargo test`), or with `--test`, it runs
    /// each benchmark once as a test. Otherwise `BENCH_FULL` wins, then the adapter decides.
    pub fn from_parts(args: &[String], full: bool, software: bool) -> Self {
        let bench = args.iter().any(|a| a == "--bench");
        let test = args.iter().any(|a| a == "--test");
        if test || !bench {
            Sweep::Test
        } else if full {
            Sweep::Full
        } else if software {
            Sweep::Software
        } else {
            Sweep::Quick
        }
    }

    /// Picks the size list for this sweep.
    pub fn pick<T: Clone>(self, test: &[T], software: &[T], quick: &[T], full: &[T]) -> Vec<T> {
        match self {
            Sweep::Test => test.to_vec(),
            Sweep::Software => software.to_vec(),
            Sweep::Quick => quick.to_vec(),
            Sweep::Full => full.to_vec(),
        }
    }

    /// The name the adapter note and the banner use.
    pub fn name(self) -> &'static str {
        match self {
            Sweep::Test => "test",
            Sweep::Software => "software",
            Sweep::Quick => "quick",
            Sweep::Full => "full",
        }
    }

    /// Criterion's warm-up and measurement time per benchmark.
    fn times(self) -> (Duration, Duration) {
        match self {
            Sweep::Test | Sweep::Software => (Duration::from_millis(100), Duration::from_millis(300)),
            Sweep::Quick => (Duration::from_millis(200), Duration::from_millis(600)),
            Sweep::Full => (Duration::from_millis(250), Duration::from_millis(800)),
        }
    }
}

/// Whether criterion measures in this run (`--bench`, and not `--test`, `--list` or
/// `--profile-time`): only then does it save results, and only then is the report updated.
pub fn measures(args: &[String]) -> bool {
    let has = |flag: &str| args.iter().any(|a| a == flag || a.starts_with(&format!("{flag}=")));
    has("--bench") && !has("--test") && !has("--list") && !has("--profile-time")
}

/// Criterion's output directory, found the way criterion 0.8 finds it: `$CRITERION_HOME`,
/// else `$CARGO_TARGET_DIR/criterion`, else the target directory `cargo metadata` reports
/// (when run by cargo, which sets `$CARGO`), else `target/criterion` under the current folder.
pub fn criterion_dir() -> PathBuf {
    if let Some(home) = std::env::var_os("CRITERION_HOME") {
        return PathBuf::from(home);
    }
    if let Some(target) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(target).join("criterion");
    }
    cargo_target_dir().map(|t| t.join("criterion")).unwrap_or_else(|| PathBuf::from("target/criterion"))
}

fn cargo_target_dir() -> Option<PathBuf> {
    let cargo = std::env::var_os("CARGO")?;
    let out = std::process::Command::new(cargo).args(["metadata", "--format-version", "1", "--no-deps"]).output().ok()?;
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    meta.get("target_directory")?.as_str().map(PathBuf::from)
}

/// Criterion configured for `sweep`, writing to `dir`, then overridden by the command line
/// (so `-- --sample-size 20` or `--save-baseline h200` still work).
///
/// Ten samples and short warm-up/measurement times ([`Sweep`]'s): the point of these benches
/// is curves over sizes, not 1% precision at one size, and the default sweep must fit a 2-core
/// machine.
pub fn criterion(sweep: Sweep, dir: &Path) -> Criterion {
    let (warm_up, measure) = sweep.times();
    Criterion::default()
        .sample_size(10)
        .warm_up_time(warm_up)
        .measurement_time(measure)
        .nresamples(20_000)
        .output_directory(dir)
        .configure_from_args()
}

/// A benchmark group with the settings every group here uses: flat sampling (each sample runs
/// the same number of iterations, so a slow size runs 10 iterations, not the 55 criterion's
/// linear sampling needs) and the throughput declared per size by the caller.
pub fn group<'a>(c: &'a mut Criterion, name: &str) -> BenchmarkGroup<'a, WallTime> {
    let mut g = c.benchmark_group(name);
    g.sampling_mode(SamplingMode::Flat);
    g
}

/// The one-line description of this machine's CPU: model name and hardware threads.
pub fn cpu_line() -> String {
    let model = common::cpu_model().unwrap_or_else(|| std::env::consts::ARCH.to_string());
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    format!("{model}, {threads} threads")
}

/// Everything the benches need: the GPU context (banner printed), the sweep, criterion, and
/// what [`Bench::finish`] needs to update the crossover report afterwards.
pub struct Bench {
    pub ctx: GpuContext,
    pub timer: GpuTimer,
    pub sweep: Sweep,
    pub criterion: Criterion,
    /// Criterion's folder; the report goes to its `crossover/`.
    pub dir: PathBuf,
    /// When this run started: results written after it are this run's.
    started: SystemTime,
    /// Whether criterion measures in this run ([`measures`]).
    measures: bool,
}

impl Bench {
    /// Creates the context and prints the adapter banner (with the software-adapter warning),
    /// the sweep and the timing source. Exits with a message when there is no adapter: a CPU
    /// versus GPU benchmark without a GPU has nothing to measure.
    pub fn start() -> Bench {
        let started = SystemTime::now();
        // The embedded DejaVu Sans as plotters' "sans-serif" (criterion's HTML charts use it).
        common::register_fonts();
        let ctx = match GpuContext::new() {
            Ok(ctx) => ctx,
            Err(e) => {
                eprintln!("bench: {e}");
                std::process::exit(2);
            }
        };
        ctx.print_banner();
        let sweep = Sweep::from_env(ctx.is_software());
        let timer = GpuTimer::new(&ctx);
        let dir = criterion_dir();
        let args: Vec<String> = std::env::args().collect();
        let (warm_up, measure) = sweep.times();
        let why = match sweep {
            Sweep::Test => "criterion's test mode: each benchmark once, on its smallest size, to check it",
            Sweep::Software => "the adapter is a software one, so fewer and smaller sizes",
            Sweep::Quick => "sizes up to where the curves usually cross",
            Sweep::Full => "BENCH_FULL is set: every size",
        };
        let other = if sweep == Sweep::Full { String::new() } else { format!(" ({FULL_ENV}=1 for the full one)") };
        eprintln!("bench: {} sweep: {why}{other}", sweep.name().to_uppercase());
        eprintln!(
            "bench: warm-up {warm_up:?} and measurement {measure:?} per benchmark; CPU: {}; kernel-only GPU times from {}; results in {}",
            cpu_line(),
            timer.source(),
            dir.display()
        );
        let criterion = criterion(sweep, &dir);
        Bench { ctx, timer, sweep, criterion, dir, started, measures: measures(&args) }
    }

    /// Criterion's summary, then, when this run measured, the crossover report: the notes of
    /// the groups this run measured are updated, the report (tables, `results.json`, plots)
    /// is rewritten from every result in criterion's folder, and its summary is printed last.
    /// Exits with an error when the report cannot be written.
    pub fn finish(self) {
        self.criterion.final_summary();
        if !self.measures {
            return;
        }
        let setup = Note {
            adapter: Some(self.ctx.adapter_line()),
            cpu: Some(cpu_line()),
            sweep: Some(self.sweep.name().to_string()),
            since: Some(self.started),
        };
        match crate::report::after_run(&self.dir, &setup) {
            Ok(summary) => print!("{summary}"),
            Err(e) => {
                eprintln!("bench: the crossover report failed: {e}");
                std::process::exit(1);
            }
        }
    }
}

/// Most repetitions recorded into one compute pass: enough to hide the cost of a submission
/// behind tiny kernels, few enough that a pass of slow kernels stays short.
pub const MAX_REPS_PER_PASS: u64 = 1024;

/// Kernel-only time of `iters` repetitions of what `record` puts into a compute pass.
///
/// The repetitions go into passes of up to [`MAX_REPS_PER_PASS`], each timed by `timer` (GPU
/// timestamps around the pass, or the wall clock around submit + wait); the sum is returned.
/// Putting many repetitions in one pass keeps the per-submission overhead (tens of
/// microseconds) out of a kernel that takes a few.
pub fn time_kernels(
    ctx: &GpuContext,
    timer: &GpuTimer,
    iters: u64,
    mut record: impl FnMut(&mut wgpu::ComputePass<'_>),
) -> Duration {
    let mut total = 0.0;
    let mut left = iters;
    while left > 0 {
        let reps = left.min(MAX_REPS_PER_PASS);
        let seconds = timer
            .time_pass(ctx, "bench", |pass| {
                for _ in 0..reps {
                    record(pass);
                }
            })
            .unwrap_or_else(|e| panic!("timing a GPU pass failed: {e}"));
        total += seconds;
        left -= reps;
    }
    Duration::from_secs_f64(total)
}

/// Wall-clock time of `iters` calls of `once` (which must wait for any GPU work it starts).
pub fn time_wall(iters: u64, mut once: impl FnMut()) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        once();
    }
    start.elapsed()
}

/// Unwraps a setup or validation step, or stops the bench with what failed: a bench must not
/// time a configuration it could not build or check.
pub fn must<T, E: std::fmt::Display>(r: Result<T, E>, what: &str) -> T {
    r.unwrap_or_else(|e| panic!("{what}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn sweep_follows_criterion_modes_the_env_flag_and_the_adapter() {
        let bench = args(&["gpu_vs_cpu", "--bench"]);
        assert_eq!(Sweep::from_parts(&bench, false, false), Sweep::Quick);
        assert_eq!(Sweep::from_parts(&bench, false, true), Sweep::Software);
        assert_eq!(Sweep::from_parts(&bench, true, false), Sweep::Full);
        assert_eq!(Sweep::from_parts(&bench, true, true), Sweep::Full, "BENCH_FULL=1 is obeyed even on a software adapter");
        // `cargo test` passes no --bench: criterion's test mode.
        assert_eq!(Sweep::from_parts(&args(&["gpu_vs_cpu"]), true, false), Sweep::Test);
        assert_eq!(Sweep::from_parts(&args(&["gpu_vs_cpu", "--bench", "--test"]), false, true), Sweep::Test);
    }

    #[test]
    fn the_report_follows_only_measuring_runs() {
        assert!(measures(&args(&["gpu_vs_cpu", "--bench"])));
        assert!(measures(&args(&["gpu_vs_cpu", "--bench", "matmul", "--noplot"])));
        assert!(!measures(&args(&["gpu_vs_cpu"])), "cargo test: criterion's test mode saves nothing");
        assert!(!measures(&args(&["gpu_vs_cpu", "--bench", "--test"])));
        assert!(!measures(&args(&["gpu_vs_cpu", "--bench", "--list"])));
        assert!(!measures(&args(&["gpu_vs_cpu", "--bench", "--profile-time=5"])));
        assert!(!measures(&args(&["gpu_vs_cpu", "--bench", "--profile-time", "5"])));
    }

    #[test]
    fn criterion_home_wins() {
        // Only this test touches CRITERION_HOME in this binary.
        // SAFETY: no other thread of this test binary reads or writes this variable.
        unsafe { std::env::set_var("CRITERION_HOME", "/tmp/somewhere") };
        assert_eq!(criterion_dir(), PathBuf::from("/tmp/somewhere"));
        unsafe { std::env::remove_var("CRITERION_HOME") };
    }
}
