//! The server's shared state: the data set, the current model, the run in flight, and the
//! channel that carries events to every connected page.
//!
//! One mutex guards everything that changes ([`Live`]). Events are sent *while holding it*, and
//! a new page subscribes and takes its snapshot under the same lock, so a page never misses an
//! event between its snapshot and its stream, nor sees one twice.
//!
//! Training runs on its own OS thread (`run.rs` starts it and updates this state; this file
//! knows nothing of it); the async handlers only flip flags and read this state, so the server
//! stays responsive while the CPU or the GPU is busy.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use common::GpuContext;
use tokio::sync::{broadcast, watch};

use super::api::SamplesResponse;
use crate::train::TrainRequest;
use super::error::ApiError;
use super::events::{AdapterInfo, EpochEvent, ProgressEvent, Published, SamplesEvent, Snapshot};
use super::model::ServeModel;
use crate::data::{Mnist, PIXELS};

/// How many test digits the page's grid shows.
pub const SAMPLE_COUNT: usize = 24;
/// Events buffered per page; a page that falls further behind gets a fresh snapshot.
const CHANNEL_CAPACITY: usize = 256;

/// Cheap to clone: every handler and the training thread hold one.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

struct Inner {
    data: Arc<Mnist>,
    /// Indices into the test set of the grid's digits.
    sample_indices: Vec<usize>,
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
    pub training: bool,
    pub run: Option<u64>,
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
    /// State for a server on `data`, predicting with `model` until a run makes a new one.
    pub fn new(data: Arc<Mnist>, model: Option<ServeModel>) -> Self {
        let (tx, _) = broadcast::channel(CHANNEL_CAPACITY);
        let (shutdown, _) = watch::channel(false);
        let sample_indices = (0..SAMPLE_COUNT.min(data.test.len())).collect();
        let state = Self {
            inner: Arc::new(Inner {
                data,
                sample_indices,
                tx,
                shutdown,
                live: Mutex::new(Live::default()),
                next_run: AtomicU64::new(1),
                gpu: Mutex::new(None),
            }),
        };
        if let Some(model) = model {
            state.set_model(model);
        }
        state
    }

    pub fn data(&self) -> &Arc<Mnist> {
        &self.inner.data
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
            dataset: self.inner.data.kind,
            class_names: self.inner.data.kind.class_names().iter().map(|n| n.to_string()).collect(),
            train_images: self.inner.data.train.len(),
            test_images: self.inner.data.test.len(),
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
                Ok(p) => {
                    live.samples_predicted = Some(p.clone());
                    events.push(Published::new("samples", &SamplesEvent { predicted: p }));
                }
                Err(e) => live.last_error = Some(format!("could not predict the test digits: {e}")),
            }
            events
        });
    }

    fn predict_samples(&self, model: &ServeModel) -> crate::Result<Vec<u8>> {
        let test = &self.inner.data.test;
        let mut pixels = Vec::with_capacity(self.inner.sample_indices.len() * PIXELS);
        for &i in &self.inner.sample_indices {
            pixels.extend_from_slice(test.image(i));
        }
        model.classify(&pixels)
    }

    /// The grid: its digits, labels, and the current model's predictions.
    pub fn samples(&self) -> SamplesResponse {
        let test = &self.inner.data.test;
        let idx = &self.inner.sample_indices;
        SamplesResponse {
            indices: idx.clone(),
            pixels: idx.iter().flat_map(|&i| test.image(i).iter().copied()).collect(),
            labels: idx.iter().map(|&i| test.labels[i]).collect(),
            predicted: self.lock().samples_predicted.clone(),
        }
    }

    /// Whether the server is shutting down (new runs are refused then).
    pub(crate) fn is_shutting_down(&self) -> bool {
        *self.inner.shutdown.borrow()
    }

    /// A new run's number: 1, 2, 3, ...
    pub(crate) fn next_run_id(&self) -> u64 {
        self.inner.next_run.fetch_add(1, Ordering::Relaxed)
    }

    /// Asks the run in flight to stop after its current batch; 409 when there is none.
    pub fn stop_run(&self) -> Result<u64, ApiError> {
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

    /// The GPU context, made on first use and kept for later runs.
    pub(crate) fn gpu(&self) -> Result<Arc<GpuContext>, common::GpuError> {
        let mut slot = self.inner.gpu.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(ctx) = slot.as_ref() {
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
