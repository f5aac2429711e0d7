//! The training loop, on the GPU or the CPU, driven by a caller that wants to watch (the
//! command line's progress bar, or the web page's live charts) and maybe stop it.
//!
//! - `config.rs`: [`TrainConfig`] and the choices ([`OptimizerChoice`], [`Schedule`]);
//! - `device.rs`: [`DeviceChoice`] -> [`Device`] ([`select_device`]; `mnist serve` reuses it);
//! - `request.rs`: [`TrainRequest`], a run as the web page asks for it (on the server or in
//!   the browser);
//! - `cpu.rs` and `gpu.rs`: the two loops; `shared.rs`: what they share (the events, the seeded
//!   shuffle, the loss and accuracy sums). This file starts a run on one or the other.
//!
//! Both devices run the same epochs: the same seeded shuffle, the same initial parameters
//! (stage 04's `NetworkSpec::init_parameters(seed)`), the same batches, the same math. What
//! differs is who does the work between two reports:
//!
//! - CPU: one batch at a time: gather the rows (`data::gather_batch_cpu`), one
//!   `CpuTrainer::train_step`, read the loss. The stop flag is checked after every batch.
//! - GPU: nothing crosses the bus during an epoch except the shuffled order (240 KB, written
//!   once) and, at the end, three numbers. A submission holds `steps_per_submit` steps, each
//!   two recordings: our gather kernel (batch `s` picked by a dynamic uniform offset) and
//!   stage 04's `record_step` (forward, loss, backward, update: a handful of dispatches). The
//!   loss and accuracy are summed on the device and read with `take_metrics` when the epoch
//!   ends, or every [`PROGRESS_EVERY`] so a slow adapter still shows progress. The stop flag is
//!   checked after every submission. Evaluation runs the same way with `record_eval` on the
//!   test set, in order.
//!
//! The loop is an `async fn` ([`train_async`]) because in a browser (the page's WebAssembly
//! build) nothing may block: each read-back of the GPU completes through the browser's event
//! loop, and the CPU path must hand control back to it now and then (the `breathe` future,
//! awaited after each progress report) or the page would freeze for a whole epoch. Natively
//! [`train`] runs the same future to completion on the calling thread, where every wait is a
//! plain blocking poll of the device, so nothing changes there.

mod config;
mod cpu;
mod device;
mod gpu;
mod request;
mod shared;

use std::future::Future;
use std::sync::atomic::AtomicBool;

use cpu_matrix::Matrix;
use gpu_layers::{LayersError, NetworkSpec};

pub use config::{CPU_EVAL_ROWS, GPU_EVAL_ROWS, LossChoice, MatmulPrecision, OptimizerChoice, Schedule, TrainConfig, network};
#[cfg(not(target_arch = "wasm32"))]
pub use device::select_device;
pub use device::{Device, DeviceChoice, Fallback, Selected, select_device_with};
pub use request::{MAX_BATCH_SIZE, MAX_EPOCHS, MAX_HIDDEN_LAYERS, MAX_HIDDEN_SIZE, MAX_LR, TrainRequest};
pub use shared::{Event, PROGRESS_EVERY, Progress, TrainOutcome, shuffled_order};

use crate::data::{Mnist, PIXELS, gather_batch_cpu};
use crate::error::{MnistError, Result};
use shared::checked;

/// Trains on `data.train`, evaluating on `data.test` after every epoch. `on_event` sees every
/// epoch start, progress report and epoch result; setting `stop` ends the run after the current
/// batch (CPU) or submission (GPU) and returns the model so far. A stop that comes during an
/// epoch's evaluation lets the evaluation finish (the epoch counts) and ends the run there. Blocks until the run ends
/// (native targets: [`train_async`] run on this thread).
#[cfg(not(target_arch = "wasm32"))]
pub fn train(
    device: &Device,
    data: &Mnist,
    cfg: &TrainConfig,
    stop: &AtomicBool,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<TrainOutcome> {
    common::block_on(train_async(device, data, cfg, stop, on_event, || std::future::ready(())))
}

/// [`train`] as a future, for every target. `breathe()` is awaited after every progress report:
/// a browser page passes a future that yields to its event loop (so it can draw, and notice a
/// click on Stop); native callers pass `|| std::future::ready(())`.
pub async fn train_async<B: Future<Output = ()>>(
    device: &Device,
    data: &Mnist,
    cfg: &TrainConfig,
    stop: &AtomicBool,
    on_event: &mut dyn FnMut(Event<'_>),
    breathe: impl FnMut() -> B,
) -> Result<TrainOutcome> {
    let spec = check_run(data, cfg)?;
    match device {
        Device::Cpu => cpu::train_cpu(&spec, data, cfg, stop, on_event, breathe).await,
        Device::Gpu(ctx) => gpu::train_gpu(ctx, &spec, data, cfg, stop, on_event, breathe).await,
    }
}

/// The network of a run, once the configuration and the data are checked.
fn check_run(data: &Mnist, cfg: &TrainConfig) -> Result<NetworkSpec> {
    cfg.validate()?;
    if data.train.is_empty() || data.test.is_empty() {
        return Err(MnistError::Dataset("the training and the test set must each hold at least one image".into()));
    }
    cfg.spec()
}

/// The mean loss of the first training step of a run of `cfg` on `device`: the same trainer,
/// initial parameters and batch (epoch 1's shuffled order) as [`train_async`]'s first step.
/// Two devices that compute the same math give the same number up to rounding (the in-browser
/// test compares WebGPU with the CPU this way).
pub async fn first_batch_loss(device: &Device, data: &Mnist, cfg: &TrainConfig) -> Result<f64> {
    let spec = check_run(data, cfg)?;
    let n = data.train.len();
    let batch = cfg.batch_size.min(n);
    let order = shuffled_order(n, cfg.seed, 1);
    let lr = cfg.schedule.lr(cfg.lr(), 1, cfg.epochs);
    let m = match device {
        Device::Cpu => {
            let mut net = cpu::trainer(&spec, cfg, data, batch)?;
            net.set_learning_rate(lr)?;
            let (x, labels) = gather_batch_cpu(&data.train, &order, 0, batch);
            net.train_step(&Matrix::new(batch, PIXELS, x).map_err(LayersError::from)?, &labels)?;
            checked(net.take_metrics(), 1, 1, cfg)?
        }
        Device::Gpu(ctx) => {
            let run = gpu::GpuRun::new(ctx, &spec, data, cfg)?;
            run.trainer.set_learning_rate(ctx, lr)?;
            run.train.set_order(ctx, &order)?;
            run.trainer.set_batch(ctx, run.train.rows(0))?;
            run.submit(0..1, true)?;
            checked(run.trainer.take_metrics_async(ctx).await, 1, 1, cfg)?
        }
    };
    Ok(m.mean_loss())
}
