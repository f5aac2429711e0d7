//! The JSON the page draws, in one schema for its two sources: the events of a training run
//! and the answers about the model and the test images, as `mnist serve` streams and sends them
//! and as the browser trainer (`05-mnist/wasm`) hands them to the page's callback. Plain serde
//! types, for native and wasm32 builds alike; the server's transport is in `serve/`.
//!
//! `mnist serve` sends each event as a named server-sent event with one JSON object as its data:
//! ```text
//! event: epoch
//! data: {"run":1,"epoch":1,"epochs":5,"train_loss":0.41,...}
//! ```
//! The page listens by name (`EventSource.addEventListener("epoch", ...)`); the browser trainer
//! calls `on_event(name, json)` with the same names and objects, so one set of handlers in
//! `web/app.js` draws both. A new connection to the server first gets a [`Snapshot`], so a page
//! that loads in the middle of a run (or reconnects) sees the whole run so far.

use gpu_layers::Loss;
use serde::{Deserialize, Serialize};

use crate::data::{Mnist, PIXELS};
use crate::datasets::DatasetKind;
use crate::metrics::EpochMetrics;
use crate::model_io::{Model, Outputs, argmax};
use crate::train::{LossChoice, TrainRequest};

/// A run's number, from 1: the server counts its runs, a page counts the runs it trains itself.
pub type RunId = u64;

/// The progress interval (defined by the training loops that keep it): at most this long
/// between two `progress` events of an epoch.
pub use crate::train::PROGRESS_EVERY;

/// How many test images the page's grid shows (the first ones of the test set).
pub const SAMPLE_COUNT: usize = 24;

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
    pub run: RunId,
    pub config: TrainRequest,
    pub adapter: AdapterInfo,
    pub train_images: usize,
    pub test_images: usize,
    pub batches_per_epoch: usize,
}

impl StartEvent {
    /// Run `run` of `config` on `data` (the request's subsets: what the loop trains on).
    pub fn new(run: RunId, config: TrainRequest, adapter: AdapterInfo, data: &Mnist) -> Self {
        let batch = config.batch_size.min(data.train.len()).max(1);
        Self {
            run,
            config,
            adapter,
            train_images: data.train.len(),
            test_images: data.test.len(),
            batches_per_epoch: data.train.len().div_ceil(batch),
        }
    }
}

/// Where the run is inside an epoch: `event: progress`, at most every [`PROGRESS_EVERY`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgressEvent {
    pub run: RunId,
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

impl ProgressEvent {
    /// The page's view of the loop's report `p` in an epoch at learning rate `lr`; `None` while
    /// the loss is not known (the GPU's is NaN until its first read-back): nothing to show yet.
    pub fn new(run: RunId, p: &crate::train::Progress, lr: f32) -> Option<Self> {
        p.loss.is_finite().then_some(Self {
            run,
            epoch: p.epoch,
            batch: p.batch,
            batches: p.batches,
            lr,
            loss: p.loss,
            images_per_sec: p.images_per_sec,
        })
    }
}

/// An epoch ended and was evaluated on the test set: `event: epoch`. The JSON object holds the
/// fields below and, flattened beside them, those of [`EpochMetrics`] (`epoch`, `train_loss`,
/// `train_acc`, `test_loss`, `test_acc`, `seconds`, `images_per_sec`, `eval_seconds`,
/// `record_seconds`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochEvent {
    pub run: RunId,
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

/// The model the page now predicts with: `event: model`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelInfo {
    /// e.g. `784-128-relu-10, run 2 after epoch 3 (test accuracy 96.10%)`.
    pub description: String,
    /// Where it came from: the part of `description` after the layers.
    pub origin: String,
    /// The widths of the hidden layers (`[]` for softmax regression).
    pub hidden: Vec<usize>,
    /// Every layer in the text form `--layers` takes (`784-256-relu-dropout0.2-10`), and the loss.
    pub layers: String,
    pub loss: LossChoice,
    /// The data set it was trained on, and that set's class names by label (what its ten
    /// outputs mean).
    pub dataset: DatasetKind,
    pub class_names: Vec<String>,
}

impl ModelInfo {
    /// `model`, described as `"{layers}, {origin}"` (`origin`: where it came from, e.g.
    /// `run 2, after epoch 3 (test accuracy 96.10%)` or `loaded from model.safetensors`).
    pub fn new(model: &Model, origin: &str) -> Self {
        let spec = &model.spec;
        Self {
            description: format!("{}, {origin}", spec.describe()),
            origin: origin.to_string(),
            hidden: spec.layer_shapes().iter().skip(1).map(|&(i, _)| i).collect(),
            layers: spec.layers_string(),
            loss: spec.loss().into(),
            dataset: model.dataset,
            class_names: class_names(model.dataset),
        }
    }
}

/// A run ended without an error, finished or stopped: `event: done`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DoneEvent {
    pub run: RunId,
    pub stopped: bool,
    pub epochs_done: usize,
    /// One sentence for the status line.
    pub message: String,
}

impl DoneEvent {
    /// Run `run` of `epochs` epochs ended after `epochs_done` of them (`stopped`: by a stop);
    /// `last_test_acc` is the last finished epoch's test accuracy. The message says so: "Stopped
    /// after 2 of 5 epochs. Test accuracy 95.10%." or "Finished 5 epochs. Test accuracy ...".
    pub fn new(run: RunId, stopped: bool, epochs_done: usize, epochs: usize, last_test_acc: Option<f64>) -> Self {
        let acc = last_test_acc.map(|a| format!(" Test accuracy {:.2}%.", 100.0 * a)).unwrap_or_default();
        let message = if stopped {
            format!("Stopped after {epochs_done} of {epochs} epochs.{acc}")
        } else {
            let s = if epochs_done == 1 { "" } else { "s" };
            format!("Finished {epochs_done} epoch{s}.{acc}")
        };
        Self { run, stopped, epochs_done, message }
    }
}

/// A run failed (a diverging loss, a GPU error, a panic caught at the thread's edge):
/// `event: error`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorEvent {
    pub run: RunId,
    pub message: String,
}

/// Everything the page shows, for a new connection to the server (`event: snapshot`) and
/// `GET /api/status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub training: bool,
    /// The current run, or the last one; `null` before the first.
    pub run: Option<RunId>,
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
    pub dataset: DatasetKind,
    pub class_names: Vec<String>,
    pub train_images: usize,
    pub test_images: usize,
}

/// A drawing's classification: the answer of `POST /api/predict`, and of the browser
/// trainer's `predict_drawing`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PredictResponse {
    /// The ten outputs, flattened into the answer with the loss that says what they are:
    /// `"loss": "cross-entropy"` and `"probabilities"` (`P(digit = d)`, summing to 1), or
    /// `"loss": "mse"` and the raw `"outputs"` (scores, not probabilities).
    #[serde(flatten)]
    pub outputs: Outputs,
    /// The class with the largest output.
    pub digit: usize,
    /// The 28x28 grey image the network saw after preprocessing (0 = background).
    pub input: Vec<u8>,
}

impl PredictResponse {
    /// The answer for `input` (the 28x28 image the network saw) and the network's ten outputs
    /// `values`, named after `loss`.
    pub fn new(loss: Loss, values: Vec<f32>, input: Vec<u8>) -> Self {
        Self { digit: argmax(&values) as usize, outputs: Outputs::new(loss, values), input }
    }
}

/// The test images of the grid, and the current model's predictions for them (`null` without
/// a model of their data set): the answer of `GET /api/samples`, and of the browser trainer's
/// `samples`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SamplesResponse {
    /// Which test images these are.
    pub indices: Vec<usize>,
    /// `[n, 784]` grey bytes, row-major.
    pub pixels: Vec<u8>,
    pub labels: Vec<u8>,
    pub predicted: Option<Vec<u8>>,
    /// The data set they come from, and its class names by label (`labels` and `predicted`
    /// index them).
    pub dataset: DatasetKind,
    pub class_names: Vec<String>,
}

impl SamplesResponse {
    /// The first `count` test images of `data` (all of them when there are fewer), with
    /// `predicted`, the model's classes for them.
    pub fn first(data: &Mnist, count: usize, predicted: Option<Vec<u8>>) -> Self {
        let n = count.min(data.test.len());
        Self {
            indices: (0..n).collect(),
            pixels: data.test.images[..n * PIXELS].to_vec(),
            labels: data.test.labels[..n].to_vec(),
            predicted,
            dataset: data.kind,
            class_names: class_names(data.kind),
        }
    }
}

/// The class names of `kind`, by label, as the page shows them.
pub fn class_names(kind: DatasetKind) -> Vec<String> {
    kind.class_names().iter().map(|n| n.to_string()).collect()
}
