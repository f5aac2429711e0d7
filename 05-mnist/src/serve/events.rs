//! The events the server streams to the page (`GET /api/events`, server-sent events), and the
//! snapshot every new connection gets first.
//!
//! Each event is a named SSE event with one JSON object as its data:
//! ```text
//! event: epoch
//! data: {"run":1,"epoch":1,"epochs":5,"train_loss":0.41,...}
//! ```
//! The page listens by name (`EventSource.addEventListener("epoch", ...)`). A snapshot first
//! means a page that loads in the middle of a run (or reconnects after a network blip) sees the
//! whole run so far, not only what happens next.

use serde::{Deserialize, Serialize};

use crate::train::TrainRequest;
use crate::metrics::EpochMetrics;

/// The processor a run trains on, as the page shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdapterInfo {
    /// `CPU (2 threads, avx512)` or the adapter line, e.g. `NVIDIA H200 (Vulkan, DiscreteGpu, ...)`.
    pub name: String,
    /// True for software adapters (lavapipe, SwiftShader, WARP): "GPU" code running on the CPU.
    pub software: bool,
    /// The loud warning for a software adapter, or a notice that `auto` chose the CPU.
    pub warning: Option<String>,
}

/// A run began: `event: start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StartEvent {
    pub run: u64,
    pub config: TrainRequest,
    pub adapter: AdapterInfo,
    pub train_images: usize,
    pub test_images: usize,
    pub batches_per_epoch: usize,
}

/// Where the run is inside an epoch: `event: progress`, at most every [`crate::train::PROGRESS_EVERY`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgressEvent {
    pub run: u64,
    /// 1-based.
    pub epoch: usize,
    /// Batches done in this epoch, 1..=batches.
    pub batch: usize,
    pub batches: usize,
    /// The learning rate of this epoch (it changes per epoch with the cosine schedule).
    pub lr: f32,
    /// Mean training loss of this epoch so far.
    pub loss: f64,
    pub images_per_sec: f64,
}

/// An epoch ended and was evaluated on the test set: `event: epoch`. The JSON object holds the
/// fields below and, flattened beside them, those of [`EpochMetrics`] (`epoch`, `train_loss`,
/// `train_acc`, `test_loss`, `test_acc`, `seconds`, `images_per_sec`, `eval_seconds`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochEvent {
    pub run: u64,
    pub epochs: usize,
    /// The learning rate the epoch trained with.
    pub lr: f32,
    #[serde(flatten)]
    pub metrics: EpochMetrics,
}

/// The grid's predictions by the model after an epoch (or a loaded one): `event: samples`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SamplesEvent {
    pub predicted: Vec<u8>,
}

/// The model that `/api/predict` now uses: `event: model`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelInfo {
    /// e.g. `784-128-relu-10, run 2 after epoch 3 (test accuracy 96.10%)`.
    pub description: String,
    /// The widths of the hidden layers (`[]` for softmax regression).
    pub hidden: Vec<usize>,
    /// Every layer in the text form `--layers` takes (`784-256-relu-dropout0.2-10`), and the loss.
    pub layers: String,
    pub loss: crate::train::LossChoice,
    /// The data set it was trained on, and that set's class names by label (what its ten
    /// outputs mean).
    pub dataset: crate::datasets::DatasetKind,
    pub class_names: Vec<String>,
}

/// A run ended without an error, finished or stopped: `event: done`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DoneEvent {
    pub run: u64,
    pub stopped: bool,
    pub epochs_done: usize,
    /// One sentence for the status line.
    pub message: String,
}

/// A run failed (a diverging loss, a GPU error, a panic caught at the thread's edge):
/// `event: error`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorEvent {
    pub run: u64,
    pub message: String,
}

/// Everything the page shows, for a new connection (`event: snapshot`) and `GET /api/status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub training: bool,
    /// The current run, or the last one; `null` before the first.
    pub run: Option<u64>,
    pub config: Option<TrainRequest>,
    pub adapter: Option<AdapterInfo>,
    pub model: Option<ModelInfo>,
    /// The finished epochs of `run`.
    pub history: Vec<EpochEvent>,
    /// The latest progress of a run in flight.
    pub progress: Option<ProgressEvent>,
    pub samples_predicted: Option<Vec<u8>>,
    /// How the last run ended, e.g. "Stopped after 2 of 5 epochs.".
    pub last_outcome: Option<String>,
    /// Why the last run failed, if it did.
    pub last_error: Option<String>,
    /// The data set of the grid and of the latest run (`mnist serve --dataset` until a run
    /// asks for another), its class names by label, and its sizes.
    pub dataset: crate::datasets::DatasetKind,
    pub class_names: Vec<String>,
    pub train_images: usize,
    pub test_images: usize,
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
