//! Every flag of the `double` runner at its boundaries: each value runs, or is refused with a
//! message naming the flag (exit code 2 from the parser, 1 from the runner); none panics. The
//! runs are tiny so the table takes seconds on the software adapter.
//!
//! Valid values that only cost time are not run: `--reps 100000` (each repetition is several submissions).

use std::process::Command;

/// What a run must do.
#[derive(Debug, Clone, Copy)]
enum Want {
    /// Exit 0.
    Runs,
    /// Exit with this code and this text on stderr.
    Refused(i32, &'static str),
    /// Depends on the device's limits: exit 0, or exit 1 with this text on stderr.
    RunsOrRefused(&'static str),
}
use Want::{Refused, Runs, RunsOrRefused};

/// Small, fast defaults, flag by flag; a case that sets a flag replaces its default.
const BASE: &[&[&str]] = &[&["--min-pow", "0"], &["--max-pow", "0"], &["--reps", "1"], &["--warmup", "0"]];

#[test]
fn boundary_values_of_every_flag() {
    let cases: &[(&[&str], Want)] = &[
        (&["--min-pow", "32"], Refused(2, "--min-pow")),
        (&["--min-pow=-1"], Refused(2, "--min-pow")),
        (&["--min-pow", "31", "--max-pow", "31"], RunsOrRefused("exceed this device's storage binding")),
        (&["--min-pow", "25", "--max-pow", "31"], RunsOrRefused("exceed this device's storage binding")),
        (&["--min-pow", "5", "--max-pow", "4"], Refused(1, "--min-pow 5 is larger than --max-pow 4")),
        (&["--max-pow", "32"], Refused(2, "--max-pow")),
        (&["--reps", "0"], Refused(2, "--reps")),
        (&["--reps", "100001"], Refused(2, "--reps")),
        (&["--reps", "1"], Runs),
        (&["--warmup", "0"], Runs),
        (&["--warmup", "1000"], Runs),
        (&["--warmup", "1001"], Refused(2, "--warmup")),
        (&["--walkthrough"], Runs),
    ];
    let mut failures = Vec::new();
    for (flags, want) in cases {
        let set: Vec<&str> = flags.iter().filter_map(|f| f.strip_prefix("--")).map(|f| f.split('=').next().unwrap_or(f)).collect();
        let base = BASE.iter().filter(|g| !g[0].strip_prefix("--").is_some_and(|f| set.contains(&f))).flat_map(|g| g.iter());
        let out = Command::new(env!("CARGO_BIN_EXE_double")).args(base).args(*flags).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        let ok = match want {
            _ if err.contains("panicked") => false,
            Runs => out.status.success(),
            Refused(code, needle) => out.status.code() == Some(*code) && err.contains(needle),
            RunsOrRefused(needle) => out.status.success() || (out.status.code() == Some(1) && err.contains(needle)),
        };
        if !ok {
            failures.push(format!("{flags:?}: wanted {want:?}, got {:?}: {}", out.status.code(), err.trim()));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases:\n{}", failures.len(), cases.len(), failures.join("\n"));
}
