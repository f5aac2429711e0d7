//! Where the data comes from: the flags every command that reads a data set shares (`train`,
//! `eval`, `serve`: `--dataset`, `--data-dir`, `--limit-test`), and finding, downloading and
//! loading the files they name. Apart from `cli.rs` so that `serve` shares them without importing the command line.

use std::path::{Path, PathBuf};

use clap::Args;

use crate::data::{self, Mnist};
use crate::datasets::DatasetKind;
use crate::download;
use crate::error::{MnistError, Result};
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
    check_data_dir(&dir)?;
    if !data::files_present(&dir) {
        eprintln!("{} is not in {}; downloading it there", kind.title(), dir.display());
        let mirrors = download::mirrors(kind);
        let mirrors: Vec<&str> = mirrors.iter().map(String::as_str).collect();
        download::download_missing(&dir, kind, &mirrors, |line| eprintln!("{line}"))?;
    }
    Ok(dir)
}

/// Refuses a data folder that cannot be one before anything is downloaded into it: a file, a
/// link that leads back to itself, a path through a file. A folder that does not exist yet is
/// fine (the download creates it).
fn check_data_dir(dir: &Path) -> Result<()> {
    let shown = dir.display();
    let bad = |msg: String| Err(MnistError::InvalidArgument(msg));
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => bad(format!(
            "the data folder {shown} is a file, not a folder; give --data-dir (or {}) a folder, new or holding the data set's files",
            "$MNIST_DIR / $FASHION_MNIST_DIR"
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if std::fs::symlink_metadata(dir).is_ok() {
                let target = std::fs::read_link(dir).map(|t| t.display().to_string()).unwrap_or_else(|_| "?".into());
                return bad(format!(
                    "the data folder {shown} is a link to {target}, which does not exist; create that folder or give another one"
                ));
            }
            Ok(())
        }
        Err(e) if is_loop(&e) => bad(format!(
            "the data folder {shown} is a symbolic link that leads back to itself (a loop); point it at a real folder or give another one"
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
            bad(format!("the data folder {shown} cannot exist: a part of that path is a file, not a folder; give another folder"))
        }
        Err(e) => bad(format!("the data folder {shown} cannot be used ({e}); give another folder")),
    }
}

/// True for "too many levels of symbolic links".
fn is_loop(e: &std::io::Error) -> bool {
    #[cfg(unix)]
    return e.raw_os_error() == Some(libc::ELOOP);
    #[cfg(not(unix))]
    return false;
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
