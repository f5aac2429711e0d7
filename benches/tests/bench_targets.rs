//! `cargo bench` prints only the benchmarks and the crossover report: every library and binary
//! target in the workspace says `bench = false` in its manifest (otherwise `cargo bench` runs
//! its empty test harness and prints "running 0 tests" or a page of ignored unit tests), and
//! the only bench target is this package's `gpu_vs_cpu`.

use std::path::Path;
use std::process::Command;

/// The manifest's sections (`[lib]`, `[[bin]]`, ...) with their lines.
fn sections(manifest: &str) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for line in manifest.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        if line.starts_with('[') {
            out.push((line.to_string(), Vec::new()));
        } else if let Some(last) = out.last_mut() {
            last.1.push(line.replace(' ', ""));
        }
    }
    out
}

#[test]
fn every_lib_and_bin_target_opts_out_of_cargo_bench() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let out = Command::new(cargo)
        .args(["metadata", "--no-deps", "--format-version", "1", "--offline"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("running cargo metadata");
    assert!(out.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&out.stderr));
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON");
    let mut missing = Vec::new();
    let mut benches = Vec::new();
    for package in meta["packages"].as_array().expect("packages") {
        let manifest_path = package["manifest_path"].as_str().expect("manifest_path");
        let manifest = std::fs::read_to_string(manifest_path).expect("reading a manifest");
        let sections = sections(&manifest);
        for target in package["targets"].as_array().expect("targets") {
            let name = target["name"].as_str().expect("target name");
            let kinds: Vec<&str> = target["kind"].as_array().expect("kind").iter().filter_map(|k| k.as_str()).collect();
            if kinds.contains(&"bench") {
                benches.push(name.to_string());
                continue;
            }
            let header = if kinds.contains(&"lib") {
                "[lib]"
            } else if kinds.contains(&"bin") {
                "[[bin]]"
            } else {
                continue; // tests and examples are not benchmarked by default
            };
            let opted_out = sections.iter().any(|(h, lines)| {
                h == header
                    && (header == "[lib]" || lines.iter().any(|l| *l == format!("name=\"{name}\"")))
                    && lines.iter().any(|l| l == "bench=false")
            });
            if !opted_out {
                let dir = Path::new(manifest_path).parent().map(|p| p.display().to_string()).unwrap_or_default();
                missing.push(format!("{header} {name} in {dir}/Cargo.toml"));
            }
        }
    }
    assert!(missing.is_empty(), "these targets need `bench = false` in their manifest section:\n{}", missing.join("\n"));
    assert_eq!(benches, ["gpu_vs_cpu"], "the one bench target, which ends with the report");
}
