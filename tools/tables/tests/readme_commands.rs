//! Every `cargo run` and `cargo bench` command that a README or a book page shows still
//! resolves: the package, binary or example exists and the arguments parse.
//!
//! A command is run as written, but in the `test` profile (what `cargo test` has already built,
//! instead of a release build) and with `--help` appended, so a long run stops at its help:
//! `cargo run --release -p mnist -- serve` runs `mnist serve --help`. A `cargo bench` command
//! is compiled, not run (`--no-run`), and so is an example (`cargo build --example`): examples
//! take no flags, so `--help` would not stop them.

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
        if rel.contains("node_modules") || rel.starts_with("target") {
            continue;
        }
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
                // Environment settings before the command are not ours to test.
                out.push((rel.clone(), t.to_string()));
            }
        }
    }
    out
}

/// The arguments cargo gets for one documented command: the test profile instead of
/// `--release`, `--help` after the program's arguments, `--no-run` for benches.
fn as_checked(cmd: &str) -> Vec<String> {
    let words: Vec<String> = cmd.split_whitespace().skip(1).map(str::to_string).collect();
    let (cargo_args, program_args) = match words.iter().position(|w| w == "--") {
        Some(i) => (words[..i].to_vec(), words[i + 1..].to_vec()),
        None => (words.clone(), Vec::new()),
    };
    let mut args: Vec<String> = cargo_args.into_iter().filter(|w| w != "--release").collect();
    args.extend(["--profile".to_string(), "test".to_string(), "--locked".to_string()]);
    if args[0] == "bench" {
        args.push("--no-run".into());
        return args;
    }
    if args.iter().any(|w| w == "--example") {
        args[0] = "build".into();
        return args;
    }
    args.push("--".into());
    args.extend(program_args);
    args.push("--help".into());
    args
}

#[test]
fn the_documented_commands_are_found() {
    let all = commands();
    let mut seen = std::collections::BTreeSet::new();
    let mut failures = Vec::new();
    for (file, cmd) in &all {
        if !seen.insert(cmd.clone()) {
            continue;
        }
        let args = as_checked(cmd);
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let out = Command::new(&cargo).args(&args).current_dir(root()).output().expect("running cargo");
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = stderr.lines().rev().take(6).collect::<Vec<_>>().into_iter().rev().collect();
            failures.push(format!("{file}: `{cmd}` (checked as `cargo {}`): {}", args.join(" "), tail.join(" / ")));
        }
    }
    assert!(seen.len() >= 5, "found only {} documented commands: {all:?}", seen.len());
    assert!(failures.is_empty(), "documented commands that no longer work:\n{}", failures.join("\n"));
}

#[test]
fn a_command_is_checked_at_its_help() {
    assert_eq!(as_checked("cargo run --release -p mnist -- serve").join(" "), "run -p mnist --profile test --locked -- serve --help");
    assert_eq!(as_checked("cargo run -p double").join(" "), "run -p double --profile test --locked -- --help");
    assert_eq!(as_checked("cargo bench").join(" "), "bench --profile test --locked --no-run");
    assert_eq!(as_checked("cargo run -p common --example adapters").join(" "), "build -p common --example adapters --profile test --locked");
}
