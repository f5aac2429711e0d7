//! Where the data comes from: the flags every command that reads MNIST shares (`train`, `eval`,
//! `serve`: `--data-dir`, `--limit-test`), and finding, downloading and loading the files they
//! name. Apart from `cli.rs` so that `serve` shares them without importing the command line.

use std::path::{Path, PathBuf};

use clap::Args;

use crate::data::{self, Mnist};
use crate::download;
use crate::error::Result;
use crate::metrics::thousands;

#[derive(Debug, Clone, Args)]
pub struct DataArgs {
    /// Folder with the four MNIST files (.gz or raw). Default: $MNIST_DIR, else data/mnist in
    /// the workspace. Missing files are downloaded there.
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Evaluate on the first N test images only.
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    pub limit_test: Option<usize>,
}


/// The data folder `args` name (or the default), with the four files downloaded into it when
/// any is missing.
pub fn find_data(args: &DataArgs) -> Result<PathBuf> {
    let dir = data::resolve_data_dir(args.data_dir.as_deref());
    if !data::files_present(&dir) {
        eprintln!("MNIST is not in {}; downloading it there", dir.display());
        download_into(&dir)?;
    }
    Ok(dir)
}

/// Finds (or downloads) and loads the data, and applies the limits.
pub fn load_data(args: &DataArgs, limit_train: Option<usize>) -> Result<Mnist> {
    let dir = find_data(args)?;
    let mut m = data::load(&dir)?;
    eprintln!("data: {} training and {} test images from {}", thousands(m.train.len() as u64), thousands(m.test.len() as u64), dir.display());
    if let Some(n) = limit_train {
        m.train = m.train.take(n);
    }
    if let Some(n) = args.limit_test {
        m.test = m.test.take(n);
    }
    if limit_train.is_some() || args.limit_test.is_some() {
        eprintln!("using the first {} training and {} test images", thousands(m.train.len() as u64), thousands(m.test.len() as u64));
    }
    Ok(m)
}

fn download_into(dir: &Path) -> Result<()> {
    let mirrors = download::mirrors();
    let mirrors: Vec<&str> = mirrors.iter().map(String::as_str).collect();
    download::download_missing(dir, &mirrors, |line| eprintln!("{line}"))?;
    Ok(())
}

/// A clap parser for counts: a whole number, at least 1.
pub(crate) fn at_least_one(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{s}` is not a whole number")),
    }
}
