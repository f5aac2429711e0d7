//! The CPU loop: one batch at a time (gather the rows, one `CpuTrainer::train_step`, read the
//! loss), the stop flag checked after every batch.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};

use web_time::Instant;

use cpu_matrix::Matrix;
use gpu_layers::{CpuTrainer, LayersError, NetworkSpec};

use super::shared::{Event, PROGRESS_EVERY, Progress, Sums, TrainOutcome, checked, epoch_metrics, shuffled_order};
use super::{CPU_EVAL_ROWS, TrainConfig};
use crate::data::{Dataset, Mnist, PIXELS, gather_batch_cpu, gather_batch_into, prefetch_batch};
use crate::error::Result;
use crate::model_io::Model;

/// The CPU trainer of a run: batches of up to `batch` rows, parameters seeded by `cfg.seed`.
/// Its tensors hold the larger of `batch` and [`eval_rows`] rows: the test set is evaluated in
/// big batches (fewer, bigger products, which the threads share well).
pub(super) fn trainer(spec: &NetworkSpec, cfg: &TrainConfig, data: &Mnist, batch: usize) -> Result<CpuTrainer> {
    Ok(CpuTrainer::new(spec, cfg.optimizer, batch.max(eval_rows(cfg, data)), cfg.seed)?)
}

/// Rows per evaluation batch on the CPU: `--eval-batch`, else [`CPU_EVAL_ROWS`]; at most the
/// test set.
fn eval_rows(cfg: &TrainConfig, data: &Mnist) -> usize {
    cfg.eval_batch.unwrap_or(CPU_EVAL_ROWS).min(data.test.len().max(1))
}

/// An `async fn` only so that a browser page can `breathe` (yield to its event loop) after
/// each progress report; it never waits for anything else.
pub(super) async fn train_cpu<B: Future<Output = ()>>(
    spec: &NetworkSpec,
    data: &Mnist,
    cfg: &TrainConfig,
    stop: &AtomicBool,
    on_event: &mut dyn FnMut(Event<'_>),
    mut breathe: impl FnMut() -> B,
) -> Result<TrainOutcome> {
    let batch = cfg.batch_size.min(data.train.len());
    check_memory(spec, batch.max(eval_rows(cfg, data)), available_memory())?; // the rows `trainer` allocates
    let mut net = trainer(spec, cfg, data, batch)?;
    let n = data.train.len();
    let batches = n.div_ceil(batch);
    let mut history = Vec::new();
    let model = |net: &CpuTrainer| -> Result<Model> { Ok(Model::new(spec.clone(), net.parameters())?.with_dataset(data.kind)) };
    for epoch in 1..=cfg.epochs {
        if stop.load(Ordering::Relaxed) {
            return Ok(TrainOutcome { model: model(&net)?, history, stopped: true, batches_done: 0 });
        }
        let lr = cfg.schedule.lr(cfg.lr(), epoch, cfg.epochs);
        net.set_learning_rate(lr)?;
        on_event(Event::EpochStart { epoch, epochs: cfg.epochs, batches, images: n, lr, step_kernels: &[] });
        let order = shuffled_order(n, cfg.seed, epoch);
        let start = Instant::now();
        let mut last_report = start;
        let mut sums = Sums::default();
        let (mut pixels, mut labels) = (Vec::new(), Vec::new());
        // ANCHOR: batch_loop
        for b in 0..batches {
            let first = b * batch;
            let rows = batch.min(n - first);
            gather_batch_into(&data.train, &order, first, rows, &mut pixels, &mut labels);
            // The next batch's images travel into the caches while this step computes.
            prefetch_batch(&data.train, &order, first + rows, batch);
            let x = Matrix::new(rows, PIXELS, std::mem::take(&mut pixels)).map_err(LayersError::from)?;
            net.train_step(&x, &labels)?;
            pixels = x.data;
            sums.add(checked(net.take_metrics(), epoch, b + 1, cfg)?);
            if last_report.elapsed() >= PROGRESS_EVERY || b + 1 == batches {
                last_report = Instant::now();
                let images_per_sec = sums.rows as f64 / start.elapsed().as_secs_f64().max(1e-9);
                on_event(Event::Progress(Progress { epoch, batch: b + 1, batches, loss: sums.mean_loss(), images_per_sec }));
                breathe().await;
            }
            if stop.load(Ordering::Relaxed) {
                return Ok(TrainOutcome { model: model(&net)?, history, stopped: true, batches_done: b + 1 });
            }
        }
        // ANCHOR_END: batch_loop
        let seconds = start.elapsed().as_secs_f64();
        let eval_start = Instant::now();
        let test = evaluate_cpu(&mut net, &data.test, eval_rows(cfg, data), epoch, cfg)?;
        let m = epoch_metrics(epoch, &sums, &test, seconds, eval_start.elapsed().as_secs_f64());
        on_event(Event::EpochEnd(&m));
        if cfg.epoch_models {
            on_event(Event::EpochModel(&model(&net)?));
        }
        history.push(m);
    }
    Ok(TrainOutcome { model: model(&net)?, history, stopped: false, batches_done: 0 })
}

/// Bytes the CPU trainer needs, estimated from above: four copies of the parameters (weights,
/// gradients, Adam's two moments) and, per row of the batch, six f32 values per layer output
/// (the output, its activation, their gradients, a dropout mask) plus the input row twice.
pub fn cpu_memory_estimate(spec: &NetworkSpec, batch: usize) -> u128 {
    let params = spec.parameter_count() as u128 * 4 * 4;
    let per_row: u128 = spec.layer_shapes().iter().map(|&(_, o)| o as u128 * 6).sum::<u128>() + 2 * PIXELS as u128;
    params + batch as u128 * per_row * 4
}

/// Memory the OS can give this process now (`MemAvailable` in /proc/meminfo), where known.
pub fn available_memory() -> Option<u128> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u128 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Refuses a configuration whose estimate is over `available` (a failed allocation would abort
/// the process), with the estimate, the limit and what to change.
pub fn check_memory(spec: &NetworkSpec, batch: usize, available: Option<u128>) -> Result<()> {
    let need = cpu_memory_estimate(spec, batch);
    match available {
        Some(limit) if need > limit => Err(crate::MnistError::InvalidArgument(format!(
            "--device cpu: {} at batch {batch} needs about {:.1} GiB of memory, more than the {:.1} GiB available; \
             use a smaller --batch-size or --eval-batch, or narrower layers",
            spec.describe(),
            need as f64 / (1u64 << 30) as f64,
            limit as f64 / (1u64 << 30) as f64
        ))),
        _ => Ok(()),
    }
}

fn evaluate_cpu(net: &mut CpuTrainer, test: &Dataset, batch: usize, epoch: usize, cfg: &TrainConfig) -> Result<Sums> {
    let order: Vec<u32> = (0..test.len() as u32).collect();
    let mut first = 0;
    while first < test.len() {
        let rows = batch.min(test.len() - first);
        let (x, labels) = gather_batch_cpu(test, &order, first, rows);
        let x = Matrix::new(rows, PIXELS, x).map_err(LayersError::from)?;
        net.eval_batch(&x, &labels)?;
        first += rows;
    }
    let mut sums = Sums::default();
    sums.add(checked(net.take_metrics(), epoch, test.len().div_ceil(batch), cfg)?);
    Ok(sums)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations_over_the_memory_are_refused_with_the_estimate() {
        let small = NetworkSpec::new(PIXELS, &[128], 10).unwrap();
        check_memory(&small, 64, Some(1 << 30)).unwrap();
        check_memory(&small, 64, None).unwrap();
        let huge = NetworkSpec::new(PIXELS, &[300_000], 10).unwrap();
        // 60,000 rows x 300,010 outputs x 6 values x 4 bytes, and the parameters: about 406 GiB.
        let err = check_memory(&huge, 60_000, Some(16 << 30)).unwrap_err().to_string();
        assert!(err.contains("needs about 406.2 GiB") && err.contains("16.0 GiB available") && err.contains("--batch-size"), "{err}");
    }
}
