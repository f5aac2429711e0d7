//! What each command does, once `cli.rs` has parsed it: [`run`] picks the command, and
//! `train.rs` (with `outputs.rs`, its checks on the files it writes), `eval.rs` and
//! `predict.rs` carry them out (`mnist serve` is `crate::serve`).
//! The work itself is done by the library modules, so the web server can do the same things.
//!
//! Every error comes back as an `MnistError`, which `main.rs` prints as `error: ...` with the
//! exit code 1 (130 for a run stopped by Ctrl-C). Nothing panics.

mod eval;
mod outputs;
mod predict;
mod train;

use clap::Parser;

use crate::cli::{Cli, Command};
use crate::error::Result;

/// Parses `args` and runs the command. `--help`, `--version` and parse errors exit here
/// through clap (parse errors with code 2).
pub fn run(args: impl IntoIterator<Item = std::ffi::OsString>) -> Result<()> {
    let cli = Cli::try_parse_from(args).unwrap_or_else(|e| e.exit());
    match cli.command {
        None => train::run(&cli.train),
        Some(Command::Train(a)) => train::run(&a),
        Some(Command::Eval(a)) => eval::run(&a),
        Some(Command::Predict(a)) => predict::run(&a),
        Some(Command::Serve(a)) => crate::serve::run(&a),
    }
}
