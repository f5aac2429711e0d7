//! The CPU side: [`CpuTape`] runs tapes of ops with the twins in `cpu.rs`, and [`CpuTrainer`]
//! trains a network with it. This is the reference the GPU trainer is checked against, and a
//! usable trainer on its own.
//!
//! Like the GPU side it allocates every tensor once, at the largest batch, and a smaller batch
//! only uses the first rows.

use cpu_matrix::Matrix;

use crate::network::{
    COUNTER_BAD_LABELS, COUNTER_CORRECT, COUNTER_LOSS_HI, COUNTER_LOSS_LO, COUNTER_NON_FINITE, COUNTER_ROWS, COUNTER_STEP,
    join_parameters, split_parameters,
};
use crate::tape::{Elem, Mode, Op, TensorId, TensorInfo, View};
use crate::{Fusion, LayersError, Metrics, Network, NetworkSpec, Optimizer, cpu};

/// Tensors in CPU memory, and the CPU implementation of every [`Op`].
pub struct CpuTape {
    max_batch: usize,
    batch: usize,
    /// f32 tensors by id (empty for u32 tensors).
    f32s: Vec<Vec<f32>>,
    /// u32 tensors by id (empty for f32 tensors).
    u32s: Vec<Vec<u32>>,
}

impl CpuTape {
    /// Allocates `tensors` (zeroed) for batches of up to `max_batch` rows.
    pub fn new(tensors: &[TensorInfo], max_batch: usize) -> Result<Self, LayersError> {
        if max_batch == 0 {
            return Err(LayersError::Batch { batch: 0, max_batch });
        }
        let mut f32s = Vec::new();
        let mut u32s = Vec::new();
        for t in tensors {
            let n = t.capacity(max_batch);
            let (f, u) = if t.elem == Elem::F32 { (n, 0) } else { (0, n) };
            f32s.push(vec![0.0; f]);
            u32s.push(vec![0; u]);
        }
        Ok(Self { max_batch, batch: max_batch, f32s, u32s })
    }

    pub fn batch(&self) -> usize {
        self.batch
    }

    /// Sets the live batch (1 to `max_batch`): ops use the first `batch` rows.
    pub fn set_batch(&mut self, batch: usize) -> Result<(), LayersError> {
        if batch == 0 || batch > self.max_batch {
            return Err(LayersError::Batch { batch, max_batch: self.max_batch });
        }
        self.batch = batch;
        Ok(())
    }

    /// The whole (capacity) f32 tensor `t`.
    pub fn f32(&self, t: TensorId) -> &[f32] {
        &self.f32s[t.0]
    }

    pub fn f32_mut(&mut self, t: TensorId) -> &mut [f32] {
        &mut self.f32s[t.0]
    }

    /// The whole (capacity) u32 tensor `t`.
    pub fn u32(&self, t: TensorId) -> &[u32] {
        &self.u32s[t.0]
    }

    pub fn u32_mut(&mut self, t: TensorId) -> &mut [u32] {
        &mut self.u32s[t.0]
    }

    /// Runs the ops in order.
    pub fn run(&mut self, ops: &[Op]) -> Result<(), LayersError> {
        ops.iter().try_for_each(|op| self.run_op(op))
    }

    /// The live part of a view: `rows.at(batch) x cols` values.
    fn len(&self, v: View) -> usize {
        v.rows.at(self.batch) * v.cols
    }

    fn get(&self, v: View) -> &[f32] {
        &self.f32s[v.tensor.0][..self.len(v)]
    }

    /// Runs `f` on a tensor taken out of the store (so the others stay readable), then puts it back.
    fn with_mut<T>(&mut self, t: TensorId, f: impl FnOnce(&Self, &mut Vec<f32>) -> T) -> T {
        let mut data = std::mem::take(&mut self.f32s[t.0]);
        let out = f(self, &mut data);
        self.f32s[t.0] = data;
        out
    }

    /// Adds one loss op's statistics to the counters, as the loss kernels do with atomics.
    fn count(&mut self, counters: TensorId, stats: cpu::LossStats, mode: Mode) {
        let c = &mut self.u32s[counters.0];
        // 64-bit fixed point in two words, wrapping like the GPU's atomics.
        let sum = ((c[COUNTER_LOSS_HI] as u64) << 32 | c[COUNTER_LOSS_LO] as u64).wrapping_add(stats.loss_fixed);
        c[COUNTER_LOSS_LO] = sum as u32;
        c[COUNTER_LOSS_HI] = (sum >> 32) as u32;
        c[COUNTER_NON_FINITE] += stats.non_finite;
        c[COUNTER_ROWS] += stats.rows;
        c[COUNTER_CORRECT] += stats.correct;
        c[COUNTER_BAD_LABELS] += stats.bad_labels;
        if mode == Mode::Train {
            c[COUNTER_STEP] += 1;
        }
    }

    fn run_op(&mut self, op: &Op) -> Result<(), LayersError> {
        let b = self.batch;
        let inv_rows = 1.0 / b as f32;
        match *op {
            Op::Matmul { a, b: bv, out, product } => {
                let r = cpu::matmul(self.get(a), (a.rows.at(b), a.cols), self.get(bv), (bv.rows.at(b), bv.cols), product)?;
                self.f32s[out.tensor.0][..r.len()].copy_from_slice(&r);
            }
            Op::BiasAdd { y, bias, offset } => {
                let n = self.len(y);
                self.with_mut(y.tensor, |s, yv| cpu::bias_add(&mut yv[..n], y.cols, &s.f32s[bias.0][offset..offset + y.cols]));
            }
            Op::Activate { y, act } => {
                let n = self.len(y);
                cpu::activation_forward(&mut self.f32s[y.tensor.0][..n], act);
            }
            Op::ActivateBackward { dy, y, act } => {
                let n = self.len(dy);
                self.with_mut(dy.tensor, |s, d| cpu::activation_backward(&mut d[..n], s.get(y), act));
            }
            Op::SoftmaxCrossEntropy { logits, labels, out, counters, mode } => {
                let n = self.len(out);
                let labels = self.u32s[labels.0][..b].to_vec();
                let stats = self.with_mut(out.tensor, |s, o| {
                    cpu::softmax_cross_entropy(s.get(logits), logits.cols, &labels, mode, inv_rows, &mut o[..n])
                });
                self.count(counters, stats, mode);
            }
            Op::ColumnSum { x, out, offset } => {
                self.with_mut(out, |s, o| cpu::column_sum(s.get(x), x.cols, &mut o[offset..offset + x.cols]));
            }
            Op::Update { params, grads, state, counters, len, opt } => {
                let step = self.u32s[counters.0][COUNTER_STEP];
                let g = self.f32s[grads.0][..len].to_vec();
                let mut st = std::mem::take(&mut self.f32s[state.0]);
                cpu::update(&mut self.f32s[params.0][..len], &g, &mut st, opt, step);
                self.f32s[state.0] = st;
            }
            Op::LinearForward { x, params, y, act } => {
                let r = cpu::linear_forward(self.get(x), b, x.cols, &self.f32s[params.0], y.cols, act)?;
                self.f32s[y.tensor.0][..r.len()].copy_from_slice(&r);
            }
            Op::OutputLayer { h, params, labels, out, dh, counters, mode } => {
                let labels = self.u32s[labels.0][..b].to_vec();
                let n_out = self.len(out);
                let mut o = std::mem::take(&mut self.f32s[out.tensor.0]);
                let mut d = dh.map(|(v, _)| std::mem::take(&mut self.f32s[v.tensor.0]));
                let dh_arg = match (dh, d.as_mut()) {
                    (Some((v, act)), Some(d)) => Some((&mut d[..self.len(v)], act)),
                    _ => None,
                };
                let stats = cpu::output_layer(
                    self.get(h),
                    b,
                    h.cols,
                    &self.f32s[params.0],
                    out.cols,
                    &labels,
                    mode,
                    inv_rows,
                    &mut o[..n_out],
                    dh_arg,
                );
                self.f32s[out.tensor.0] = o;
                if let (Some((v, _)), Some(d)) = (dh, d) {
                    self.f32s[v.tensor.0] = d;
                }
                self.count(counters, stats?, mode);
            }
            Op::LinearBackwardInput { dy, params, h, act, dx } => {
                let r = cpu::linear_backward_input(self.get(dy), b, dy.cols, &self.f32s[params.0], dx.cols, self.get(h), act)?;
                self.f32s[dx.tensor.0][..r.len()].copy_from_slice(&r);
            }
            Op::LinearUpdate { first, second, counters, opt } => {
                let step = self.u32s[counters.0][COUNTER_STEP];
                for l in std::iter::once(first).chain(second) {
                    let g = cpu::linear_grads(self.get(l.x), b, l.x.cols, self.get(l.dy), l.dy.cols)?;
                    self.f32s[l.grads.0][..g.len()].copy_from_slice(&g);
                    let mut st = std::mem::take(&mut self.f32s[l.state.0]);
                    cpu::update(&mut self.f32s[l.params.0][..g.len()], &g, &mut st, opt, step);
                    self.f32s[l.state.0] = st;
                }
            }
        }
        Ok(())
    }
}

/// Trains a [`NetworkSpec`] on the CPU. Batches come in as `&Matrix` and label slices.
pub struct CpuTrainer {
    net: Network,
    tape: CpuTape,
}

impl CpuTrainer {
    /// A trainer for batches of up to `max_batch` rows, parameters from `spec.init_parameters(seed)`.
    pub fn new(spec: &NetworkSpec, optimizer: Optimizer, max_batch: usize, seed: u64) -> Result<Self, LayersError> {
        Self::with_fusion(spec, optimizer, max_batch, seed, Fusion::Composed)
    }

    /// Like [`CpuTrainer::new`], running the `fusion` tapes (both compute the same math).
    pub fn with_fusion(
        spec: &NetworkSpec,
        optimizer: Optimizer,
        max_batch: usize,
        seed: u64,
        fusion: Fusion,
    ) -> Result<Self, LayersError> {
        let net = Network::new(spec, optimizer, fusion)?;
        let tape = CpuTape::new(&net.tensors, max_batch)?;
        let mut trainer = Self { net, tape };
        trainer.load_parameters(&spec.init_parameters(seed))?;
        Ok(trainer)
    }

    pub fn network(&self) -> &Network {
        &self.net
    }

    pub fn max_batch(&self) -> usize {
        self.tape.max_batch
    }

    /// The learning rate the next step uses.
    pub fn learning_rate(&self) -> f32 {
        self.net.optimizer.lr()
    }

    /// One training step on `x: [rows, input]` with `labels: [rows]` (forward, loss, backward,
    /// optimizer). Loss and accuracy accumulate until [`CpuTrainer::take_metrics`].
    pub fn train_step<L: Copy + Into<u32>>(&mut self, x: &Matrix, labels: &[L]) -> Result<(), LayersError> {
        self.load_batch(x, labels)?;
        self.tape.run(&self.net.train)
    }

    /// Forward and loss only on `x: [rows, input]`, `labels: [rows]`; adds to the metrics.
    pub fn eval_batch<L: Copy + Into<u32>>(&mut self, x: &Matrix, labels: &[L]) -> Result<(), LayersError> {
        self.load_batch(x, labels)?;
        self.tape.run(&self.net.eval)
    }

    /// Softmax probabilities `[rows, classes]` for `x: [rows, input]` (any number of rows).
    pub fn predict_probs(&mut self, x: &Matrix) -> Result<Matrix, LayersError> {
        let spec = &self.net.spec;
        let classes = spec.output;
        if x.cols != spec.input || x.rows == 0 {
            return Err(LayersError::Shape {
                what: "input".into(),
                expected: format!("[rows >= 1, {}]", spec.input),
                got: format!("[{}, {}]", x.rows, x.cols),
            });
        }
        let mut probs = Vec::with_capacity(x.rows * classes);
        for chunk in x.data.chunks(self.tape.max_batch * x.cols) {
            let rows = chunk.len() / x.cols;
            self.tape.set_batch(rows)?;
            self.tape.f32_mut(self.net.input)[..chunk.len()].copy_from_slice(chunk);
            self.tape.run(&self.net.predict)?;
            probs.extend_from_slice(&self.tape.f32(self.net.out)[..rows * classes]);
        }
        Ok(Matrix::new(x.rows, classes, probs)?)
    }

    /// Loss and accuracy since the last call; resets them. Errors on a non-finite loss.
    pub fn take_metrics(&mut self) -> Result<Metrics, LayersError> {
        let c = self.tape.u32_mut(self.net.counters);
        let snapshot = c.to_vec();
        c[..COUNTER_STEP].iter_mut().for_each(|v| *v = 0);
        self.net.metrics_from_counters(&snapshot)
    }

    /// `[W1, b1, W2, b2, ...]`, `W: [in, out]`, `b: [1, out]`.
    pub fn parameters(&self) -> Vec<Matrix> {
        let flat: Vec<Vec<f32>> = self.net.layers.iter().map(|l| self.tape.f32(l.params).to_vec()).collect();
        split_parameters(&self.net.spec, &flat)
    }

    /// The gradients of the last training step, shaped like [`CpuTrainer::parameters`].
    pub fn gradients(&self) -> Vec<Matrix> {
        let flat: Vec<Vec<f32>> = self.net.layers.iter().map(|l| self.tape.f32(l.grads).to_vec()).collect();
        split_parameters(&self.net.spec, &flat)
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
        let flat = join_parameters(&self.net.spec, params)?;
        for (layer, p) in self.net.layers.iter().zip(flat) {
            self.tape.f32_mut(layer.params).copy_from_slice(&p);
            self.tape.f32_mut(layer.state).iter_mut().for_each(|v| *v = 0.0);
        }
        self.tape.u32_mut(self.net.counters)[COUNTER_STEP] = 0;
        Ok(())
    }

    fn load_batch<L: Copy + Into<u32>>(&mut self, x: &Matrix, labels: &[L]) -> Result<(), LayersError> {
        let labels: Vec<u32> = labels.iter().map(|&l| l.into()).collect();
        self.net.check_batch(x.rows, x.cols, &labels, self.tape.max_batch)?;
        self.tape.set_batch(x.rows)?;
        self.tape.f32_mut(self.net.input)[..x.data.len()].copy_from_slice(&x.data);
        self.tape.u32_mut(self.net.labels)[..labels.len()].copy_from_slice(&labels);
        Ok(())
    }
}
