//! One training run, on its own OS thread: start it ([`start`]: checks, one run at a time), pick
//! the device, train epoch by epoch, and turn everything that happens into events for the page.
//!
//! The thread never takes the server down. Errors (a diverging loss, a GPU that refuses a
//! buffer) end the run with an `error` event; a panic is caught at the thread's edge and
//! reported the same way. Either way the run's slot is freed, so the next Start works.
//!
//! The loop itself is the command line's (`crate::train::train`); this file translates its
//! events (epoch start, progress, epoch end, the model after each epoch) into the page's.
//!
//! Stopping is cooperative: the Stop button sets an `AtomicBool` that the loop reads after
//! every batch on the CPU, and after every submission (up to 100 batches, milliseconds on a
//! real GPU) on the GPU, where at most two submissions are in flight: a stop waits for those.
//! A lost GPU device ends the run with an error; `AppState::gpu` makes a new context for the
//! next one.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use common::{GpuContext, software_warning};

use super::error::ApiError;
use super::model::ServeModel;
use super::state::{AppState, Published};
use crate::data::Mnist;
use crate::events::{AdapterInfo, DoneEvent, EpochEvent, ErrorEvent, ProgressEvent, RunId, StartEvent};
use crate::metrics::EpochMetrics;
use crate::train::{Device, DeviceChoice, Event, Fallback, TrainRequest, select_device_with, train};

/// How a run ended when it did not fail.
struct Outcome {
    epochs_done: usize,
    stopped: bool,
    last_test_acc: Option<f64>,
}

/// Starts a run on `all` (the request's data set, loaded: [`AppState::dataset`]) on its own
/// thread, or refuses: a bad request (422), a run already in flight (409), a server shutting
/// down (503).
pub(crate) fn start(state: &AppState, req: TrainRequest, all: Arc<Mnist>) -> Result<RunId, ApiError> {
    req.validate(all.train.len(), all.test.len()).map_err(ApiError::invalid)?;
    // The training loop's own checks too, so nothing it would refuse gets a 202.
    req.config().validate().map_err(|e| ApiError::invalid(e.to_string()))?;
    if state.is_shutting_down() {
        return Err(ApiError::new(axum::http::StatusCode::SERVICE_UNAVAILABLE, "the server is shutting down"));
    }
    let mut live = state.lock();
    if live.training {
        return Err(ApiError::conflict(format!(
            "a training run (run {}) is already in progress; stop it first (POST /api/stop) \
             or wait for it to finish",
            live.run.unwrap_or(0)
        )));
    }
    // The previous run's thread has ended (it clears `training` as its very last step);
    // joining it here reaps it.
    if let Some(old) = live.thread.take() {
        let _ = old.join();
    }
    let run = state.next_run_id();
    let stop = Arc::new(AtomicBool::new(false));
    let (state2, req2, stop2) = (state.clone(), req.clone(), stop.clone());
    let data = req.data(&all);
    let thread = std::thread::Builder::new()
        .name(format!("train-run-{run}"))
        .spawn(move || run_thread(state2, run, req2, data, stop2))
        .map_err(|e| ApiError::internal(format!("could not start the training thread: {e}")))?;
    AppState::set_dataset(&mut live, req.dataset);
    live.training = true;
    live.run = Some(run);
    live.config = Some(req);
    live.stop = Some(stop);
    live.thread = Some(thread);
    live.adapter = None;
    live.history.clear();
    live.progress = None;
    live.last_outcome = None;
    live.last_error = None;
    Ok(run)
}

/// The body of a run's thread: trains, then frees the run's slot and says how it ended.
fn run_thread(state: AppState, run: RunId, req: TrainRequest, data: Arc<Mnist>, stop: Arc<AtomicBool>) {
    let result = catch_unwind(AssertUnwindSafe(|| train_run(&state, run, &req, &data, &stop)));
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
                let done = DoneEvent::new(run, o.stopped, o.epochs_done, req.epochs, o.last_test_acc);
                live.last_outcome = Some(done.message.clone());
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

/// Picks the device the request asks for with `train::select_device_with`, as the command line
/// does, but with the GPU context kept between runs (see `AppState::gpu`) and the words for
/// the page. `auto` takes a real GPU and otherwise the CPU, with a notice; `gpu` takes whatever
/// adapter there is, with the loud warning if it is a software one.
fn choose_device(state: &AppState, choice: DeviceChoice) -> Result<(Device, AdapterInfo), String> {
    let selected = select_device_with(choice, || state.gpu())
        .map_err(|e| format!("device gpu: {e}. Choose the CPU device instead."))?;
    let info = match (&selected.device, &selected.fallback) {
        (Device::Gpu(ctx), _) => gpu_info(ctx),
        (Device::Cpu, fallback) => {
            let warning = fallback.as_ref().map(|f| match f {
                Fallback::Software { adapter } => format!(
                    "Device auto: the only adapter, {adapter}, is a software one (GPU code on the CPU), so \
                     training runs on the CPU. Choose GPU to train on the software adapter anyway."
                ),
                Fallback::NoGpu(e) => format!("Device auto: no GPU adapter ({e}), so training runs on the CPU."),
            });
            AdapterInfo { name: Device::Cpu.describe(), software: false, warning }
        }
    };
    Ok((selected.device, info))
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

/// Trains `req` on `data` (the request's subsets of its data set: the loop uses all of it).
fn train_run(state: &AppState, run: RunId, req: &TrainRequest, data: &Mnist, stop: &AtomicBool) -> Result<Outcome, String> {
    let cfg = req.config();
    let (device, adapter) = choose_device(state, req.device)?;
    state.update(|live| {
        live.adapter = Some(adapter.clone());
        vec![Published::new("start", &StartEvent::new(run, req.clone(), adapter, data))]
    });

    let mut last_epoch: Option<EpochMetrics> = None;
    let mut epoch_lr = req.lr;
    let mut on_event = |event: Event<'_>| match event {
        Event::EpochStart { lr, .. } => epoch_lr = lr,
        Event::Progress(p) => {
            // The loop reports at most every `events::PROGRESS_EVERY`, and the end of each epoch.
            let Some(progress) = ProgressEvent::new(run, &p, epoch_lr) else { return };
            state.update(|live| {
                live.progress = Some(progress.clone());
                vec![Published::new("progress", &progress)]
            });
        }
        Event::EpochEnd(m) => {
            last_epoch = Some(*m);
            let event = EpochEvent { run, epochs: req.epochs, lr: epoch_lr, metrics: *m };
            state.update(|live| {
                live.history.push(event.clone());
                vec![Published::new("epoch", &event)]
            });
        }
        Event::EpochModel(model) => {
            let origin = match &last_epoch {
                Some(m) => format!("run {run}, after epoch {} (test accuracy {:.2}%)", m.epoch, 100.0 * m.test_acc),
                None => format!("run {run}"),
            };
            publish_model(state, model.clone(), origin);
        }
    };
    let outcome = train(&device, data, &cfg, stop, &mut on_event).map_err(|e| e.to_string())?;
    let epochs_done = outcome.history.len();
    if outcome.stopped {
        // Keep what was learned so far: the page can still classify drawings with it.
        let origin = format!("run {run}, stopped during epoch {}", epochs_done + 1);
        publish_model(state, outcome.model, origin);
    }
    Ok(Outcome { epochs_done, stopped: outcome.stopped, last_test_acc: outcome.history.last().map(|m| m.test_acc) })
}

/// Makes `model` the one the page predicts with. A model the classifier refuses cannot come out
/// of a training loop that checked its shapes; should it happen, the page is told.
fn publish_model(state: &AppState, model: crate::model_io::Model, origin: String) {
    match ServeModel::new(model, origin) {
        Ok(m) => state.set_model(m),
        Err(e) => state.update(|live| {
            live.last_error = Some(format!("could not use the new model: {e}"));
            Vec::new()
        }),
    }
}
