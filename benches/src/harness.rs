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
use std::time::{Duration, Instant};

use common::{GpuContext, GpuTimer, wgpu};
use criterion::{BenchmarkGroup, Criterion, SamplingMode, measurement::WallTime};

/// Set to `1` to run the full sweep (sizes for a real GPU); unset runs the quick sweep that
/// fits the 15-minute budget on a 2-core machine with a software adapter.
pub const FULL_ENV: &str = "BENCH_FULL";

/// The adapter note: the GPU adapter line (line 1) and the CPU line (line 2) of the last run,
/// written at a bench's start into criterion's directory and into each of its groups' folders
/// (`<criterion dir>/<group>/adapter.txt`). The crossover report titles its plots with it, and
/// treats results older than their group's note as left over from an earlier run.
pub const ADAPTER_NOTE: &str = "adapter.txt";

/// How many sizes a bench runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sweep {
    /// Criterion's test mode (`cargo test --benches`, or `-- --test`): each bench runs once,
    /// so only the smallest sizes are set up.
    Test,
    /// The default: sizes and settings that keep `cargo bench` within 15 minutes on a
    /// 2-core machine with the software adapter.
    Quick,
    /// `BENCH_FULL=1`: sizes up to where a real GPU has clearly overtaken the CPU.
    Full,
}

impl Sweep {
    /// Reads the command line (criterion's `--bench` / `--test`) and `BENCH_FULL`.
    pub fn from_env() -> Self {
        let args: Vec<String> = std::env::args().collect();
        let full = std::env::var(FULL_ENV).is_ok_and(|v| !v.is_empty() && v != "0");
        Self::from_parts(&args, full)
    }

    /// Criterion's rule: without `--bench` (as under `cargo test --benches`), or with `--test`,
    /// it runs each benchmark once as a test.
    pub fn from_parts(args: &[String], full: bool) -> Self {
        let bench = args.iter().any(|a| a == "--bench");
        let test = args.iter().any(|a| a == "--test");
        if test || !bench {
            Sweep::Test
        } else if full {
            Sweep::Full
        } else {
            Sweep::Quick
        }
    }

    /// Picks the size list for this sweep.
    pub fn pick<T: Clone>(self, test: &[T], quick: &[T], full: &[T]) -> Vec<T> {
        match self {
            Sweep::Test => test.to_vec(),
            Sweep::Quick => quick.to_vec(),
            Sweep::Full => full.to_vec(),
        }
    }
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
/// Ten samples and short warm-up/measurement times: the point of these benches is curves over
/// sizes, not 1% precision at one size, and the quick sweep must fit a 2-core machine.
pub fn criterion(sweep: Sweep, dir: &Path) -> Criterion {
    let (warm_up, measure) = match sweep {
        Sweep::Test | Sweep::Quick => (Duration::from_millis(200), Duration::from_millis(600)),
        Sweep::Full => (Duration::from_millis(250), Duration::from_millis(800)),
    };
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

/// Registers the embedded DejaVu Sans as plotters' "sans-serif" (criterion's HTML charts and the
/// crossover plots use it): plotters draws text with `ab_glyph` from registered fonts, so no
/// system font is needed. Safe to call more than once.
pub fn register_fonts() {
    use plotters::style::{FontStyle, register_font};
    for (style, bytes) in [(FontStyle::Normal, dejavu::sans::regular()), (FontStyle::Bold, dejavu::sans::bold())] {
        // The font is compiled in and known to parse; a failure would only lose text in plots.
        if register_font("sans-serif", style, bytes).is_err() {
            eprintln!("warning: could not register the embedded DejaVu font; plots will lack text");
        }
    }
}

/// The one-line description of this machine's CPU: model name and hardware threads.
pub fn cpu_line() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split(':').nth(1)).map(|m| m.trim().to_string()))
        .unwrap_or_else(|| std::env::consts::ARCH.to_string());
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    format!("{model}, {threads} threads")
}

/// Everything a bench needs before its first benchmark: the GPU context (banner printed), the
/// sweep, criterion, and the adapter note written for the crossover report.
pub struct Bench {
    pub ctx: GpuContext,
    pub timer: GpuTimer,
    pub sweep: Sweep,
    pub criterion: Criterion,
}

impl Bench {
    /// Creates the context and prints the adapter banner (with the software-adapter warning),
    /// the sweep and the timing source; writes the adapter note for `groups` (the criterion
    /// groups this bench runs). Exits with a message when there is no adapter: a CPU versus
    /// GPU benchmark without a GPU has nothing to measure.
    pub fn start(name: &str, groups: &[&str]) -> Bench {
        register_fonts();
        let ctx = match GpuContext::new() {
            Ok(ctx) => ctx,
            Err(e) => {
                eprintln!("bench {name}: {e}");
                std::process::exit(2);
            }
        };
        ctx.print_banner();
        let sweep = Sweep::from_env();
        let timer = GpuTimer::new(&ctx);
        let dir = criterion_dir();
        eprintln!(
            "bench {name}: {sweep:?} sweep ({FULL_ENV}=1 for the full one); CPU: {}; kernel-only GPU times from {}; results in {}",
            cpu_line(),
            timer.source(),
            dir.display()
        );
        if sweep != Sweep::Test {
            let note = format!("{}\n{}\n", ctx.adapter_line(), cpu_line());
            for folder in std::iter::once(dir.clone()).chain(groups.iter().map(|g| dir.join(g))) {
                let path = folder.join(ADAPTER_NOTE);
                if let Err(e) = std::fs::create_dir_all(&folder).and_then(|_| std::fs::write(&path, &note)) {
                    eprintln!("warning: could not write {}: {e}", path.display());
                }
            }
        }
        let criterion = criterion(sweep, &dir);
        Bench { ctx, timer, sweep, criterion }
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
    fn sweep_follows_criterion_modes_and_the_env_flag() {
        assert_eq!(Sweep::from_parts(&args(&["double", "--bench"]), false), Sweep::Quick);
        assert_eq!(Sweep::from_parts(&args(&["double", "--bench"]), true), Sweep::Full);
        // `cargo test --benches` passes no --bench: criterion's test mode.
        assert_eq!(Sweep::from_parts(&args(&["double"]), true), Sweep::Test);
        assert_eq!(Sweep::from_parts(&args(&["double", "--bench", "--test"]), false), Sweep::Test);
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
