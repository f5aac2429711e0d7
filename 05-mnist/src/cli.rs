//! The command line's grammar: `mnist [train] [FLAGS]`, `mnist eval --model PATH`,
//! `mnist predict --model PATH IMAGE...`, `mnist serve`: the clap definitions of every command
//! and flag, and the parsers that refuse bad values. What each command does is in `commands/`.
//!
//! Bad values are refused while parsing, with the flag named and the exit code 2.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use gpu_layers::Layer;

use crate::data_args::{DataArgs, at_least_one};
use crate::train::{DeviceChoice, LossChoice, MatmulPrecision, OptimizerChoice, Schedule, TrainConfig};

#[derive(Debug, Parser)]
#[command(
    name = "mnist",
    version,
    about = "Train an MNIST digit classifier on the GPU (hand-written WGSL kernels) or the CPU.",
    long_about = "Train an MNIST digit classifier on the GPU (hand-written WGSL kernels) or the CPU.\n\n\
                  `mnist` alone trains with the defaults (784-128-10, Adam, cosine schedule, 10 epochs).",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Flags of `train`, the default command.
    #[command(flatten)]
    pub train: TrainArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Train a network (the default command).
    Train(TrainArgs),
    /// Evaluate a saved model on the test set: accuracy and confusion matrix.
    Eval(EvalArgs),
    /// Classify PNG or JPEG images of digits with a saved model.
    Predict(PredictArgs),
    /// A web page to train, watch the loss and accuracy live, and draw digits to classify.
    Serve(crate::serve::ServeArgs),
}

#[derive(Debug, Clone, Args)]
pub struct TrainArgs {
    /// Hidden layer sizes, comma-separated (`512,256` for two layers; `none` for softmax regression).
    #[arg(long, value_name = "SIZES", default_value = "128", value_parser = parse_hidden)]
    pub hidden: Hidden,
    /// Every layer, separated by `-`: a number is a width (the first is the input, 784; each
    /// later one adds a linear layer), and relu, tanh, sigmoid, gelu, dropoutP (dropout0.2)
    /// and flatten add those layers. Example: 784-256-relu-dropout0.2-128-relu-10.
    #[arg(long, value_name = "LAYERS", conflicts_with = "hidden", value_parser = parse_layer_list)]
    pub layers: Option<LayerList>,
    /// The loss after the last layer: cross-entropy (softmax) or mse (against one-hot labels).
    #[arg(long, value_enum, default_value_t = LossChoice::CrossEntropy)]
    pub loss: LossChoice,
    /// Images per training step.
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = at_least_one)]
    pub batch_size: usize,
    /// Images per evaluation batch on the test set (the result does not depend on it)
    /// [default: 1000 on the CPU; on the GPU the whole test set, halved until it fits the adapter].
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    pub eval_batch: Option<usize>,
    /// Passes over the training set.
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = at_least_one)]
    pub epochs: usize,
    /// Learning rate [default: 0.001 for adam, 0.05 for sgd].
    #[arg(long, value_name = "LR", value_parser = positive_f32, allow_negative_numbers = true)]
    pub lr: Option<f32>,
    /// SGD momentum, in [0, 1).
    #[arg(long, value_name = "M", default_value_t = 0.9, value_parser = momentum, allow_negative_numbers = true)]
    pub momentum: f32,
    #[arg(long, value_enum, default_value_t = OptimizerChoice::Adam)]
    pub optimizer: OptimizerChoice,
    /// Learning-rate schedule over the epochs.
    #[arg(long, value_enum, default_value_t = Schedule::Cosine)]
    pub schedule: Schedule,
    /// Seeds the initial weights and the shuffling.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// auto: a real GPU if there is one, else the CPU; gpu: any adapter, even a software one.
    #[arg(long, value_enum, default_value_t = DeviceChoice::Auto)]
    pub device: DeviceChoice,
    /// GPU: training steps recorded into one submission.
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = at_least_one)]
    pub steps_per_submit: usize,
    /// GPU: the limits to ask the adapter for: adapter (its own), webgpu (WebGPU's defaults,
    /// what every browser offers), or some of the adapter's lowered, as KEY=VALUE pairs
    /// (storage-buffers, workgroup-storage, invocations, storage-binding), say to those a
    /// browser granted. The fused kernels are chosen to fit them.
    #[arg(long, value_name = "LIMITS", default_value = "adapter")]
    pub gpu_limits: common::GpuLimits,
    /// GPU: precision of the wide layers' products: f32, or f16-inputs (tensor cores: inputs
    /// rounded to f16, sums in f32; in the fused layer kernels of layers of 256+ outputs, and in
    /// stage 03's matmul for layers routed through it, batch x width of at least 1 Mi).
    #[arg(long, value_enum, default_value_t = MatmulPrecision::F32)]
    pub matmul: MatmulPrecision,
    /// CPU: worker threads (1 to 1024) [default: $RAYON_NUM_THREADS, else every core].
    #[arg(long, value_name = "N", value_parser = thread_count)]
    pub threads: Option<usize>,
    /// Train on the first N training images only.
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    pub limit_train: Option<usize>,
    #[command(flatten)]
    pub data: DataArgs,
    /// Write one JSON object per epoch (epoch, train_loss, train_acc, test_loss, test_acc, seconds, images_per_sec, eval_seconds, record_seconds).
    #[arg(long, value_name = "PATH")]
    pub metrics: Option<PathBuf>,
    /// Save the trained model (safetensors).
    #[arg(long, value_name = "PATH")]
    pub save: Option<PathBuf>,
    /// Draw the loss and accuracy curves (.png or .svg).
    #[arg(long, value_name = "PATH")]
    pub plot: Option<PathBuf>,
    /// Test digits shown in the terminal at the end (0: none).
    #[arg(long, value_name = "N", default_value_t = 6)]
    pub preview: usize,
}

#[derive(Debug, Clone, Args)]
pub struct EvalArgs {
    /// The model to evaluate (written by `train --save`).
    #[arg(long, value_name = "PATH")]
    pub model: PathBuf,
    #[command(flatten)]
    pub data: DataArgs,
}

#[derive(Debug, Clone, Args)]
pub struct PredictArgs {
    /// The model to classify with (written by `train --save`).
    #[arg(long, value_name = "PATH")]
    pub model: PathBuf,
    /// Also draw each image as the network sees it (28x28 after preprocessing).
    #[arg(long)]
    pub show: bool,
    /// PNG or JPEG images, any size, dark ink on light paper or the reverse.
    #[arg(required = true, value_name = "IMAGE")]
    pub images: Vec<PathBuf>,
}

/// Hidden layer sizes (a newtype so clap parses the whole comma list as one value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hidden(pub Vec<usize>);

/// The layers of `--layers` (a newtype so clap keeps the list as one value).
#[derive(Debug, Clone, PartialEq)]
pub struct LayerList(pub Vec<Layer>);

fn parse_layer_list(s: &str) -> Result<LayerList, String> {
    gpu_layers::sequential::parse_layers(s).map(LayerList).map_err(|e| e.to_string())
}

fn parse_hidden(s: &str) -> Result<Hidden, String> {
    let s = s.trim();
    if s.is_empty() || s.eq_ignore_ascii_case("none") {
        return Ok(Hidden(Vec::new()));
    }
    s.split(',')
        .map(|part| match part.trim().parse::<usize>() {
            Ok(0) => Err("a hidden layer needs at least 1 unit (0 given)".to_string()),
            Ok(n) => Ok(n),
            Err(_) => Err(format!("`{}` is not a layer size; use sizes like 128 or 512,256", part.trim())),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Hidden)
}

fn positive_f32(s: &str) -> Result<f32, String> {
    match s.trim().parse::<f32>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        Ok(v) => Err(format!("must be a finite number > 0, got {v}")),
        Err(_) => Err(format!("`{s}` is not a number")),
    }
}

fn thread_count(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=1024).contains(&n) => Ok(n),
        Ok(n) => Err(format!("must be between 1 and 1024, got {n}")),
        Err(_) => Err(format!("`{s}` is not a whole number")),
    }
}

fn momentum(s: &str) -> Result<f32, String> {
    match s.trim().parse::<f32>() {
        Ok(v) if (0.0..1.0).contains(&v) => Ok(v),
        Ok(v) => Err(format!("must be in [0, 1), got {v}")),
        Err(_) => Err(format!("`{s}` is not a number")),
    }
}

impl TrainArgs {
    /// The run these flags describe.
    pub fn config(&self) -> TrainConfig {
        let optimizer = self.optimizer.optimizer(self.lr.unwrap_or(self.optimizer.default_lr()), self.momentum);
        TrainConfig {
            layers: self.layers.as_ref().map_or_else(|| TrainConfig::mlp(&self.hidden.0), |l| l.0.clone()),
            loss: self.loss.loss(),
            batch_size: self.batch_size,
            eval_batch: self.eval_batch,
            epochs: self.epochs,
            optimizer,
            schedule: self.schedule,
            seed: self.seed,
            steps_per_submit: self.steps_per_submit,
            epoch_models: false,
            matmul: self.matmul,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasets::DatasetKind;

    #[test]
    fn hidden_sizes_parse() {
        assert_eq!(parse_hidden("128").unwrap(), Hidden(vec![128]));
        assert_eq!(parse_hidden("512, 256").unwrap(), Hidden(vec![512, 256]));
        assert_eq!(parse_hidden("none").unwrap(), Hidden(vec![]));
        assert!(parse_hidden("128,0").unwrap_err().contains("at least 1"));
        assert!(parse_hidden("12x").unwrap_err().contains("not a layer size"));
    }

    #[test]
    fn layers_loss_and_dataset_parse() {
        let cli = Cli::try_parse_from(["mnist", "--layers", "784-256-relu-dropout0.2-10", "--loss", "mse", "--dataset", "fashion"]).unwrap();
        let cfg = cli.train.config();
        assert_eq!(cfg.spec().unwrap().describe(), "784-256-relu-dropout0.2-10 mse");
        assert_eq!(cli.train.data.dataset, Some(DatasetKind::Fashion));
        // --hidden is the short form of the same thing.
        let cli = Cli::try_parse_from(["mnist", "--hidden", "512,256"]).unwrap();
        assert_eq!(cli.train.config().spec().unwrap().layers_string(), "784-512-relu-256-relu-10");
        for bad in [
            vec!["mnist", "--layers", "784-12x-10"],
            vec!["mnist", "--layers", "784-dropout-10"],
            vec!["mnist", "--layers", "784-10", "--hidden", "64"],
            vec!["mnist", "--loss", "hinge"],
            vec!["mnist", "--dataset", "cifar"],
        ] {
            assert!(Cli::try_parse_from(&bad).is_err(), "{bad:?} was accepted");
        }
        // Parsed, but not an MNIST network: refused before any data is read, naming the flag.
        let cli = Cli::try_parse_from(["mnist", "--layers", "784-128-relu-9"]).unwrap();
        assert!(cli.train.config().validate().unwrap_err().to_string().contains("--layers"));
    }

    #[test]
    fn defaults_and_subcommands() {
        let cli = Cli::try_parse_from(["mnist"]).unwrap();
        assert!(cli.command.is_none());
        assert_eq!(cli.train.config(), TrainConfig::default());
        let cli = Cli::try_parse_from(["mnist", "--optimizer", "sgd", "--epochs", "3"]).unwrap();
        assert_eq!(cli.train.config().optimizer, gpu_layers::Optimizer::sgd(0.05, 0.9));
        let cli = Cli::try_parse_from(["mnist", "predict", "--model", "m.safetensors", "a.png", "b.jpg"]).unwrap();
        assert!(matches!(cli.command, Some(Command::Predict(ref p)) if p.images.len() == 2));
        for bad in [
            vec!["mnist", "--batch-size", "0"],
            vec!["mnist", "--lr", "0"],
            vec!["mnist", "--lr", "-1"],
            vec!["mnist", "--lr", "nan"],
            vec!["mnist", "--epochs", "0"],
            vec!["mnist", "--hidden", "0"],
            vec!["mnist", "--optimizer", "rmsprop"],
            vec!["mnist", "--momentum", "1"],
            vec!["mnist", "predict", "--model", "m"],
        ] {
            assert!(Cli::try_parse_from(&bad).is_err(), "{bad:?} was accepted");
        }
    }
}
