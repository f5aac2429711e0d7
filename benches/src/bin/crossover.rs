//! The crossover report, redrawn: `cargo bench` already ends with it; this program draws it
//! again from criterion's folder (results copied back from another machine, or other options),
//! or from a saved report folder's `results.json` (the copies under `benches/results/`).
//!
//! ```text
//! cargo run --release -p benches --bin crossover                                   # target/criterion -> target/criterion/crossover
//! cargo run --release -p benches --bin crossover -- --saved benches/results/h200   # redraw a saved report in place
//! crossover --criterion-dir /tmp/criterion --out /tmp/report                       # results from another machine
//! ```
//!
//! From criterion's folder it writes `crossover.md`, `results.json` and one plot per sweep (PNG
//! and SVG); from a saved folder it redraws the plots only (its `crossover.md` and
//! `results.json` stay as the run wrote them). Either way it prints the tables and ends with the
//! same summary as `cargo bench`.

use std::path::PathBuf;
use std::process::ExitCode;

use benches::report::{self, Saved};
use benches::{crossover, harness};
use clap::Parser;

#[derive(Parser)]
#[command(about = "From which size does the GPU beat the CPU? Reads criterion's saved estimates, or a saved report.")]
struct Args {
    /// Criterion's output folder [default: $CRITERION_HOME, else the cargo target dir's
    /// `criterion`, else ./target/criterion]
    #[arg(long, conflicts_with = "saved")]
    criterion_dir: Option<PathBuf>,
    /// A saved report folder (holding results.json, as benches/results/h200 does): redraw its
    /// plots from there instead of reading criterion's folder
    #[arg(long)]
    saved: Option<PathBuf>,
    /// Where to write the report (the plots, with --saved) [default: <criterion dir>/crossover,
    /// or the --saved folder]
    #[arg(long)]
    out: Option<PathBuf>,
    /// The GPU adapter for the titles [default: the adapter note of each group]
    #[arg(long)]
    adapter: Option<String>,
    /// The CPU for the titles [default: the adapter note of each group]
    #[arg(long)]
    cpu: Option<String>,
    /// Plot formats to write, comma-separated: png, svg
    #[arg(long, value_delimiter = ',', default_value = "png,svg", value_parser = ["png", "svg"])]
    formats: Vec<String>,
    /// Keep results older than their group's adapter, CPU and sweep (by default they are left
    /// out, since they come from another setup)
    #[arg(long, conflicts_with = "saved")]
    keep_old: bool,
    /// Only these groups (comma-separated, e.g. double,matmul) [default: all]
    #[arg(long, value_delimiter = ',')]
    groups: Vec<String>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("crossover: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> Result<(), String> {
    let (mut ops, stale, from, default_out) = match &args.saved {
        Some(dir) => (Saved::read(dir)?.operations(), Vec::new(), dir.clone(), dir.clone()),
        None => {
            let dir = args.criterion_dir.clone().unwrap_or_else(harness::criterion_dir);
            let (ops, stale) = crossover::from_dir(&dir, args.keep_old).map_err(|e| e.to_string())?;
            (ops, stale, dir.clone(), dir.join(report::REPORT_DIR))
        }
    };
    if !args.groups.is_empty() {
        let unknown: Vec<&String> = args.groups.iter().filter(|g| !ops.iter().any(|o| &&o.group == g)).collect();
        if !unknown.is_empty() {
            let have: Vec<&str> = ops.iter().map(|o| o.group.as_str()).collect();
            return Err(format!("no results for group(s) {unknown:?} in {}; found {have:?}", from.display()));
        }
        ops.retain(|o| args.groups.contains(&o.group));
    }
    if ops.is_empty() {
        return Err(format!("no benchmark results in {}: run `cargo bench` first", from.display()));
    }
    for op in &mut ops {
        if let Some(a) = &args.adapter {
            op.adapter = a.clone();
        }
        if let Some(c) = &args.cpu {
            op.cpu = c.clone();
        }
    }

    print!("{}", crossover::report(&ops));
    let out = args.out.unwrap_or(default_out);
    let formats: Vec<&str> = args.formats.iter().map(String::as_str).collect();
    let written = match &args.saved {
        Some(dir) => report::Written { markdown: dir.join(report::MARKDOWN), plots: report::draw(&ops, &out, &formats)? },
        None => report::write(&ops, &Saved::of(&ops), &out, &formats)?,
    };
    print!("{}", report::summary(&ops, &written, stale.len(), None));
    Ok(())
}
