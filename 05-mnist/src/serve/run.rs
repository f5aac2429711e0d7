//! One training run, on its own OS thread: pick the device, train epoch by epoch, and turn
//! everything that happens into events for the page.
//!
//! The thread never takes the server down. Errors (a diverging loss, a GPU that refuses a
//! buffer) end the run with an `error` event; a panic is caught at the thread's edge and
//! reported the same way. Either way the run's slot is freed, so the next Start works.
//!
//! Stopping is cooperative: the Stop button sets an `AtomicBool` that the loop reads after
//! every batch, so a stop takes effect after the current batch.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use common::{GpuContext, software_warning};
use cpu_matrix::Matrix;
use gpu_layers::{CpuTrainer, GpuTrainer, LayersError, Metrics, NetworkSpec, Optimizer};
use rand::SeedableRng;
use rand::seq::SliceRandom;

use super::api::{DeviceChoice, OptimizerChoice, TrainRequest};
use super::events::{AdapterInfo, DoneEvent, EpochEvent, ErrorEvent, ProgressEvent, Published, StartEvent};
use super::model::ServeModel;
use super::state::{AppState, PROGRESS_EVERY};
use crate::data::{CLASSES, Dataset, PIXELS, gather_batch_cpu};

/// How a run ended when it did not fail.
struct Outcome {
    epochs_done: usize,
    stopped: bool,
    last_test_acc: Option<f64>,
}

/// The body of a run's thread: trains, then frees the run's slot and says how it ended.
pub(crate) fn run_thread(state: AppState, run: u64, req: TrainRequest, stop: Arc<AtomicBool>) {
    let result = catch_unwind(AssertUnwindSafe(|| train(&state, run, &req, &stop)));
    let result = result.unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown cause".to_string());
        Err(format!("the training run crashed ({what}); the server is still up, start again"))
    });
    state.update(|live| {
        live.training = false;
        live.progress = None;
        live.stop = None;
        match result {
            Ok(o) => {
                let acc = o.last_test_acc.map(|a| format!(" Test accuracy {:.2}%.", 100.0 * a)).unwrap_or_default();
                let message = if o.stopped {
                    format!("Stopped after {} of {} epochs.{acc}", o.epochs_done, req.epochs)
                } else {
                    format!("Finished {} epochs.{acc}", o.epochs_done)
                };
                live.last_outcome = Some(message.clone());
                let done = DoneEvent { run, stopped: o.stopped, epochs_done: o.epochs_done, message };
                vec![Published::new("done", &done)]
            }
            Err(message) => {
                live.last_outcome = Some("Training failed.".to_string());
                live.last_error = Some(message.clone());
                vec![Published::new("error", &ErrorEvent { run, message })]
            }
        }
    });
}

/// The device a run trains on.
enum Learner {
    Cpu(CpuTrainer),
    Gpu { ctx: Arc<GpuContext>, trainer: GpuTrainer },
}

impl Learner {
    /// One training step on `x: [rows, 784]`, `labels: [rows]`.
    fn step(&mut self, x: &Matrix, labels: &[u8]) -> Result<(), LayersError> {
        match self {
            Learner::Cpu(t) => t.train_step(x, labels),
            Learner::Gpu { ctx, trainer } => {
                trainer.write_batch(ctx, x, labels)?;
                trainer.train_steps(ctx, 1)
            }
        }
    }

    /// Forward and loss only; adds to the metrics.
    fn eval(&mut self, x: &Matrix, labels: &[u8]) -> Result<(), LayersError> {
        match self {
            Learner::Cpu(t) => t.eval_batch(x, labels),
            Learner::Gpu { ctx, trainer } => {
                trainer.write_batch(ctx, x, labels)?;
                trainer.eval(ctx)
            }
        }
    }

    fn take_metrics(&mut self) -> Result<Metrics, LayersError> {
        match self {
            Learner::Cpu(t) => t.take_metrics(),
            Learner::Gpu { ctx, trainer } => trainer.take_metrics(ctx),
        }
    }

    /// `[W1, b1, ...]`, `W: [in, out]`, `b: [1, out]`.
    fn parameters(&self) -> Result<Vec<Matrix>, LayersError> {
        match self {
            Learner::Cpu(t) => Ok(t.parameters()),
            Learner::Gpu { ctx, trainer } => trainer.parameters(ctx),
        }
    }
}

/// Picks the device the request asks for. `auto` takes a real GPU and otherwise the CPU, with
/// a notice; `gpu` takes whatever adapter there is, with the loud warning if it is software.
fn choose_device(state: &AppState, choice: DeviceChoice) -> Result<(Option<Arc<GpuContext>>, AdapterInfo), String> {
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let cpu = |warning: Option<String>| AdapterInfo { name: format!("CPU ({threads} threads)"), software: false, warning };
    match choice {
        DeviceChoice::Cpu => Ok((None, cpu(None))),
        DeviceChoice::Gpu => {
            let ctx = state.gpu().map_err(|e| format!("device gpu: {e}. Choose the CPU device instead."))?;
            let info = gpu_info(&ctx);
            Ok((Some(ctx), info))
        }
        DeviceChoice::Auto => match state.gpu() {
            Ok(ctx) if !ctx.is_software() => {
                let info = gpu_info(&ctx);
                Ok((Some(ctx), info))
            }
            Ok(ctx) => Ok((
                None,
                cpu(Some(format!(
                    "Device auto: the only adapter, {}, is a software one (GPU code on the CPU), so \
                     training runs on the CPU. Choose GPU to train on the software adapter anyway.",
                    ctx.info.name
                ))),
            )),
            Err(e) => Ok((None, cpu(Some(format!("Device auto: no GPU adapter ({e}), so training runs on the CPU."))))),
        },
    }
}

fn gpu_info(ctx: &GpuContext) -> AdapterInfo {
    let software = ctx.is_software();
    // The banner's text without its rows of '!': one paragraph for the page.
    let warning = software.then(|| {
        software_warning(&ctx.info.name)
            .lines()
            .filter(|l| !l.chars().all(|c| c == '!'))
            .map(|l| l.trim_start_matches('!').trim())
            .collect::<Vec<_>>()
            .join(" ")
    });
    AdapterInfo { name: ctx.adapter_line(), software, warning }
}

fn train(state: &AppState, run: u64, req: &TrainRequest, stop: &AtomicBool) -> Result<Outcome, String> {
    let data = state.data().clone();
    let train_len = req.train_images(data.train.len());
    let batches = train_len.div_ceil(req.batch_size);
    let max_batch = req.batch_size.min(train_len);

    let (gpu, adapter) = choose_device(state, req.device)?;
    let spec = NetworkSpec::new(PIXELS, &req.hidden, CLASSES).map_err(|e| e.to_string())?;
    let optimizer = match req.optimizer {
        OptimizerChoice::Sgd => Optimizer::sgd(req.lr, req.momentum),
        OptimizerChoice::Adam => Optimizer::adam(req.lr),
    };
    let mut learner = match gpu {
        None => Learner::Cpu(CpuTrainer::new(&spec, optimizer, max_batch, req.seed).map_err(|e| e.to_string())?),
        Some(ctx) => {
            let trainer = GpuTrainer::new(&ctx, &spec, optimizer, max_batch, req.seed).map_err(|e| e.to_string())?;
            Learner::Gpu { ctx, trainer }
        }
    };

    state.update(|live| {
        live.adapter = Some(adapter.clone());
        let start = StartEvent {
            run,
            config: req.clone(),
            adapter,
            train_images: train_len,
            test_images: data.test.len(),
            batches_per_epoch: batches,
        };
        vec![Published::new("start", &start)]
    });

    let mut order: Vec<u32> = (0..train_len as u32).collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(req.seed);
    let mut outcome = Outcome { epochs_done: 0, stopped: false, last_test_acc: None };
    let diverged = |epoch: usize, batch: usize, e: LayersError| match e {
        LayersError::NonFinite { .. } => format!(
            "the loss became NaN or infinite at epoch {epoch}, batch {batch}: training diverged. \
             Try a smaller learning rate (now {}), e.g. {}.",
            req.lr,
            req.lr / 10.0
        ),
        other => other.to_string(),
    };

    for epoch in 1..=req.epochs {
        order.shuffle(&mut rng);
        let started = Instant::now();
        let mut last_report = Instant::now();
        let mut sums = Metrics::default();
        for b in 0..batches {
            let first = b * req.batch_size;
            let count = req.batch_size.min(train_len - first);
            let (x, labels) = gather_batch_cpu(&data.train, &order, first, count);
            let x = Matrix::new(count, PIXELS, x).map_err(|e| e.to_string())?;
            learner.step(&x, &labels).map_err(|e| diverged(epoch, b + 1, e))?;
            let done = b + 1;
            if stop.load(Ordering::Relaxed) {
                // Keep what was learned so far: the page can still classify drawings with it.
                let params = learner.parameters().map_err(|e| e.to_string())?;
                let origin = format!("run {run}, stopped in epoch {epoch} after batch {done} of {batches}");
                state.set_model(ServeModel::new(&spec, &params, origin)?);
                outcome.stopped = true;
                return Ok(outcome);
            }
            if last_report.elapsed() >= PROGRESS_EVERY || done == batches {
                // Reading the metrics waits for the GPU: only as often as the page is told.
                let m = learner.take_metrics().map_err(|e| diverged(epoch, done, e))?;
                add(&mut sums, &m);
                last_report = Instant::now();
                let progress = ProgressEvent {
                    run,
                    epoch,
                    batch: done,
                    batches,
                    loss: sums.mean_loss(),
                    images_per_sec: (first + count) as f64 / started.elapsed().as_secs_f64().max(1e-9),
                };
                state.update(|live| {
                    live.progress = Some(progress.clone());
                    vec![Published::new("progress", &progress)]
                });
            }
        }
        let seconds = started.elapsed().as_secs_f64();
        let test = evaluate(&mut learner, &data.test, max_batch).map_err(|e| diverged(epoch, batches, e))?;

        let params = learner.parameters().map_err(|e| e.to_string())?;
        let origin = format!("run {run}, after epoch {epoch} (test accuracy {:.2}%)", 100.0 * test.accuracy());
        let model = ServeModel::new(&spec, &params, origin)?;
        state.set_model(model);

        let event = EpochEvent {
            run,
            epoch,
            epochs: req.epochs,
            train_loss: sums.mean_loss(),
            train_acc: sums.accuracy(),
            test_loss: test.mean_loss(),
            test_acc: test.accuracy(),
            seconds,
            images_per_sec: train_len as f64 / seconds.max(1e-9),
        };
        state.update(|live| {
            live.history.push(event.clone());
            vec![Published::new("epoch", &event)]
        });
        outcome.epochs_done = epoch;
        outcome.last_test_acc = Some(test.accuracy());
    }
    Ok(outcome)
}

fn add(sums: &mut Metrics, m: &Metrics) {
    sums.loss_sum += m.loss_sum;
    sums.rows += m.rows;
    sums.correct += m.correct;
}

/// Loss and accuracy over all of `test`, in chunks of `rows`.
fn evaluate(learner: &mut Learner, test: &Dataset, rows: usize) -> Result<Metrics, LayersError> {
    let order: Vec<u32> = (0..test.len() as u32).collect();
    let mut first = 0;
    while first < test.len() {
        let count = rows.min(test.len() - first);
        let (x, labels) = gather_batch_cpu(test, &order, first, count);
        learner.eval(&Matrix::new(count, PIXELS, x)?, &labels)?;
        first += count;
    }
    learner.take_metrics()
}
