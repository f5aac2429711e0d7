//! One error type for the whole stage. Every variant says what went wrong *and what to do*,
//! because these messages are what a user sees when a file is broken or a flag is wrong.

use std::fmt;
use std::path::PathBuf;

#[derive(Debug)]
pub enum MnistError {
    /// A file could not be opened, read or written.
    Io { path: PathBuf, source: std::io::Error },
    /// An IDX file whose bytes do not make sense (bad magic, wrong size, bad label...).
    Idx { path: PathBuf, msg: String },
    /// Images and labels of one set (training or test) disagree, or a set is not what MNIST should be.
    Dataset(String),
    /// Every mirror failed for a file; `attempts` says why for each one.
    Download { file: String, attempts: Vec<String>, kind: crate::datasets::DatasetKind },
    /// A bad command-line or configuration value.
    InvalidArgument(String),
    /// The loss became NaN or infinite.
    NonFiniteLoss { epoch: usize, batch: usize, lr: f32 },
    /// A model file that is missing tensors, has wrong shapes, or is not safetensors at all.
    Model { path: PathBuf, msg: String },
    /// A model that loads but cannot classify: its outputs are NaN or infinite.
    UnusableModel(String),
    /// An image for `predict` that cannot be read or holds no digit.
    Image { path: PathBuf, msg: String },
    /// The loss and accuracy plot could not be drawn.
    Plot(String),
    /// A GPU error (no adapter, a buffer over the limits, a validation error).
    Gpu(common::GpuError),
    /// An error from the layers, loss or optimizers (stage 04).
    Layers(gpu_layers::LayersError),
    /// Ctrl-C (or SIGTERM) ended a training run early; the message says what was written.
    /// The binary exits with status 130 (128 + SIGINT), as shells do for an interrupted command.
    Interrupted(String),
}

impl MnistError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        MnistError::Io { path: path.into(), source }
    }
}

impl fmt::Display for MnistError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MnistError::Io { path, source } if source.kind() == std::io::ErrorKind::NotFound => {
                // Only the data set's files and folder get the data-folder hint; a missing image
                // or output folder gets a plain message.
                let is_data = path.to_string_lossy().contains("ubyte") || path.is_dir() || path.extension().is_none();
                if is_data {
                    write!(
                        f,
                        "{}: not found. Pass --data-dir or set MNIST_DIR to the folder with the MNIST files.",
                        path.display()
                    )
                } else {
                    write!(f, "{}: file not found", path.display())
                }
            }
            MnistError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            MnistError::Idx { path, msg } => write!(
                f,
                "{}: not a valid MNIST IDX file: {msg}. Delete it and run again to download a fresh copy.",
                path.display()
            ),
            MnistError::Dataset(msg) => write!(f, "MNIST data: {msg}"),
            MnistError::Download { file, attempts, kind } => {
                write!(f, "could not download {file} from any mirror:")?;
                for a in attempts {
                    write!(f, "\n  - {a}")?;
                }
                write!(
                    f,
                    "\nCopy the four {} files into the data folder by hand (see --data-dir / {}), \
                 or set {} to mirrors that serve them.",
                    kind.title(),
                    kind.dir_env(),
                    kind.mirrors_env()
                )
            }
            MnistError::InvalidArgument(msg) => write!(f, "invalid argument: {msg}"),
            MnistError::NonFiniteLoss { epoch, batch, lr } => write!(
                f,
                "the loss became NaN or infinite at epoch {epoch} (by batch {batch}): training diverged. \
                 Try a smaller learning rate (--lr, now {lr}), e.g. {}.",
                lr / 10.0
            ),
            MnistError::Model { path, msg } => write!(f, "{}: bad model file: {msg}", path.display()),
            MnistError::UnusableModel(msg) => write!(f, "the model cannot classify: {msg}"),
            MnistError::Image { path, msg } => write!(f, "{}: {msg}", path.display()),
            MnistError::Plot(msg) => write!(f, "could not draw the plot: {msg}"),
            MnistError::Gpu(e) => write!(f, "{e}"),
            MnistError::Layers(e) => write!(f, "{e}"),
            MnistError::Interrupted(msg) => write!(f, "{msg}"),
        }
    }
}

impl std::error::Error for MnistError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            MnistError::Io { source, .. } => Some(source),
            MnistError::Gpu(e) => Some(e),
            MnistError::Layers(e) => Some(e),
            _ => None,
        }
    }
}

impl From<common::GpuError> for MnistError {
    fn from(e: common::GpuError) -> Self {
        MnistError::Gpu(e)
    }
}

impl From<gpu_layers::LayersError> for MnistError {
    fn from(e: gpu_layers::LayersError) -> Self {
        MnistError::Layers(e)
    }
}

pub type Result<T, E = MnistError> = std::result::Result<T, E>;
