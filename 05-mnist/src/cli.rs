//! The command line: `mnist [train] [FLAGS]`, `mnist eval --model PATH`,
//! `mnist predict --model PATH IMAGE...`. Parsing (clap) and the three commands; the work is
//! done by the library modules, so the web server can do the same things.
//!
//! Bad values are refused while parsing, with the flag named and the exit code 2; every other
//! error is printed as `error: ...` with the exit code 1 (see `main.rs`). Nothing panics.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use clap::{Args, Parser, Subcommand};
use gpu_layers::{Layer, Network};
use indicatif::{ProgressBar, ProgressStyle};
use rand::SeedableRng;
use rand::seq::index::sample;

use crate::data::{self, Dataset};
use crate::datasets::DatasetKind;
use crate::data_args::{DataArgs, at_least_one, find_data, load_data};
use crate::error::{MnistError, Result};
use crate::metrics::{Confusion, thousands, write_metrics};
use crate::model_io::{argmax, load_model, save_model};
use crate::preview::{PreviewItem, digit_lines, per_row_for, render_grid};
use crate::train::{Device, DeviceChoice, Event, LossChoice, MatmulPrecision, OptimizerChoice, Schedule, TrainConfig, select_device, train};
use crate::{plot, preprocess};

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
    /// Write one JSON object per epoch (epoch, train_loss, train_acc, test_loss, test_acc, seconds, images_per_sec, eval_seconds).
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

/// Builds the thread pool the CPU trainer splits its products over: `threads` workers, else
/// `RAYON_NUM_THREADS` (read by rayon itself), else one per core. Once per process, before any
/// CPU work.
fn build_thread_pool(threads: Option<usize>) -> Result<()> {
    let mut builder = rayon::ThreadPoolBuilder::new();
    if let Some(n) = threads {
        builder = builder.num_threads(n);
    }
    builder
        .build_global()
        .map_err(|e| MnistError::InvalidArgument(format!("--threads: could not start the thread pool ({e})")))?;
    // Stage 02's matmul (the composed reference path) sizes its strips the same way.
    cpu_matrix::set_num_threads(rayon::current_num_threads());
    Ok(())
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

/// Parses `args` and runs the command. `--help`, `--version` and parse errors exit here
/// through clap (parse errors with code 2).
pub fn run(args: impl IntoIterator<Item = std::ffi::OsString>) -> Result<()> {
    let cli = Cli::try_parse_from(args).unwrap_or_else(|e| e.exit());
    match cli.command {
        None => run_train(&cli.train),
        Some(Command::Train(a)) => run_train(&a),
        Some(Command::Eval(a)) => run_eval(&a),
        Some(Command::Predict(a)) => run_predict(&a),
        Some(Command::Serve(a)) => crate::serve::run(&a),
    }
}

fn terminal_columns() -> usize {
    std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()).unwrap_or(100)
}

fn run_train(args: &TrainArgs) -> Result<()> {
    // With --save, the loop hands over the parameters after every epoch, so that Ctrl-C can
    // save the model of the last finished epoch.
    let cfg = TrainConfig { epoch_models: args.save.is_some(), ..args.config() };
    cfg.validate()?;
    build_thread_pool(args.threads)?;
    let spec = cfg.spec()?;
    // Check the output paths before spending minutes training: each must be a file name (not a
    // folder) in a folder that exists and takes new files, and no two may be the same file.
    let outputs = [("--save", &args.save), ("--metrics", &args.metrics), ("--plot", &args.plot)];
    for (i, (flag, path)) in outputs.iter().enumerate() {
        let Some(path) = path else { continue };
        check_writable(flag, path)?;
        if let Some((other, _)) = outputs[..i].iter().find(|(_, p)| p.as_ref() == Some(path)) {
            return Err(MnistError::InvalidArgument(format!("{other} and {flag} name the same file {}", path.display())));
        }
    }
    if let Some(path) = &args.plot {
        plot::check_plot_path(path)?;
    }
    let data = load_data(&args.data, args.limit_train)?;
    let selected = select_device(args.device)?;
    match &selected.device {
        Device::Gpu(ctx) => ctx.print_banner(),
        Device::Cpu => {
            if let Some(n) = selected.notice() {
                eprintln!("{n}");
            }
            eprintln!("device: {}", selected.device.describe());
        }
    }
    if let Device::Gpu(_) = &selected.device {
        match Network::fused_blocker(&spec) {
            None => println!("GPU tapes: the fused kernels"),
            Some(why) => println!("GPU tapes: composed ops, because {why}"),
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    stop_on_ctrl_c(stop.clone());
    println!(
        "model {} ({} parameters), {}, {:?} schedule, batch {}, {} epochs, seed {}",
        spec.describe(),
        thousands(spec.parameter_count() as u64),
        cfg.optimizer.describe(),
        cfg.schedule,
        cfg.batch_size,
        cfg.epochs,
        cfg.seed
    );

    // One bar per epoch, drawn on stderr only when it is a terminal; it fills the width.
    let new_bar = |len: u64, prefix: String| {
        let bar = ProgressBar::new(len);
        if !std::io::stderr().is_terminal() {
            bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
        }
        bar.set_style(
            ProgressStyle::with_template("{prefix} [{wide_bar:.cyan/blue}] {pos}/{len} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        bar.set_prefix(prefix);
        bar
    };
    let mut bar: Option<ProgressBar> = None;
    let epochs = cfg.epochs;
    let mut batches_per_epoch = 0;
    let mut epoch_model = None;
    let outcome = train(&selected.device, &data, &cfg, &stop, &mut |event| match event {
        Event::EpochStart { epoch, batches, lr, step_kernels, .. } => {
            if epoch == 1 && !step_kernels.is_empty() {
                // Stage 04's split step (its update also records a prologue per submission).
                let split = step_kernels.iter().any(|k| k.ends_with(" (split)"));
                let note = if split { "; each update also computes the next batch's x W1" } else { "" };
                println!("GPU step: {} dispatches ({}){note}", step_kernels.len(), step_kernels.join(", "));
            }
            batches_per_epoch = batches;
            bar = Some(new_bar(batches as u64, format!("epoch {epoch}/{epochs} lr {lr:.4}")));
        }
        Event::Progress(p) => {
            if let Some(bar) = &bar {
                let loss = if p.loss.is_nan() { "-".to_string() } else { format!("{:.4}", p.loss) };
                bar.set_message(format!("loss {loss} {} img/s", thousands(p.images_per_sec.round() as u64)));
                bar.set_position(p.batch as u64);
            }
        }
        Event::EpochEnd(m) => {
            if let Some(bar) = bar.take() {
                bar.finish_and_clear();
            }
            println!("{}", m.line(epochs));
        }
        Event::EpochModel(model) => epoch_model = Some(model.clone()),
    });
    if let Some(bar) = bar.take() {
        bar.finish_and_clear();
    }
    let outcome = outcome?;
    let train_seconds: f64 = outcome.history.iter().map(|m| m.seconds).sum();
    if let Some(last) = outcome.history.last() {
        println!(
            "trained {} epochs in {:.2} s ({:.3} s per epoch, training only): test accuracy {:.2}%",
            outcome.history.len(),
            train_seconds,
            train_seconds / outcome.history.len() as f64,
            100.0 * last.test_acc
        );
    }
    let mut outputs = Outputs { save: args.save.as_deref(), metrics: args.metrics.as_deref(), plot: args.plot.as_deref() };
    // Stopped: the model of the last finished epoch, which the metrics describe; before the end
    // of the first epoch, the parameters so far (there are no metrics yet).
    let interrupted = outcome.stopped.then(|| interrupted_message(&outcome, batches_per_epoch, &outputs));
    let model = match (outcome.stopped, epoch_model) {
        (true, Some(m)) => m,
        _ => outcome.model,
    };
    if outcome.history.is_empty() {
        (outputs.metrics, outputs.plot) = (None, None);
    }
    let mut failures = write_outputs(&outputs, &model, &outcome.history);
    if let Some(last) = failures.pop() {
        for e in &failures {
            eprintln!("error: {e}");
        }
        if let Some(msg) = interrupted {
            eprintln!("{msg}");
        }
        return Err(last);
    }
    if let Some(msg) = interrupted {
        return Err(MnistError::Interrupted(msg));
    }
    if args.preview > 0 {
        let mut classifier = model.classifier()?;
        print!("{}", preview(&mut classifier, &data.test, args.preview, cfg.seed, data.kind)?);
    }
    Ok(())
}

/// First Ctrl-C (or SIGTERM): sets `stop`, so the run ends after the current batch (CPU) or
/// submission (GPU) and writes what it has. Second: exits at once, writing nothing more.
/// (The handler runs on its own thread, so it works while the main thread waits for the GPU.)
fn stop_on_ctrl_c(stop: Arc<AtomicBool>) {
    let presses = AtomicUsize::new(0);
    let installed = ctrlc::set_handler(move || {
        if presses.fetch_add(1, Ordering::SeqCst) == 0 {
            stop.store(true, Ordering::SeqCst);
            eprintln!(
                "\nCtrl-C: stopping after the current batch (CPU) or submission (GPU), then writing the \
                 model and metrics of the last finished epoch. Ctrl-C again exits at once."
            );
        } else {
            eprintln!("\nCtrl-C again: exiting now; nothing more is written.");
            std::process::exit(130);
        }
    });
    if let Err(e) = installed {
        eprintln!("warning: Ctrl-C will end the run without saving anything ({e})");
    }
}

/// What a run stopped by Ctrl-C wrote, in one sentence per output kind.
fn interrupted_message(outcome: &crate::train::TrainOutcome, batches: usize, out: &Outputs<'_>) -> String {
    let done = outcome.history.len();
    let at = match outcome.batches_done {
        0 => format!("stopped by Ctrl-C before epoch {} began", done + 1),
        b => format!("stopped by Ctrl-C during epoch {} ({b} of {batches} batches done)", done + 1),
    };
    let written = |path: Option<&Path>, what: &str| path.map(|p| format!("{what} {}", p.display()));
    match outcome.history.last() {
        Some(m) => {
            let files: Vec<String> =
                [written(out.save, "model"), written(out.metrics, "metrics"), written(out.plot, "plot")].into_iter().flatten().collect();
            let files = if files.is_empty() { "nothing to write (no --save, --metrics or --plot)".to_string() } else { files.join(", ") };
            format!("{at}; kept epoch {}, the last finished one (test accuracy {:.2}%): {files}", m.epoch, 100.0 * m.test_acc)
        }
        None => match out.save {
            Some(p) => format!(
                "{at}: no epoch finished, so no metrics; the model as it was then (not evaluated) is in {}",
                p.display()
            ),
            None => format!("{at}: no epoch finished; nothing written"),
        },
    }
}

/// A few seeded random test images with the model's predictions, drawn in half blocks and
/// captioned with `kind`'s class names.
pub fn preview(
    classifier: &mut crate::model_io::Classifier,
    test: &Dataset,
    count: usize,
    seed: u64,
    kind: DatasetKind,
) -> Result<String> {
    let count = count.min(test.len());
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let picks = sample(&mut rng, test.len(), count).into_vec();
    let images: Vec<u8> = picks.iter().flat_map(|&i| test.image(i).iter().copied()).collect();
    let predicted = classifier.predict(&images)?;
    let items: Vec<PreviewItem> = picks
        .iter()
        .zip(&predicted)
        .map(|(&i, &p)| PreviewItem { pixels: test.image(i), predicted: p, label: test.labels[i] })
        .collect();
    let names = kind.class_names();
    Ok(format!("\n{}", render_grid(&items, names, per_row_for(terminal_columns(), &items, names))))
}

/// Fails early (better now than after training) when `path` is a folder, or its folder does
/// not exist or does not take new files (checked by creating and deleting a temporary file).
fn check_writable(flag: &str, path: &Path) -> Result<()> {
    if path.is_dir() {
        return Err(MnistError::InvalidArgument(format!("{flag} {}: that is a folder; give a file name in it", path.display())));
    }
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(MnistError::InvalidArgument(format!(
            "{flag} {}: the folder {} does not exist; create it first",
            path.display(),
            dir.display()
        )));
    }
    tempfile::Builder::new().prefix(".check-").tempfile_in(dir).map_err(|e| MnistError::io(dir, e))?;
    Ok(())
}

/// The files a run writes when it ends.
#[derive(Debug, Clone, Copy, Default)]
pub struct Outputs<'a> {
    pub save: Option<&'a Path>,
    pub metrics: Option<&'a Path>,
    pub plot: Option<&'a Path>,
}

/// Writes the model first (the one output that cannot be made again without training again),
/// then the metrics, then the plot, each atomically, saying where each went. A failure of one
/// never prevents the others: the failures are returned, in that order.
pub fn write_outputs(out: &Outputs<'_>, model: &crate::model_io::Model, history: &[crate::metrics::EpochMetrics]) -> Vec<MnistError> {
    let mut failures = Vec::new();
    let mut write = |what: &str, path: Option<&Path>, f: &dyn Fn(&Path) -> Result<()>| {
        if let Some(path) = path {
            match f(path) {
                Ok(()) => eprintln!("{what}: {}", path.display()),
                Err(e) => failures.push(e),
            }
        }
    };
    write("model", out.save, &|p| save_model(p, model));
    write("metrics", out.metrics, &|p| write_metrics(p, history));
    write("plot", out.plot, &|p| plot::plot_history(p, history));
    failures
}

fn run_eval(args: &EvalArgs) -> Result<()> {
    let model = load_model(&args.model)?;
    let kind = args.data.dataset.unwrap_or(model.dataset);
    let dir = find_data(&args.data, kind)?;
    let mut test = data::load_split(&data::file_path(&dir, data::TEST_IMAGES), &data::file_path(&dir, data::TEST_LABELS))?;
    if let Some(n) = args.data.limit_test {
        test = test.take(n);
    }
    let start = std::time::Instant::now();
    let predicted = model.classifier()?.predict(&test.images)?;
    let confusion = Confusion::new(&test.labels, &predicted);
    println!("model {} ({}) from {}, on the {} test set", model.spec.describe(), model.dataset.title(), args.model.display(), kind.title());
    println!(
        "test accuracy {:.2}% ({} of {} images) in {:.2} s on the CPU",
        100.0 * confusion.accuracy(),
        thousands(confusion.correct()),
        thousands(confusion.total()),
        start.elapsed().as_secs_f64()
    );
    print!("{}", confusion.render());
    if kind != DatasetKind::Mnist {
        let names: Vec<String> = kind.class_names().iter().enumerate().map(|(i, n)| format!("{i} {n}")).collect();
        println!("classes: {}", names.join(", "));
    }
    Ok(())
}

fn run_predict(args: &PredictArgs) -> Result<()> {
    let model = load_model(&args.model)?;
    let mut classifier = model.classifier()?;
    let mut failures = 0;
    for path in &args.images {
        let result = preprocess::preprocess_file(path).and_then(|px| Ok((classifier.probabilities(&px)?, px)));
        match result {
            Ok((probs, px)) => {
                let class = argmax(&probs);
                let names = model.dataset.class_names();
                // A cross-entropy model's outputs are probabilities; an MSE model's are scores
                // (regressions on one-hot targets, possibly negative or above 1): no percent.
                let best = match model.spec.loss() {
                    gpu_layers::Loss::Mse => format!("score {:.3}", probs[class as usize]),
                    gpu_layers::Loss::CrossEntropy => format!("{:.1}%", 100.0 * probs[class as usize]),
                };
                println!("{}: {} ({best})", path.display(), names[class as usize]);
                let row: Vec<String> = probs.iter().enumerate().map(|(d, p)| format!("{}: {p:.4}", names[d])).collect();
                println!("  {}", row.join("  "));
                if args.show {
                    for line in digit_lines(&px) {
                        println!("  |{line}|");
                    }
                }
            }
            Err(e) => {
                eprintln!("error: {e}");
                failures += 1;
            }
        }
    }
    if failures > 0 {
        return Err(MnistError::InvalidArgument(format!("{failures} of {} images could not be classified", args.images.len())));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn one_failing_output_does_not_prevent_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let spec = gpu_layers::NetworkSpec::new(784, &[4], 10).unwrap();
        let model = crate::model_io::Model::new(spec.clone(), spec.init_parameters(1)).unwrap();
        let history = vec![crate::metrics::EpochMetrics {
            epoch: 1,
            train_loss: 0.5,
            train_acc: 0.8,
            test_loss: 0.4,
            test_acc: 0.85,
            seconds: 1.0,
            images_per_sec: 1000.0,
            eval_seconds: 0.1,
        }];
        // The metrics go into a folder that is not there (as if deleted during training).
        let (save, metrics, plot) = (dir.path().join("m.safetensors"), dir.path().join("gone/m.jsonl"), dir.path().join("p.png"));
        let out = Outputs { save: Some(&save), metrics: Some(&metrics), plot: Some(&plot) };
        let failures = write_outputs(&out, &model, &history);
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(failures[0].to_string().contains("gone"), "{}", failures[0]);
        assert_eq!(crate::model_io::load_model(&save).unwrap(), model);
        assert!(std::fs::read(&plot).unwrap().starts_with(b"\x89PNG"));
        // No temporary files are left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn output_paths_are_checked_before_training() {
        let dir = tempfile::tempdir().unwrap();
        let err = check_writable("--metrics", dir.path()).unwrap_err().to_string();
        assert!(err.contains("--metrics") && err.contains("that is a folder"), "{err}");
        let err = check_writable("--save", &dir.path().join("no/such/m.safetensors")).unwrap_err().to_string();
        assert!(err.contains("does not exist"), "{err}");
        check_writable("--save", &dir.path().join("m.safetensors")).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "the check leaves nothing behind");
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
