//! What the page sends and what it gets back: the JSON bodies of the API, and the checks that
//! turn a request into something safe to run.
//!
//! Validation happens in two steps. serde rejects the wrong *shape* (unknown fields, a string
//! where a number belongs, a pixel of 300: `u8` cannot hold it), and `validate` rejects values
//! in range for their type but not for training (a learning rate of 0, 500 epochs). Both end up
//! as a 4xx answer with a sentence that names the field (see `error.rs`).

use gpu_layers::Layer;
use serde::{Deserialize, Serialize};

use super::error::ApiError;
use crate::train::{DeviceChoice, OptimizerChoice, Schedule, TrainConfig};

/// Limits on a training request. Generous enough for real use, small enough that one request
/// cannot tie the server up for days or ask for gigabytes.
pub const MAX_HIDDEN_LAYERS: usize = 4;
pub const MAX_HIDDEN_SIZE: usize = 4096;
pub const MAX_EPOCHS: usize = 100;
pub const MAX_BATCH_SIZE: usize = 8192;
pub const MAX_LR: f32 = 10.0;

/// Limits on a drawing sent to `/api/predict`.
pub const MIN_SIDE: usize = 8;
pub const MAX_SIDE: usize = 1024;

/// The body of `POST /api/train`. Every field may be left out; the defaults are the command
/// line's (`mnist train`: Adam, lr 0.001, cosine schedule), except `epochs`, which is 5 here so
/// a first click finishes soon. The choices are the command line's types, with the same names
/// (`"optimizer": "sgd"` is `--optimizer sgd`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrainRequest {
    /// Hidden layer sizes, first to last; `[]` is softmax regression.
    pub hidden: Vec<usize>,
    /// Every layer in stage 04's text form (`784-256-relu-dropout0.2-10`); when given, it
    /// replaces `hidden`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layers: Option<String>,
    pub lr: f32,
    pub batch_size: usize,
    pub epochs: usize,
    pub optimizer: OptimizerChoice,
    /// SGD's momentum (ignored by Adam), in `[0, 1)`.
    pub momentum: f32,
    pub schedule: Schedule,
    pub device: DeviceChoice,
    /// Train on the first `limit_train` training images only (all 60,000 when absent).
    pub limit_train: Option<usize>,
    pub seed: u64,
}

impl Default for TrainRequest {
    fn default() -> Self {
        Self {
            hidden: vec![128],
            layers: None,
            lr: 0.001,
            batch_size: 64,
            epochs: 5,
            optimizer: OptimizerChoice::Adam,
            momentum: 0.9,
            schedule: Schedule::Cosine,
            device: DeviceChoice::Auto,
            limit_train: None,
            seed: 42,
        }
    }
}

impl TrainRequest {
    /// Checks every value against its range; `train_len` is the size of the training set.
    pub fn validate(&self, train_len: usize) -> Result<(), ApiError> {
        let bad = |msg: String| Err(ApiError::invalid(msg));
        if self.hidden.len() > MAX_HIDDEN_LAYERS {
            return bad(format!(
                "hidden: {} hidden layers requested; at most {MAX_HIDDEN_LAYERS} are allowed",
                self.hidden.len()
            ));
        }
        if let Some(&h) = self.hidden.iter().find(|&&h| h == 0 || h > MAX_HIDDEN_SIZE) {
            return bad(format!("hidden: a layer of {h} units; each hidden layer needs 1 to {MAX_HIDDEN_SIZE} units"));
        }
        if let Some(text) = &self.layers {
            let layers = self.layer_list().map_err(|e| ApiError::invalid(format!("layers: {e}")))?;
            let linears: Vec<usize> = layers
                .iter()
                .filter_map(|l| match l {
                    Layer::Linear { outputs, .. } => Some(*outputs),
                    _ => None,
                })
                .collect();
            if linears.len() > MAX_HIDDEN_LAYERS + 1 {
                return bad(format!("layers: `{text}` has {} hidden layers; at most {MAX_HIDDEN_LAYERS} are allowed", linears.len() - 1));
            }
            if let Some(&h) = linears.iter().find(|&&h| h > MAX_HIDDEN_SIZE) {
                return bad(format!("layers: a layer of {h} units; each layer needs 1 to {MAX_HIDDEN_SIZE} units"));
            }
        }
        if !self.lr.is_finite() || self.lr <= 0.0 || self.lr > MAX_LR {
            return bad(format!("lr: {} is not a learning rate; use a number in (0, {MAX_LR}], e.g. 0.001 for Adam or 0.05 for SGD", self.lr));
        }
        if self.batch_size == 0 || self.batch_size > MAX_BATCH_SIZE {
            return bad(format!("batch_size: {} is out of range; use 1 to {MAX_BATCH_SIZE}", self.batch_size));
        }
        if self.epochs == 0 || self.epochs > MAX_EPOCHS {
            return bad(format!("epochs: {} is out of range; use 1 to {MAX_EPOCHS}", self.epochs));
        }
        if !self.momentum.is_finite() || !(0.0..1.0).contains(&self.momentum) {
            return bad(format!("momentum: {} is out of range; use a number in [0, 1), e.g. 0.9", self.momentum));
        }
        match self.limit_train {
            Some(n) if n == 0 || n > train_len => {
                return bad(format!("limit_train: {n} training images requested; use 1 to {train_len}"));
            }
            _ => {}
        }
        Ok(())
    }

    /// The layers this request trains: `layers` parsed, else the MLP of `hidden`.
    pub fn layer_list(&self) -> Result<Vec<Layer>, gpu_layers::LayersError> {
        match &self.layers {
            Some(text) => gpu_layers::sequential::parse_layers(text),
            None => Ok(crate::train::TrainConfig::mlp(&self.hidden)),
        }
    }

    /// The request as the training loop's configuration: `mnist train`'s defaults for what the
    /// page does not set (steps per GPU submission), plus a model after every epoch for the grid
    /// and the drawing pad.
    pub fn config(&self) -> TrainConfig {
        TrainConfig {
            // validate() has parsed the list already; a bad one fails TrainConfig::validate.
            layers: self.layer_list().unwrap_or_default(),
            batch_size: self.batch_size,
            epochs: self.epochs,
            optimizer: self.optimizer.optimizer(self.lr, self.momentum),
            schedule: self.schedule,
            seed: self.seed,
            epoch_models: true,
            ..TrainConfig::default()
        }
    }

    /// The number of training images this request uses.
    pub fn train_images(&self, train_len: usize) -> usize {
        self.limit_train.unwrap_or(train_len).min(train_len)
    }
}

/// The body of `POST /api/stop`: an empty object.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StopRequest {}

/// The body of `POST /api/predict`: a grey image, row-major, `width * height` bytes. Either
/// polarity works (the preprocessing inverts light backgrounds), any size from 8x8 to 1024x1024.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PredictRequest {
    pub width: usize,
    pub height: usize,
    pub pixels: Vec<u8>,
}

impl PredictRequest {
    pub fn validate(&self) -> Result<(), ApiError> {
        for (name, v) in [("width", self.width), ("height", self.height)] {
            if !(MIN_SIDE..=MAX_SIDE).contains(&v) {
                return Err(ApiError::invalid(format!("{name}: {v} is out of range; use {MIN_SIDE} to {MAX_SIDE}")));
            }
        }
        let want = self.width * self.height;
        if self.pixels.len() != want {
            return Err(ApiError::invalid(format!(
                "pixels: {} values for a {}x{} image; expected width * height = {want} grey values 0-255",
                self.pixels.len(),
                self.width,
                self.height
            )));
        }
        Ok(())
    }
}

/// The answer of `POST /api/predict`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PredictResponse {
    /// `P(digit = d)` for d = 0..9; sums to 1.
    pub probabilities: Vec<f32>,
    /// The most probable digit.
    pub digit: usize,
    /// The 28x28 grey image the network saw after preprocessing (0 = background).
    pub input: Vec<u8>,
}

/// The answer of `GET /api/samples`: the test digits of the grid, and the current model's
/// predictions for them (`null` without a model).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SamplesResponse {
    /// Which test images these are.
    pub indices: Vec<usize>,
    /// `[n, 784]` grey bytes, row-major.
    pub pixels: Vec<u8>,
    pub labels: Vec<u8>,
    pub predicted: Option<Vec<u8>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(r: TrainRequest) -> String {
        r.validate(60_000).unwrap_err().to_string()
    }

    #[test]
    fn defaults_are_valid() {
        TrainRequest::default().validate(60_000).unwrap();
    }

    #[test]
    fn each_range_has_a_message_naming_the_field() {
        let d = TrainRequest::default;
        assert!(err(TrainRequest { lr: 0.0, ..d() }).starts_with("lr:"));
        assert!(err(TrainRequest { lr: f32::NAN, ..d() }).starts_with("lr:"));
        assert!(err(TrainRequest { lr: 11.0, ..d() }).starts_with("lr:"));
        assert!(err(TrainRequest { batch_size: 0, ..d() }).starts_with("batch_size:"));
        assert!(err(TrainRequest { epochs: 0, ..d() }).starts_with("epochs:"));
        assert!(err(TrainRequest { epochs: 101, ..d() }).starts_with("epochs:"));
        assert!(err(TrainRequest { hidden: vec![128, 0], ..d() }).starts_with("hidden:"));
        assert!(err(TrainRequest { hidden: vec![8; 5], ..d() }).starts_with("hidden:"));
        assert!(err(TrainRequest { momentum: 1.0, ..d() }).starts_with("momentum:"));
        assert!(err(TrainRequest { limit_train: Some(0), ..d() }).starts_with("limit_train:"));
        assert!(err(TrainRequest { limit_train: Some(60_001), ..d() }).starts_with("limit_train:"));
        // Softmax regression (no hidden layer) is allowed.
        TrainRequest { hidden: vec![], ..d() }.validate(60_000).unwrap();
        // A layer list instead of hidden sizes.
        let layers = |t: &str| TrainRequest { layers: Some(t.into()), ..d() };
        layers("784-256-relu-dropout0.2-10").validate(60_000).unwrap();
        assert!(err(layers("784-256-relx-10")).starts_with("layers:"));
        assert!(err(layers("784-5000-relu-10")).starts_with("layers:"));
        assert!(err(layers("784-8-8-8-8-8-10")).starts_with("layers:"));
    }

    #[test]
    fn predict_checks_the_pixel_count() {
        let ok = PredictRequest { width: 8, height: 10, pixels: vec![0; 80] };
        ok.validate().unwrap();
        let short = PredictRequest { pixels: vec![0; 79], ..ok.clone() };
        assert!(short.validate().unwrap_err().to_string().contains("expected width * height = 80"));
        let tiny = PredictRequest { width: 4, height: 4, pixels: vec![0; 16] };
        assert!(tiny.validate().unwrap_err().to_string().starts_with("width:"));
    }
}
