//! A training run as the web page asks for it: the JSON body of `mnist serve`'s
//! `POST /api/train`, which the page's in-browser trainer (`05-mnist/wasm`) reads too, so the
//! form means the same thing wherever it trains. The choices are the command line's types.

use std::sync::Arc;

use gpu_layers::{Layer, NetworkSpec};
use serde::{Deserialize, Serialize};

use super::{DeviceChoice, LossChoice, OptimizerChoice, Schedule, TrainConfig, network};
use crate::data::Mnist;
use crate::datasets::DatasetKind;

/// Limits on a training request. Generous enough for real use, small enough that one request
/// cannot tie the server up for days or ask for gigabytes.
pub const MAX_HIDDEN_LAYERS: usize = 4;
pub const MAX_HIDDEN_SIZE: usize = 4096;
pub const MAX_EPOCHS: usize = 100;
pub const MAX_BATCH_SIZE: usize = 8192;
pub const MAX_LR: f32 = 10.0;
pub const MAX_STEPS_PER_SUBMIT: usize = 10_000;

/// The body of `POST /api/train`. Every field may be left out; the defaults are the command
/// line's (`mnist train`: 784-128-relu-10, cross-entropy, Adam, lr 0.001, cosine schedule,
/// MNIST), except `epochs`, which is 5 here so a first click finishes soon. The choices are the
/// command line's types, with the same names (`"optimizer": "sgd"` is `--optimizer sgd`,
/// `"loss": "mse"` is `--loss mse`, `"dataset": "fashion"` is `--dataset fashion`, `"layers"`
/// is `--layers` and `"hidden": [512, 256]` is `--hidden 512,256`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrainRequest {
    /// Hidden layer sizes, first to last; `[]` is softmax regression.
    pub hidden: Vec<usize>,
    /// Every layer in stage 04's text form (`784-256-relu-dropout0.2-10`); when given, it
    /// replaces `hidden`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layers: Option<String>,
    /// The loss after the last layer.
    pub loss: LossChoice,
    /// The data set to train and test on.
    pub dataset: DatasetKind,
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
    /// Evaluate on the first `limit_test` test images only (all 10,000 when absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_test: Option<usize>,
    pub seed: u64,
    /// GPU only: training steps per submission (`mnist train --steps-per-submit`; 100 when
    /// absent). The page's measuring mode (`measure.html`) varies it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steps_per_submit: Option<usize>,
}

impl Default for TrainRequest {
    fn default() -> Self {
        Self {
            hidden: vec![128],
            layers: None,
            loss: LossChoice::CrossEntropy,
            dataset: DatasetKind::Mnist,
            lr: 0.001,
            batch_size: 64,
            epochs: 5,
            optimizer: OptimizerChoice::Adam,
            momentum: 0.9,
            schedule: Schedule::Cosine,
            device: DeviceChoice::Auto,
            limit_train: None,
            limit_test: None,
            seed: 42,
            steps_per_submit: None,
        }
    }
}

impl TrainRequest {
    /// Checks every value against its range, for a training set of `train_len` and a test set of `test_len` images.
    /// `Err` names the field (`mnist serve` answers it as a 400).
    pub fn validate(&self, train_len: usize, test_len: usize) -> Result<(), String> {
        self.validate_before_loading()?;
        for (field, limit, len) in [("limit_train", self.limit_train, train_len), ("limit_test", self.limit_test, test_len)] {
            match limit {
                Some(n) if n > len => return Err(format!("{field}: {n} images requested; use 1 to {len}")),
                _ => {}
            }
        }
        Ok(())
    }

    /// Every check that needs no data set: all of [`TrainRequest::validate`] but the upper
    /// bounds of `limit_train` and `limit_test` (the sizes of the sets, not loaded yet), whose
    /// lower bound it does check ("use at least 1").
    pub fn validate_before_loading(&self) -> Result<(), String> {
        let bad = |msg: String| Err(msg);
        self.check_network()?;
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
        match self.steps_per_submit {
            Some(n) if n == 0 || n > MAX_STEPS_PER_SUBMIT => {
                return bad(format!("steps_per_submit: {n} is out of range; use 1 to {MAX_STEPS_PER_SUBMIT}"));
            }
            _ => {}
        }
        for (field, limit) in [("limit_train", self.limit_train), ("limit_test", self.limit_test)] {
            if limit == Some(0) {
                return bad(format!("{field}: 0 images requested; use at least 1 (or leave it out for all of them)"));
            }
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
            loss: self.loss.loss(),
            batch_size: self.batch_size,
            epochs: self.epochs,
            optimizer: self.optimizer.optimizer(self.lr, self.momentum),
            schedule: self.schedule,
            seed: self.seed,
            epoch_models: true,
            steps_per_submit: self.steps_per_submit.unwrap_or(TrainConfig::default().steps_per_submit),
            ..TrainConfig::default()
        }
    }

    /// The number of training images this request uses.
    pub fn train_images(&self, train_len: usize) -> usize {
        self.limit_train.unwrap_or(train_len).min(train_len)
    }

    /// The network this request trains, checked: `layers` (or `hidden`) within the limits, the
    /// shapes layer by layer, 784 inputs and 10 classes, with `loss`. `Err` names the field
    /// and, for a shape, the layer (`layers: layer 3 (Linear(64, 10)) takes 64 inputs, ...`).
    /// The page calls it as the visitor types ([`TrainRequest::validate`] calls it too).
    pub fn check_network(&self) -> Result<NetworkSpec, String> {
        let bad = |msg: String| Err(msg);
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
            let layers = self.layer_list().map_err(|e| format!("layers: {e}"))?;
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
        // The shapes, layer by layer (the message names the layer), and 784 in, 10 out.
        let field = if self.layers.is_some() { "layers" } else { "hidden" };
        let layers = self.layer_list().map_err(|e| format!("{field}: {e}"))?;
        network(&layers, self.loss.loss()).map_err(|e| format!("{field}: {e}"))
    }

    /// The network this request trains, as the model file and the page write it
    /// (`784-256-relu-dropout0.2-10`, with ` mse` after it for that loss), or why it cannot.
    pub fn describe_network(&self) -> Result<String, String> {
        self.check_network().map(|spec| spec.describe())
    }

    /// The part of `all` this request trains and evaluates on (`all` itself when it asks for
    /// every image).
    pub fn data(&self, all: &Arc<Mnist>) -> Arc<Mnist> {
        let train = self.train_images(all.train.len());
        let test = self.limit_test.unwrap_or(all.test.len()).min(all.test.len());
        if train == all.train.len() && test == all.test.len() {
            return all.clone();
        }
        Arc::new(Mnist { train: all.train.take(train), test: all.test.take(test), kind: all.kind })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(r: TrainRequest) -> String {
        r.validate(60_000, 10_000).unwrap_err()
    }

    #[test]
    fn defaults_are_valid() {
        TrainRequest::default().validate(60_000, 10_000).unwrap();
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
        assert!(err(TrainRequest { steps_per_submit: Some(0), ..d() }).starts_with("steps_per_submit:"));
        assert_eq!(TrainRequest { steps_per_submit: Some(7), ..d() }.config().steps_per_submit, 7);
        assert!(err(TrainRequest { momentum: 1.0, ..d() }).starts_with("momentum:"));
        assert!(err(TrainRequest { limit_train: Some(0), ..d() }).starts_with("limit_train:"));
        assert!(err(TrainRequest { limit_train: Some(60_001), ..d() }).starts_with("limit_train:"));
        assert!(err(TrainRequest { limit_test: Some(10_001), ..d() }).starts_with("limit_test:"));
        assert!(err(TrainRequest { limit_test: Some(10_001), ..d() }).contains("use 1 to 10000"));
        // Softmax regression (no hidden layer) is allowed.
        TrainRequest { hidden: vec![], ..d() }.validate(60_000, 10_000).unwrap();
        // A layer list instead of hidden sizes.
        let layers = |t: &str| TrainRequest { layers: Some(t.into()), ..d() };
        layers("784-256-relu-dropout0.2-10").validate(60_000, 10_000).unwrap();
        assert!(err(layers("784-256-relx-10")).starts_with("layers:"));
        assert!(err(layers("784-5000-relu-10")).starts_with("layers:"));
        assert!(err(layers("784-8-8-8-8-8-10")).starts_with("layers:"));
    }

    #[test]
    fn counts_checked_before_the_data_is_loaded_name_a_readable_range() {
        for field in ["limit_train", "limit_test"] {
            let req: TrainRequest = serde_json::from_str(&format!(r#"{{"{field}":0}}"#)).unwrap();
            let err = req.validate_before_loading().unwrap_err();
            assert!(err.starts_with(&format!("{field}:")) && err.contains("use at least 1"), "{err}");
            assert!(!err.contains(&usize::MAX.to_string()), "{err}");
        }
        // The sizes of the sets are not known yet: any positive count passes here.
        TrainRequest { limit_train: Some(usize::MAX), ..TrainRequest::default() }.validate_before_loading().unwrap();
    }

    #[test]
    fn layer_lists_are_checked_layer_by_layer_with_the_layer_named() {
        let d = TrainRequest::default;
        let layers = |t: &str| TrainRequest { layers: Some(t.into()), ..d() };
        for (text, want) in [
            ("784-128-relu-dropout1.5-10", "layer 3 (Dropout(1.5))"),
            ("784-128-relu-dropoutx-10", "`dropoutx`: `x` is not a probability"),
            ("784-128-relu-relx-10", "`relx` is not a layer"),
            ("784-128-relu--10", "part 4 is empty"),
            ("784-128-relu-12", "10 classes"),
            ("100-10", "784 pixels"),
            ("relu", "no linear layer"),
        ] {
            let e = err(layers(text));
            assert!(e.starts_with("layers: ") && e.contains(want), "{text}: {want:?} not in {e:?}");
        }
        // A good list, with each loss; the description is the model file's.
        let ok = layers("784-256-relu-dropout0.2-128-relu-10");
        ok.validate(60_000, 10_000).unwrap();
        assert_eq!(ok.describe_network().unwrap(), "784-256-relu-dropout0.2-128-relu-10");
        let mse = TrainRequest { loss: LossChoice::Mse, ..layers("784-10") };
        mse.validate(60_000, 10_000).unwrap();
        assert_eq!(mse.describe_network().unwrap(), "784-10 mse");
        assert_eq!(mse.config().loss, gpu_layers::Loss::Mse);
        // The short form describes the same network as its long one.
        let short = TrainRequest { hidden: vec![256, 128], ..d() };
        assert_eq!(short.describe_network().unwrap(), "784-256-relu-128-relu-10");
        assert_eq!(short.config().layers, layers("784-256-relu-128-relu-10").config().layers);
    }

    #[test]
    fn the_json_names_are_the_command_lines() {
        let req: TrainRequest =
            serde_json::from_str(r#"{"layers": "784-64-relu-10", "loss": "mse", "dataset": "fashion"}"#).unwrap();
        assert_eq!((req.loss, req.dataset), (LossChoice::Mse, DatasetKind::Fashion));
        assert_eq!(serde_json::from_str::<TrainRequest>("{}").unwrap(), TrainRequest::default());
        for bad in [r#"{"loss": "hinge"}"#, r#"{"dataset": "cifar"}"#, r#"{"layers": 784}"#] {
            let e = serde_json::from_str::<TrainRequest>(bad).unwrap_err().to_string();
            assert!(e.contains("unknown variant") || e.contains("invalid type"), "{bad}: {e}");
        }
    }

    /// The page's form (`web/index.html`) refuses what `validate` refuses: its `max` attributes,
    /// which the page's own check reads, are these limits.
    #[test]
    fn the_page_form_has_the_same_limits() {
        let html = include_str!("../../web/index.html");
        let max = |id: &str| -> f64 {
            let at = html.find(&format!("id=\"{id}\"")).unwrap_or_else(|| panic!("no field {id} in index.html"));
            let tag = &html[at..at + html[at..].find('>').expect("the tag ends")];
            let value = tag.split("max=\"").nth(1).unwrap_or_else(|| panic!("{id} has no max"));
            value[..value.find('"').expect("quoted")].parse().expect("a number")
        };
        assert_eq!(max("lr"), f64::from(MAX_LR));
        assert_eq!(max("batch_size"), MAX_BATCH_SIZE as f64);
        assert_eq!(max("epochs"), MAX_EPOCHS as f64);
        assert!(max("momentum") < 1.0, "momentum is below 1");
    }
}
