//! [`CpuTrainer`]: trains a network on the CPU by running the [`Network`]'s tapes on a
//! [`CpuStore`]. This is the CPU reference the GPU trainer is checked against, and a usable trainer
//! on its own. Batches come in as `&Matrix` and label slices.

use cpu_matrix::Matrix;

use crate::cpu::store::CpuStore;
use crate::network::{flatten_parameters, unflatten_parameters};
use crate::tape::Op;
use crate::wgsl::COUNTER_STEP;
use crate::{Fusion, LayersError, Metrics, Network, NetworkSpec, Optimizer};

/// Trains a [`NetworkSpec`] on the CPU. Batches come in as `&Matrix` and label slices.
pub struct CpuTrainer {
    net: Network,
    store: CpuStore,
}

impl CpuTrainer {
    /// A trainer for batches of up to `max_batch` rows, parameters from `spec.init_parameters(seed)`,
    /// running the fused tapes with the fast CPU path (`cpu/fast.rs`). `with_fusion(..,
    /// Fusion::Composed)` runs the primitive CPU references instead, the plain reference.
    pub fn new(spec: &NetworkSpec, optimizer: Optimizer, max_batch: usize, seed: u64) -> Result<Self, LayersError> {
        Self::with_fusion(spec, optimizer, max_batch, seed, Fusion::Fused)
    }

    /// Like [`CpuTrainer::new`], running the `fusion` tapes (both compute the same math).
    pub fn with_fusion(
        spec: &NetworkSpec,
        optimizer: Optimizer,
        max_batch: usize,
        seed: u64,
        fusion: Fusion,
    ) -> Result<Self, LayersError> {
        let net = Network::new(spec, optimizer, fusion, seed)?;
        let store = CpuStore::new(&net.tensors, max_batch)?;
        let mut trainer = Self { net, store };
        trainer.load_parameters(&spec.init_parameters(seed))?;
        Ok(trainer)
    }

    pub fn network(&self) -> &Network {
        &self.net
    }

    pub fn max_batch(&self) -> usize {
        self.store.max_batch
    }

    /// The learning rate the next step uses.
    pub fn learning_rate(&self) -> f32 {
        self.net.optimizer.lr()
    }

    /// One training step on `x: [rows, input]` with `labels: [rows]` (forward, loss, backward,
    /// optimizer). Loss and accuracy accumulate until [`CpuTrainer::take_metrics`].
    pub fn train_step<L: Copy + Into<u32>>(&mut self, x: &Matrix, labels: &[L]) -> Result<(), LayersError> {
        self.load_batch(x, labels)?;
        let (store, train) = (&mut self.store, &self.net.train);
        on_pool(|| store.run(train))
    }

    /// Forward and loss only on `x: [rows, input]`, `labels: [rows]`; adds to the metrics.
    pub fn eval_batch<L: Copy + Into<u32>>(&mut self, x: &Matrix, labels: &[L]) -> Result<(), LayersError> {
        self.load_batch(x, labels)?;
        let (store, eval) = (&mut self.store, &self.net.eval);
        on_pool(|| store.run(eval))
    }

    /// Softmax probabilities `[rows, classes]` for `x: [rows, input]` (any number of rows).
    pub fn predict_probs(&mut self, x: &Matrix) -> Result<Matrix, LayersError> {
        let spec = &self.net.spec;
        let classes = spec.output();
        if x.cols != spec.input() || x.rows == 0 {
            return Err(LayersError::Shape {
                what: "input".into(),
                expected: format!("[rows >= 1, {}]", spec.input()),
                got: format!("[{}, {}]", x.rows, x.cols),
            });
        }
        let mut probs = Vec::with_capacity(x.rows * classes);
        for chunk in x.data.chunks(self.store.max_batch * x.cols) {
            let rows = chunk.len() / x.cols;
            self.store.set_batch(rows)?;
            self.store.f32_mut(self.net.input)[..chunk.len()].copy_from_slice(chunk);
            self.store.run(&self.net.predict)?;
            probs.extend_from_slice(&self.store.f32(self.net.out)[..rows * classes]);
        }
        Ok(Matrix::new(x.rows, classes, probs)?)
    }

    /// Loss and accuracy since the last call; resets them. Errors on a non-finite loss.
    pub fn take_metrics(&mut self) -> Result<Metrics, LayersError> {
        let c = self.store.u32_mut(self.net.counters);
        let snapshot = c.to_vec();
        c[..COUNTER_STEP].iter_mut().for_each(|v| *v = 0);
        self.net.metrics_from_counters(&snapshot)
    }

    /// `[W1, b1, W2, b2, ...]`, `W: [in, out]`, `b: [1, out]`.
    pub fn parameters(&self) -> Vec<Matrix> {
        let flat: Vec<Vec<f32>> = self.net.linears.iter().map(|l| self.store.f32(l.params).to_vec()).collect();
        unflatten_parameters(&self.net.spec, &flat)
    }

    /// The gradients of the last training step, shaped like [`CpuTrainer::parameters`].
    pub fn gradients(&self) -> Vec<Matrix> {
        let flat: Vec<Vec<f32>> = self.net.linears.iter().map(|l| self.store.f32(l.grads).to_vec()).collect();
        unflatten_parameters(&self.net.spec, &flat)
    }

    /// Changes the learning rate from the next step on, keeping the optimizer state (momentum,
    /// Adam's moments and step count). For schedules: call it between epochs.
    pub fn set_learning_rate(&mut self, lr: f32) -> Result<(), LayersError> {
        let opt = self.net.optimizer.with_lr(lr);
        opt.validate()?;
        self.net.optimizer = opt;
        for op in &mut self.net.train {
            if let Op::Update { opt, .. } | Op::LinearUpdate { opt, .. } = op {
                *opt = opt.with_lr(lr);
            }
        }
        Ok(())
    }

    /// Replaces the parameters (shapes checked) and resets the optimizer state and step count.
    pub fn load_parameters(&mut self, params: &[Matrix]) -> Result<(), LayersError> {
        let flat = flatten_parameters(&self.net.spec, params)?;
        for (layer, p) in self.net.linears.iter().zip(flat) {
            self.store.f32_mut(layer.params).copy_from_slice(&p);
            self.store.f32_mut(layer.state).iter_mut().for_each(|v| *v = 0.0);
        }
        // The step count and the step the fused dropout masks are drawn for.
        self.store.u32_mut(self.net.counters)[COUNTER_STEP..].iter_mut().for_each(|v| *v = 0);
        Ok(())
    }

    fn load_batch<L: Copy + Into<u32>>(&mut self, x: &Matrix, labels: &[L]) -> Result<(), LayersError> {
        let labels: Vec<u32> = labels.iter().map(|&l| l.into()).collect();
        self.net.check_batch(x.rows, x.cols, &labels, self.store.max_batch)?;
        Network::check_finite_input(&x.data, x.cols)?;
        self.store.set_batch(x.rows)?;
        self.store.f32_mut(self.net.input)[..x.data.len()].copy_from_slice(&x.data);
        self.store.u32_mut(self.net.labels)[..labels.len()].copy_from_slice(&labels);
        Ok(())
    }
}

/// Runs `f` on a thread of rayon's pool when the pool has more than one (natively), else here.
/// The products of a step split over the pool; run from outside it, the calling thread would
/// be a third thread beside two busy workers on a 2-core machine, competing with them for the
/// step's serial parts.
fn on_pool<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    #[cfg(not(target_arch = "wasm32"))]
    if rayon::current_num_threads() > 1 && rayon::current_thread_index().is_none() {
        return rayon::scope(|_| f());
    }
    f()
}
