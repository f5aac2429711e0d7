//! The crossover report: reads the results `cargo bench` left in criterion's folder and
//! prints, per operation, from which size the GPU beats the best CPU function, with and
//! without transfers; writes the same as Markdown plus one plot per operation (SVG and PNG).
//!
//! ```text
//! cargo bench                                   # writes target/criterion/...
//! cargo run --release -p benches --bin crossover
//! crossover --criterion-dir /tmp/criterion --out /tmp/report   # results from another machine
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use benches::{crossover, harness, plot};
use clap::Parser;

#[derive(Parser)]
#[command(about = "From which size does the GPU beat the CPU? Reads criterion's saved estimates.")]
struct Args {
    /// Criterion's output folder [default: $CRITERION_HOME, else the cargo target dir's
    /// `criterion`, else ./target/criterion]
    #[arg(long)]
    criterion_dir: Option<PathBuf>,
    /// Where to write crossover.md and the plots [default: <criterion dir>/crossover]
    #[arg(long)]
    out: Option<PathBuf>,
    /// The GPU adapter for the titles [default: line 1 of <criterion dir>/<group>/adapter.txt]
    #[arg(long)]
    adapter: Option<String>,
    /// The CPU for the titles [default: line 2 of that adapter.txt]
    #[arg(long)]
    cpu: Option<String>,
    /// Plot formats to write, comma-separated: svg, png
    #[arg(long, value_delimiter = ',', default_value = "svg,png", value_parser = ["svg", "png"])]
    formats: Vec<String>,
    /// Keep results older than their group's last run (by default they are left out, since
    /// they may come from another adapter or another sweep)
    #[arg(long)]
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
    let dir = args.criterion_dir.unwrap_or_else(harness::criterion_dir);
    let (mut ops, stale) = crossover::from_dir(&dir, args.keep_old).map_err(|e| e.to_string())?;
    if !stale.is_empty() {
        let names: Vec<String> = stale.iter().take(6).map(|m| format!("{}/{}/{}", m.group, m.function, m.param)).collect();
        eprintln!(
            "crossover: left out {} result(s) older than their group's last run (e.g. {}); --keep-old includes them",
            stale.len(),
            names.join(", ")
        );
    }
    if !args.groups.is_empty() {
        let unknown: Vec<&String> = args.groups.iter().filter(|g| !ops.iter().any(|o| &&o.group == g)).collect();
        if !unknown.is_empty() {
            let have: Vec<&str> = ops.iter().map(|o| o.group.as_str()).collect();
            return Err(format!("no results for group(s) {unknown:?} in {}; found {have:?}", dir.display()));
        }
        ops.retain(|o| args.groups.contains(&o.group));
    }
    if ops.is_empty() {
        return Err(format!("no benchmark results under {}: run `cargo bench -p benches` first", dir.display()));
    }
    for op in &mut ops {
        if let Some(a) = &args.adapter {
            op.adapter = a.clone();
        }
        if let Some(c) = &args.cpu {
            op.cpu = c.clone();
        }
    }

    let text = crossover::report(&ops);
    print!("{text}");
    let out = args.out.unwrap_or_else(|| dir.join("crossover"));
    std::fs::create_dir_all(&out).map_err(|e| format!("creating {}: {e}", out.display()))?;
    let md = out.join("crossover.md");
    std::fs::write(&md, &text).map_err(|e| format!("writing {}: {e}", md.display()))?;
    eprintln!("wrote {}", md.display());

    harness::register_fonts();
    for op in ops.iter().filter(|o| o.numeric) {
        for format in &args.formats {
            let path = out.join(format!("{}.{format}", op.group));
            plot::plot(op, &path)?;
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(())
}
