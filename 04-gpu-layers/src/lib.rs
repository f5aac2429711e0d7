//! Stage 04: layers with forward and backward passes on the GPU and the CPU, a buffer manager,
//! SGD and Adam, and one definition of the network for both devices.
//!
//! - `shaders/`: the WGSL kernels. Primitives: `bias_add`, `activation_forward`/`_backward`
//!   (ReLU, tanh), `softmax_ce` (fused, stable softmax + cross-entropy + dL/dlogits + loss and
//!   correct count on the GPU), `column_sum` (parallel reduction), `sgd`, `adam`. Fused layer
//!   kernels: `linear_forward`, `output_layer`, `linear_backward_input`, `linear_update`.
//! - [`cpu`]: the CPU twin of every kernel, same names and shapes.
//! - [`tape`]: the tensor ops ([`Op`]) both devices implement.
//! - [`network`]: the layers ([`Linear`], [`ActivationLayer`], [`SoftmaxCrossEntropy`]) and the
//!   [`Network`] (our `Sequential`) that writes a training step as a tape of ops, composed from
//!   primitives or [`Fusion::Fused`].
//! - [`CpuTrainer`] runs the tapes on the CPU (the reference); [`GpuTrainer`] prepares every
//!   dispatch once with the [`BufferManager`] and then only records.
//!
//! On the GPU a training loop looks like this (stage 05 writes batches with a gather kernel
//! instead of `write_batch`):
//!
//! ```no_run
//! use common::GpuContext;
//! use cpu_matrix::Matrix;
//! use gpu_layers::{GpuTrainer, NetworkSpec, Optimizer};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ctx = GpuContext::new()?;
//! let spec = NetworkSpec::new(784, &[128], 10)?;
//! let trainer = GpuTrainer::new(&ctx, &spec, Optimizer::sgd(0.1, 0.9), 64, 42)?;
//! let x = Matrix::random_uniform(64, 784, 0.0, 1.0, 1);
//! let labels: Vec<u8> = (0..64).map(|i| (i % 10) as u8).collect();
//! trainer.write_batch(&ctx, &x, &labels)?;   // upload + set_batch
//! let mut encoder = ctx.device.create_command_encoder(&Default::default());
//! {
//!     let mut pass = encoder.begin_compute_pass(&Default::default());
//!     for _ in 0..10 {
//!         trainer.record_step(&mut pass);    // 3 dispatches, no CPU work, no read-back
//!     }
//! }
//! ctx.queue.submit([encoder.finish()]);
//! let m = trainer.take_metrics(&ctx)?;       // the only read-back
//! println!("loss {:.3}, accuracy {:.1}%", m.mean_loss(), 100.0 * m.accuracy());
//! # Ok(()) }
//! ```

mod buffers;
pub mod cpu;
mod cpu_trainer;
mod error;
mod gpu_trainer;
mod kernels;
pub mod network;
mod spec;
pub mod tape;

pub use buffers::{Allocations, BufferManager};
pub use cpu_trainer::{CpuTape, CpuTrainer};
pub use error::LayersError;
pub use gpu_trainer::{GpuTape, GpuTrainer, ProgramId};
pub use kernels::{KernelId, Kernels};
pub use network::{ActivationLayer, Fusion, Linear, Network, SoftmaxCrossEntropy};
pub use spec::{Activation, MAX_CLASSES, Metrics, NetworkSpec, Optimizer};
pub use tape::{Dim, Elem, LayerUpdate, Mode, Op, Product, TensorId, TensorInfo, View};
