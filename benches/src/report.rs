//! The crossover report that `cargo bench` ends with, and the saved form it is redrawn from.
//!
//! After criterion has run, [`after_run`] updates the adapter notes of the groups this run
//! measured, reads every result in criterion's folder (so groups a filtered run skipped keep
//! their last results), writes the report folder and returns the short summary to print last.
//! The report folder (`<criterion dir>/crossover/` after `cargo bench`; the copies kept in the
//! repository are under `benches/results/<machine>/`) holds:
//! - `crossover.md`: per group, the adapter and the CPU, time per size and function, and
//!   where the GPU wins ([`crate::crossover::report`]);
//! - `results.json`: the measurements behind it ([`Saved`]), so that
//!   `crossover --saved DIR` redraws everything without criterion's folder, and the verdicts
//!   the tables end with (where each GPU series first wins);
//! - `<group>.png` and `<group>.svg`: one plot per sweep over sizes ([`crate::plot`]).
//!
//! Nothing here knows the benches' function names: a new series (another `gpu*_e2e` or
//! `gpu*_fast_e2e` function, say) shows up in the tables, the plots and the verdicts of its
//! side (simple or fast transfers) as soon as a bench measures it.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::crossover::{self, Crossover, Operation, Side, crossover};
use crate::plot;
use crate::results::{self, Measurement, Note};

/// The report's folder under criterion's.
pub const REPORT_DIR: &str = "crossover";
/// The Markdown tables.
pub const MARKDOWN: &str = "crossover.md";
/// The measurements, as [`Saved`].
pub const RESULTS: &str = "results.json";
/// What `results.json` says it is.
pub const SAVED_FORMAT: &str = "benches crossover results, version 1";
/// Plot formats the report writes (PNG for READMEs, SVG to zoom into).
pub const FORMATS: [&str; 2] = ["png", "svg"];

/// The measurements a report was made from: `results.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Saved {
    /// [`SAVED_FORMAT`].
    pub format: String,
    /// The adapter and CPU of each group.
    pub groups: Vec<SavedGroup>,
    /// Every measurement of the report (criterion's typical time per iteration, in seconds).
    pub measurements: Vec<Measurement>,
    /// Where the GPU wins, per group and series, as the report says it: written with the
    /// measurements for readers of the file (the report itself recomputes them). Files
    /// written before these were saved have none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verdicts: Vec<SavedVerdict>,
}

/// One verdict of the report: a GPU series against the fastest CPU function.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedVerdict {
    pub group: String,
    /// A side ("GPU, with fast transfers (best of gpu_best_fast_e2e)") or one function
    /// ("gpu_best_fast_e2e").
    pub series: String,
    /// The report's sentence ("wins from n = 128 (loses at 64; the curves cross near n = 97)").
    pub verdict: String,
    /// The smallest measured size from which the series is faster at every larger size; `None`
    /// when it never wins for good, and for the MNIST shapes (no sizes).
    pub wins_from: Option<f64>,
}

impl SavedVerdict {
    /// The verdicts of `op`: for a sweep over sizes, [`Operation::crossovers`]; for shapes,
    /// one line per GPU side, as the summary prints it.
    fn of(op: &Operation) -> Vec<SavedVerdict> {
        let saved = |series: String, verdict: String, wins_from: Option<f64>| SavedVerdict { group: op.group.clone(), series, verdict, wins_from };
        if op.numeric {
            op.crossovers()
                .into_iter()
                .map(|(series, c)| {
                    let wins_from = match c {
                        Crossover::Always { from } | Crossover::From { from, .. } => Some(from),
                        Crossover::Never { .. } | Crossover::NoOverlap => None,
                    };
                    saved(series, c.describe(&op.info.x), wins_from)
                })
                .collect()
        } else {
            Side::GPU.iter().filter_map(|&side| Some(saved(format!("GPU, {}", side.label()), verdict(op, side)?, None))).collect()
        }
    }
}

/// Who measured one group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedGroup {
    pub group: String,
    pub adapter: String,
    pub cpu: String,
}

impl Saved {
    /// The measurements and titles of `ops`.
    pub fn of(ops: &[Operation]) -> Saved {
        Saved {
            format: SAVED_FORMAT.to_string(),
            groups: ops
                .iter()
                .map(|op| SavedGroup { group: op.group.clone(), adapter: op.adapter.clone(), cpu: op.cpu.clone() })
                .collect(),
            measurements: ops.iter().flat_map(|op| op.params.iter().flat_map(|p| op.functions.iter().filter_map(|(f, _)| op.cells.get(&(f.clone(), p.clone())).cloned()))).collect(),
            verdicts: ops.iter().flat_map(SavedVerdict::of).collect(),
        }
    }

    /// The operations again, titled as saved.
    pub fn operations(&self) -> Vec<Operation> {
        let mut ops = crossover::operations(&self.measurements);
        for op in &mut ops {
            if let Some(g) = self.groups.iter().find(|g| g.group == op.group) {
                op.adapter = g.adapter.clone();
                op.cpu = g.cpu.clone();
            }
        }
        ops
    }

    /// Reads `<dir>/results.json`.
    pub fn read(dir: &Path) -> Result<Saved, String> {
        let path = dir.join(RESULTS);
        let text = std::fs::read_to_string(&path).map_err(|e| format!("reading {}: {e} (a saved report folder holds {RESULTS})", path.display()))?;
        let saved: Saved = serde_json::from_str(&text).map_err(|e| format!("{} is not a saved report: {e}", path.display()))?;
        if saved.format != SAVED_FORMAT {
            return Err(format!("{} is '{}', not '{SAVED_FORMAT}'", path.display(), saved.format));
        }
        Ok(saved)
    }
}

/// Where a report's files are.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    /// `crossover.md`.
    pub markdown: PathBuf,
    /// `(group, plot files)`, one entry per numeric group.
    pub plots: Vec<(String, Vec<PathBuf>)>,
}

/// Writes the report of `ops` into `out`: `crossover.md`, `results.json` (`saved`) and one
/// plot per numeric group in each of `formats`. Returns where they are.
pub fn write(ops: &[Operation], saved: &Saved, out: &Path, formats: &[&str]) -> Result<Written, String> {
    std::fs::create_dir_all(out).map_err(|e| format!("creating {}: {e}", out.display()))?;
    let markdown = out.join(MARKDOWN);
    std::fs::write(&markdown, crossover::report(ops)).map_err(|e| format!("writing {}: {e}", markdown.display()))?;
    let results = out.join(RESULTS);
    let json = serde_json::to_string_pretty(saved).map_err(|e| format!("encoding {}: {e}", results.display()))?;
    std::fs::write(&results, json + "\n").map_err(|e| format!("writing {}: {e}", results.display()))?;
    Ok(Written { markdown, plots: draw(ops, out, formats)? })
}

/// Draws one plot per numeric group of `ops` into `out`, in each of `formats`; returns
/// `(group, files)`. A saved report is redrawn with this alone: its `crossover.md` and
/// `results.json` stay as the run wrote them.
pub fn draw(ops: &[Operation], out: &Path, formats: &[&str]) -> Result<Vec<(String, Vec<PathBuf>)>, String> {
    std::fs::create_dir_all(out).map_err(|e| format!("creating {}: {e}", out.display()))?;
    common::register_fonts();
    let mut plots = Vec::new();
    for op in ops.iter().filter(|o| o.numeric) {
        let mut files = Vec::new();
        for format in formats {
            let path = out.join(format!("{}.{format}", op.group));
            plot::plot(op, &path)?;
            files.push(path);
        }
        plots.push((op.group.clone(), files));
    }
    Ok(plots)
}

/// Whether an adapter line (as `GpuContext::adapter_line` writes it: `name (Backend,
/// DeviceType, driver ...)`) names a software adapter, device type `Cpu`.
pub fn is_software(adapter: &str) -> bool {
    adapter.contains(", Cpu,") || adapter.contains(", Cpu)")
}

/// The short summary: per adapter and CPU, each group's verdict with kernels only, with the
/// simple transfers and with the fast ones, then where the files are. `stale` is how many results were left out as older
/// than their group's setup; `html` is criterion's own report, if it exists.
pub fn summary(ops: &[Operation], written: &Written, stale: usize, html: Option<&Path>) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "\n== crossover: where the GPU starts to beat the CPU ==");
    let width = ops.iter().map(|o| o.group.len()).max().unwrap_or(0);
    let label_width = Side::GPU.iter().map(|side| side.label().len() + 1).max().unwrap_or(0);
    let mut last_setup: Option<(&str, &str)> = None;
    for op in ops {
        if last_setup != Some((&op.adapter, &op.cpu)) {
            let _ = writeln!(s, "GPU: {}", op.adapter);
            if is_software(&op.adapter) {
                let _ = writeln!(s, "     a SOFTWARE adapter: this \"GPU\" runs on the CPU's cores, so its timings are CPU timings");
            }
            let _ = writeln!(s, "CPU: {}", op.cpu);
            last_setup = Some((&op.adapter, &op.cpu));
        }
        let mut first = true;
        for side in Side::GPU {
            let Some(verdict) = verdict(op, side) else { continue };
            let name = if first { op.group.as_str() } else { "" };
            let _ = writeln!(s, "  {name:width$}  {:<label_width$} {verdict}", format!("{}:", side.label()));
            first = false;
        }
        if first {
            let _ = writeln!(s, "  {:width$}  no GPU function measured", op.group);
        }
    }
    if stale > 0 {
        let _ = writeln!(
            s,
            "(left out: {stale} result(s) older than their group's adapter, CPU or sweep; `crossover --keep-old` includes them)"
        );
    }
    let _ = writeln!(s, "tables: {}", written.markdown.display());
    for (group, files) in &written.plots {
        let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
        let _ = writeln!(s, "plot:   {}  ({group})", names.join(", "));
    }
    if let Some(html) = html {
        let _ = writeln!(s, "criterion's report: {}", html.display());
    }
    s
}

/// One line for `side` of `op`: where the best function of that side first beats the best CPU
/// function (a sweep over sizes), or at how many shapes it does (the MNIST shapes).
fn verdict(op: &Operation, side: Side) -> Option<String> {
    let names: Vec<&str> = op.functions.iter().filter(|(_, s)| *s == Some(side)).map(|(f, _)| f.as_str()).collect();
    if names.is_empty() {
        return None;
    }
    if op.numeric {
        return Some(crossover(&op.best_of(Side::Cpu), &op.best_of(side)).describe(&op.info.x));
    }
    let fastest = |p: &String, side: Side| {
        op.functions
            .iter()
            .filter(|(_, s)| *s == Some(side))
            .filter_map(|(f, _)| op.cells.get(&(f.clone(), p.clone())).map(|m| m.seconds))
            .min_by(f64::total_cmp)
    };
    let both: Vec<(&String, f64, f64)> =
        op.params.iter().filter_map(|p| Some((p, fastest(p, Side::Cpu)?, fastest(p, side)?))).collect();
    let wins: Vec<&str> = both.iter().filter(|(_, cpu, gpu)| gpu < cpu).map(|(p, _, _)| p.as_str()).collect();
    let list = if wins.is_empty() { String::new() } else { format!(": {}", wins.join(", ")) };
    Some(format!("faster at {} of {} shapes{list}", wins.len(), both.len()))
}

/// After a bench run that started at `setup.since` on `setup`'s adapter, CPU and sweep:
/// updates the notes of the groups with results from this run (a group measured again on the
/// same setup keeps its old `since`, so a filtered run adds to its results; a new setup starts
/// afresh), rewrites the report from every result in criterion's `dir`, and returns the summary.
pub fn after_run(dir: &Path, setup: &Note) -> Result<String, String> {
    let started = setup.since.ok_or("the run's start time is missing")?;
    let all = results::load(dir).map_err(|e| e.to_string())?;
    let ran: BTreeSet<&str> =
        all.iter().filter(|m| m.modified.is_some_and(|t| t >= started)).map(|m| m.group.as_str()).collect();
    for group in &ran {
        let folder = dir.join(group);
        let old = Note::read(&folder);
        let since = if old.same_setup(setup) { old.since.or(setup.since) } else { setup.since };
        Note { since, ..setup.clone() }.write(&folder).map_err(|e| format!("writing the note in {}: {e}", folder.display()))?;
    }
    if !ran.is_empty() {
        // Criterion's own folder names the last setup, for groups without a note of their own.
        setup.write(dir).map_err(|e| format!("writing the note in {}: {e}", dir.display()))?;
    }
    let (ops, stale) = crossover::from_dir(dir, false).map_err(|e| e.to_string())?;
    let written = write(&ops, &Saved::of(&ops), &dir.join(REPORT_DIR), &FORMATS)?;
    let html = dir.join("report").join("index.html");
    let measured = all.iter().filter(|m| m.modified.is_some_and(|t| t >= started)).count();
    let seconds = started.elapsed().map_or(0.0, |d| d.as_secs_f64());
    let sweep = setup.sweep.as_deref().unwrap_or("unknown");
    Ok(format!(
        "{}this run: {measured} benchmark(s), {sweep} sweep, {seconds:.0} s from start to report\n",
        summary(&ops, &written, stale.len(), html.is_file().then_some(html.as_path()))
    ))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::results::fixture;

    /// A bench run on `adapter` that measures `(group, function, param, ns)`: criterion's files
    /// written after the run's start, then [`after_run`].
    fn run(dir: &Path, adapter: &str, sweep: &str, results: &[(&str, &str, &str, f64)]) -> String {
        let started = SystemTime::now();
        // File times come from a coarse clock that may lag `now()` by a tick.
        std::thread::sleep(Duration::from_millis(30));
        for &(group, function, param, ns) in results {
            fixture::write(dir, group, function, param, ns, false, r#"{"Elements":1000}"#);
        }
        let setup = Note {
            adapter: Some(adapter.to_string()),
            cpu: Some("Test CPU, 2 threads".into()),
            sweep: Some(sweep.to_string()),
            since: Some(started),
        };
        after_run(dir, &setup).unwrap()
    }

    /// Every size of a full run: double, matmul (numeric) and the MNIST shapes.
    fn full_run() -> Vec<(&'static str, &'static str, &'static str, f64)> {
        let mut v = Vec::new();
        for (p, ns) in [("1024", 1e3), ("4096", 4e3)] {
            v.push(("double", "cpu", p, ns));
            v.push(("double", "gpu_kernel", p, 2e3));
            v.push(("double", "gpu_e2e", p, 9e3));
        }
        v.push(("double", "gpu_fast_e2e", "1024", 1.5e3));
        v.push(("double", "gpu_fast_e2e", "4096", 3e3));
        for (p, ns, fast) in [("16", 1e3, 2e4), ("32", 8e3, 5e3), ("64", 64e3, 2e4)] {
            v.push(("matmul", "cpu_best", p, ns));
            v.push(("matmul", "gpu_best_kernel", p, 1e4));
            v.push(("matmul", "gpu_best_e2e", p, 3e4));
            v.push(("matmul", "gpu_best_fast_e2e", p, fast));
        }
        v.push(("matmul_mnist", "cpu_best", "64x784x128", 1e6));
        v.push(("matmul_mnist", "gpu_best_kernel", "64x784x128", 2e5));
        v.push(("matmul_mnist", "gpu_best_e2e", "64x784x128", 3e6));
        v.push(("matmul_mnist", "gpu_best_fast_e2e", "64x784x128", 5e5));
        v
    }

    fn section<'a>(md: &'a str, title_start: &str) -> &'a str {
        let start = md.find(title_start).unwrap_or_else(|| panic!("no section {title_start} in\n{md}"));
        let rest = &md[start..];
        let end = rest[3..].find("\n### ").map_or(rest.len(), |e| e + 3);
        &rest[..end]
    }

    #[test]
    fn a_filtered_run_updates_its_groups_and_keeps_the_others() {
        let dir = fixture::temp_dir("merge");
        let summary = run(&dir, "Test GPU (Vulkan, DiscreteGpu)", "quick", &full_run());
        let out = dir.join(REPORT_DIR);
        let md = std::fs::read_to_string(out.join(MARKDOWN)).unwrap();
        let double_before = section(&md, "### double").to_string();
        // The summary: the adapter, each group's verdicts, the files; kernels only at 1024
        // and 4096: 2 µs against 1 and 4 µs: wins from 4096; matmul from 64; the fast
        // transfers win doubling from 4096 (3 µs against 4) and matmul from 32.
        for needle in [
            "GPU: Test GPU (Vulkan, DiscreteGpu)",
            "CPU: Test CPU, 2 threads",
            "  double        kernels only:          wins from elements = 4096 (loses at 1024;",
            "                with simple transfers: never wins up to elements = 4096",
            "                with fast transfers:   wins from elements = 4096 (loses at 1024;",
            "  matmul        kernels only:          wins from n = 64",
            "                with simple transfers: wins from n = 64 (loses at 32;",
            "                with fast transfers:   wins from n = 32 (loses at 16;",
            "  matmul_mnist  kernels only:          faster at 1 of 1 shapes: 64x784x128",
            "                with simple transfers: faster at 0 of 1 shapes",
            "                with fast transfers:   faster at 1 of 1 shapes: 64x784x128",
        ] {
            assert!(summary.contains(needle), "{needle:?} missing from\n{summary}");
        }
        assert!(!summary.contains("SOFTWARE"), "{summary}");
        assert!(summary.contains(&format!("this run: {} benchmark(s), quick sweep", full_run().len())), "{summary}");
        assert!(summary.contains(&out.join("matmul.png").display().to_string()), "{summary}");

        // `cargo bench -- matmul`, same setup: new numbers for n = 16 and 32 only (as a finer
        // filter would leave n = 64 alone), none for matmul_mnist.
        let later = run(
            &dir,
            "Test GPU (Vulkan, DiscreteGpu)",
            "quick",
            &[
                ("matmul", "cpu_best", "16", 500.0),
                ("matmul", "gpu_best_kernel", "16", 100.0),
                ("matmul", "cpu_best", "32", 4e3),
                ("matmul", "gpu_best_kernel", "32", 1e3),
            ],
        );
        let md = std::fs::read_to_string(out.join(MARKDOWN)).unwrap();
        assert_eq!(section(&md, "### double"), double_before, "the double group must be kept as it was");
        assert!(md.contains("### matmul at the MNIST"), "matmul_mnist kept:\n{md}");
        // matmul: the new numbers, and n = 64 from the earlier run of the same setup.
        let mm = section(&md, "### matmul: square");
        assert!(mm.contains("| 16 | 500 ns (2.00) | 100 ns (10.0) |"), "{mm}");
        assert!(mm.contains("| 64 | 64.0 µs"), "{mm}");
        assert!(later.contains("kernels only:          wins at every size measured (from n = 16)"), "{later}");
        assert!(later.contains("double"), "the summary still covers every group:\n{later}");
        // Every plot is still there, and results.json has every group.
        for g in ["double", "matmul"] {
            for f in FORMATS {
                assert!(out.join(format!("{g}.{f}")).is_file(), "{g}.{f}");
            }
        }
        let saved = Saved::read(&out).unwrap();
        let groups: BTreeSet<&str> = saved.measurements.iter().map(|m| m.group.as_str()).collect();
        assert_eq!(groups, BTreeSet::from(["double", "matmul", "matmul_mnist"]));
        assert_eq!(saved.measurements.len(), full_run().len());

        // The same filter on another adapter: matmul's sizes it did not measure are from the
        // old setup and left out; the other groups keep their own adapter.
        let other = run(&dir, "llvmpipe (Vulkan, Cpu, driver Mesa)", "software", &[("matmul", "cpu_best", "16", 600.0), ("matmul", "gpu_best_kernel", "16", 9e3)]);
        let md = std::fs::read_to_string(out.join(MARKDOWN)).unwrap();
        assert_eq!(section(&md, "### double"), double_before);
        let mm = section(&md, "### matmul: square");
        assert!(mm.contains("GPU: llvmpipe") && !mm.contains("| 32 |"), "{mm}");
        assert!(other.contains("SOFTWARE") && other.contains("GPU: Test GPU"), "{other}");
        assert!(other.contains("left out: 10 result(s)"), "{other}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn saved_results_redraw_the_same_report() {
        let dir = fixture::temp_dir("saved");
        run(&dir, "Test GPU (Vulkan, DiscreteGpu)", "quick", &full_run());
        let out = dir.join(REPORT_DIR);
        let md = std::fs::read_to_string(out.join(MARKDOWN)).unwrap();
        let saved = Saved::read(&out).unwrap();
        let ops = saved.operations();
        assert_eq!(ops.len(), 3);
        assert_eq!(crossover::report(&ops), md, "results.json holds everything the tables show");
        // ... and the verdicts, for readers of the file: per group, each side, then (for the
        // sweeps) each GPU function.
        let verdict = |group: &str, series: &str| {
            saved
                .verdicts
                .iter()
                .find(|v| v.group == group && v.series == series)
                .unwrap_or_else(|| panic!("no verdict for {group} / {series} in {:#?}", saved.verdicts))
        };
        let fast = verdict("matmul", "GPU, with fast transfers (best of gpu_best_fast_e2e)");
        assert_eq!(fast.wins_from, Some(32.0));
        assert!(fast.verdict.starts_with("wins from n = 32 (loses at 16;"), "{fast:?}");
        assert!(md.contains(&format!("- {}: {}", fast.series, fast.verdict)), "the tables say the same:\n{md}");
        assert_eq!(verdict("double", "gpu_e2e").wins_from, None);
        assert_eq!(verdict("double", "gpu_fast_e2e").wins_from, Some(4096.0));
        assert_eq!(verdict("matmul_mnist", "GPU, with fast transfers").verdict, "faster at 1 of 1 shapes: 64x784x128");
        assert_eq!(saved.verdicts.len(), (3 + 3) + (3 + 3) + 3, "double, matmul: sides + functions; shapes: sides");
        let again = dir.join("again");
        let written = write(&ops, &saved, &again, &["svg"]).unwrap();
        assert_eq!(written.plots.len(), 2, "double and matmul; the shapes get no plot");
        assert_eq!(Saved::read(&again).unwrap(), saved);
        // Redrawing in place touches only the plots.
        std::fs::remove_file(out.join("matmul.png")).unwrap();
        let plots = draw(&ops, &out, &FORMATS).unwrap();
        assert_eq!(plots[1], ("matmul".to_string(), vec![out.join("matmul.png"), out.join("matmul.svg")]));
        assert!(out.join("matmul.png").is_file());
        assert_eq!(std::fs::read_to_string(out.join(MARKDOWN)).unwrap(), md);

        std::fs::write(out.join(RESULTS), r#"{"format":"something else","groups":[],"measurements":[]}"#).unwrap();
        let err = Saved::read(&out).unwrap_err();
        assert!(err.contains("not 'benches crossover results"), "{err}");
        let err = Saved::read(&dir.join("nowhere")).unwrap_err();
        assert!(err.contains("results.json"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn software_adapters_are_recognised_from_the_adapter_line() {
        assert!(is_software("llvmpipe (LLVM 15.0.6, 256 bits) (Vulkan, Cpu, driver llvmpipe Mesa 22.3.6 (LLVM 15.0.6))"));
        assert!(is_software("WARP (Dx12, Cpu)"));
        assert!(!is_software("NVIDIA H200 (Vulkan, DiscreteGpu, driver NVIDIA 580.159.04)"));
        assert!(!is_software("Cpu-named GPU (Vulkan, DiscreteGpu)"));
    }
}
