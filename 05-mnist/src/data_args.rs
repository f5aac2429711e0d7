//! Where the data comes from: the flags every command that reads a data set shares (`train`,
//! `eval`, `serve`: `--dataset`, `--data-dir`, `--limit-test`), and finding, downloading and
//! loading the files they name. Apart from `cli.rs` so that `serve` shares them without importing the command line.

use std::path::PathBuf;

use clap::Args;

use crate::data::{self, Mnist};
use crate::datasets::DatasetKind;
use crate::download;
use crate::error::Result;
use crate::metrics::thousands;

#[derive(Debug, Clone, Args)]
pub struct DataArgs {
    /// The data set: handwritten digits or Zalando's Fashion-MNIST (clothes, same format)
    /// [default: mnist; for eval, the one the model was trained on].
    #[arg(long, value_enum)]
    pub dataset: Option<DatasetKind>,
    /// Folder with the data set's four files (.gz or raw). Default: $MNIST_DIR
    /// ($FASHION_MNIST_DIR), else data/mnist (data/fashion-mnist) in the workspace. Missing
    /// files are downloaded there.
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Evaluate on the first N test images only.
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    pub limit_test: Option<usize>,
}


/// The folder of `kind`'s files (`args.data_dir`, or the default), with the four files
/// downloaded into it when any is missing.
pub fn find_data(args: &DataArgs, kind: DatasetKind) -> Result<PathBuf> {
    let dir = data::resolve_data_dir(args.data_dir.as_deref(), kind);
    if !data::files_present(&dir) {
        eprintln!("{} is not in {}; downloading it there", kind.title(), dir.display());
        let mirrors = download::mirrors(kind);
        let mirrors: Vec<&str> = mirrors.iter().map(String::as_str).collect();
        download::download_missing(&dir, kind, &mirrors, |line| eprintln!("{line}"))?;
    }
    Ok(dir)
}

/// Finds (or downloads) and loads the data set (`--dataset`, MNIST by default), and applies the
/// limits.
pub fn load_data(args: &DataArgs, limit_train: Option<usize>) -> Result<Mnist> {
    let kind = args.dataset.unwrap_or_default();
    let dir = find_data(args, kind)?;
    let mut m = data::load(&dir, kind)?;
    eprintln!(
        "data: {}, {} training and {} test images from {}",
        kind.title(),
        thousands(m.train.len() as u64),
        thousands(m.test.len() as u64),
        dir.display()
    );
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

/// A clap parser for counts: a whole number, at least 1.
pub(crate) fn at_least_one(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{s}` is not a whole number")),
    }
}
