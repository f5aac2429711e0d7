//! Every flag of the `gpu-matmul` runner at its boundaries: each value runs, or is refused with a
//! message naming the flag (exit code 2 from the parser, 1 from the runner); none panics. The
//! runs are tiny so the table takes seconds on the software adapter.
//!
//! Valid values that only cost time are not run: `--reps 10000`, `--warmup 10000`, sizes in the thousands.

use std::process::Command;

/// What a run must do.
#[derive(Debug, Clone, Copy)]
enum Want {
    /// Exit 0.
    Runs,
    /// Exit with this code and this text on stderr.
    Refused(i32, &'static str),
}
use Want::{Refused, Runs};

/// Small, fast defaults, flag by flag; a case that sets a flag replaces its default.
const BASE: &[&[&str]] = &[&["1"], &["--sizes", "16"], &["--reps", "1"], &["--warmup", "0"], &["--no-mnist"], &["--no-checks-study"]];

#[test]
fn boundary_values_of_every_flag() {
    let cases: &[(&[&str], Want)] = &[
        (&["--reps", "0"], Refused(2, "--reps")),
        (&["--reps", "10001"], Refused(2, "--reps")),
        (&["--reps", "18446744073709551615"], Refused(2, "--reps")),
        (&["--warmup", "0"], Runs),
        (&["--warmup", "10001"], Refused(2, "--warmup")),
        (&["--warmup", "18446744073709551615"], Refused(2, "--warmup")),
        (&["--sizes", "1"], Runs),
        (&["--sizes", "17x1x33,1x63x1"], Runs),
        (&["--sizes", "0"], Refused(2, "--sizes")),
        (&["--sizes", "1x2"], Refused(2, "--sizes")),
        (&["--sizes", "x"], Refused(2, "--sizes")),
        (&["--sizes", ""], Refused(2, "--sizes")),
        (&["--sizes", "1000000"], Refused(1, "--sizes 1000000x1000000x1000000")),
        (&["--sizes", "18446744073709551615"], Refused(1, "--sizes")),
        (&["--sizes", "4294967296x4294967296x1"], Refused(1, "--sizes")),
        (&["0", "--no-cpu"], Runs),
        (&["99"], Refused(1, "no kernel 99")),
        (&["4294967296"], Refused(2, "4294967296")),
        (&["--checks", "none"], Runs),
        (&["--checks", "some"], Refused(2, "--checks")),
        (&["--transposes"], Runs),
        (&["--tune"], Runs),
    ];
    let mut failures = Vec::new();
    for (flags, want) in cases {
        let set: Vec<&str> = flags.iter().filter_map(|f| f.strip_prefix("--")).map(|f| f.split('=').next().unwrap_or(f)).collect();
        let base = BASE.iter().filter(|g| !g[0].strip_prefix("--").is_some_and(|f| set.contains(&f))).flat_map(|g| g.iter());
        let out = Command::new(env!("CARGO_BIN_EXE_gpu-matmul")).args(base).args(*flags).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        let ok = match want {
            _ if err.contains("panicked") => false,
            Runs => out.status.success(),
            Refused(code, needle) => out.status.code() == Some(*code) && err.contains(needle),
        };
        if !ok {
            failures.push(format!("{flags:?}: wanted {want:?}, got {:?}: {}", out.status.code(), err.trim()));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases:\n{}", failures.len(), cases.len(), failures.join("\n"));
}
