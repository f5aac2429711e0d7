//! Stage 05: train an MNIST digit classifier, on the GPU with hand-written WGSL kernels or on
//! the CPU, with the tools a user expects (download, progress, metrics, plots, eval, predict).
//!
//! The modules marked native-only below need files, sockets or a terminal; the rest also build
//! for `wasm32-unknown-unknown`, where `05-mnist/wasm` trains in a browser with the same code.

#[cfg(not(target_arch = "wasm32"))]
pub mod cli;
#[cfg(not(target_arch = "wasm32"))]
pub mod commands;
pub mod data;
#[cfg(not(target_arch = "wasm32"))]
pub mod data_args;
pub mod datasets;
#[cfg(not(target_arch = "wasm32"))]
pub mod download;
pub mod error;
pub mod events;
pub mod gather;
pub mod idx;
pub mod metrics;
pub mod model_io;
#[cfg(not(target_arch = "wasm32"))]
pub mod plot;
pub mod preprocess;
pub mod preview;
#[cfg(not(target_arch = "wasm32"))]
pub mod serve;
#[cfg(not(target_arch = "wasm32"))]
pub mod signals;
#[cfg(not(target_arch = "wasm32"))]
pub mod strict_image;
pub mod train;

pub use error::{MnistError, Result};
