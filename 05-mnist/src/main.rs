//! `mnist`: train, evaluate and use an MNIST digit classifier. Everything lives in the library
//! (`mnist::cli` parses and runs the commands); this file only turns errors into exit codes.

use std::process::ExitCode;

fn main() -> ExitCode {
    match mnist::cli::run(std::env::args_os()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
