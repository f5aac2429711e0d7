//! Every `cargo run` and `cargo bench` command that a README or a book page shows still
//! resolves: the package and its binary, example or bench exist, and a binary's arguments parse.
//!
//! `cargo run [--release] -p PKG [--bin B] -- ARGS` runs the binary that `cargo test` built
//! (`target/debug/B`, in the test profile, instead of a release build) as `B ARGS --help`, so a
//! long run stops at its help and a flag that no longer exists fails: `cargo run --release -p
//! mnist -- serve` runs `mnist serve --help`. An example or a bench must exist as a target of
//! its package (`cargo metadata`); examples take no flags and benches build in the bench
//! profile, so neither is run here.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `cargo run` / `cargo bench` lines inside the code blocks of every markdown file.
fn commands() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for md in tables::markdown_files(&root()) {
        let rel = md.strip_prefix(root()).unwrap_or(&md).display().to_string();
        let text = std::fs::read_to_string(&md).unwrap();
        let mut fence = false;
        // A command continued over several lines (`\` at the end) is one command.
        let joined = text.replace("\\\n", " ");
        for line in joined.lines() {
            let t = line.trim();
            if t.starts_with("```") {
                fence = !fence;
                continue;
            }
            if !fence {
                continue;
            }
            let t = t.trim_start_matches("$ ").trim();
            // A comment after the command (`cargo run -p double   # the table`), or a second
            // command after it (`&&`, `;`, a pipe).
            let t = t.split(" #").next().unwrap();
            let t = t.split(['&', ';', '|']).next().unwrap().trim();
            if t.starts_with("cargo run") || t.starts_with("cargo bench") {
                out.push((rel.clone(), t.to_string()));
            }
        }
    }
    out
}

/// What a documented command asks for.
#[derive(Debug, PartialEq)]
struct Parsed {
    bench: bool,
    package: Option<String>,
    bin: Option<String>,
    example: Option<String>,
    args: Vec<String>,
}

fn parse(cmd: &str) -> Result<Parsed, String> {
    let words: Vec<&str> = cmd.split_whitespace().collect();
    let (cargo_args, program_args) = match words.iter().position(|w| *w == "--") {
        Some(i) => (&words[..i], &words[i + 1..]),
        None => (&words[..], &[][..]),
    };
    let mut p = Parsed { bench: cargo_args[1] == "bench", package: None, bin: None, example: None, args: program_args.iter().map(|s| s.to_string()).collect() };
    let mut it = cargo_args[2..].iter();
    while let Some(w) = it.next() {
        let mut value = || it.next().map(|v| v.to_string()).ok_or_else(|| format!("`{w}` needs a value"));
        match *w {
            "--release" | "--locked" | "--offline" | "-q" | "--quiet" => {}
            "-p" | "--package" => p.package = Some(value()?),
            "--bin" => p.bin = Some(value()?),
            "--example" => p.example = Some(value()?),
            "--bench" => {
                value()?;
            }
            other => return Err(format!("cargo flag `{other}` is not understood by this test")),
        }
    }
    Ok(p)
}

/// A target of a package: its name and kinds (`bin`, `example`, `bench`, ...).
type Target = (String, Vec<String>);
/// A package: its name, its `default-run`, its targets.
type Package = (String, Option<String>, Vec<Target>);

/// `cargo metadata`'s packages.
fn packages() -> Vec<Package> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo).args(["metadata", "--no-deps", "--format-version", "1", "--offline"]).current_dir(root()).output().expect("running cargo metadata");
    assert!(out.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&out.stderr));
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON");
    meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let targets = p["targets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| (t["name"].as_str().unwrap().to_string(), t["kind"].as_array().unwrap().iter().map(|k| k.as_str().unwrap().to_string()).collect()))
                .collect();
            (p["name"].as_str().unwrap().to_string(), p["default_run"].as_str().map(str::to_string), targets)
        })
        .collect()
}

/// The folder `cargo test` put its binaries in: this test's own executable is in its `deps/`.
fn built_dir() -> PathBuf {
    std::env::current_exe().unwrap().parent().unwrap().parent().unwrap().to_path_buf()
}

fn check(cmd: &str, pkgs: &[Package]) -> Result<(), String> {
    let p = parse(cmd)?;
    let has = |kind: &str, name: &str, targets: &[Target]| targets.iter().any(|(n, k)| n == name && k.iter().any(|x| x == kind));
    if p.bench {
        let benches: Vec<&String> = pkgs.iter().flat_map(|(_, _, t)| t).filter(|(_, k)| k.iter().any(|x| x == "bench")).map(|(n, _)| n).collect();
        return if benches.is_empty() { Err("no package has a bench target".into()) } else { Ok(()) };
    }
    let name = p.package.as_deref().ok_or("no `-p PACKAGE`: say which package runs")?;
    let (_, default_run, targets) = pkgs.iter().find(|(n, _, _)| n == name).ok_or_else(|| format!("no package `{name}` in the workspace"))?;
    if let Some(example) = &p.example {
        return if has("example", example, targets) { Ok(()) } else { Err(format!("package `{name}` has no example `{example}`")) };
    }
    let bins: Vec<&String> = targets.iter().filter(|(_, k)| k.iter().any(|x| x == "bin")).map(|(n, _)| n).collect();
    let bin = match (&p.bin, default_run, bins.as_slice()) {
        (Some(b), _, _) => b.clone(),
        (None, Some(d), _) => d.clone(),
        (None, None, [only]) => (*only).clone(),
        _ => return Err(format!("package `{name}` has several binaries ({bins:?}) and no default-run: cargo cannot tell which to run")),
    };
    if !bins.contains(&&bin) {
        return Err(format!("package `{name}` has no binary `{bin}`"));
    }
    let exe = built_dir().join(format!("{bin}{}", std::env::consts::EXE_SUFFIX));
    if !exe.exists() {
        // Not built by this `cargo test` (run with `-p tables` alone): build it.
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo).args(["build", "--profile", "test", "-p", name, "--bin", &bin]).current_dir(root()).status().unwrap();
        assert!(status.success(), "building {name}'s {bin}");
    }
    let out = Command::new(&exe).args(&p.args).arg("--help").output().map_err(|e| format!("running {}: {e}", exe.display()))?;
    if out.status.success() {
        Ok(())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Err(format!("`{bin} {} --help` exited with {}: {}", p.args.join(" "), out.status, err.lines().take(3).collect::<Vec<_>>().join(" / ")))
    }
}

#[test]
fn the_documented_commands_are_found() {
    let pkgs = packages();
    let all = commands();
    let mut seen = std::collections::BTreeSet::new();
    let mut failures = Vec::new();
    for (file, cmd) in &all {
        if seen.insert(cmd.clone()) {
            if let Err(e) = check(cmd, &pkgs) {
                failures.push(format!("{file}: `{cmd}`: {e}"));
            }
        }
    }
    assert!(seen.len() >= 10, "found only {} documented commands: {all:?}", seen.len());
    assert!(failures.is_empty(), "documented commands that no longer work:\n{}", failures.join("\n"));
}

#[test]
fn a_command_is_parsed_as_cargo_would() {
    let p = parse("cargo run --release -p mnist -- serve --port 8080").unwrap();
    assert_eq!(p, Parsed { bench: false, package: Some("mnist".into()), bin: None, example: None, args: vec!["serve".into(), "--port".into(), "8080".into()] });
    assert_eq!(parse("cargo run -p common --example adapters").unwrap().example.as_deref(), Some("adapters"));
    assert!(parse("cargo bench -- matmul").unwrap().bench);
    assert!(parse("cargo run --features x -p mnist").is_err());
}

#[test]
fn a_command_that_cannot_resolve_is_reported() {
    let pkgs = packages();
    assert!(check("cargo run --release -p no-such-package", &pkgs).unwrap_err().contains("no package"));
    assert!(check("cargo run -p common --example no_such_example", &pkgs).unwrap_err().contains("no example"));
    assert!(check("cargo run -p double --bin no_such_bin", &pkgs).unwrap_err().contains("no binary"));
}
