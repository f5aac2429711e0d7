//! Every flag of the `gpu-matmul` runner at its boundaries: each value runs, or is refused with a
//! message naming the flag (exit code 2 from the parser, 1 from the runner); none panics. The
//! runs are tiny so the table takes seconds on the software adapter.
//!
//! Valid values that only cost time are not run: `--reps 10000`, `--warmup 10000`, sizes in the thousands.

use std::process::Command;

use common::flags::Want::{self, Refused, Runs, RunsOrRefused};
use common::flags::assert_flags;

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
        // The driver decides: lavapipe (Mesa 22) lacks the extension `--compiled` reads.
        (&["--compiled", "plain"], RunsOrRefused("VK_KHR_pipeline_executable_properties")),
        (&["--compiled", "bogus"], Refused(2, "--compiled")),
        (&["--compiled-out", "x"], Refused(2, "--compiled")),
        (&["--csv", "/nonexistent-folder/matmul.csv"], Refused(1, "--csv")),
        (&["--tune", "--csv", "x.csv"], Refused(2, "--csv")),
    ];
    assert_flags(|| Command::new(env!("CARGO_BIN_EXE_gpu-matmul")), BASE, cases);
}
