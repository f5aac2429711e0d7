//! `cargo run -p tables`: rewrites every generated table of the repository's markdown from the
//! results files it names; `cargo run -p tables -- --check` changes nothing and exits 1 when a
//! committed table differs from what its results make.

use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let check = match args.as_slice() {
        [] => false,
        [a] if a == "--check" => true,
        _ => {
            eprintln!("usage: cargo run -p tables [-- --check]\n  rewrites the `<!-- table: ... -->` regions of every markdown file from their CSVs;\n  --check: change nothing, exit 1 when a region is out of date");
            return ExitCode::from(2);
        }
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let stale = match tables::stale(&root) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("tables: {e}");
            return ExitCode::FAILURE;
        }
    };
    let rel = |p: &Path| p.strip_prefix(&root).unwrap_or(p).display().to_string();
    if check {
        for (md, _) in &stale {
            eprintln!("tables: {} is out of date with its results; run `cargo run -p tables`", rel(md));
        }
        return if stale.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE };
    }
    for (md, text) in &stale {
        if let Err(e) = std::fs::write(md, text) {
            eprintln!("tables: writing {}: {e}", rel(md));
            return ExitCode::FAILURE;
        }
        println!("rewrote {}", rel(md));
    }
    if stale.is_empty() {
        println!("every table is up to date");
    }
    ExitCode::SUCCESS
}
