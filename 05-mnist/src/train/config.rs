//! What defines a run: [`TrainConfig`], and the choices the command line and the web page share
//! ([`OptimizerChoice`], [`Schedule`], [`LossChoice`]; the device is in `device.rs`, the data set
//! in `datasets.rs`). Each choice is one enum
//! that both clap (`--optimizer sgd`) and serde (`"optimizer": "sgd"`) read, with the same
//! lower-case names.

use gpu_layers::{Layer, Loss, NetworkSpec, Optimizer};

use crate::data::{CLASSES, PIXELS};
use crate::error::{MnistError, Result};
use crate::model_io::MAX_PARAMETERS;

/// Which optimizer trains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptimizerChoice {
    /// Stochastic gradient descent with momentum (--lr, --momentum).
    Sgd,
    /// Adam (--lr; betas 0.9, 0.999).
    Adam,
}

impl OptimizerChoice {
    /// The learning rate when none is given: 0.05 for SGD, 0.001 for Adam.
    pub fn default_lr(self) -> f32 {
        match self {
            OptimizerChoice::Sgd => 0.05,
            OptimizerChoice::Adam => 0.001,
        }
    }

    /// The optimizer with learning rate `lr`; `momentum` is SGD's (Adam ignores it).
    pub fn optimizer(self, lr: f32, momentum: f32) -> Optimizer {
        match self {
            OptimizerChoice::Sgd => Optimizer::sgd(lr, momentum),
            OptimizerChoice::Adam => Optimizer::adam(lr),
        }
    }
}

/// The loss after the last layer (stage 04's [`Loss`]), as `--loss` and `"loss"` name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LossChoice {
    /// Softmax, then cross-entropy of the label (the usual classifier loss).
    #[default]
    #[value(alias = "ce")]
    #[serde(alias = "ce")]
    CrossEntropy,
    /// Mean squared error against the one-hot label.
    Mse,
}

impl LossChoice {
    pub fn loss(self) -> Loss {
        match self {
            LossChoice::CrossEntropy => Loss::CrossEntropy,
            LossChoice::Mse => Loss::Mse,
        }
    }
}

impl From<Loss> for LossChoice {
    fn from(loss: Loss) -> Self {
        match loss {
            Loss::CrossEntropy => LossChoice::CrossEntropy,
            Loss::Mse => LossChoice::Mse,
        }
    }
}

/// How the learning rate changes from epoch to epoch (set between epochs, never between steps).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Schedule {
    /// The same learning rate for every epoch.
    Constant,
    /// Cosine decay per epoch: epoch e of E (1-based) uses `lr * (1 + cos(pi * (e - 1) / E)) / 2`,
    /// from the full rate down to a few percent of it in the last epoch.
    Cosine,
}

impl Schedule {
    // ANCHOR: cosine
    /// The learning rate of epoch `epoch` (1-based) of `epochs`, starting from `lr`.
    pub fn lr(self, lr: f32, epoch: usize, epochs: usize) -> f32 {
        match self {
            Schedule::Constant => lr,
            Schedule::Cosine => {
                let t = epoch.saturating_sub(1) as f64 / epochs.max(1) as f64;
                (lr as f64 * 0.5 * (1.0 + (std::f64::consts::PI * t).cos())) as f32
            }
        }
    }
    // ANCHOR_END: cosine
}

// ANCHOR: eval_rows
/// Rows per evaluation batch on the CPU unless `--eval-batch` says otherwise: on this 2-core
/// machine one epoch's evaluation took 22-37 ms in batches of 1,000 and 44-71 ms in one batch of
/// 10,000 (README, "Evaluation: the test set in one batch").
pub const CPU_EVAL_ROWS: usize = 1000;

/// The largest evaluation batch on the GPU unless `--eval-batch` says otherwise: MNIST's whole
/// test set. On the H200 one evaluation of the defaults took 0.57 ms in one batch of 10,000,
/// 0.94 ms in batches of 1,000 and 2.01 ms in the training's batches of 64 (README, "Evaluation: the
/// test set in one batch").
pub const GPU_EVAL_ROWS: usize = 10_000;
// ANCHOR_END: eval_rows

/// Everything that defines a run.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainConfig {
    /// The layers, from `Linear(784, ..)` to `Linear(.., 10)` (stage 04's [`Layer`]s; the text
    /// form is `784-128-relu-10`). [`TrainConfig::mlp`] makes the short form (`--hidden`).
    pub layers: Vec<Layer>,
    pub loss: Loss,
    pub batch_size: usize,
    /// Rows per evaluation batch on the test set (the result does not depend on it). `None`:
    /// [`CPU_EVAL_ROWS`] on the CPU; on the GPU the whole test set up to [`GPU_EVAL_ROWS`],
    /// halved until the evaluator's buffers fit the adapter's limits.
    pub eval_batch: Option<usize>,
    pub epochs: usize,
    /// The optimizer and its starting learning rate.
    pub optimizer: Optimizer,
    pub schedule: Schedule,
    /// Seeds the initial parameters and the shuffle of every epoch.
    pub seed: u64,
    /// GPU only: training steps recorded into one submission.
    pub steps_per_submit: usize,
    /// Send [`super::Event::EpochModel`] with the parameters after every epoch (the web page
    /// predicts with the latest model). On the GPU that is one read-back of the parameters per
    /// epoch, outside the timed part.
    pub epoch_models: bool,
    /// GPU only: the precision of the products of layers routed through stage 03's matmul
    /// (wide layers in big batches): f32, or inputs rounded to f16 on the tensor cores.
    pub matmul: MatmulPrecision,
}

/// `--matmul`: the precision of stage 03's products for wide layers on the GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MatmulPrecision {
    /// f32 inputs and sums: results within f32 rounding of the CPU's.
    #[default]
    F32,
    /// Inputs rounded to f16 (a relative 2^-11 each), sums in f32, on the tensor cores where
    /// the adapter has cooperative matrices (else f32).
    F16Inputs,
}

impl MatmulPrecision {
    pub fn precision(self) -> gpu_layers::Precision {
        match self {
            MatmulPrecision::F32 => gpu_layers::Precision::F32,
            MatmulPrecision::F16Inputs => gpu_layers::Precision::F16Inputs,
        }
    }
}

impl Default for TrainConfig {
    /// The defaults of `mnist train`: 784-128-relu-10, batch 64, 10 epochs, Adam lr 0.001 with
    /// a cosine schedule (98.11% to 98.22% test accuracy over four seeds on the CPU; see README).
    fn default() -> Self {
        Self {
            layers: Self::mlp(&[128]),
            loss: Loss::CrossEntropy,
            batch_size: 64,
            eval_batch: None,
            epochs: 10,
            optimizer: OptimizerChoice::Adam.optimizer(OptimizerChoice::Adam.default_lr(), 0.0),
            schedule: Schedule::Cosine,
            seed: 42,
            steps_per_submit: 100,
            epoch_models: false,
            matmul: MatmulPrecision::F32,
        }
    }
}

impl TrainConfig {
    /// Checks every value; the error names the flag.
    pub fn validate(&self) -> Result<()> {
        let bad = |msg: String| Err(MnistError::InvalidArgument(msg));
        if self.batch_size == 0 {
            return bad("--batch-size must be at least 1".into());
        }
        if self.eval_batch == Some(0) {
            return bad("--eval-batch must be at least 1".into());
        }
        if self.epochs == 0 {
            return bad("--epochs must be at least 1".into());
        }
        if self.steps_per_submit == 0 {
            return bad("--steps-per-submit must be at least 1".into());
        }
        let spec = self.spec()?;
        // Weights and biases of every layer, `(in + 1) * out`, counted without overflowing.
        let count = spec.layer_shapes().iter().try_fold(0usize, |sum, &(i, o)| i.checked_add(1)?.checked_mul(o)?.checked_add(sum));
        if count.is_none_or(|n| n > MAX_PARAMETERS) {
            return bad(format!(
                "--layers (or --hidden): the network would have more than {MAX_PARAMETERS} parameters (1 GiB per copy); use narrower layers"
            ));
        }
        self.optimizer.validate().map_err(|e| MnistError::InvalidArgument(format!("{e} (check --lr and --momentum)")))?;
        Ok(())
    }

    /// `Linear(784, hidden[0]), ReLU, ..., Linear(.., 10)`: the layers `--hidden` describes
    /// (`[]` is softmax regression), unchecked ([`TrainConfig::validate`] checks them).
    pub fn mlp(hidden: &[usize]) -> Vec<Layer> {
        let mut widths = vec![PIXELS];
        widths.extend(hidden);
        widths.push(CLASSES);
        let mut layers = Vec::new();
        for (l, w) in widths.windows(2).enumerate() {
            if l > 0 {
                layers.push(Layer::Activation(gpu_layers::Activation::Relu));
            }
            layers.push(Layer::Linear { inputs: w[0], outputs: w[1] });
        }
        layers
    }

    /// The network, checked: the layers' shapes, 784 inputs, 10 classes.
    pub fn spec(&self) -> Result<NetworkSpec> {
        network(&self.layers, self.loss).map_err(|e| MnistError::InvalidArgument(format!("--layers (or --hidden): {e}")))
    }

    /// The starting learning rate.
    pub fn lr(&self) -> f32 {
        self.optimizer.lr()
    }
}

/// `layers` ending in `loss` as a network for 28x28 images and 10 classes, or why not: the
/// error names the layer (`layer 3 (Linear(64, 10)) takes 64 inputs, ...`). The command line
/// puts the flag before it, the web API the field.
pub fn network(layers: &[Layer], loss: Loss) -> std::result::Result<NetworkSpec, String> {
    let spec = NetworkSpec::sequential(layers.to_vec(), loss).map_err(|e| e.to_string())?;
    if spec.input() != PIXELS || spec.output() != CLASSES {
        return Err(format!(
            "the network maps {} inputs to {} outputs; images have 784 pixels and there are \
             10 classes (start with 784, end with 10: 784-128-relu-10)",
            spec.input(),
            spec.output()
        ));
    }
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_schedule_decays_from_the_full_rate() {
        assert_eq!(Schedule::Cosine.lr(0.1, 1, 10), 0.1);
        assert!((Schedule::Cosine.lr(0.1, 6, 10) - 0.05).abs() < 1e-7);
        let last = Schedule::Cosine.lr(0.1, 10, 10);
        assert!(last > 0.0 && last < 0.003, "{last}");
        assert_eq!(Schedule::Constant.lr(0.1, 10, 10), 0.1);
        assert_eq!(Schedule::Cosine.lr(0.1, 1, 1), 0.1);
    }

    #[test]
    fn invalid_configurations_name_the_flag() {
        let ok = TrainConfig::default();
        ok.validate().unwrap();
        let layers = |text: &str| gpu_layers::sequential::parse_layers(text).unwrap();
        let cases: [(TrainConfig, &str); 11] = [
            (TrainConfig { layers: layers("100-10"), ..ok.clone() }, "784 pixels"),
            (
                TrainConfig {
                    layers: vec![
                        Layer::Linear { inputs: 784, outputs: 128 },
                        Layer::Activation(gpu_layers::Activation::Relu),
                        Layer::Linear { inputs: 64, outputs: 10 },
                    ],
                    ..ok.clone()
                },
                "layer 3 (Linear(64, 10)) takes 64 inputs, but layer 1 (Linear(784, 128)) gives 128",
            ),
            (TrainConfig { batch_size: 0, ..ok.clone() }, "--batch-size"),
            (TrainConfig { eval_batch: Some(0), ..ok.clone() }, "--eval-batch"),
            (TrainConfig { epochs: 0, ..ok.clone() }, "--epochs"),
            (TrainConfig { layers: TrainConfig::mlp(&[128, 0]), ..ok.clone() }, "layer 3 (Linear(128, 0))"),
            (TrainConfig { layers: TrainConfig::mlp(&[99_999_999_999]), ..ok.clone() }, "parameters"),
            (TrainConfig { layers: TrainConfig::mlp(&[usize::MAX, usize::MAX]), ..ok.clone() }, "parameters"),
            (TrainConfig { optimizer: Optimizer::sgd(0.0, 0.9), ..ok.clone() }, "--lr"),
            (TrainConfig { optimizer: Optimizer::sgd(0.1, 1.5), ..ok.clone() }, "momentum"),
            (TrainConfig { optimizer: Optimizer::adam(f32::NAN), ..ok.clone() }, "lr"),
        ];
        for (cfg, want) in cases {
            let err = cfg.validate().unwrap_err().to_string();
            assert!(err.contains(want), "{want:?} not in {err:?}");
        }
    }

    #[test]
    fn the_choices_have_the_same_names_on_the_command_line_and_in_json() {
        use clap::ValueEnum;
        fn same<T: ValueEnum + serde::Serialize>() {
            for v in T::value_variants() {
                let cli = v.to_possible_value().unwrap().get_name().to_string();
                assert_eq!(serde_json::to_value(v).unwrap(), serde_json::json!(cli));
            }
        }
        same::<OptimizerChoice>();
        same::<Schedule>();
        same::<LossChoice>();
        same::<crate::datasets::DatasetKind>();
        same::<super::super::DeviceChoice>();
        assert_eq!(serde_json::from_str::<LossChoice>("\"ce\"").unwrap(), LossChoice::CrossEntropy);
        assert_eq!(LossChoice::from_str("ce", true), Ok(LossChoice::CrossEntropy));
        for (choice, loss) in [(LossChoice::CrossEntropy, Loss::CrossEntropy), (LossChoice::Mse, Loss::Mse)] {
            assert_eq!((choice.loss(), LossChoice::from(loss)), (loss, choice));
            assert_eq!(choice.to_possible_value().unwrap().get_name(), loss.name());
        }
        assert_eq!(OptimizerChoice::Sgd.optimizer(0.05, 0.9), Optimizer::sgd(0.05, 0.9));
        assert_eq!(OptimizerChoice::Adam.optimizer(OptimizerChoice::Adam.default_lr(), 0.9), Optimizer::adam(0.001));
    }
}
