//! What the CPU and the GPU loops share: what a run reports ([`Event`], [`Progress`]) and
//! returns ([`TrainOutcome`]), the seeded shuffle of an epoch's rows, and the loss and accuracy
//! sums that become an epoch's [`EpochMetrics`], and how often a run reports ([`PROGRESS_EVERY`]).

use std::time::Duration;

use gpu_layers::{LayersError, Metrics};
use rand::SeedableRng;
use rand::seq::SliceRandom;

use super::TrainConfig;
use crate::error::{MnistError, Result};
use crate::metrics::EpochMetrics;
use crate::model_io::Model;

/// The progress interval: how often a run reports its progress inside an epoch, at most (the
/// last batch of an epoch is always reported). On the GPU each report is a read-back of the
/// loss, which waits for the device, so it stays rare; 250 ms still moves the page's progress
/// bar four times a second.
pub const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// What a run reports while it runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Event<'a> {
    /// An epoch (1-based) begins: `batches` steps over `images` images at learning rate `lr`;
    /// on the GPU, `step_kernels` names the dispatches of one training step (empty on the CPU).
    EpochStart { epoch: usize, epochs: usize, batches: usize, images: usize, lr: f32, step_kernels: &'a [&'static str] },
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
    /// When stopped: the steps of the interrupted epoch (number `history.len() + 1`) that ran
    /// before the stop, 0 when the stop came between two epochs. 0 when not stopped.
    pub batches_done: usize,
}

/// The order of epoch `epoch`'s rows: a permutation of `0..n` seeded by `(seed, epoch)`.
pub fn shuffled_order(n: usize, seed: u64, epoch: usize) -> Vec<u32> {
    let mut order: Vec<u32> = (0..n as u32).collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ (epoch as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    order.shuffle(&mut rng);
    order
}

/// Loss and accuracy sums, in f64.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Sums {
    pub(super) loss: f64,
    pub(super) rows: u64,
    pub(super) correct: u64,
}

impl Sums {
    pub(super) fn add(&mut self, m: Metrics) {
        self.loss += m.loss_sum;
        self.rows += m.rows;
        self.correct += m.correct;
    }

    pub(super) fn mean_loss(&self) -> f64 {
        self.loss / self.rows.max(1) as f64
    }

    /// The mean loss, NaN when nothing was read yet.
    pub(super) fn mean_loss_or_nan(&self) -> f64 {
        if self.rows == 0 { f64::NAN } else { self.mean_loss() }
    }

    pub(super) fn accuracy(&self) -> f64 {
        self.correct as f64 / self.rows.max(1) as f64
    }
}

/// The metrics of a take, with a NaN or infinite loss turned into the error that says what to
/// do (stage 04's `take_metrics` refuses non-finite sums).
pub(super) fn checked(taken: Result<Metrics, LayersError>, epoch: usize, batch: usize, cfg: &TrainConfig) -> Result<Metrics> {
    match taken {
        Ok(m) if m.loss_sum.is_finite() => Ok(m),
        // Name the starting rate: that is what the user passes with --lr.
        Ok(_) | Err(LayersError::NonFinite { .. }) => Err(MnistError::NonFiniteLoss { epoch, batch, lr: cfg.lr() }),
        Err(e) => Err(e.into()),
    }
}

pub(super) fn epoch_metrics(epoch: usize, train: &Sums, test: &Sums, seconds: f64, eval_seconds: f64) -> EpochMetrics {
    EpochMetrics {
        epoch,
        train_loss: train.mean_loss(),
        train_acc: train.accuracy(),
        test_loss: test.mean_loss(),
        test_acc: test.accuracy(),
        seconds,
        images_per_sec: train.rows as f64 / seconds.max(1e-9),
        eval_seconds,
        record_seconds: 0.0,
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
}
