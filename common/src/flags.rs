//! The loop behind every runner's `tests/flags.rs`: a table of flag values at their boundaries,
//! each run as a real process on top of small, fast defaults, each required to run or to be
//! refused with the right exit code and a message that names the problem, and none allowed to
//! panic. A test that gets one case wrong lists every case that went wrong, not only the first.
//!
//! The tables stay in the stages (they are about each runner's flags); only the loop is here.

use std::process::Command;

/// What a run must do.
#[derive(Debug, Clone, Copy)]
pub enum Want {
    /// Exit 0.
    Runs,
    /// Exit with this code and this text on stderr: 2 when the argument parser refuses the
    /// value, 1 when the runner does.
    Refused(i32, &'static str),
    /// Depends on the device's limits: exit 0, or exit 1 with this text on stderr.
    RunsOrRefused(&'static str),
}

/// Runs every case and panics, listing the cases that did not do what they want, unless all did.
///
/// `command` makes the runner's `Command` afresh for each case (its binary, and any folder or
/// environment the runs need). `base` holds the defaults that keep the runs small, flag by
/// flag (`&["--reps", "1"]`, `&["--no-mnist"]`; a group that does not start with `--`, such as
/// a positional value, is always passed). A case's arguments come after the defaults, and a
/// flag the case sets (`--reps 5` or `--reps=5`) drops that flag's default. A run whose stderr
/// says `panicked` fails whatever it wants.
#[track_caller]
pub fn assert_flags(command: impl Fn() -> Command, base: &[&[&str]], cases: &[(&[&str], Want)]) {
    let mut failures = Vec::new();
    for (flags, want) in cases {
        let set: Vec<&str> = flags.iter().filter_map(|f| f.strip_prefix("--")).map(|f| f.split('=').next().unwrap_or(f)).collect();
        let defaults = base.iter().filter(|g| !g[0].strip_prefix("--").is_some_and(|f| set.contains(&f))).flat_map(|g| g.iter());
        let out = command().args(defaults).args(*flags).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        let ok = match want {
            _ if err.contains("panicked") => false,
            Want::Runs => out.status.success(),
            Want::Refused(code, needle) => out.status.code() == Some(*code) && err.contains(needle),
            Want::RunsOrRefused(needle) => out.status.success() || (out.status.code() == Some(1) && err.contains(needle)),
        };
        if !ok {
            failures.push(format!("{flags:?}: wanted {want:?}, got {:?}: {}", out.status.code(), err.trim()));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

#[cfg(all(test, unix))]
mod tests {
    use super::Want::{Refused, Runs, RunsOrRefused};
    use super::*;

    /// A stand-in runner: prints its arguments to stderr and exits with its last argument.
    fn echo_exit() -> Command {
        let mut sh = Command::new("sh");
        sh.args(["-c", r#"echo "$*" >&2; for a; do code=$a; done; exit $code"#, "echo_exit"]);
        sh
    }

    /// `--keep k` stays unless a case sets it; the exit code comes last.
    const BASE: &[&[&str]] = &[&["--keep", "k"], &["--code", "0"]];

    #[test]
    fn cases_that_do_what_they_want_pass() {
        assert_flags(
            echo_exit,
            BASE,
            &[
                (&[], Runs),
                (&["--code", "2"], Refused(2, "--keep k --code 2")),
                (&["--keep", "j", "--code", "1"], Refused(1, "--keep j --code 1")),
                (&["--code", "1"], RunsOrRefused("--code 1")),
                (&["--code", "0"], RunsOrRefused("never printed")),
            ],
        );
    }

    #[test]
    #[should_panic(expected = "5 of 5 cases")]
    fn a_wrong_code_message_or_a_panic_fails() {
        assert_flags(
            echo_exit,
            BASE,
            &[
                (&["--code", "1"], Runs),
                (&["--code", "1"], Refused(2, "--code")),
                (&["--code", "2"], Refused(2, "--other")),
                (&["--code", "2"], RunsOrRefused("--code")),
                (&["panicked", "--code", "0"], Runs),
            ],
        );
    }
}
