//! Stage 04: layers with forward and backward passes on the GPU and the CPU, a buffer manager,
//! SGD and Adam, and one definition of the network for both devices.
//!
//! - `shaders/`: the WGSL kernels. Primitives: `bias_add`, `activation_forward`/`_backward`
//!   (in place: ReLU, tanh, sigmoid), `activation_copy_forward`/`_backward` (out of place, any
//!   activation, GELU included), `dropout_forward`/`_backward` (counter-based masks),
//!   `softmax_ce` (fused, stable softmax + cross-entropy + dL/dlogits + loss and correct count on
//!   the GPU), `mse`, `column_sum` (parallel reduction), `sgd`, `adam`. Fused layer kernels:
//!   `linear_forward`, `output_layer`, `linear_backward_input`, `linear_update`.
//! - [`wgsl`]: the Rust <-> WGSL contract: the constants both sides share (generated into every
//!   kernel's prelude) and each kernel's `#[repr(C)]` uniform struct. The fused kernels' tile
//!   sizes are [`FusedTiles`] (`tiles.rs`); what each kernel needs of a device, the sizes fitted
//!   to it ([`DeviceFit`]) and which kernel an op runs there are `routing.rs`'s; the variants
//!   `--sweep` times are [`sweep_variants_of`].
//! - [`cpu`]: the CPU reference of every kernel (`cpu::reference`, same names and shapes), the
//!   fast CPU path the CPU trainer runs (`cpu::fast`), the [`CpuStore`] and the [`CpuTrainer`].
//! - [`tape`]: the tensor ops ([`Op`]) both devices implement. A tape is a hand-written list of
//!   them (not automatic differentiation).
//! - [`sequential`]: the layers a user chooses ([`Layer`]: `Linear`, ReLU, tanh, sigmoid, GELU,
//!   `Dropout(p)`, `Flatten`), the [`Loss`] (softmax cross-entropy or MSE) and a text form
//!   (`784-256-relu-dropout0.2-10`); [`NetworkSpec`] checks a list's shapes.
//! - `layers.rs`: the layers as op emitters ([`Linear`], [`ActivationLayer`], [`DropoutLayer`],
//!   [`SoftmaxCrossEntropy`], [`MeanSquaredError`]); `network.rs`: the [`Network`] (our
//!   `Sequential`) that writes a training step as a tape of ops, composed from primitives or
//!   [`Fusion::Fused`].
//! - Running a tape: [`CpuStore`] (`cpu/store.rs`, op by op through `cpu/run_op.rs`) and
//!   [`GpuStore`] (`gpu/store.rs`; each op prepared once as a dispatch (`gpu/dispatch.rs`) by
//!   `gpu/prepare*.rs`, with the [`BufferManager`], then only recorded).
//! - [`CpuTrainer`] (the CPU reference) and [`GpuTrainer`] train a [`NetworkSpec`] with them.
//!
//! On the GPU a training loop looks like this (stage 05's batches are gathered from byte images
//! on the GPU by the first dispatch itself, [`GpuTrainer::add_gathered`], and recorded a range
//! of batches at a time with [`GpuTrainer::record_gathered_steps`], which for 784-128-10 runs
//! the split step: each update also computes the next batch's `x W1`):
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
//! // One command encoder, one compute pass, one submit (common's `submit_pass`):
//! ctx.submit_pass("train", |pass| {
//!     for _ in 0..10 {
//!         trainer.record_step(pass);        // 2 dispatches, no CPU work, no read-back
//!     }
//! });
//! let m = trainer.take_metrics(&ctx)?;       // the only read-back
//! println!("loss {:.3}, accuracy {:.1}%", m.mean_loss(), 100.0 * m.accuracy());
//! # Ok(()) }
//! ```

pub mod cpu;
mod error;
mod gpu;
mod layers;
#[cfg(test)]
mod naga_check;
mod network;
mod routing;
pub mod sequential;
mod spec;
mod sweep_variants;
pub mod tape;
mod tiles;
pub mod wgsl;

pub use cpu::store::CpuStore;
pub use cpu::trainer::CpuTrainer;
pub use error::LayersError;
pub use gpu::buffers::{Allocations, BufferManager};
pub use gpu::dispatch::ByteImages;
pub use gpu::kernels::{KernelId, Kernels};
pub use gpu::plan::plan;
pub use gpu::store::{GpuStore, TapeId};
pub use gpu::trainer::{Gathered, GatheredEval, GpuTrainer};
pub use gpu_matmul::Precision;
pub use layers::{ActivationLayer, DropoutLayer, Linear, MeanSquaredError, SoftmaxCrossEntropy};
pub use network::{Fusion, Network};
pub use routing::{DeviceFit, Needs, ROUTE_MIN_F16, ROUTE_MIN_F32, Routing, routes_by_shape};
pub use sequential::{Activation, Init, Layer, Loss};
pub use spec::{MAX_CLASSES, Metrics, NetworkSpec, Optimizer};
pub use sweep_variants::{sweep_variants, sweep_variants_of};
pub use tape::{Dim, Elem, FusedDropout, LayerUpdate, Mode, Op, TensorId, TensorInfo, Transpose, View};
pub use tiles::FusedTiles;
pub use wgsl::GatherSlot;
