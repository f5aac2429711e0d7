//! Stage 05: train an MNIST digit classifier, on the GPU with hand-written WGSL kernels or on
//! the CPU, with the tools a user expects (download, progress, metrics, plots, eval, predict).

pub mod cli;
pub mod data;
pub mod data_args;
pub mod datasets;
pub mod download;
pub mod error;
pub mod gather;
pub mod idx;
pub mod metrics;
pub mod model_io;
pub mod plot;
pub mod preprocess;
pub mod preview;
pub mod serve;
pub mod train;

pub use error::{MnistError, Result};
