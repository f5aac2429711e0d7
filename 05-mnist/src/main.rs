//! `mnist`: train, evaluate and use an MNIST digit classifier. Everything lives in the library
//! (`mnist::cli` parses the commands, `mnist::commands` runs them); this file only turns errors
//! into exit codes.

use std::process::ExitCode;

fn main() -> ExitCode {
    match mnist::commands::run(std::env::args_os()) {
        Ok(()) => ExitCode::SUCCESS,
        // Not an error: the run stopped where it was asked to, and says what it wrote.
        Err(e @ mnist::MnistError::Interrupted(_)) => {
            eprintln!("{e}");
            ExitCode::from(130)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
