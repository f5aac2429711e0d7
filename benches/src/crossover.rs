//! The crossover analysis: from which size the GPU beats the CPU, with and without transfers.
//!
//! A function's side comes from its name, which every bench here follows:
//! `cpu*` runs on the CPU; `gpu*_fast_e2e` and `gpu*_mapped_e2e` are the GPU end to end
//! (upload + kernels + download) through the fast transfers (`common::Transfer`); any other
//! `gpu*_e2e` is the GPU end to end through the simple ones (`Queue::write_buffer` up, one
//! staging buffer read back by one thread); any other `gpu*` is the GPU's kernels alone, with
//! the data already on the device.
//!
//! Adding a series needs no change here or in the report and plots: a bench that also
//! measures, say, `gpu_tiled_fast_e2e` gets a column in the tables, a curve of its own in the
//! plot, a verdict line of its own, and counts in its side's verdict, which takes the fastest
//! function of each side at each size.
//!
//! At each size the GPU is compared with the best CPU function measured at that size. The
//! GPU "wins from" the smallest measured size at which it is faster and stays faster at every
//! larger measured size; between that size and the one before, the size where the speed ratio
//! crosses 1 is estimated by straight-line interpolation on log-log axes.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::results::{self, Measurement, Note, ResultsError, Throughput};

/// Which side of the comparison a function is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Side {
    Cpu,
    /// GPU kernels only: inputs already on the device, results left there.
    GpuKernel,
    /// GPU end to end through the simple transfers: `Queue::write_buffer` up, one `MAP_READ`
    /// staging buffer copied out by one thread down (the tutorial's first version).
    GpuE2e,
    /// GPU end to end through the fast transfers (`common::Transfer`: reused mapped staging
    /// buffers, chunks, several threads).
    GpuFastE2e,
}

/// The name endings of the end-to-end functions that use the fast transfers: `_fast_e2e`
/// copies the result into the caller's slice, `_mapped_e2e` reads it in the mapped staging
/// memory (stage 01's paths 2 and 3).
pub const FAST_E2E_SUFFIXES: [&str; 2] = ["_fast_e2e", "_mapped_e2e"];

impl Side {
    /// The GPU sides, in report order.
    pub const GPU: [Side; 3] = [Side::GpuKernel, Side::GpuE2e, Side::GpuFastE2e];

    /// How the report names the side.
    pub fn label(self) -> &'static str {
        match self {
            Side::Cpu => "CPU",
            Side::GpuKernel => "kernels only",
            Side::GpuE2e => "with simple transfers",
            Side::GpuFastE2e => "with fast transfers",
        }
    }

    /// The side named by a function id, or `None` for names that follow no convention.
    pub fn of(function: &str) -> Option<Side> {
        if function.starts_with("cpu") {
            Some(Side::Cpu)
        } else if function.starts_with("gpu") {
            Some(if FAST_E2E_SUFFIXES.iter().any(|s| function.ends_with(s)) {
                Side::GpuFastE2e
            } else if function.ends_with("_e2e") {
                Side::GpuE2e
            } else {
                Side::GpuKernel
            })
        } else {
            None
        }
    }
}

/// Time per iteration over sizes for one function: `(size, seconds)`, sizes ascending.
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    pub function: String,
    pub side: Side,
    pub points: Vec<(f64, f64)>,
}

/// Where the GPU overtakes the CPU (saved as such in `results.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Crossover {
    /// The GPU is faster at every size both sides measured.
    Always { from: f64 },
    /// Faster from `from` on, slower at `before` (the next smaller measured size); `estimate`
    /// is where the speed ratio crosses 1 on log-log axes.
    From { from: f64, before: f64, estimate: f64 },
    /// Slower at the largest size both measured. `best_ratio` is the best CPU-time / GPU-time
    /// seen (below 1 when the GPU never wins) and `at` its size.
    Never { largest: f64, best_ratio: f64, at: f64 },
    /// No size was measured on both sides.
    NoOverlap,
}

impl Crossover {
    /// A short sentence; `x` names the size ("n", "batch").
    pub fn describe(&self, x: &str) -> String {
        match *self {
            Crossover::Always { from } => format!("wins at every size measured (from {x} = {})", fmt_size(from)),
            Crossover::From { from, before, estimate } => format!(
                "wins from {x} = {} (loses at {}; the curves cross near {x} = {})",
                fmt_size(from),
                fmt_size(before),
                fmt_size(estimate.round())
            ),
            Crossover::Never { largest, best_ratio, at } => {
                if best_ratio > 1.0 {
                    format!(
                        "loses at the largest {x} = {} (it led at {x} = {}, by {}, then fell behind)",
                        fmt_size(largest),
                        fmt_size(at),
                        fmt_ratio(best_ratio)
                    )
                } else {
                    format!(
                        "never wins up to {x} = {} (at best {} the CPU's speed, at {x} = {})",
                        fmt_size(largest),
                        fmt_ratio(best_ratio),
                        fmt_size(at)
                    )
                }
            }
            Crossover::NoOverlap => "no size measured on both sides".to_string(),
        }
    }
}

/// Finds where `gpu` overtakes `cpu` (both `(size, seconds)`, any order).
pub fn crossover(cpu: &[(f64, f64)], gpu: &[(f64, f64)]) -> Crossover {
    // Sizes measured on both sides, ascending, with ratio = cpu time / gpu time (> 1: GPU wins).
    let mut common: Vec<(f64, f64)> = gpu
        .iter()
        .filter_map(|&(s, g)| cpu.iter().find(|&&(c, _)| c == s).map(|&(_, t)| (s, t / g)))
        .filter(|(_, r)| r.is_finite() && *r > 0.0)
        .collect();
    common.sort_by(|a, b| a.0.total_cmp(&b.0));
    let Some(&(largest, last_ratio)) = common.last() else {
        return Crossover::NoOverlap;
    };
    if last_ratio <= 1.0 {
        let &(at, best_ratio) = common.iter().max_by(|a, b| a.1.total_cmp(&b.1)).expect("not empty");
        return Crossover::Never { largest, best_ratio, at };
    }
    // Walk down from the largest size while the GPU keeps winning.
    let first_win = common.iter().rposition(|&(_, r)| r <= 1.0).map_or(0, |lose| lose + 1);
    if first_win == 0 {
        return Crossover::Always { from: common[0].0 };
    }
    let (s0, r0) = common[first_win - 1];
    let (s1, r1) = common[first_win];
    // ln r is linear in ln s between the two sizes; solve ln r = 0.
    let t = if r1 == r0 { 0.5 } else { (0.0 - r0.ln()) / (r1.ln() - r0.ln()) };
    let estimate = (s0.ln() + t.clamp(0.0, 1.0) * (s1.ln() - s0.ln())).exp();
    Crossover::From { from: s1, before: s0, estimate }
}

/// How a group is described in the report.
#[derive(Debug, Clone, PartialEq)]
pub struct OpInfo {
    pub title: String,
    /// What the parameter is ("n", "elements", "batch").
    pub x: String,
    /// The rate's unit and the divisor from per-second amounts to it.
    pub rate_unit: String,
    pub rate_scale: f64,
}

/// The description of the groups the benches in this package write; other groups get a
/// generic one.
pub fn op_info(group: &str, throughput: Option<&Throughput>) -> OpInfo {
    let info = |title: &str, x: &str, unit: &str, scale: f64| OpInfo {
        title: title.to_string(),
        x: x.to_string(),
        rate_unit: unit.to_string(),
        rate_scale: scale,
    };
    match group {
        "double" => info("double: y = 2x over an f32 array (bytes read + written per second)", "elements", "GB/s", 1e9),
        "matmul" => info("matmul: square n x n times n x n, f32", "n", "GFLOP/s", 1e9),
        "matmul_mnist" => info("matmul at the MNIST network's shapes, m x k times k x n, f32", "m x k x n", "GFLOP/s", 1e9),
        "train_step" => info("train_step: one SGD step of the 784-128-10 MLP (forward, loss, backward, update)", "batch", "images/s", 1.0),
        _ => match throughput {
            Some(Throughput::Bytes(_) | Throughput::BytesDecimal(_)) => info(group, "size", "GB/s", 1e9),
            _ => info(group, "size", "elements/s", 1.0),
        },
    }
}

/// Formats a size without a trailing `.0`, with powers of two spelled out when large.
pub fn fmt_size(s: f64) -> String {
    if s.fract() == 0.0 && s.abs() < 1e15 {
        let i = s as u64;
        if i >= 1 << 14 && i.is_power_of_two() { format!("2^{}", i.trailing_zeros()) } else { i.to_string() }
    } else {
        format!("{s:.3}")
    }
}

/// Formats seconds with a unit that keeps three significant digits (`common`'s, shared with the
/// runners).
pub use common::fmt_time;

/// A speed ratio with at least two significant digits: `5.00x`, `0.031x`.
pub fn fmt_ratio(r: f64) -> String {
    if r >= 0.1 || r <= 0.0 || !r.is_finite() {
        format!("{r:.2}x")
    } else {
        let decimals = (1.0 - r.log10().floor()) as usize;
        format!("{r:.decimals$}x")
    }
}

fn fmt_rate(r: f64) -> String {
    if r >= 1e6 {
        format!("{:.2}M", r / 1e6)
    } else if r >= 100.0 {
        format!("{r:.0}")
    } else if r >= 10.0 {
        format!("{r:.1}")
    } else {
        format!("{r:.2}")
    }
}

/// One group's results, ready to report.
#[derive(Debug, Clone)]
pub struct Operation {
    pub group: String,
    pub info: OpInfo,
    /// Functions in report order: CPU, then GPU kernel only, then GPU end to end.
    pub functions: Vec<(String, Option<Side>)>,
    /// Parameters in order (ascending sizes, or first-seen order for shapes).
    pub params: Vec<String>,
    /// `(function, param) -> measurement`.
    pub cells: BTreeMap<(String, String), Measurement>,
    /// Whether every parameter is a number (a sweep over sizes, so curves and crossovers).
    pub numeric: bool,
    /// The GPU adapter and the CPU that measured it (from the adapter note), for titles.
    pub adapter: String,
    pub cpu: String,
}

impl Operation {
    /// The curve of one function (numeric operations only).
    pub fn curve(&self, function: &str) -> Vec<(f64, f64)> {
        self.params
            .iter()
            .filter_map(|p| self.cells.get(&(function.to_string(), p.clone())).and_then(|m| Some((m.size()?, m.seconds))))
            .collect()
    }

    /// All curves with a side, in report order.
    pub fn curves(&self) -> Vec<Curve> {
        self.functions
            .iter()
            .filter_map(|(f, side)| Some(Curve { function: f.clone(), side: (*side)?, points: self.curve(f) }))
            .filter(|c| !c.points.is_empty())
            .collect()
    }

    /// At each size, the fastest of the functions on `side`.
    pub fn best_of(&self, side: Side) -> Vec<(f64, f64)> {
        let mut best: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
        for c in self.curves().iter().filter(|c| c.side == side) {
            for &(s, t) in &c.points {
                let e = best.entry(s.to_bits()).or_insert((s, t));
                if t < e.1 {
                    e.1 = t;
                }
            }
        }
        let mut v: Vec<(f64, f64)> = best.into_values().collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        v
    }

    fn names(&self, side: Side) -> Vec<&str> {
        self.functions.iter().filter(|(_, s)| *s == Some(side)).map(|(f, _)| f.as_str()).collect()
    }

    /// The headline crossovers against the best CPU: `(label, crossover)` for the best GPU
    /// without transfers, the best GPU with transfers, then each GPU function.
    pub fn crossovers(&self) -> Vec<(String, Crossover)> {
        let cpu = self.best_of(Side::Cpu);
        let mut out = Vec::new();
        for side in Side::GPU {
            let names = self.names(side);
            if !names.is_empty() {
                out.push((format!("GPU, {} (best of {})", side.label(), names.join(", ")), crossover(&cpu, &self.best_of(side))));
            }
        }
        for c in self.curves().iter().filter(|c| c.side != Side::Cpu) {
            out.push((c.function.clone(), crossover(&cpu, &c.points)));
        }
        out
    }
}

/// Groups measurements into operations, in group order.
pub fn operations(all: &[Measurement]) -> Vec<Operation> {
    let mut by_group: BTreeMap<&str, Vec<&Measurement>> = BTreeMap::new();
    for m in all {
        by_group.entry(m.group.as_str()).or_default().push(m);
    }
    by_group
        .into_iter()
        .map(|(group, ms)| {
            let numeric = ms.iter().all(|m| m.size().is_some());
            let mut functions: Vec<(String, Option<Side>)> = ms
                .iter()
                .map(|m| m.function.clone())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .map(|f| {
                    let side = Side::of(&f);
                    (f, side)
                })
                .collect();
            functions.sort_by(|a, b| (a.1.is_none(), a.1, &a.0).cmp(&(b.1.is_none(), b.1, &b.0)));
            let mut params: Vec<String> = Vec::new();
            for m in &ms {
                if !params.contains(&m.param) {
                    params.push(m.param.clone());
                }
            }
            if numeric {
                params.sort_by(|a, b| a.parse::<f64>().unwrap_or(0.0).total_cmp(&b.parse::<f64>().unwrap_or(0.0)));
            } else {
                // Shapes in order of the work they declare (FLOPs), then by name.
                let work = |p: &String| {
                    ms.iter().find(|m| &m.param == p).and_then(|m| m.throughput.as_ref()).map_or(0, |t| t.amount())
                };
                params.sort_by(|a, b| work(a).cmp(&work(b)).then(a.cmp(b)));
            }
            let cells = ms.iter().map(|m| ((m.function.clone(), m.param.clone()), (*m).clone())).collect();
            let info = op_info(group, ms.iter().find_map(|m| m.throughput.as_ref()));
            let (adapter, cpu) = ("unknown adapter (no adapter.txt)".to_string(), "unknown CPU".to_string());
            Operation { group: group.to_string(), info, functions, params, cells, numeric, adapter, cpu }
        })
        .collect()
}

/// Loads every result under criterion's `dir` and groups them into operations titled from
/// the adapter notes. Results older than their group's note (left over from an earlier run,
/// maybe on another adapter) are returned apart, unless `keep_old`.
pub fn from_dir(dir: &Path, keep_old: bool) -> Result<(Vec<Operation>, Vec<Measurement>), ResultsError> {
    let all = results::load(dir)?;
    // The note in criterion's own folder names whichever bench ran last: a fallback for
    // titles, never a reason to leave results out.
    let global = Note::read(dir);
    let (fresh, stale): (Vec<_>, Vec<_>) =
        all.into_iter().partition(|m| keep_old || !Note::read(&dir.join(&m.group)).predates(m));
    let mut ops = operations(&fresh);
    for op in &mut ops {
        let note = Note::read(&dir.join(&op.group));
        if let Some(a) = note.adapter.or_else(|| global.adapter.clone()) {
            op.adapter = a;
        }
        if let Some(c) = note.cpu.or_else(|| global.cpu.clone()) {
            op.cpu = c;
        }
    }
    Ok((ops, stale))
}

/// The whole report as Markdown: per operation, the adapter, a table of time (and rate) per
/// size and function, then the crossovers (numeric sweeps) or the fastest function per shape.
pub fn report(ops: &[Operation]) -> String {
    let mut s = String::new();
    for op in ops {
        let _ = writeln!(s, "### {}\n", op.info.title);
        let _ = writeln!(s, "GPU: {}  \nCPU: {}\n", op.adapter, op.cpu);
        let _ = writeln!(s, "Time per iteration ({} in brackets):\n", op.info.rate_unit);
        let _ = write!(s, "| {} |", op.info.x);
        for (f, _) in &op.functions {
            let _ = write!(s, " {f} |");
        }
        let _ = write!(s, "\n|---:|");
        for _ in &op.functions {
            let _ = write!(s, "---:|");
        }
        let _ = writeln!(s);
        for p in &op.params {
            let label = if op.numeric { p.parse::<f64>().map(fmt_size).unwrap_or_else(|_| p.clone()) } else { p.clone() };
            let _ = write!(s, "| {label} |");
            for (f, _) in &op.functions {
                match op.cells.get(&(f.clone(), p.clone())) {
                    Some(m) => {
                        let rate = m.rate().map(|r| format!(" ({})", fmt_rate(r / op.info.rate_scale))).unwrap_or_default();
                        let _ = write!(s, " {}{rate} |", fmt_time(m.seconds));
                    }
                    None => {
                        let _ = write!(s, " - |");
                    }
                }
            }
            let _ = writeln!(s);
        }
        let _ = writeln!(s);
        if op.numeric {
            let _ = writeln!(s, "Against the fastest CPU function at each size:\n");
            for (label, c) in op.crossovers() {
                let _ = writeln!(s, "- {label}: {}", c.describe(&op.info.x));
            }
        } else {
            let _ = writeln!(s, "Fastest per shape:\n");
            for p in &op.params {
                let fastest = |side: Side| {
                    op.functions
                        .iter()
                        .filter(|(_, s)| *s == Some(side))
                        .filter_map(|(f, _)| op.cells.get(&(f.clone(), p.clone())).map(|m| (f.as_str(), m.seconds)))
                        .min_by(|a, b| a.1.total_cmp(&b.1))
                };
                let cpu = fastest(Side::Cpu);
                let parts: Vec<String> = Side::GPU
                    .iter()
                    .filter_map(|&side| {
                        let what = side.label();
                        let (f, t) = fastest(side)?;
                        let (cf, ct) = cpu?;
                        let ratio = ct / t;
                        let verdict = if ratio > 1.0 { "GPU wins" } else { "CPU wins" };
                        Some(format!("{what}: {verdict} ({f} {} vs {cf} {}, {})", fmt_time(t), fmt_time(ct), fmt_ratio(ratio)))
                    })
                    .collect();
                let _ = writeln!(s, "- {p}: {}", if parts.is_empty() { "no CPU/GPU pair measured".to_string() } else { parts.join("; ") });
            }
        }
        let _ = writeln!(s);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{self, fixture};

    #[test]
    fn sides_follow_the_naming_convention() {
        assert_eq!(Side::of("cpu_best"), Some(Side::Cpu));
        assert_eq!(Side::of("cpu"), Some(Side::Cpu));
        assert_eq!(Side::of("gpu_tiled_kernel"), Some(Side::GpuKernel));
        assert_eq!(Side::of("gpu_kernels"), Some(Side::GpuKernel));
        assert_eq!(Side::of("gpu_best_e2e"), Some(Side::GpuE2e));
        assert_eq!(Side::of("gpu_e2e"), Some(Side::GpuE2e));
        assert_eq!(Side::of("gpu_best_fast_e2e"), Some(Side::GpuFastE2e));
        assert_eq!(Side::of("gpu_mapped_e2e"), Some(Side::GpuFastE2e));
        // Only the ending decides: a kernel named "fast" is still a kernel.
        assert_eq!(Side::of("gpu_fast_kernel"), Some(Side::GpuKernel));
        assert_eq!(Side::of("matrixmultiply"), None);
    }

    #[test]
    fn crossover_cases() {
        let cpu = [(16.0, 1.0), (32.0, 8.0), (64.0, 64.0), (128.0, 512.0)];
        // GPU: constant 10 s: loses at 16 and 32 (ratio 0.1, 0.8), wins from 64 (6.4x).
        let gpu = [(16.0, 10.0), (32.0, 10.0), (64.0, 10.0), (128.0, 10.0)];
        match crossover(&cpu, &gpu) {
            Crossover::From { from, before, estimate } => {
                assert_eq!((from, before), (64.0, 32.0));
                // ln r: ln 0.8 at ln 32, ln 6.4 at ln 64: r = 1 at 32 * 2^(ln 1.25 / ln 8).
                let expected = 32.0 * 2f64.powf(1.25f64.ln() / 8f64.ln());
                assert!((estimate - expected).abs() < 1e-9, "{estimate} vs {expected}");
            }
            other => panic!("{other:?}"),
        }
        // Always faster.
        assert_eq!(crossover(&cpu, &[(16.0, 0.5), (128.0, 1.0)]), Crossover::Always { from: 16.0 });
        // Never faster: best ratio is at the largest size.
        match crossover(&cpu, &[(16.0, 100.0), (128.0, 1000.0)]) {
            Crossover::Never { largest, best_ratio, at } => {
                assert_eq!((largest, at), (128.0, 128.0));
                assert!((best_ratio - 0.512).abs() < 1e-12);
            }
            other => panic!("{other:?}"),
        }
        // Wins in the middle, loses again at the end: that is no crossover.
        let dip = [(16.0, 10.0), (32.0, 1.0), (64.0, 100.0)];
        assert!(matches!(crossover(&[(16.0, 1.0), (32.0, 8.0), (64.0, 64.0)], &dip), Crossover::Never { at: 32.0, .. }));
        // A win, a loss, then wins to the end: the crossover is after the last loss.
        let wobble = [(16.0, 0.5), (32.0, 9.0), (64.0, 10.0), (128.0, 10.0)];
        assert!(matches!(crossover(&cpu, &wobble), Crossover::From { from: 64.0, before: 32.0, .. }));
        // Only sizes measured on both sides count.
        assert_eq!(crossover(&cpu, &[(1000.0, 1.0)]), Crossover::NoOverlap);
        assert_eq!(crossover(&[], &gpu), Crossover::NoOverlap);
    }

    /// A synthetic matmul sweep: the CPU grows as n^3, the GPU kernel has a fixed cost plus
    /// a faster n^3 term, and transfers add an n^2 term (the fast ones a smaller fixed cost
    /// and a sixth of the per-element one).
    fn synthetic(dir: &std::path::Path) {
        for n in [16u64, 32, 64, 128, 256, 512] {
            let n3 = (n * n * n) as f64;
            let flops = format!(r#"{{"Elements":{}}}"#, 2 * n * n * n);
            let p = n.to_string();
            fixture::write(dir, "matmul", "cpu_best", &p, n3 * 0.1, false, &flops);
            fixture::write(dir, "matmul", "cpu_naive", &p, n3 * 1.0, false, &flops);
            fixture::write(dir, "matmul", "gpu_best_kernel", &p, 20_000.0 + n3 * 0.01, false, &flops);
            fixture::write(dir, "matmul", "gpu_best_e2e", &p, 100_000.0 + n3 * 0.01 + (n * n) as f64 * 30.0, false, &flops);
            fixture::write(dir, "matmul", "gpu_best_fast_e2e", &p, 30_000.0 + n3 * 0.01 + (n * n) as f64 * 5.0, false, &flops);
        }
        fixture::write(dir, "matmul_mnist", "cpu_best", "64x784x128", 1e6, false, r#"{"Elements":12845056}"#);
        fixture::write(dir, "matmul_mnist", "gpu_best_kernel", "64x784x128", 2e5, false, r#"{"Elements":12845056}"#);
        fixture::write(dir, "matmul_mnist", "gpu_best_e2e", "64x784x128", 3e6, false, r#"{"Elements":12845056}"#);
        fixture::write(dir, "matmul_mnist", "gpu_best_fast_e2e", "64x784x128", 5e5, false, r#"{"Elements":12845056}"#);
    }

    #[test]
    fn report_from_synthetic_estimates() {
        let dir = fixture::temp_dir("report");
        synthetic(&dir);
        let all = results::load(&dir).unwrap();
        let mut ops = operations(&all);
        assert_eq!(ops.len(), 2);
        ops[0].adapter = "Test GPU (Vulkan, DiscreteGpu)".into();
        ops[0].cpu = "Test CPU, 2 threads".into();
        let mm = &ops[0];
        assert!(mm.numeric);
        let order: Vec<&str> = mm.functions.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(order, ["cpu_best", "cpu_naive", "gpu_best_kernel", "gpu_best_e2e", "gpu_best_fast_e2e"]);
        assert_eq!(mm.params, ["16", "32", "64", "128", "256", "512"]);
        // Kernel only: 0.1 n^3 > 20000 + 0.01 n^3 from n^3 > 222,222 (n > 60.6): wins from 64.
        // Simple transfers: 0.09 n^3 > 1e5 + 30 n^2: n = 512 wins (1.2e7 > 7.9e6 + 1e5), 256 loses.
        // Fast transfers: 0.09 n^3 > 3e4 + 5 n^2: n = 128 wins (188743 > 111920), 64 loses.
        let cross = mm.crossovers();
        assert!(matches!(cross[0].1, Crossover::From { from: 64.0, before: 32.0, .. }), "{cross:?}");
        assert!(matches!(cross[1].1, Crossover::From { from: 512.0, before: 256.0, .. }), "{cross:?}");
        assert!(matches!(cross[2].1, Crossover::From { from: 128.0, before: 64.0, .. }), "{cross:?}");
        assert_eq!(cross[0].0, "GPU, kernels only (best of gpu_best_kernel)");
        assert_eq!(cross[1].0, "GPU, with simple transfers (best of gpu_best_e2e)");
        assert_eq!(cross[2].0, "GPU, with fast transfers (best of gpu_best_fast_e2e)");
        // Then each GPU function on its own.
        let each: Vec<&str> = cross[3..].iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(each, ["gpu_best_kernel", "gpu_best_e2e", "gpu_best_fast_e2e"]);

        let text = report(&ops);
        assert!(text.contains("Test GPU"), "{text}");
        assert!(text.contains("wins from n = 64"), "{text}");
        assert!(text.contains("wins from n = 512"), "{text}");
        assert!(text.contains("- GPU, with fast transfers (best of gpu_best_fast_e2e): wins from n = 128 (loses at 64;"), "{text}");
        // 2 * 512^3 FLOP in 0.1 * 512^3 ns = 20 GFLOP/s for cpu_best at 512.
        assert!(text.contains("| 512 | 13.4 ms (20.0) |"), "{text}");
        // The shape table: GPU kernels win (5x), GPU with transfers loses (0.33x).
        assert!(text.contains("kernels only: GPU wins (gpu_best_kernel 200 µs vs cpu_best 1.00 ms, 5.00x)"), "{text}");
        // With the simple transfers it loses (0.33x), with the fast ones it wins (2x).
        assert!(text.contains("with simple transfers: CPU wins (gpu_best_e2e 3.00 ms vs cpu_best 1.00 ms, 0.33x)"), "{text}");
        assert!(text.contains("with fast transfers: GPU wins (gpu_best_fast_e2e 500 µs vs cpu_best 1.00 ms, 2.00x)"), "{text}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn from_dir_titles_by_group_and_leaves_out_earlier_runs() {
        let dir = fixture::temp_dir("from_dir");
        synthetic(&dir);
        std::fs::write(dir.join("adapter.txt"), "Last GPU\nLast CPU\n").unwrap();
        // matmul was rerun on another adapter, for n = 16 only: its other sizes are old.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(dir.join("matmul").join("adapter.txt"), "Other GPU\nOther CPU\n").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        fixture::write(&dir, "matmul", "cpu_best", "16", 400.0, false, "null");
        fixture::write(&dir, "matmul", "gpu_best_kernel", "16", 100.0, false, "null");

        let (ops, stale) = from_dir(&dir, false).unwrap();
        let mm = ops.iter().find(|o| o.group == "matmul").unwrap();
        assert_eq!(mm.params, ["16"]);
        assert_eq!((mm.adapter.as_str(), mm.cpu.as_str()), ("Other GPU", "Other CPU"));
        assert_eq!(mm.crossovers()[0].1, Crossover::Always { from: 16.0 });
        assert_eq!(stale.len(), 5 * 6 - 2);
        assert!(stale.iter().all(|m| m.group == "matmul"));
        // matmul_mnist has no note of its own: titled from the global one, nothing left out.
        let shapes = ops.iter().find(|o| o.group == "matmul_mnist").unwrap();
        assert_eq!(shapes.adapter, "Last GPU");
        assert_eq!(shapes.cells.len(), 4);

        let (ops, stale) = from_dir(&dir, true).unwrap();
        assert!(stale.is_empty());
        assert_eq!(ops.iter().find(|o| o.group == "matmul").unwrap().params.len(), 6);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn formatting() {
        assert_eq!(fmt_size(1024.0), "1024");
        assert_eq!(fmt_size(65536.0), "2^16");
        assert_eq!(fmt_size(100000.0), "100000");
        assert_eq!(fmt_ratio(5.0), "5.00x");
        assert_eq!(fmt_ratio(0.0312), "0.031x");
        assert_eq!(fmt_ratio(0.00012), "0.00012x");
    }
}
