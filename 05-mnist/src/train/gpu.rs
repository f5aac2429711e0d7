//! The GPU loop: the training and test sets resident on the device, `steps_per_submit` steps per submission,
//! the loss summed on the device and read back when the epoch ends or every `PROGRESS_EVERY`;
//! the stop flag checked after every submission.
//!
//! A step is stage 04's training step with its first layer's forward gathering the batch from
//! the bytes on the device itself (`GpuTrainer::record_gathered_step`): two dispatches for
//! 784-128-10 where stage 04 merges the forward and the output layer (`forward_output`), three
//! where it does not. A network whose first op cannot gather (no hidden layer, a first layer routed
//! through stage 03's matmul, or the composed tapes) records our gather kernel and then
//! `record_step` instead.
//!
//! Submitting does not wait, so a loop that only submits queues a whole epoch in a moment, and
//! a stop would wait for all of it. So after submitting piece `k` the loop waits for piece
//! `k - 1` (`GpuContext::mark` / `wait_for_async`): the GPU always has the next piece queued,
//! and at most two are in flight ([`IN_FLIGHT`]; three on a GPU in a browser). A stop takes
//! effect within that many submissions' time (plus the rest of an evaluation the stop came
//! during, which is one forward pass over the test set).

use std::cell::Cell;
use std::collections::VecDeque;
use std::future::Future;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use wgpu::SubmissionIndex;

use web_time::Instant;

use common::{GpuContext, QueueMark};
use gpu_layers::{Fusion, FusedTiles, Gathered, GatheredEval, GpuTrainer, Kernels, Network, NetworkSpec};

use super::shared::{Event, PROGRESS_EVERY, Progress, Sums, TrainOutcome, checked, epoch_metrics, shuffled_order};
use super::{GPU_EVAL_ROWS, TrainConfig};
use crate::data::{Mnist, PIXELS};
use crate::error::{MnistError, Result};
use crate::metrics::EpochMetrics;
use crate::gather::{DeviceBatches, GatherKernel};
use crate::model_io::Model;

// ANCHOR: first_piece
/// Steps in an epoch's first submission. The GPU waits for the first submission's recording
/// (about 3 us of CPU per dispatch on the H200 host): 8 steps start it within ~50 us, where a
/// first piece of 100 steps kept it idle for ~0.6 ms. (A software adapter starts at one step
/// and grows only once a piece has been timed: see [`PIECE_TIME`].)
const FIRST_PIECE: usize = 8;
// ANCHOR_END: first_piece

/// Submissions in flight, the one just made included, before the loop waits for the oldest.
/// Natively two: the GPU always has the next piece queued. A browser's GPU process turns each
/// submission's commands into Vulkan's on its own thread, and only then passes on that an
/// earlier one finished: with two in flight it sat idle about 0.9 ms before each piece of 100
/// steps, waiting for the page's next. In a browser three: on an H100 in Chromium 156 an epoch
/// of 784-128-10 took 17.5-23.0 ms against 22.8-27.6 with two (`results/h100-browser/`). A
/// software adapter keeps two: its pieces are sized by timing each turn of the loop, and with
/// three a read-back of the metrics (which waits for all of them) left the next turn's piece
/// already done, timed at nearly nothing, so the pieces kept doubling (SwiftShader's progress
/// line then stood still for 24 s).
const IN_FLIGHT: usize = if cfg!(target_arch = "wasm32") { 3 } else { 2 };

/// The longest a submission should keep the GPU busy: the loop reports progress and looks at
/// the stop flag between submissions, so on a slow adapter (a software one: SwiftShader takes
/// about 0.2 s per step of 784-128-10) a piece of 100 steps would freeze the progress line for
/// half a minute and make Stop wait as long.
const PIECE_TIME: Duration = Duration::from_millis(100);

/// The size of the next piece, after a piece of `steps` steps `took` this long on the GPU:
/// twice as many while pieces are quick (the cap is the caller's `per_submit`), as many as fit
/// in [`PIECE_TIME`] when they are not, and at least one.
fn next_piece(steps: usize, took: Duration) -> usize {
    if took <= PIECE_TIME {
        return steps.saturating_mul(2);
    }
    let fit = steps as f64 * PIECE_TIME.as_secs_f64() / took.as_secs_f64();
    (fit as usize).max(1)
}

/// A trainer on the GPU with the training set resident and bound to its input buffers, and
/// an evaluator (the same network in batches of [`eval_batch`] rows) with the test set.
pub(super) struct GpuRun<'a> {
    ctx: &'a GpuContext,
    pub(super) trainer: GpuTrainer,
    /// Gets the trainer's parameters before every evaluation (`GpuTrainer::copy_parameters_to`):
    /// MNIST's test set goes through in one batch instead of 157 of the training's 64 rows.
    evaluator: GpuTrainer,
    kernel: GatherKernel,
    pub(super) train: DeviceBatches,
    test: DeviceBatches,
    /// The trainer's gathering tapes for the training set and the evaluator's for the test
    /// set, when the first op can gather.
    gathered: Option<Gathered>,
    eval_gathered: Option<GatheredEval>,
    batch: usize,
    eval_batch: usize,
    /// Time spent in [`GpuRun::submit`] recording and submitting training steps since
    /// [`GpuRun::take_recorded`] was last called.
    recorded: Cell<Duration>,
}

impl<'a> GpuRun<'a> {
    /// A GPU trainer for `cfg` (batches of up to `cfg.batch_size` rows) with the training set
    /// of `data` uploaded as bytes and bound to its input buffers, and an evaluator for the test
    /// set (batches of [`eval_batch`] rows).
    pub(super) fn new(ctx: &'a GpuContext, spec: &NetworkSpec, data: &Mnist, cfg: &TrainConfig) -> Result<Self> {
        let batch = cfg.batch_size.min(data.train.len());
        let eval_batch = eval_batch(spec, cfg, data, batch, &ctx.limits)?;
        let available = if ctx.is_software() { super::cpu::available_memory() } else { None };
        check_gpu_memory(&ctx.limits, &gpu_buffers(spec, cfg, data, batch, eval_batch)?, batch, available)?;
        // The evaluator shares the trainer's compiled kernels: no pipeline is built twice.
        let kernels = Kernels::with_options(FusedTiles::for_network(batch, &spec.layer_shapes()), cfg.matmul.precision());
        let mut trainer = GpuTrainer::with_options(ctx, &kernels, spec, cfg.optimizer, batch, cfg.seed, Fusion::Fused)?;
        let mut evaluator = GpuTrainer::for_evaluation(ctx, &kernels, spec, cfg.optimizer, eval_batch, cfg.seed)?;
        let kernel = GatherKernel::new(ctx)?;
        let train = DeviceBatches::new(ctx, &kernel, &data.train, batch, trainer.input(), trainer.labels(), "train")?;
        let test = DeviceBatches::new(ctx, &kernel, &data.test, eval_batch, evaluator.input(), evaluator.labels(), "test")?;
        let gathered = if trainer.can_gather() { Some(trainer.add_gathered(ctx, &kernels, &train.source())?) } else { None };
        let eval_gathered = if evaluator.can_gather() { Some(evaluator.add_gathered_eval(ctx, &kernels, &test.source())?) } else { None };
        Ok(Self { ctx, trainer, evaluator, kernel, train, test, gathered, eval_gathered, batch, eval_batch, recorded: Cell::new(Duration::ZERO) })
    }

    /// Waits until the uploads queued by [`GpuRun::new`] (both sets, the parameters) have
    /// reached the GPU, so that the first epoch's clock starts with the data in place: queued
    /// writes are carried out with the next submission, which is otherwise the epoch's first.
    pub(super) async fn uploaded(&self) -> Result<()> {
        let index = self.ctx.queue.submit([]);
        self.ctx.wait_for_async(self.ctx.mark(index)).await?;
        Ok(())
    }

    /// The dispatches of one training step, by kernel: the gathering tape's, or the gather
    /// kernel's and then the plain step's.
    pub(super) fn step_kernels(&self) -> Vec<&'static str> {
        match self.gathered {
            Some(g) => self.trainer.step_kernels(Some(g)),
            None => std::iter::once("gather").chain(self.trainer.step_kernels(None)).collect(),
        }
    }

    /// The trainer's training set, or the evaluator's test set, and their batch size.
    fn side(&self, training: bool) -> (&GpuTrainer, &DeviceBatches, usize) {
        if training { (&self.trainer, &self.train, self.batch) } else { (&self.evaluator, &self.test, self.eval_batch) }
    }

    /// Records steps `steps` of the training set (`training`) or the test set (all of them
    /// full batches, or a single short one after `set_batch`) into one compute pass and submits
    /// it, inside the context's error scope (a rejected submission, or one to a lost device, is
    /// an `Err`, not a panic). Does not wait for the GPU.
    pub(super) fn submit(&self, steps: Range<usize>, training: bool) -> Result<SubmissionIndex> {
        let label = if training { "train steps" } else { "eval steps" };
        let (trainer, batches, _) = self.side(training);
        let start = Instant::now();
        let index = self.ctx.scoped(|| {
            self.ctx.submit_pass(label, |pass| match (self.gathered, self.eval_gathered, training) {
                // All steps at once: in the split step each step hands the next its partial sums.
                (Some(g), _, true) => trainer.record_gathered_steps(g, steps, pass),
                (_, Some(e), false) => steps.for_each(|s| trainer.record_gathered_eval(e, s, pass)),
                _ => {
                    for s in steps {
                        batches.record(&self.kernel, pass, s);
                        if training {
                            trainer.record_step(pass);
                        } else {
                            trainer.record_eval(pass);
                        }
                    }
                }
            })
        })?;
        if training {
            self.recorded.set(self.recorded.get() + start.elapsed());
        }
        Ok(index)
    }

    /// The time [`GpuRun::submit`] spent on training steps since the last call.
    fn take_recorded(&self) -> Duration {
        self.recorded.replace(Duration::ZERO)
    }

    // ANCHOR: run_all
    /// Runs every step of the training set (`training`) or the test set: full batches in
    /// submissions of `per_submit` steps (the first ones shorter: [`FIRST_PIECE`] steps, then
    /// twice as many each time up to `per_submit`, so the GPU starts while the CPU records the
    /// rest; on a slow adapter fewer, see [`next_piece`]), then the short last batch (if any) in
    /// its own submission. `after_submit(steps_done)` runs after each submission and returns
    /// false to stop early. Returns the steps submitted and whether all of them were (false:
    /// stopped early).
    async fn run_all(&self, training: bool, per_submit: usize, mut after_submit: impl AsyncFnMut(usize) -> Result<bool>) -> Result<(usize, bool)> {
        let (trainer, batches, batch) = self.side(training);
        let full = batches.len() / batch;
        trainer.set_batch(self.ctx, batch)?;
        let mut done = 0;
        // The pieces submitted and not yet waited for, oldest first, with their sizes.
        let mut pending: VecDeque<(QueueMark, usize)> = VecDeque::with_capacity(IN_FLIGHT);
        // A software adapter may take a second or more per step: its pieces start at one step
        // and grow only after one has been timed, so its progress line moves from the start.
        let software = self.ctx.is_software();
        let mut piece = if software { 1 } else { FIRST_PIECE };
        let in_flight = if software { 2 } else { IN_FLIGHT };
        let mut turn = Instant::now();
        while done < full {
            let k = per_submit.min(piece).min(full - done);
            let index = self.submit(done..done + k, training)?;
            pending.push_back((self.ctx.mark(index), k));
            let oldest = if pending.len() >= in_flight { pending.pop_front() } else { None };
            piece = match oldest {
                Some((before, steps)) => {
                    self.ctx.wait_for_async(before).await?;
                    // Once the GPU is the bottleneck, one turn of this loop lasts about as long
                    // as the GPU takes for the piece just waited for.
                    let took = std::mem::replace(&mut turn, Instant::now()).elapsed();
                    next_piece(steps, took)
                }
                None if software => piece,
                None => piece.saturating_mul(2),
            };
            done += k;
            if !after_submit(done).await? {
                return Ok((done, false));
            }
        }
        if done < batches.steps() {
            trainer.set_batch(self.ctx, batches.rows(done))?;
            self.submit(done..done + 1, training)?;
            done += 1;
            if !after_submit(done).await? {
                return Ok((done, false));
            }
        }
        Ok((done, true))
    }
    // ANCHOR_END: run_all

    // ANCHOR: evaluate
    /// Evaluates the trainer's current parameters on the test set: copies them to the
    /// evaluator, runs every test batch in one submission (plus one for a short last batch) and
    /// waits for the loss and accuracy sums.
    async fn evaluate(&self, epoch: usize, done: usize, cfg: &TrainConfig) -> Result<Sums> {
        self.trainer.copy_parameters_to(self.ctx, &self.evaluator)?;
        self.run_all(false, self.test.steps(), async |_| Ok(true)).await?;
        let mut test = Sums::default();
        test.add(checked(self.evaluator.take_metrics_async(self.ctx).await, epoch, done, cfg)?);
        Ok(test)
    }
    // ANCHOR_END: evaluate
}

pub(super) async fn train_gpu<B: Future<Output = ()>>(
    ctx: &GpuContext,
    spec: &NetworkSpec,
    data: &Mnist,
    cfg: &TrainConfig,
    stop: &AtomicBool,
    on_event: &mut dyn FnMut(Event<'_>),
    mut breathe: impl FnMut() -> B,
) -> Result<TrainOutcome> {
    let run = GpuRun::new(ctx, spec, data, cfg)?;
    run.uploaded().await?;
    let batch = run.batch;
    let n = run.train.len();
    let batches = run.train.steps();
    let step_kernels = run.step_kernels();
    let mut history = Vec::new();
    let parameters = async |run: &GpuRun<'_>| -> Result<Model> {
        Ok(Model::new(spec.clone(), run.trainer.parameters_async(ctx).await?)?.with_dataset(data.kind))
    };

    for epoch in 1..=cfg.epochs {
        if stop.load(Ordering::Relaxed) {
            return Ok(TrainOutcome { model: parameters(&run).await?, history, stopped: true, batches_done: 0 });
        }
        let lr = cfg.schedule.lr(cfg.lr(), epoch, cfg.epochs);
        run.trainer.set_learning_rate(ctx, lr)?;
        on_event(Event::EpochStart { epoch, epochs: cfg.epochs, batches, images: n, lr, step_kernels: &step_kernels });
        // The order and the rate are queue writes: they land before the epoch's first submit.
        run.train.set_order(ctx, &shuffled_order(n, cfg.seed, epoch))?;
        run.take_recorded();
        let start = Instant::now();
        let mut last_read = start;
        let mut sums = Sums::default();
        let (done, completed) = run
            .run_all(true, cfg.steps_per_submit, async |done| {
                let due = last_read.elapsed() >= PROGRESS_EVERY;
                if due && done < batches {
                    // A read-back waits for the GPU: only on slow devices, a few times a second.
                    sums.add(checked(run.trainer.take_metrics_async(ctx).await, epoch, done, cfg)?);
                    last_read = Instant::now();
                }
                if due || done == batches {
                    let images_per_sec = (done * batch).min(n) as f64 / start.elapsed().as_secs_f64().max(1e-9);
                    on_event(Event::Progress(Progress { epoch, batch: done, batches, loss: sums.mean_loss_or_nan(), images_per_sec }));
                    breathe().await;
                }
                Ok(!stop.load(Ordering::Relaxed))
            })
            .await?;
        if !completed {
            ctx.wait_async().await?;
            return Ok(TrainOutcome { model: parameters(&run).await?, history, stopped: true, batches_done: done });
        }
        sums.add(checked(run.trainer.take_metrics_async(ctx).await, epoch, done, cfg)?); // waits for the last step
        let seconds = start.elapsed().as_secs_f64();
        let record_seconds = run.take_recorded().as_secs_f64();
        let eval_start = Instant::now();
        let test = run.evaluate(epoch, done, cfg).await?;
        let m = EpochMetrics { record_seconds, ..epoch_metrics(epoch, &sums, &test, seconds, eval_start.elapsed().as_secs_f64()) };
        on_event(Event::EpochEnd(&m));
        if cfg.epoch_models {
            on_event(Event::EpochModel(&parameters(&run).await?));
        }
        history.push(m);
    }
    Ok(TrainOutcome { model: parameters(&run).await?, history, stopped: false, batches_done: 0 })
}

/// Rows per evaluation batch on the GPU: `--eval-batch` (at most the test set), else the whole
/// test set up to [`GPU_EVAL_ROWS`], halved (down to the training's `batch`) while one of the
/// evaluator's tensors is over the adapter's limit for one buffer.
pub fn eval_batch(spec: &NetworkSpec, cfg: &TrainConfig, data: &Mnist, batch: usize, limits: &wgpu::Limits) -> Result<usize> {
    let len = data.test.len().max(1);
    if let Some(rows) = cfg.eval_batch {
        return Ok(rows.min(len));
    }
    let net = Network::new(spec, cfg.optimizer, Fusion::Fused, cfg.seed)?;
    let limit = limits.max_storage_buffer_binding_size.min(limits.max_buffer_size);
    let mut rows = GPU_EVAL_ROWS.min(len);
    while rows > batch && net.tensors.iter().any(|t| 4 * t.capacity(rows) as u64 > limit) {
        rows = rows.div_ceil(2).max(batch);
    }
    Ok(rows)
}

/// Every buffer a GPU run of `spec` at batches of `batch` rows allocates, as (what, bytes): the
/// trainer's tensors (stage 04's `Network`: parameters, optimizer state, activations and their
/// gradients), the evaluator's (the same at `eval_batch` rows, named `evaluator's ...`) and,
/// per set (training and test), the images (u8), labels (u8) and row order (u32). Read-back staging and uniforms
/// (kilobytes) are left out, and so are the trainer's partial sums of a wide layer's forward
/// in a k split (stage 04's `FusedTiles::WIDE`: twice that layer's output at `batch` rows, 2 MiB
/// for 784-1024-10 at 256; stage 04 uses no k split where they would not fit one buffer).
pub fn gpu_buffers(spec: &NetworkSpec, cfg: &TrainConfig, data: &Mnist, batch: usize, eval_batch: usize) -> Result<Vec<(String, u64)>> {
    let net = Network::new(spec, cfg.optimizer, Fusion::Fused, cfg.seed)?;
    let mut buffers: Vec<(String, u64)> = net.tensors.iter().map(|t| (t.name.clone(), 4 * t.capacity(batch) as u64)).collect();
    buffers.extend(net.tensors.iter().map(|t| (format!("{EVALUATOR}{}", t.name), 4 * t.capacity(eval_batch) as u64)));
    for (name, set) in [("train", &data.train), ("test", &data.test)] {
        let n = set.len() as u64;
        buffers.push((format!("{name} images (u8)"), (n * PIXELS as u64).next_multiple_of(4)));
        buffers.push((format!("{name} labels (u8)"), n.next_multiple_of(4)));
        buffers.push((format!("{name} order"), 4 * n));
    }
    Ok(buffers)
}

/// How [`gpu_buffers`] names the evaluator's tensors: `evaluator's <tensor>`.
const EVALUATOR: &str = "evaluator's ";

/// Refuses a GPU run before it allocates anything when one of its `buffers` is over the
/// device's limit for one buffer, or (with `available`: a software adapter's memory is the
/// machine's) when all of them together are over `available`. Each error names the buffer or
/// the total, the limit, and what to change. A hardware adapter does not say how much memory
/// it has (wgpu has no such query): there, an allocation it refuses is an out-of-memory error
/// from the context's error scope, not a crash.
pub fn check_gpu_memory(limits: &wgpu::Limits, buffers: &[(String, u64)], batch: usize, available: Option<u128>) -> Result<()> {
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    let (limit, limit_name) = if limits.max_storage_buffer_binding_size <= limits.max_buffer_size {
        (limits.max_storage_buffer_binding_size, "max_storage_buffer_binding_size")
    } else {
        (limits.max_buffer_size, "max_buffer_size")
    };
    // The largest buffer over the limit; of equal ones the trainer's (its --batch-size is the
    // flag to change when the evaluator's batch was only raised to the training's).
    let largest = buffers.iter().filter(|(_, b)| *b > limit).max_by_key(|(w, b)| (*b, !w.starts_with(EVALUATOR)));
    if let Some((what, bytes)) = largest {
        let flag = if what.starts_with(EVALUATOR) { "--eval-batch" } else { "--batch-size" };
        return Err(MnistError::InvalidArgument(format!(
            "--device gpu: at batch {batch}, the buffer `{what}` needs {:.1} MiB, more than the {:.1} MiB this adapter \
             allows for one buffer (`{limit_name}`); use a smaller {flag} or narrower layers \
             (or --limit-train for the images)",
            mib(*bytes),
            mib(limit)
        )));
    }
    let total: u128 = buffers.iter().map(|&(_, b)| b as u128).sum();
    match available {
        Some(free) if total > free => Err(MnistError::InvalidArgument(format!(
            "--device gpu: at batch {batch}, the run's {} buffers need about {:.1} GiB in all, more than the {:.1} GiB \
             of memory available to this software adapter (it uses the machine's memory); use a smaller \
             --batch-size or --eval-batch, or narrower layers",
            buffers.len(),
            total as f64 / (1u64 << 30) as f64,
            free as f64 / (1u64 << 30) as f64
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Dataset;
    use crate::datasets::DatasetKind;

    fn data(n: usize) -> Mnist {
        let set = Dataset { images: vec![0; n * PIXELS], labels: vec![0; n] };
        Mnist { train: set.clone(), test: set, kind: DatasetKind::Mnist }
    }

    #[test]
    fn gpu_runs_over_the_limits_are_refused_before_allocating() {
        let limits = wgpu::Limits { max_storage_buffer_binding_size: 128 << 20, max_buffer_size: 256 << 20, ..wgpu::Limits::default() };
        let cfg = |hidden: usize| TrainConfig { layers: TrainConfig::mlp(&[hidden]), ..TrainConfig::default() };
        let spec = |hidden: usize| cfg(hidden).spec().unwrap();
        // The default network fits, with 1,000 images per set.
        let fits = gpu_buffers(&spec(128), &cfg(128), &data(1000), 64, 1000).unwrap();
        assert!(fits.iter().any(|(w, b)| w == "train images (u8)" && *b == 784_000), "{fits:?}");
        check_gpu_memory(&limits, &fits, 64, Some(1 << 30)).unwrap();
        // 2,000 rows of 30,000 units: 229 MiB per activation buffer, over the 128 MiB binding limit.
        let wide = gpu_buffers(&spec(30_000), &cfg(30_000), &data(1000), 2000, 1000).unwrap();
        let err = check_gpu_memory(&limits, &wide, 2000, None).unwrap_err().to_string();
        assert!(err.contains("more than the 128.0 MiB") && err.contains("max_storage_buffer_binding_size") && err.contains("--batch-size"), "{err}");
        // The evaluator at the same 2,000 rows has the same buffers: the trainer's is named.
        let same = gpu_buffers(&spec(30_000), &cfg(30_000), &data(3000), 2000, 2000).unwrap();
        let err = check_gpu_memory(&limits, &same, 2000, None).unwrap_err().to_string();
        assert!(err.contains("the buffer `delta1`") && err.contains("--batch-size"), "{err}");
        // Training in batches of 64 fits; evaluating in batches of 2,000 does not.
        let eval_cfg = TrainConfig { eval_batch: Some(2000), ..cfg(30_000) };
        let rows = eval_batch(&spec(30_000), &eval_cfg, &data(3000), 64, &limits).unwrap();
        assert_eq!(rows, 2000, "an evaluation batch the user chose is not changed");
        let err = check_gpu_memory(&limits, &gpu_buffers(&spec(30_000), &eval_cfg, &data(3000), 64, rows).unwrap(), 64, None).unwrap_err().to_string();
        assert!(err.contains("`evaluator's ") && err.contains("--eval-batch"), "{err}");
        // Every buffer fits, but not all of them in the memory a software adapter has.
        let err = check_gpu_memory(&limits, &fits, 64, Some(1 << 20)).unwrap_err().to_string();
        assert!(err.contains("GiB in all") && err.contains("software adapter"), "{err}");
    }

    #[test]
    fn the_evaluator_takes_the_whole_test_set_where_it_fits() {
        let limits = wgpu::Limits { max_storage_buffer_binding_size: 128 << 20, max_buffer_size: 256 << 20, ..wgpu::Limits::default() };
        let cfg = |hidden: usize, rows: Option<usize>| TrainConfig { layers: TrainConfig::mlp(&[hidden]), eval_batch: rows, ..TrainConfig::default() };
        let rows = |hidden: usize, chosen: Option<usize>, n: usize| eval_batch(&cfg(hidden, chosen).spec().unwrap(), &cfg(hidden, chosen), &data(n), 64, &limits).unwrap();
        // The default network: all of MNIST's 10,000 test images in one batch, or all of a smaller test set.
        assert_eq!(rows(128, None, 10_000), GPU_EVAL_ROWS);
        assert_eq!(rows(128, None, 500), 500);
        // `--eval-batch`, at most the test set.
        assert_eq!((rows(128, Some(300), 10_000), rows(128, Some(20_000), 1000)), (300, 1000));
        // 20,000 hidden units take 80 KB per row: 10,000 rows -> 5,000 -> 2,500 -> 1,250, the
        // first under 128 MiB.
        assert_eq!(rows(20_000, None, 10_000), 1250);
        let buffers = gpu_buffers(&cfg(20_000, None).spec().unwrap(), &cfg(20_000, None), &data(10_000), 64, 1250).unwrap();
        check_gpu_memory(&limits, &buffers, 64, None).unwrap();
    }

    #[test]
    fn the_estimate_is_what_the_trainer_allocates() {
        let ctx = common::test_context();
        for (layers, batch) in [(vec![128], 64), (vec![300, 100], 17)] {
            let cfg = TrainConfig { layers: TrainConfig::mlp(&layers), ..TrainConfig::default() };
            let spec = cfg.spec().unwrap();
            let buffers = gpu_buffers(&spec, &cfg, &data(10), batch, 10).unwrap();
            let is_data = |w: &str| w.starts_with("train ") || w.starts_with("test ");
            // The trainer at `batch` rows, and the evaluator at the 10 rows of the test set.
            for (rows, evaluator) in [(batch, false), (10, true)] {
                let tensors: u64 = buffers.iter().filter(|(w, _)| !is_data(w) && w.starts_with(EVALUATOR) == evaluator).map(|(_, b)| b).sum();
                let made = GpuTrainer::new(ctx, &spec, cfg.optimizer, rows, cfg.seed).unwrap().allocations().bytes;
                // What the estimate leaves out: uniforms and placeholders, a few kilobytes.
                assert!(made >= tensors && made - tensors < 64 << 10, "{layers:?} at {rows}: estimated {tensors} bytes, allocated {made}");
            }
        }
    }

    #[test]
    fn pieces_double_while_quick_and_shrink_to_the_piece_time_when_slow() {
        assert_eq!(next_piece(8, Duration::from_micros(50)), 16, "the H200: 8 steps in 50 us");
        assert_eq!(next_piece(100, PIECE_TIME), 200, "at the piece time exactly, still quick");
        // A software adapter: 8 steps in 1.6 s is 0.2 s a step, so one step per piece.
        assert_eq!(next_piece(8, Duration::from_millis(1600)), 1);
        assert_eq!(next_piece(100, Duration::from_millis(400)), 25);
        // Never zero, whatever the clock says.
        assert_eq!(next_piece(1, Duration::from_secs(60)), 1);
    }
}
