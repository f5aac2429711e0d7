//! The committed tables are what their committed results make: a figure typed into a table by
//! hand, or a results file changed without `cargo run -p tables`, fails here.

use std::path::Path;

#[test]
fn every_committed_table_matches_its_results() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let stale = tables::stale(&root).unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<String> = stale.iter().map(|(p, _)| p.strip_prefix(&root).unwrap_or(p).display().to_string()).collect();
    assert!(names.is_empty(), "out of date with their results (run `cargo run -p tables`): {names:?}");
}

#[test]
fn the_repository_has_generated_tables() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let regions = tables::markdown_files(&root)
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .map(|t| t.lines().filter(|l| l.trim_start().starts_with("<!-- table:")).count())
        .sum::<usize>();
    assert!(regions >= 1, "no `<!-- table: ... -->` region found: the check above would pass vacuously");
}
