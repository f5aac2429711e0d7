//! Every flag of the `cpu-matrix` runner at its boundaries: each value is accepted and runs, or
//! is refused with a message naming the flag (exit code 2 from the parser, 1 from the runner);
//! none panics. The runs are tiny (8x8 products, a 1 ms budget) so the table runs in seconds.
//!
//! Values that are valid but only cost time (`--threads 1024` measures the FMA peak on 1024
//! threads, `--sizes 16384` multiplies 16384^2 matrices) are not run here.

use std::process::Command;

use common::flags::Want::{self, Refused, Runs};
use common::flags::assert_flags;

/// Small, fast defaults, flag by flag; a case that sets a flag replaces its default.
const BASE: &[&[&str]] = &[&["--sizes", "8"], &["--no-mnist"], &["--variants", "1,2,3"], &["--budget-ms", "1"], &["--min-reps", "1"]];

#[test]
fn boundary_values_of_every_flag() {
    let cases: &[(&[&str], Want)] = &[
        (&["--min-reps", "0"], Refused(2, "--min-reps")),
        (&["--min-reps", "1"], Runs),
        (&["--min-reps", "200"], Runs),
        (&["--min-reps", "201"], Refused(2, "--min-reps")),
        (&["--min-reps", "18446744073709551615"], Refused(2, "--min-reps")),
        (&["--min-reps=-1"], Refused(2, "--min-reps")),
        (&["--budget-ms", "0"], Runs),
        (&["--budget-ms", "18446744073709551615"], Runs),
        (&["--budget-ms=-1"], Refused(2, "--budget-ms")),
        (&["--threads", "0"], Refused(2, "--threads")),
        (&["--threads", "1"], Runs),
        (&["--threads", "2"], Runs),
        (&["--threads", "1025"], Refused(2, "--threads")),
        (&["--naive-max", "0"], Runs),
        (&["--naive-max", "18446744073709551615"], Runs),
        (&["--naive-max=-1"], Refused(2, "--naive-max")),
        (&["--sizes", "0"], Refused(1, "--sizes: 0")),
        (&["--sizes", "1"], Runs),
        (&["--sizes", "1,7,9"], Runs),
        (&["--sizes", "16385"], Refused(1, "--sizes: 16385")),
        (&["--sizes", "18446744073709551615"], Refused(1, "--sizes")),
        (&["--sizes", ""], Refused(2, "--sizes")),
        (&["--sizes", "8,,8"], Refused(2, "--sizes")),
        (&["--variants", "0"], Runs),
        (&["--variants", "4"], Runs),
        (&["--variants", "5"], Refused(1, "no variant 5")),
        (&["--variants", "4294967296"], Refused(2, "--variants")),
        (&["--variants", ""], Refused(2, "--variants")),
        (&["--ghz", "0"], Refused(2, "--ghz")),
        (&["--ghz", "nan"], Refused(2, "--ghz")),
        (&["--ghz", "inf"], Refused(2, "--ghz")),
        (&["--ghz=-1"], Refused(2, "--ghz")),
        (&["--ghz", "1e-300"], Runs),
        (&["--ghz", "1e300"], Runs),
        (&["--flops-per-cycle", "0"], Refused(2, "--flops-per-cycle")),
        (&["--flops-per-cycle", "1e-300"], Runs),
        (&["--flops-per-cycle", "1e300"], Runs),
        // The internal flag of the child process checks its sizes too.
        (&["--library-child", "--sizes", "0"], Refused(1, "--sizes: 0")),
        (&["--library-child", "--sizes", "4"], Runs),
    ];
    assert_flags(|| Command::new(env!("CARGO_BIN_EXE_cpu-matrix")), BASE, cases);
}
