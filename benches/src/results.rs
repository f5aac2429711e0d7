//! Reading criterion's saved results.
//!
//! Criterion 0.8 writes, for every benchmark `<group>/<function>/<parameter>`, a folder
//! `<criterion dir>/<group>/<function>/<parameter>/new/` (names made filename-safe) holding
//! `benchmark.json` (the ids and the declared throughput) and `estimates.json` (mean, median,
//! slope... in nanoseconds per iteration, each with a confidence interval). Earlier runs sit in
//! `base/` (or a named baseline) beside `new/`; we read only `new/`, as criterion's own report
//! does. The ids come from `benchmark.json`, not from the folder names, so names with `/` or
//! `:` in them survive.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// One benchmark's result (also the rows of a saved report's `results.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    pub group: String,
    pub function: String,
    /// The parameter as criterion printed it ("1024", "64x784x128").
    pub param: String,
    /// Criterion's typical time per iteration (the slope of a linear fit when it sampled
    /// linearly, else the mean), in seconds, as its reports and line charts use.
    pub seconds: f64,
    /// The 95% confidence interval of that estimate, in seconds.
    pub low: f64,
    pub high: f64,
    /// The throughput declared for one iteration, if any.
    pub throughput: Option<Throughput>,
    /// When criterion wrote the estimates (to tell this run's results from an earlier run's);
    /// not saved in `results.json`.
    #[serde(skip)]
    pub modified: Option<SystemTime>,
}

impl Measurement {
    /// The parameter as a number, for sweeps over sizes.
    pub fn size(&self) -> Option<f64> {
        self.param.trim().parse::<f64>().ok().filter(|v| v.is_finite())
    }

    /// Work per second from the declared throughput (bytes/s or elements/s).
    pub fn rate(&self) -> Option<f64> {
        self.throughput.as_ref().map(|t| t.amount() as f64 / self.seconds)
    }
}

/// The throughput criterion saved with a benchmark (its enum, as serde writes it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Throughput {
    Bits(u64),
    Bytes(u64),
    BytesDecimal(u64),
    Elements(u64),
    ElementsAndBytes { elements: u64, bytes: u64 },
}

impl Throughput {
    /// The amount of work per iteration (elements for the mixed form).
    pub fn amount(&self) -> u64 {
        match *self {
            Throughput::Bits(n) | Throughput::Bytes(n) | Throughput::BytesDecimal(n) | Throughput::Elements(n) => n,
            Throughput::ElementsAndBytes { elements, .. } => elements,
        }
    }
}

#[derive(Deserialize)]
struct BenchmarkJson {
    group_id: String,
    function_id: Option<String>,
    value_str: Option<String>,
    throughput: Option<Throughput>,
}

#[derive(Deserialize)]
struct EstimateJson {
    confidence_interval: IntervalJson,
    point_estimate: f64,
}

#[derive(Deserialize)]
struct IntervalJson {
    lower_bound: f64,
    upper_bound: f64,
}

#[derive(Deserialize)]
struct EstimatesJson {
    mean: EstimateJson,
    slope: Option<EstimateJson>,
}

/// Why results could not be read.
#[derive(Debug)]
pub enum ResultsError {
    /// The criterion directory does not exist (no bench has run yet, or the wrong path).
    NoDirectory(PathBuf),
    Io(PathBuf, std::io::Error),
    /// A file that is not what criterion writes.
    Parse(PathBuf, serde_json::Error),
}

impl std::fmt::Display for ResultsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResultsError::NoDirectory(p) => write!(
                f,
                "no criterion results at {}: run `cargo bench -p benches` first, or pass --criterion-dir",
                p.display()
            ),
            ResultsError::Io(p, e) => write!(f, "reading {}: {e}", p.display()),
            ResultsError::Parse(p, e) => write!(f, "{} is not a criterion 0.8 result file: {e}", p.display()),
        }
    }
}

impl std::error::Error for ResultsError {}

/// Every benchmark under `dir` that has both `new/benchmark.json` and `new/estimates.json`,
/// sorted by group, function and size (or parameter text).
pub fn load(dir: &Path) -> Result<Vec<Measurement>, ResultsError> {
    if !dir.is_dir() {
        return Err(ResultsError::NoDirectory(dir.to_path_buf()));
    }
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(folder) = stack.pop() {
        let entries = std::fs::read_dir(&folder).map_err(|e| ResultsError::Io(folder.clone(), e))?;
        for entry in entries {
            let path = entry.map_err(|e| ResultsError::Io(folder.clone(), e))?.path();
            if !path.is_dir() {
                continue;
            }
            let bench = path.join("benchmark.json");
            if path.file_name().is_some_and(|n| n == "new") && bench.is_file() {
                if let Some(m) = load_one(&bench, &path.join("estimates.json"))? {
                    found.push(m);
                }
            } else {
                stack.push(path);
            }
        }
    }
    found.sort_by(|a, b| {
        (a.group.as_str(), a.function.as_str())
            .cmp(&(b.group.as_str(), b.function.as_str()))
            .then(a.size().unwrap_or(f64::NAN).total_cmp(&b.size().unwrap_or(f64::NAN)))
            .then(a.param.cmp(&b.param))
    });
    Ok(found)
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, ResultsError> {
    let text = std::fs::read_to_string(path).map_err(|e| ResultsError::Io(path.to_path_buf(), e))?;
    serde_json::from_str(&text).map_err(|e| ResultsError::Parse(path.to_path_buf(), e))
}

/// One benchmark; `None` when criterion saved the id but no estimates (an interrupted run).
fn load_one(bench: &Path, estimates: &Path) -> Result<Option<Measurement>, ResultsError> {
    if !estimates.is_file() {
        return Ok(None);
    }
    let id: BenchmarkJson = read_json(bench)?;
    let est: EstimatesJson = read_json(estimates)?;
    let modified = std::fs::metadata(estimates).and_then(|m| m.modified()).ok();
    let typical = est.slope.as_ref().unwrap_or(&est.mean);
    Ok(Some(Measurement {
        group: id.group_id,
        function: id.function_id.unwrap_or_default(),
        param: id.value_str.unwrap_or_default(),
        seconds: typical.point_estimate * 1e-9,
        low: typical.confidence_interval.lower_bound * 1e-9,
        high: typical.confidence_interval.upper_bound * 1e-9,
        throughput: id.throughput,
        modified,
    }))
}

/// The adapter note: the GPU adapter, the CPU, the sweep and when that setup was first run
/// ([`Note`]), kept in each group's folder (`<criterion dir>/<group>/adapter.txt`) and in
/// criterion's own. The report titles its plots with it, and leaves out results older than
/// their group's setup.
pub const ADAPTER_NOTE: &str = "adapter.txt";

/// The adapter note a bench leaves in each group's folder (see [`ADAPTER_NOTE`]):
///
/// ```text
/// NVIDIA H200 (Vulkan, DiscreteGpu, driver NVIDIA 580.159.04)
/// Intel(R) Xeon(R) Processor, 16 threads
/// sweep: full
/// since: 1764460800.123456789
/// ```
///
/// The adapter and the CPU title the report; `since` (seconds since 1970) is when the first
/// run with this adapter, CPU and sweep started, so results older than it come from another
/// setup and are left out. A note without a `since:` line dates from its file's modification
/// time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Note {
    /// The GPU adapter line.
    pub adapter: Option<String>,
    /// The CPU line.
    pub cpu: Option<String>,
    /// The sweep that measured the group (`quick`, `software`, `full`).
    pub sweep: Option<String>,
    /// The start of the first run with this setup.
    pub since: Option<SystemTime>,
}

impl Note {
    /// Reads `<folder>/adapter.txt`; every field `None` when it is missing.
    pub fn read(folder: &Path) -> Note {
        let path = folder.join(ADAPTER_NOTE);
        let Ok(text) = std::fs::read_to_string(&path) else {
            return Note::default();
        };
        let mut note = Note::default();
        let mut free = Vec::new();
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            if let Some(v) = line.strip_prefix("sweep:") {
                note.sweep = Some(v.trim().to_string());
            } else if let Some(v) = line.strip_prefix("since:") {
                note.since = v.trim().parse::<f64>().ok().filter(|s| s.is_finite() && *s >= 0.0).map(|s| UNIX_EPOCH + Duration::from_secs_f64(s));
            } else {
                free.push(line.to_string());
            }
        }
        let mut free = free.into_iter();
        note.adapter = free.next();
        note.cpu = free.next();
        if note.since.is_none() {
            note.since = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
        }
        note
    }

    /// Writes `<folder>/adapter.txt` (creating the folder).
    pub fn write(&self, folder: &Path) -> std::io::Result<()> {
        let mut text = String::new();
        for line in [&self.adapter, &self.cpu].into_iter().flatten() {
            text.push_str(line);
            text.push('\n');
        }
        if let Some(sweep) = &self.sweep {
            text.push_str(&format!("sweep: {sweep}\n"));
        }
        if let Some(since) = self.since.and_then(|t| t.duration_since(UNIX_EPOCH).ok()) {
            text.push_str(&format!("since: {}.{:09}\n", since.as_secs(), since.subsec_nanos()));
        }
        std::fs::create_dir_all(folder)?;
        std::fs::write(folder.join(ADAPTER_NOTE), text)
    }

    /// Whether both notes name the same adapter, CPU and sweep.
    pub fn same_setup(&self, other: &Note) -> bool {
        (&self.adapter, &self.cpu, &self.sweep) == (&other.adapter, &other.cpu, &other.sweep)
    }

    /// Whether `m` was measured before this note's setup began, i.e. by an earlier run on
    /// another adapter or CPU, or with another sweep.
    pub fn predates(&self, m: &Measurement) -> bool {
        matches!((m.modified, self.since), (Some(t), Some(w)) if t < w)
    }
}

/// Writers of synthetic criterion folders, shared by the tests of this crate.
#[cfg(test)]
pub(crate) mod fixture {
    use std::path::Path;

    /// Writes `<dir>/<group>/<function>/<param>/new/{benchmark,estimates}.json` as criterion
    /// 0.8 does, with `ns` nanoseconds per iteration (the mean; the slope only if `slope`).
    pub fn write(dir: &Path, group: &str, function: &str, param: &str, ns: f64, slope: bool, throughput: &str) {
        let folder = dir.join(group).join(function).join(param).join("new");
        std::fs::create_dir_all(&folder).unwrap();
        let full = format!("{group}/{function}/{param}");
        std::fs::write(
            folder.join("benchmark.json"),
            format!(
                r#"{{"group_id":"{group}","function_id":"{function}","value_str":"{param}","throughput":{throughput},"full_id":"{full}","directory_name":"{full}","title":"{full}"}}"#
            ),
        )
        .unwrap();
        let est = |v: f64| {
            format!(
                r#"{{"confidence_interval":{{"confidence_level":0.95,"lower_bound":{},"upper_bound":{}}},"point_estimate":{v},"standard_error":1.0}}"#,
                v * 0.9,
                v * 1.1
            )
        };
        let slope_json = if slope { est(ns * 0.5) } else { "null".to_string() };
        std::fs::write(
            folder.join("estimates.json"),
            format!(
                r#"{{"mean":{},"median":{},"median_abs_dev":{},"slope":{slope_json},"std_dev":{}}}"#,
                est(ns),
                est(ns),
                est(1.0),
                est(1.0)
            ),
        )
        .unwrap();
    }

    /// A fresh empty temporary folder, unique per test.
    pub fn temp_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("benches-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}

#[cfg(test)]
mod tests {
    use super::fixture::{temp_dir, write};
    use super::*;

    #[test]
    fn reads_new_results_and_ignores_baselines() {
        let dir = temp_dir("load");
        write(&dir, "double", "cpu", "1024", 2000.0, false, r#"{"BytesDecimal":8192}"#);
        write(&dir, "double", "cpu", "4096", 8000.0, true, r#"{"BytesDecimal":32768}"#);
        write(&dir, "matmul_mnist", "gpu_best_e2e", "64x784x128", 5e5, false, r#"{"Elements":12845056}"#);
        // A saved baseline beside `new/` must not be read.
        let base = dir.join("double/cpu/1024/base");
        std::fs::create_dir_all(&base).unwrap();
        std::fs::copy(dir.join("double/cpu/1024/new/benchmark.json"), base.join("benchmark.json")).unwrap();
        // A report folder without results is skipped.
        std::fs::create_dir_all(dir.join("report")).unwrap();

        let all = load(&dir).unwrap();
        assert_eq!(all.len(), 3, "{all:?}");
        let small = &all[0];
        assert_eq!((small.group.as_str(), small.function.as_str(), small.param.as_str()), ("double", "cpu", "1024"));
        assert!((small.seconds - 2e-6).abs() < 1e-15);
        assert!((small.low - 1.8e-6).abs() < 1e-15 && (small.high - 2.2e-6).abs() < 1e-15);
        assert_eq!(small.size(), Some(1024.0));
        assert_eq!(small.throughput, Some(Throughput::BytesDecimal(8192)));
        assert!((small.rate().unwrap() - 8192.0 / 2e-6).abs() < 1.0);
        // With a slope, criterion's typical estimate is the slope (here half the mean).
        assert!((all[1].seconds - 4e-6).abs() < 1e-15);
        assert_eq!(all[2].size(), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn missing_dir_and_corrupt_files_are_clear_errors() {
        let dir = temp_dir("errors");
        let missing = dir.join("nope");
        let err = load(&missing).unwrap_err().to_string();
        assert!(err.contains("cargo bench"), "{err}");

        write(&dir, "double", "cpu", "1024", 2000.0, false, "null");
        std::fs::write(dir.join("double/cpu/1024/new/estimates.json"), "{ not json").unwrap();
        let err = load(&dir).unwrap_err().to_string();
        assert!(err.contains("estimates.json") && err.contains("not a criterion"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn adapter_note_and_results_from_an_earlier_run() {
        let dir = temp_dir("note");
        assert_eq!(Note::read(&dir), Note::default());
        write(&dir, "double", "cpu", "1024", 2000.0, false, "null");
        // The next run starts (writes its note), then measures one size again.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(dir.join("adapter.txt"), "NVIDIA H200 (Vulkan, DiscreteGpu)\nAMD EPYC, 16 threads\n").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        write(&dir, "double", "cpu", "4096", 8000.0, false, "null");
        let note = Note::read(&dir);
        assert_eq!(note.adapter.as_deref(), Some("NVIDIA H200 (Vulkan, DiscreteGpu)"));
        assert_eq!(note.cpu.as_deref(), Some("AMD EPYC, 16 threads"));
        let all = load(&dir).unwrap();
        assert!(note.predates(&all[0]), "the 1024 result is from the earlier run");
        assert!(!note.predates(&all[1]));

        // The full note round-trips, and its `since` line, not the file's time, dates it.
        let full = Note {
            adapter: Some("llvmpipe (Vulkan, Cpu)".into()),
            cpu: Some("AMD EPYC, 2 threads".into()),
            sweep: Some("software".into()),
            since: Some(UNIX_EPOCH + Duration::new(1_000_000, 123_456_789)),
        };
        full.write(&dir.join("matmul")).unwrap();
        let back = Note::read(&dir.join("matmul"));
        assert_eq!(back.adapter, full.adapter);
        assert_eq!((back.cpu.as_deref(), back.sweep.as_deref()), (Some("AMD EPYC, 2 threads"), Some("software")));
        let (a, b) = (back.since.unwrap(), full.since.unwrap());
        assert!(a.max(b).duration_since(a.min(b)).unwrap() < Duration::from_micros(1), "{a:?} vs {b:?}");
        assert!(back.same_setup(&full) && !back.same_setup(&note));
        assert!(!back.predates(&all[0]), "results written now are newer than a setup from 1970");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
