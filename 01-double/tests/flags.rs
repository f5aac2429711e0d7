//! Every flag of the `double` runner at its boundaries: each value runs, or is refused with a
//! message naming the flag (exit code 2 from the parser, 1 from the runner); none panics. The
//! runs are tiny so the table takes seconds on the software adapter.
//!
//! Valid values that only cost time are not run: `--reps 100000` (each repetition is several submissions).

use std::process::Command;

use common::flags::Want::{self, Refused, Runs, RunsOrRefused};
use common::flags::assert_flags;

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
    assert_flags(|| Command::new(env!("CARGO_BIN_EXE_double")), BASE, cases);
}
