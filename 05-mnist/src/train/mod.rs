//! The training loop, on the GPU or the CPU, driven by a caller that wants to watch (the
//! command line's progress bar, or the web page's live charts) and maybe stop it.
//!
//! Both devices run the same epochs: the same seeded shuffle, the same initial parameters
//! (stage 04's `NetworkSpec::init_parameters(seed)`), the same batches, the same math. What
//! differs is who does the work between two reports:
//!
//! - CPU: one batch at a time: gather the rows (`data::gather_batch_cpu`), one
//!   `CpuTrainer::train_step`, read the loss. The stop flag is checked after every batch.
//! - GPU: nothing crosses the bus during an epoch except the shuffled order (240 KB, written
//!   once) and, at the end, three numbers. A submission holds `steps_per_submit` steps, each
//!   two recordings: our gather kernel (batch `s` picked by a dynamic uniform offset) and
//!   stage 04's `record_step` (forward, loss, backward, update: a handful of dispatches). The
//!   loss and accuracy are summed on the device and read with `take_metrics` when the epoch
//!   ends, or about every quarter of a second so a slow adapter still shows progress. The
//!   stop flag is checked after every submission. Evaluation runs the same way with
//!   `record_eval` on the test set, in order.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::GpuContext;
use cpu_matrix::Matrix;
use gpu_layers::{CpuTrainer, GpuTrainer, LayersError, Metrics, NetworkSpec, Optimizer};
use rand::SeedableRng;
use rand::seq::SliceRandom;

use crate::data::{CLASSES, Dataset, Mnist, PIXELS, gather_batch_cpu};
use crate::error::{MnistError, Result};
use crate::gather::{DeviceBatches, GatherKernel};
use crate::metrics::EpochMetrics;
use crate::model_io::Model;

/// How often a long epoch reports progress (on the GPU, each report is a read-back).
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// The most parameters a network may have: 2^28 floats is 1 GiB per copy, and training keeps
/// several (weights, gradients, Adam's two moments). `--hidden 99999999999` is refused here
/// instead of aborting on a failed allocation.
pub const MAX_PARAMETERS: usize = 1 << 28;

/// Which processor trains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DeviceChoice {
    /// A real GPU if there is one, else the CPU (a software adapter counts as no GPU).
    Auto,
    /// The best GPU adapter, even a software one (with a loud warning).
    Gpu,
    /// The CPU trainer (stage 04's reference implementation).
    Cpu,
}

/// How the learning rate changes from epoch to epoch (set between epochs, never between steps).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Schedule {
    /// The same learning rate for every epoch.
    Constant,
    /// Cosine decay per epoch: epoch e of E (1-based) uses `lr * (1 + cos(pi * (e - 1) / E)) / 2`,
    /// from the full rate down to a few percent of it in the last epoch.
    Cosine,
}

impl Schedule {
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
}

/// The processor a run uses.
#[derive(Clone)]
pub enum Device {
    Cpu,
    Gpu(Arc<GpuContext>),
}

impl Device {
    /// `CPU` or the adapter line (`NVIDIA H200 (Vulkan, DiscreteGpu, ...)`).
    pub fn describe(&self) -> String {
        match self {
            Device::Cpu => format!("CPU ({} threads)", std::thread::available_parallelism().map_or(1, |n| n.get())),
            Device::Gpu(ctx) => ctx.adapter_line(),
        }
    }
}

/// The device picked for a [`DeviceChoice`], and a notice to show when `auto` fell back to the
/// CPU (None otherwise). For the GPU, call `ctx.print_banner()` (it warns about software).
pub struct Selected {
    pub device: Device,
    pub notice: Option<String>,
}

/// Opens the device for `choice`. `Gpu` fails when there is no adapter at all; `Auto` then
/// (and when the only adapter is a software one) chooses the CPU and says why.
pub fn select_device(choice: DeviceChoice) -> Result<Selected> {
    match choice {
        DeviceChoice::Cpu => Ok(Selected { device: Device::Cpu, notice: None }),
        DeviceChoice::Gpu => Ok(Selected { device: Device::Gpu(Arc::new(GpuContext::new()?)), notice: None }),
        DeviceChoice::Auto => match GpuContext::new() {
            Ok(ctx) if !ctx.is_software() => Ok(Selected { device: Device::Gpu(Arc::new(ctx)), notice: None }),
            Ok(ctx) => Ok(Selected {
                device: Device::Cpu,
                notice: Some(format!(
                    "note: the only GPU adapter is '{}', a software renderer running on the CPU; \
                     training on the CPU instead (use --device gpu to train on it anyway)",
                    ctx.info.name
                )),
            }),
            Err(e) => Ok(Selected {
                device: Device::Cpu,
                notice: Some(format!("note: no GPU found ({e}); training on the CPU")),
            }),
        },
    }
}

/// Everything that defines a run.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainConfig {
    /// Hidden layer sizes (ReLU); `[]` is softmax regression.
    pub hidden: Vec<usize>,
    pub batch_size: usize,
    pub epochs: usize,
    /// The optimizer and its starting learning rate.
    pub optimizer: Optimizer,
    pub schedule: Schedule,
    /// Seeds the initial parameters and the shuffle of every epoch.
    pub seed: u64,
    /// GPU only: training steps recorded into one submission.
    pub steps_per_submit: usize,
    /// Send [`Event::EpochModel`] with the parameters after every epoch (the web page predicts
    /// with the latest model). On the GPU that is one read-back of the parameters per epoch,
    /// outside the timed part.
    pub epoch_models: bool,
}

impl Default for TrainConfig {
    /// The defaults of `mnist train`: 784-128-10, batch 64, 10 epochs, Adam lr 0.001 with a
    /// cosine schedule (98.11% to 98.22% test accuracy over four seeds on the CPU; see README).
    fn default() -> Self {
        Self {
            hidden: vec![128],
            batch_size: 64,
            epochs: 10,
            optimizer: Optimizer::adam(0.001),
            schedule: Schedule::Cosine,
            seed: 42,
            steps_per_submit: 100,
            epoch_models: false,
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
        if self.epochs == 0 {
            return bad("--epochs must be at least 1".into());
        }
        if self.steps_per_submit == 0 {
            return bad("--steps-per-submit must be at least 1".into());
        }
        if let Some(i) = self.hidden.iter().position(|&h| h == 0) {
            return bad(format!("--hidden: layer {} has 0 units; every layer needs at least 1", i + 1));
        }
        // Weights and biases of every layer, `(in + 1) * out`, counted without overflowing.
        let mut sizes = vec![PIXELS];
        sizes.extend(&self.hidden);
        sizes.push(CLASSES);
        let count = sizes.windows(2).try_fold(0usize, |sum, w| w[0].checked_add(1)?.checked_mul(w[1])?.checked_add(sum));
        if count.is_none_or(|n| n > MAX_PARAMETERS) {
            return bad(format!("--hidden: the network would have more than {MAX_PARAMETERS} parameters (1 GiB per copy); use narrower layers"));
        }
        self.optimizer.validate().map_err(|e| MnistError::InvalidArgument(format!("{e} (check --lr and --momentum)")))?;
        Ok(())
    }

    /// The network: 784 inputs, the hidden layers, 10 classes.
    pub fn spec(&self) -> Result<NetworkSpec> {
        NetworkSpec::new(PIXELS, &self.hidden, CLASSES).map_err(|e| MnistError::InvalidArgument(e.to_string()))
    }

    /// The starting learning rate.
    pub fn lr(&self) -> f32 {
        match self.optimizer {
            Optimizer::Sgd { lr, .. } | Optimizer::Adam { lr, .. } => lr,
        }
    }
}

/// What a run reports while it runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Event<'a> {
    /// An epoch (1-based) begins: `batches` steps over `images` images at learning rate `lr`.
    EpochStart { epoch: usize, epochs: usize, batches: usize, images: usize, lr: f32 },
    Progress(Progress),
    /// An epoch ended and was evaluated on the test set.
    EpochEnd(&'a EpochMetrics),
    /// The parameters after that epoch, right after its `EpochEnd` (only with
    /// [`TrainConfig::epoch_models`]).
    EpochModel(&'a Model),
}

/// Where an epoch is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Progress {
    pub epoch: usize,
    /// Batches done (CPU) or submitted (GPU) in this epoch.
    pub batch: usize,
    pub batches: usize,
    /// Mean training loss of this epoch so far (NaN before the GPU's first read-back).
    pub loss: f64,
    pub images_per_sec: f64,
}

/// How a run ended.
pub struct TrainOutcome {
    /// The parameters after the last step.
    pub model: Model,
    /// One entry per completed epoch.
    pub history: Vec<EpochMetrics>,
    /// True when the stop flag ended the run early (the interrupted epoch is not in `history`).
    pub stopped: bool,
}

/// The order of epoch `epoch`'s rows: a permutation of `0..n` seeded by `(seed, epoch)`.
pub fn shuffled_order(n: usize, seed: u64, epoch: usize) -> Vec<u32> {
    let mut order: Vec<u32> = (0..n as u32).collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ (epoch as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    order.shuffle(&mut rng);
    order
}

fn layers(e: LayersError) -> MnistError {
    MnistError::Layers(e.to_string())
}

/// Loss and accuracy sums, in f64.
#[derive(Debug, Clone, Copy, Default)]
struct Sums {
    loss: f64,
    rows: u64,
    correct: u64,
}

impl Sums {
    fn add(&mut self, m: Metrics) {
        self.loss += m.loss_sum;
        self.rows += m.rows;
        self.correct += m.correct;
    }
    fn mean_loss(&self) -> f64 {
        self.loss / self.rows.max(1) as f64
    }
    fn accuracy(&self) -> f64 {
        self.correct as f64 / self.rows.max(1) as f64
    }
}

/// Trains on `data.train`, evaluating on `data.test` after every epoch. `on_event` sees every
/// epoch start, progress report and epoch result; setting `stop` ends the run after the current
/// batch (CPU) or submission (GPU) and returns the model so far.
pub fn train(
    device: &Device,
    data: &Mnist,
    cfg: &TrainConfig,
    stop: &AtomicBool,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<TrainOutcome> {
    cfg.validate()?;
    if data.train.is_empty() || data.test.is_empty() {
        return Err(MnistError::Dataset("the training and the test set must each hold at least one image".into()));
    }
    let spec = cfg.spec()?;
    match device {
        Device::Cpu => train_cpu(&spec, data, cfg, stop, on_event),
        Device::Gpu(ctx) => train_gpu(ctx, &spec, data, cfg, stop, on_event),
    }
}

/// The metrics of a take, with a NaN or infinite loss turned into the error that says what to
/// do (stage 04's `take_metrics` refuses non-finite sums).
fn checked(taken: Result<Metrics, LayersError>, epoch: usize, batch: usize, cfg: &TrainConfig) -> Result<Metrics> {
    match taken {
        Ok(m) if m.loss_sum.is_finite() => Ok(m),
        // Name the starting rate: that is what the user passes with --lr.
        Ok(_) | Err(LayersError::NonFinite { .. }) => Err(MnistError::NonFiniteLoss { epoch, batch, lr: cfg.lr() }),
        Err(e) => Err(layers(e)),
    }
}

fn epoch_metrics(epoch: usize, train: &Sums, test: &Sums, seconds: f64) -> EpochMetrics {
    EpochMetrics {
        epoch,
        train_loss: train.mean_loss(),
        train_acc: train.accuracy(),
        test_loss: test.mean_loss(),
        test_acc: test.accuracy(),
        seconds,
        images_per_sec: train.rows as f64 / seconds.max(1e-9),
    }
}

fn train_cpu(
    spec: &NetworkSpec,
    data: &Mnist,
    cfg: &TrainConfig,
    stop: &AtomicBool,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<TrainOutcome> {
    let batch = cfg.batch_size.min(data.train.len());
    let mut net = CpuTrainer::new(spec, cfg.optimizer, batch.max(1), cfg.seed).map_err(layers)?;
    let n = data.train.len();
    let batches = n.div_ceil(batch);
    let mut history = Vec::new();
    for epoch in 1..=cfg.epochs {
        let lr = cfg.schedule.lr(cfg.lr(), epoch, cfg.epochs);
        net.set_learning_rate(lr).map_err(layers)?;
        on_event(Event::EpochStart { epoch, epochs: cfg.epochs, batches, images: n, lr });
        let order = shuffled_order(n, cfg.seed, epoch);
        let start = Instant::now();
        let mut last_report = start;
        let mut sums = Sums::default();
        for b in 0..batches {
            let first = b * batch;
            let rows = batch.min(n - first);
            let (x, labels) = gather_batch_cpu(&data.train, &order, first, rows);
            let x = Matrix::new(rows, PIXELS, x).map_err(|e| MnistError::Layers(e.to_string()))?;
            net.train_step(&x, &labels).map_err(layers)?;
            sums.add(checked(net.take_metrics(), epoch, b + 1, cfg)?);
            if last_report.elapsed() >= PROGRESS_EVERY / 2 || b + 1 == batches {
                last_report = Instant::now();
                let images_per_sec = sums.rows as f64 / start.elapsed().as_secs_f64().max(1e-9);
                on_event(Event::Progress(Progress { epoch, batch: b + 1, batches, loss: sums.mean_loss(), images_per_sec }));
            }
            if stop.load(Ordering::Relaxed) {
                return Ok(TrainOutcome { model: Model::new(spec.clone(), net.parameters())?, history, stopped: true });
            }
        }
        let seconds = start.elapsed().as_secs_f64();
        let test = evaluate_cpu(&mut net, &data.test, batch, epoch, cfg)?;
        let m = epoch_metrics(epoch, &sums, &test, seconds);
        on_event(Event::EpochEnd(&m));
        if cfg.epoch_models {
            on_event(Event::EpochModel(&Model::new(spec.clone(), net.parameters())?));
        }
        history.push(m);
    }
    Ok(TrainOutcome { model: Model::new(spec.clone(), net.parameters())?, history, stopped: false })
}

fn evaluate_cpu(net: &mut CpuTrainer, test: &Dataset, batch: usize, epoch: usize, cfg: &TrainConfig) -> Result<Sums> {
    let order: Vec<u32> = (0..test.len() as u32).collect();
    let mut first = 0;
    while first < test.len() {
        let rows = batch.min(test.len() - first);
        let (x, labels) = gather_batch_cpu(test, &order, first, rows);
        let x = Matrix::new(rows, PIXELS, x).map_err(|e| MnistError::Layers(e.to_string()))?;
        net.eval_batch(&x, &labels).map_err(layers)?;
        first += rows;
    }
    let mut sums = Sums::default();
    sums.add(checked(net.take_metrics(), epoch, test.len().div_ceil(batch), cfg)?);
    Ok(sums)
}

/// A trainer on the GPU with both splits resident and bound to its input buffers.
struct GpuRun<'a> {
    ctx: &'a GpuContext,
    trainer: GpuTrainer,
    kernel: GatherKernel,
    train: DeviceBatches,
    test: DeviceBatches,
    batch: usize,
}

impl GpuRun<'_> {
    /// Records steps `steps` of `batches` (all of them full batches, or a single short one
    /// after `set_batch`) into one compute pass and submits it. Does not wait.
    fn submit(&self, batches: &DeviceBatches, steps: Range<usize>, training: bool) {
        let label = if training { "train steps" } else { "eval steps" };
        let mut encoder = self.ctx.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(label) });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some(label), timestamp_writes: None });
            for s in steps {
                batches.record(&self.kernel, &mut pass, s);
                if training {
                    self.trainer.record_step(&mut pass);
                } else {
                    self.trainer.record_eval(&mut pass);
                }
            }
        }
        self.ctx.queue.submit([encoder.finish()]);
    }

    /// Runs every step of `batches`: full batches in submissions of `per_submit` steps, then
    /// the short last batch (if any) in its own submission. `after_submit(steps_done)` runs
    /// after each submission and returns false to stop early. Returns the steps submitted and
    /// whether all of them were (false: stopped early).
    fn run_all(
        &self,
        batches: &DeviceBatches,
        training: bool,
        per_submit: usize,
        mut after_submit: impl FnMut(usize) -> Result<bool>,
    ) -> Result<(usize, bool)> {
        let full = batches.len() / self.batch;
        self.trainer.set_batch(self.ctx, self.batch).map_err(layers)?;
        let mut done = 0;
        while done < full {
            let k = per_submit.min(full - done);
            self.submit(batches, done..done + k, training);
            done += k;
            if !after_submit(done)? {
                return Ok((done, false));
            }
        }
        if done < batches.steps() {
            self.trainer.set_batch(self.ctx, batches.rows(done)).map_err(layers)?;
            self.submit(batches, done..done + 1, training);
            done += 1;
            if !after_submit(done)? {
                return Ok((done, false));
            }
        }
        Ok((done, true))
    }
}

fn train_gpu(
    ctx: &GpuContext,
    spec: &NetworkSpec,
    data: &Mnist,
    cfg: &TrainConfig,
    stop: &AtomicBool,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<TrainOutcome> {
    let batch = cfg.batch_size.min(data.train.len());
    let trainer = GpuTrainer::new(ctx, spec, cfg.optimizer, batch, cfg.seed).map_err(layers)?;
    let kernel = GatherKernel::new(ctx)?;
    let train = DeviceBatches::new(ctx, &kernel, &data.train, batch, trainer.input(), trainer.labels(), "train")?;
    let test = DeviceBatches::new(ctx, &kernel, &data.test, batch, trainer.input(), trainer.labels(), "test")?;
    let run = GpuRun { ctx, trainer, kernel, train, test, batch };
    let n = run.train.len();
    let batches = run.train.steps();
    let mut history = Vec::new();
    let parameters = |run: &GpuRun| -> Result<Model> { Model::new(spec.clone(), run.trainer.parameters(ctx).map_err(layers)?) };

    for epoch in 1..=cfg.epochs {
        let lr = cfg.schedule.lr(cfg.lr(), epoch, cfg.epochs);
        run.trainer.set_learning_rate(ctx, lr).map_err(layers)?;
        on_event(Event::EpochStart { epoch, epochs: cfg.epochs, batches, images: n, lr });
        // The order and the rate are queue writes: they land before the epoch's first submit.
        run.train.set_order(ctx, &shuffled_order(n, cfg.seed, epoch))?;
        let start = Instant::now();
        let mut last_read = start;
        let mut sums = Sums::default();
        let (done, completed) = run.run_all(&run.train, true, cfg.steps_per_submit, |done| {
            if last_read.elapsed() >= PROGRESS_EVERY && done < batches {
                // A read-back waits for the GPU: only on slow devices, a few times a second.
                sums.add(checked(run.trainer.take_metrics(ctx), epoch, done, cfg)?);
                last_read = Instant::now();
            }
            let images_per_sec = (done * batch).min(n) as f64 / start.elapsed().as_secs_f64().max(1e-9);
            on_event(Event::Progress(Progress { epoch, batch: done, batches, loss: sums.mean_loss_or_nan(), images_per_sec }));
            Ok(!stop.load(Ordering::Relaxed))
        })?;
        if !completed {
            ctx.wait()?;
            return Ok(TrainOutcome { model: parameters(&run)?, history, stopped: true });
        }
        sums.add(checked(run.trainer.take_metrics(ctx), epoch, done, cfg)?); // waits for the last step
        let seconds = start.elapsed().as_secs_f64();
        run.run_all(&run.test, false, cfg.steps_per_submit.max(run.test.steps()), |_| Ok(true))?;
        let mut test = Sums::default();
        test.add(checked(run.trainer.take_metrics(ctx), epoch, done, cfg)?);
        let m = epoch_metrics(epoch, &sums, &test, seconds);
        on_event(Event::EpochEnd(&m));
        if cfg.epoch_models {
            on_event(Event::EpochModel(&parameters(&run)?));
        }
        history.push(m);
    }
    Ok(TrainOutcome { model: parameters(&run)?, history, stopped: false })
}

impl Sums {
    /// The mean loss, NaN when nothing was read yet.
    fn mean_loss_or_nan(&self) -> f64 {
        if self.rows == 0 { f64::NAN } else { self.mean_loss() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shuffles_are_seeded_permutations() {
        let a = shuffled_order(1000, 7, 1);
        let mut sorted = a.clone();
        sorted.sort();
        assert_eq!(sorted, (0..1000).collect::<Vec<u32>>());
        assert_eq!(a, shuffled_order(1000, 7, 1));
        assert_ne!(a, shuffled_order(1000, 7, 2), "each epoch has its own order");
        assert_ne!(a, shuffled_order(1000, 8, 1), "the seed matters");
    }

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
        let cases: [(TrainConfig, &str); 8] = [
            (TrainConfig { batch_size: 0, ..ok.clone() }, "--batch-size"),
            (TrainConfig { epochs: 0, ..ok.clone() }, "--epochs"),
            (TrainConfig { hidden: vec![128, 0], ..ok.clone() }, "layer 2 has 0 units"),
            (TrainConfig { hidden: vec![99_999_999_999], ..ok.clone() }, "parameters"),
            (TrainConfig { hidden: vec![usize::MAX, usize::MAX], ..ok.clone() }, "parameters"),
            (TrainConfig { optimizer: Optimizer::sgd(0.0, 0.9), ..ok.clone() }, "--lr"),
            (TrainConfig { optimizer: Optimizer::sgd(0.1, 1.5), ..ok.clone() }, "momentum"),
            (TrainConfig { optimizer: Optimizer::adam(f32::NAN), ..ok.clone() }, "lr"),
        ];
        for (cfg, want) in cases {
            let err = cfg.validate().unwrap_err().to_string();
            assert!(err.contains(want), "{want:?} not in {err:?}");
        }
    }
}
