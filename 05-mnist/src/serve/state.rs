//! The server's shared state: the data sets, the current model, the run in flight, and the
//! channel that carries events (each serialized once, a [`Published`]) to every connected page.
//!
//! One mutex guards everything that changes ([`Live`]). Events are sent *while holding it*, and
//! a new page subscribes and takes its snapshot under the same lock, so a page never misses an
//! event between its snapshot and its stream, nor sees one twice.
//!
//! Training runs on its own OS thread (`run.rs` starts it and updates this state; this file
//! knows nothing of it); the async handlers only flip flags and read this state, so the server
//! stays responsive while the CPU or the GPU is busy.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use common::GpuContext;
use tokio::sync::{broadcast, watch};

use serde::Serialize;

use super::error::ApiError;
use super::model::ServeModel;
use crate::data::{Mnist, PIXELS};
use crate::datasets::DatasetKind;
use crate::events::{AdapterInfo, EpochEvent, ProgressEvent, RunId, SAMPLE_COUNT, SamplesEvent, SamplesResponse, Snapshot, class_names};
use crate::train::TrainRequest;

/// Events buffered per page; a page that falls further behind gets a fresh snapshot.
const CHANNEL_CAPACITY: usize = 256;

/// Cheap to clone: every handler and the training thread hold one.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

struct Inner {
    /// The data sets loaded so far: the one the server started with, and those runs asked for.
    datasets: Mutex<Vec<Arc<Mnist>>>,
    /// Where each data set's files are, for loading one the first time a run asks for it.
    data_dirs: Vec<(DatasetKind, PathBuf)>,
    tx: broadcast::Sender<Arc<Published>>,
    /// Becomes `true` when the server shuts down; event streams end then.
    shutdown: watch::Sender<bool>,
    live: Mutex<Live>,
    next_run: AtomicU64,
    /// The GPU context, made on the first GPU run and kept (making one takes a while).
    gpu: Mutex<Option<Arc<GpuContext>>>,
}

/// What changes while the server runs.
#[derive(Default)]
pub(crate) struct Live {
    /// The data set of the grid and of the latest run (the server's `--dataset` until a run
    /// asks for another).
    pub dataset: DatasetKind,
    pub training: bool,
    pub run: Option<RunId>,
    pub config: Option<TrainRequest>,
    pub stop: Option<Arc<AtomicBool>>,
    pub thread: Option<JoinHandle<()>>,
    pub adapter: Option<AdapterInfo>,
    pub history: Vec<EpochEvent>,
    pub progress: Option<ProgressEvent>,
    pub model: Option<Arc<ServeModel>>,
    pub samples_predicted: Option<Vec<u8>>,
    pub last_outcome: Option<String>,
    pub last_error: Option<String>,
}

impl AppState {
    /// State for a server on `data`, predicting with `model` until a run makes a new one. A run
    /// that asks for the other data set loads it from its default folder
    /// (`data::resolve_data_dir`: `$FASHION_MNIST_DIR`, `$MNIST_DIR`, or `data/` of the
    /// workspace); see [`AppState::with_data_dirs`].
    pub fn new(data: Arc<Mnist>, model: Option<ServeModel>) -> Self {
        let dirs = [DatasetKind::Mnist, DatasetKind::Fashion].map(|k| (k, crate::data::resolve_data_dir(None, k)));
        Self::with_data_dirs(data, model, dirs.to_vec())
    }

    /// [`AppState::new`], with the folder each data set is loaded from when a run first asks
    /// for it (`data` itself is loaded already).
    pub fn with_data_dirs(data: Arc<Mnist>, model: Option<ServeModel>, data_dirs: Vec<(DatasetKind, PathBuf)>) -> Self {
        let (tx, _) = broadcast::channel(CHANNEL_CAPACITY);
        let (shutdown, _) = watch::channel(false);
        let live = Live { dataset: data.kind, ..Live::default() };
        let state = Self {
            inner: Arc::new(Inner {
                datasets: Mutex::new(vec![data]),
                data_dirs,
                tx,
                shutdown,
                live: Mutex::new(live),
                next_run: AtomicU64::new(1),
                gpu: Mutex::new(None),
            }),
        };
        if let Some(model) = model {
            state.set_model(model);
        }
        state
    }

    /// The data set of the grid and of the latest run.
    pub fn data(&self) -> Arc<Mnist> {
        let kind = self.lock().dataset;
        self.loaded_or_first(kind)
    }

    /// Data set `kind` if loaded, else the one the server started with. Takes only the data
    /// sets' lock (callers may hold the live state's).
    fn loaded_or_first(&self, kind: DatasetKind) -> Arc<Mnist> {
        let sets = self.inner.datasets.lock().unwrap_or_else(|p| p.into_inner());
        sets.iter().find(|d| d.kind == kind).unwrap_or(&sets[0]).clone()
    }

    fn loaded(&self, kind: DatasetKind) -> Option<Arc<Mnist>> {
        self.inner.datasets.lock().unwrap_or_else(|p| p.into_inner()).iter().find(|d| d.kind == kind).cloned()
    }

    /// The data set `kind`, loaded from its folder the first time it is asked for (blocking:
    /// a second or two; call it off the async threads). 409 when its files are not there.
    pub fn dataset(&self, kind: DatasetKind) -> Result<Arc<Mnist>, ApiError> {
        if let Some(d) = self.loaded(kind) {
            return Ok(d);
        }
        let dir = self.data_dir(kind);
        if !crate::data::files_present(&dir) {
            return Err(ApiError::conflict(format!(
                "dataset: {} is not on this server ({} has no train-images-idx3-ubyte(.gz) and the rest); set {} to \
                 the folder with its four files and restart, or start the server with --dataset {} --data-dir DIR \
                 (mnist train --dataset {} downloads them)",
                kind.title(),
                dir.display(),
                kind.dir_env(),
                kind.name(),
                kind.name()
            )));
        }
        let data = crate::data::load(&dir, kind)
            .map_err(|e| ApiError::conflict(format!("dataset: {} could not be loaded from {}: {e}", kind.title(), dir.display())))?;
        let data = Arc::new(data);
        let mut sets = self.inner.datasets.lock().unwrap_or_else(|p| p.into_inner());
        // Two requests may have loaded it at once: keep the first.
        match sets.iter().find(|d| d.kind == kind) {
            Some(d) => Ok(d.clone()),
            None => {
                sets.push(data.clone());
                Ok(data)
            }
        }
    }

    /// The folder data set `kind` is (or would be) loaded from.
    pub fn data_dir(&self, kind: DatasetKind) -> PathBuf {
        self.inner
            .data_dirs
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, d)| d.clone())
            .unwrap_or_else(|| crate::data::resolve_data_dir(None, kind))
    }

    /// Makes `kind` the data set of the grid (a run on it is starting). The old grid's
    /// predictions are of other images: they go.
    pub(crate) fn set_dataset(live: &mut Live, kind: DatasetKind) {
        if live.dataset != kind {
            live.dataset = kind;
            live.samples_predicted = None;
        }
    }

    /// Locks the live state. A panic while it was held (there should be none: the training
    /// thread catches its own) leaves data that is still consistent field by field, so a
    /// poisoned lock is taken over rather than taking the whole server down.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Live> {
        self.inner.live.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Applies `f` to the live state and sends the events it returns, under one lock.
    pub(crate) fn update(&self, f: impl FnOnce(&mut Live) -> Vec<Published>) {
        let mut live = self.lock();
        for event in f(&mut live) {
            // An error only means that no page is listening right now.
            let _ = self.inner.tx.send(Arc::new(event));
        }
    }

    /// A snapshot and a receiver for every event after it (taken under one lock).
    pub fn subscribe(&self) -> (Snapshot, broadcast::Receiver<Arc<Published>>) {
        let live = self.lock();
        (self.snapshot_of(&live), self.inner.tx.subscribe())
    }

    pub fn snapshot(&self) -> Snapshot {
        self.snapshot_of(&self.lock())
    }

    fn snapshot_of(&self, live: &Live) -> Snapshot {
        let data = self.loaded_or_first(live.dataset);
        Snapshot {
            training: live.training,
            run: live.run,
            config: live.config.clone(),
            adapter: live.adapter.clone(),
            model: live.model.as_ref().map(|m| m.info()),
            history: live.history.clone(),
            progress: if live.training { live.progress.clone() } else { None },
            samples_predicted: live.samples_predicted.clone(),
            last_outcome: live.last_outcome.clone(),
            last_error: live.last_error.clone(),
            dataset: data.kind,
            class_names: class_names(data.kind),
            train_images: data.train.len(),
            test_images: data.test.len(),
        }
    }

    /// The model `/api/predict` uses now.
    pub fn model(&self) -> Option<Arc<ServeModel>> {
        self.lock().model.clone()
    }

    /// Makes `model` the current one, predicts the grid with it and tells the pages.
    pub fn set_model(&self, model: ServeModel) {
        let predicted = self.predict_samples(&model);
        let model = Arc::new(model);
        self.update(|live| {
            live.model = Some(model.clone());
            let mut events = vec![Published::new("model", &model.info())];
            match predicted {
                Ok(Some(p)) => {
                    live.samples_predicted = Some(p.clone());
                    events.push(Published::new("samples", &SamplesEvent { predicted: p }));
                }
                Ok(None) => live.samples_predicted = None,
                Err(e) => live.last_error = Some(format!("could not predict the test digits: {e}")),
            }
            events
        });
    }

    /// The model's predictions for the grid; None for a model of another data set (its classes
    /// are not these images').
    fn predict_samples(&self, model: &ServeModel) -> crate::Result<Option<Vec<u8>>> {
        let data = self.data();
        if model.model().dataset != data.kind {
            return Ok(None);
        }
        let n = SAMPLE_COUNT.min(data.test.len());
        model.classify(&data.test.images[..n * PIXELS]).map(Some)
    }

    /// The grid: the first test images of the current data set, their labels and class names,
    /// and the current model's predictions.
    pub fn samples(&self) -> SamplesResponse {
        SamplesResponse::first(&self.data(), SAMPLE_COUNT, self.lock().samples_predicted.clone())
    }

    /// Whether the server is shutting down (new runs are refused then).
    pub(crate) fn is_shutting_down(&self) -> bool {
        *self.inner.shutdown.borrow()
    }

    /// A new run's number: 1, 2, 3, ...
    pub(crate) fn next_run_id(&self) -> RunId {
        self.inner.next_run.fetch_add(1, Ordering::Relaxed)
    }

    /// Asks the run in flight to stop after its current batch; 409 when there is none.
    pub fn stop_run(&self) -> Result<RunId, ApiError> {
        let live = self.lock();
        match (&live.stop, live.training) {
            (Some(stop), true) => {
                stop.store(true, Ordering::Relaxed);
                Ok(live.run.unwrap_or(0))
            }
            _ => Err(ApiError::conflict("no training run is in progress")),
        }
    }

    /// A receiver that turns `true` when the server shuts down.
    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.inner.shutdown.subscribe()
    }

    /// Ends every event stream and asks the run in flight to stop after its current batch;
    /// new runs are refused from now on. Does not wait: see [`AppState::wait_for_run`].
    pub fn shutdown(&self) {
        self.inner.shutdown.send_replace(true);
        if let Some(stop) = &self.lock().stop {
            stop.store(true, Ordering::Relaxed);
        }
    }

    /// Waits until the last run's thread has ended (returns at once when there is none).
    pub fn wait_for_run(&self) {
        let thread = self.lock().thread.take();
        if let Some(t) = thread {
            let _ = t.join();
        }
    }

    /// The GPU context, made on first use and kept for later runs; made again when the device
    /// was lost (a driver reset, a GPU removed), so the next run works.
    pub(crate) fn gpu(&self) -> Result<Arc<GpuContext>, common::GpuError> {
        let mut slot = self.inner.gpu.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(ctx) = slot.as_ref().filter(|ctx| !ctx.is_lost()) {
            return Ok(ctx.clone());
        }
        let ctx = Arc::new(GpuContext::new()?);
        *slot = Some(ctx.clone());
        Ok(ctx)
    }

    /// Whether a run is in flight (for tests and the shutdown path).
    pub fn is_training(&self) -> bool {
        self.lock().training
    }
}

/// One event, serialized once and shared by every connected page.
#[derive(Debug, Clone, PartialEq)]
pub struct Published {
    pub name: &'static str,
    pub json: String,
}

impl Published {
    pub fn new(name: &'static str, payload: &impl Serialize) -> Self {
        // Serializing these plain structs cannot fail (no maps with non-string keys, no
        // custom serializers); an empty object keeps the stream well-formed regardless.
        let json = serde_json::to_string(payload).unwrap_or_else(|_| "{}".to_string());
        Self { name, json }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Dataset;

    #[test]
    fn a_lost_gpu_context_is_made_again_for_the_next_run() {
        let set = Dataset { images: vec![0; 2 * PIXELS], labels: vec![0, 1] };
        let state = AppState::new(Arc::new(Mnist { train: set.clone(), test: set, kind: DatasetKind::Mnist }), None);
        let first = state.gpu().unwrap();
        assert!(Arc::ptr_eq(&first, &state.gpu().unwrap()), "kept between runs");
        first.device.destroy();
        assert!(first.wait().is_err() && first.is_lost());
        let second = state.gpu().unwrap();
        assert!(!Arc::ptr_eq(&first, &second) && !second.is_lost());
        second.wait().unwrap();
    }
}
