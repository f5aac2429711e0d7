//! [`GpuTrainer`]: trains a network on the GPU. It builds the [`Network`]'s tapes into one
//! [`GpuStore`] (train, eval, predict) and from then on only records them; see the crate docs for
//! the calling pattern.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use common::GpuContext;
use cpu_matrix::Matrix;

use crate::gpu::buffers::Allocations;
use crate::gpu::dispatch::ByteImages;
use crate::gpu::kernels::{KernelId, Kernels};
use crate::gpu::store::{GpuStore, TapeId};
use crate::network::{flatten_parameters, unflatten_parameters};
use crate::routing::{Routing, routes_by_shape};
use crate::tiles::FusedTiles;
use crate::tape::TensorId;
use crate::wgsl::{COUNTER_STEP, COUNTERS};
use crate::{Fusion, LayersError, Metrics, Network, NetworkSpec, Optimizer};

/// The train and eval tapes of a [`GpuTrainer`] that gather their batches from one
/// [`ByteImages`] source (see [`GpuTrainer::add_gathered`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gathered {
    train: TapeId,
    eval: GatheredEval,
}

impl Gathered {
    /// The evaluation tape alone, for [`GpuTrainer::record_gathered_eval`].
    pub fn eval(self) -> GatheredEval {
        self.eval
    }
}

/// An evaluation tape of a [`GpuTrainer`] that gathers its batches from one [`ByteImages`]
/// source: [`Gathered::eval`], or [`GpuTrainer::add_gathered_eval`] for a trainer that only
/// evaluates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GatheredEval(TapeId);

/// Trains a [`NetworkSpec`] on the GPU. See the crate docs for the calling pattern.
pub struct GpuTrainer {
    net: Network,
    /// The current learning rate (f32 bits): `set_learning_rate` changes it through `&self`.
    lr: AtomicU32,
    /// Whether the fused updates write the gradients out: `keep_gradients` changes it.
    keeps_gradients: AtomicBool,
    store: GpuStore,
    train: TapeId,
    eval: TapeId,
    predict: TapeId,
    /// The first dispatch of a step is `linear_forward_tiled`.
    first_tiled: bool,
    /// False for [`GpuTrainer::for_evaluation`]: its training tape is empty.
    trains: bool,
}

impl GpuTrainer {
    /// A trainer with the fused kernels, for batches of up to `max_batch` rows, parameters from
    /// `spec.init_parameters(seed)`. Compiles the kernels it needs.
    pub fn new(
        ctx: &GpuContext,
        spec: &NetworkSpec,
        optimizer: Optimizer,
        max_batch: usize,
        seed: u64,
    ) -> Result<Self, LayersError> {
        let kernels = Kernels::with_tiles(FusedTiles::for_network(max_batch, &spec.layer_shapes()));
        Self::with_options(ctx, &kernels, spec, optimizer, max_batch, seed, Fusion::Fused)
    }

    /// Like [`GpuTrainer::new`], sharing compiled `kernels` and choosing the tapes' [`Fusion`]
    /// (the fused tapes route wide layers by [`Routing::Auto`]).
    pub fn with_options(
        ctx: &GpuContext,
        kernels: &Arc<Kernels>,
        spec: &NetworkSpec,
        optimizer: Optimizer,
        max_batch: usize,
        seed: u64,
        fusion: Fusion,
    ) -> Result<Self, LayersError> {
        Self::with_routing(ctx, kernels, spec, optimizer, max_batch, seed, fusion, Routing::Auto)
    }

    /// Like [`GpuTrainer::with_options`], choosing which hidden layers of the fused tapes run
    /// their products through stage 03's matmul (`kernels`' precision) instead of the fused
    /// layer kernels.
    #[allow(clippy::too_many_arguments)]
    pub fn with_routing(
        ctx: &GpuContext,
        kernels: &Arc<Kernels>,
        spec: &NetworkSpec,
        optimizer: Optimizer,
        max_batch: usize,
        seed: u64,
        fusion: Fusion,
        routing: Routing,
    ) -> Result<Self, LayersError> {
        Self::build(ctx, kernels, spec, optimizer, (max_batch, seed), fusion, routing, true)
    }

    /// A trainer that only evaluates and predicts (stage 05's evaluator, sized for the test
    /// set): like [`GpuTrainer::with_options`], but its training tape is empty, so nothing a
    /// training step alone needs is prepared (the partial sums of a forward split over k, for
    /// one). [`GpuTrainer::train_steps`] and [`GpuTrainer::add_gathered`] refuse; its
    /// parameters come from [`GpuTrainer::load_parameters`] or [`GpuTrainer::copy_parameters_to`].
    pub fn for_evaluation(
        ctx: &GpuContext,
        kernels: &Arc<Kernels>,
        spec: &NetworkSpec,
        optimizer: Optimizer,
        max_batch: usize,
        seed: u64,
    ) -> Result<Self, LayersError> {
        Self::build(ctx, kernels, spec, optimizer, (max_batch, seed), Fusion::Fused, Routing::Auto, false)
    }

    #[allow(clippy::too_many_arguments)]
    fn build(
        ctx: &GpuContext,
        kernels: &Arc<Kernels>,
        spec: &NetworkSpec,
        optimizer: Optimizer,
        (max_batch, seed): (usize, u64),
        fusion: Fusion,
        routing: Routing,
        trains: bool,
    ) -> Result<Self, LayersError> {
        let routed: Vec<bool> = spec
            .layer_shapes()
            .iter()
            .map(|&(inputs, outputs)| match routing {
                Routing::Auto => routes_by_shape(max_batch, inputs, outputs, kernels.matmul_precision_on(ctx)),
                Routing::Never => false,
                Routing::Always => true,
            })
            .collect();
        let net = Network::with_routes(spec, optimizer, fusion, seed, &routed)?;
        let mut store = GpuStore::new(ctx, &net.tensors, max_batch)?;
        let train = store.add_tape(ctx, kernels, if trains { &net.train } else { &[] })?;
        let eval = store.add_tape(ctx, kernels, &net.eval)?;
        let predict = store.add_tape(ctx, kernels, &net.predict)?;
        let lr = AtomicU32::new(optimizer.lr().to_bits());
        // Whether the first layer runs linear_forward_tiled (which does not gather:
        // `can_gather`), read from the evaluation tape, which every trainer has (a training
        // tape's may be split over k: the same layer, the same answer).
        let first_tiled = store.dispatch_names(eval).first() == Some(&KernelId::LinearForwardTiled.name());
        let keeps_gradients = AtomicBool::new(false);
        let trainer = Self { net, lr, keeps_gradients, store, train, eval, predict, first_tiled, trains };
        trainer.load_parameters(ctx, &spec.init_parameters(seed))?;
        Ok(trainer)
    }

    pub fn network(&self) -> &Network {
        &self.net
    }

    /// `[max_batch, input]` f32, row-major: write a batch here (e.g. with a gather kernel), then
    /// [`GpuTrainer::set_batch`] and record a step.
    pub fn input(&self) -> &wgpu::Buffer {
        self.store.buffer(self.net.input)
    }

    /// `[max_batch]` u32: the labels of the batch in [`GpuTrainer::input`].
    pub fn labels(&self) -> &wgpu::Buffer {
        self.store.buffer(self.net.labels)
    }

    pub fn max_batch(&self) -> usize {
        self.store.max_batch()
    }

    /// The batch size the next submission runs with.
    pub fn batch(&self) -> usize {
        self.store.batch()
    }

    /// Dispatches one recorded training step makes.
    pub fn dispatches_per_step(&self) -> usize {
        self.store.dispatches(self.train)
    }

    /// The kernel each dispatch of a training step runs: of [`GpuTrainer::record_step`], or of
    /// [`GpuTrainer::record_gathered_step`] with `gathered`.
    pub fn step_kernels(&self, gathered: Option<Gathered>) -> Vec<&'static str> {
        self.store.dispatch_names(gathered.map_or(self.train, |g| g.train))
    }

    /// The GPU tensor store underneath, and the id of its training tape (to time single kernels with
    /// [`GpuStore::record_one`]; [`GpuStore::dispatch_names`] says which kernel each runs).
    pub fn store(&self) -> (&GpuStore, TapeId) {
        (&self.store, self.train)
    }

    /// Buffers, bind groups and bytes this trainer has allocated (all of it at construction).
    pub fn allocations(&self) -> Allocations {
        self.store.allocations()
    }

    /// Sets the live batch size (1 to `max_batch`) for the NEXT SUBMISSION: it writes the batch
    /// uniform through the queue, so it applies to every step of that submission. A smaller
    /// last batch therefore goes in a submission of its own.
    pub fn set_batch(&self, ctx: &GpuContext, batch: usize) -> Result<(), LayersError> {
        // Queue writes, inside the error scope (a lost device is an `Err`, not a panic).
        ctx.scoped(|| self.store.set_batch(ctx, batch))?
    }

    /// Changes the learning rate from the next submission on, keeping the optimizer state
    /// (momentum, Adam's moments and step count). For schedules: call it between epochs.
    pub fn set_learning_rate(&self, ctx: &GpuContext, lr: f32) -> Result<(), LayersError> {
        self.net.optimizer.with_lr(lr).validate()?;
        ctx.scoped(|| self.store.set_learning_rate(ctx, lr))?;
        self.lr.store(lr.to_bits(), Ordering::Relaxed);
        Ok(())
    }

    /// Whether the training steps from the next submission on keep their gradients for
    /// [`GpuTrainer::gradients`] (off at first). The fused update computes each gradient in
    /// registers and moves its parameter at once; writing the gradients out as well is 4 bytes
    /// more per parameter and step (0.45 us of the update's 11.4 for 784-512-256-10 at batch 64
    /// on an H100), so only checks and inspection ask for it.
    pub fn keep_gradients(&self, ctx: &GpuContext, keep: bool) -> Result<(), LayersError> {
        ctx.scoped(|| self.store.set_keep_gradients(ctx, keep))?;
        self.keeps_gradients.store(keep, Ordering::Relaxed);
        Ok(())
    }

    /// The learning rate the next submission uses.
    pub fn learning_rate(&self) -> f32 {
        f32::from_bits(self.lr.load(Ordering::Relaxed))
    }

    /// Uploads `x: [rows, input]` and `labels: [rows]` (checked: widths, counts, label range)
    /// and sets the batch to `rows`. For data already on the GPU, write into
    /// [`GpuTrainer::input`] / [`GpuTrainer::labels`] instead.
    pub fn write_batch<L: Copy + Into<u32>>(&self, ctx: &GpuContext, x: &Matrix, labels: &[L]) -> Result<(), LayersError> {
        let labels: Vec<u32> = labels.iter().map(|&l| l.into()).collect();
        self.net.check_batch(x.rows, x.cols, &labels, self.max_batch())?;
        Network::check_finite_input(&x.data, x.cols)?;
        self.store.write_f32(ctx, self.net.input, &x.data)?;
        self.store.write_u32(ctx, self.net.labels, &labels)?;
        self.set_batch(ctx, x.rows)
    }

    /// Records one training step (forward, loss, backward, optimizer) into `pass`. The loss sum
    /// and correct count accumulate on the GPU; read them with [`GpuTrainer::take_metrics`].
    /// (Nothing, for a trainer made by [`GpuTrainer::for_evaluation`].)
    pub fn record_step(&self, pass: &mut wgpu::ComputePass<'_>) {
        self.store.record(self.train, pass);
    }

    /// Whether [`GpuTrainer::add_gathered`] works for this network: its first op must be a
    /// fused `linear_forward` (a hidden layer, not routed through stage 03's matmul) that runs
    /// `linear_forward` or `forward_output`, not `linear_forward_tiled` (which reads a ready
    /// input: a separate gather dispatch before it is faster, stage 04's "Wide layers").
    pub fn can_gather(&self) -> bool {
        self.net.first_op_gathers() && !self.first_tiled
    }

    /// Prepares train and eval tapes whose first dispatch gathers batch `slot` of `source` itself
    /// (and keeps it in [`GpuTrainer::input`] and [`GpuTrainer::labels`] for the rest of the
    /// step): one dispatch per step fewer than a gather kernel plus [`GpuTrainer::record_step`].
    /// Where it applies (one merged hidden layer, [`FusedTiles::runs_split_step`]), the training
    /// tape runs SPLIT: each update also computes the next batch's `x W1` ([`GpuStore::add_split_tape`];
    /// record ranges of steps with [`GpuTrainer::record_gathered_steps`]).
    /// Errors unless [`GpuTrainer::can_gather`].
    pub fn add_gathered(&mut self, ctx: &GpuContext, kernels: &Kernels, source: &ByteImages<'_>) -> Result<Gathered, LayersError> {
        self.check_trains()?;
        if !self.can_gather() {
            return Err(LayersError::Spec(
                "only a network whose first layer runs the fused linear_forward can gather its batches".into(),
            ));
        }
        let labels = self.net.labels;
        let train = match self.store.add_split_tape(ctx, kernels, &self.net.train, labels, source)? {
            Some(split) => split,
            None => self.store.add_gathered_tape(ctx, kernels, &self.net.train, labels, source)?,
        };
        let eval = self.add_gathered_eval(ctx, kernels, source)?;
        // The new tape's uniforms start from the optimizer as built: give them the learning rate
        // and the gradients' keeping as they are now.
        let (lr, keep) = (self.learning_rate(), self.keeps_gradients.load(Ordering::Relaxed));
        ctx.scoped(|| {
            self.store.set_learning_rate(ctx, lr);
            self.store.set_keep_gradients(ctx, keep);
        })?;
        Ok(Gathered { train, eval })
    }

    /// Prepares only the evaluation tape of [`GpuTrainer::add_gathered`]: for a trainer that
    /// evaluates in bigger batches than the one that trains (stage 05's test set). Errors unless
    /// [`GpuTrainer::can_gather`].
    pub fn add_gathered_eval(&mut self, ctx: &GpuContext, kernels: &Kernels, source: &ByteImages<'_>) -> Result<GatheredEval, LayersError> {
        if !self.can_gather() {
            return Err(LayersError::Spec(
                "only a network whose first layer runs the fused linear_forward can gather its batches".into(),
            ));
        }
        Ok(GatheredEval(self.store.add_gathered_tape(ctx, kernels, &self.net.eval, self.net.labels, source)?))
    }

    /// Records one training step on batch `slot` of a gathered source (set the batch size to
    /// the slot's row count first, as for [`GpuTrainer::record_step`]). For many steps use
    /// [`GpuTrainer::record_gathered_steps`]: a split step recorded alone has its prologue too.
    pub fn record_gathered_step(&self, gathered: Gathered, slot: usize, pass: &mut wgpu::ComputePass<'_>) {
        self.store.record_at(gathered.train, slot, pass);
    }

    /// Records one training step per batch in `slots` (all of the same size), in order: in the
    /// split form one prologue dispatch, then two per step.
    pub fn record_gathered_steps(&self, gathered: Gathered, slots: std::ops::Range<usize>, pass: &mut wgpu::ComputePass<'_>) {
        self.store.record_steps(gathered.train, slots, pass);
    }

    /// The training tape of `gathered`, for [`GpuStore::record_one`] and
    /// [`GpuStore::dispatch_names`].
    pub fn gathered_train_tape(&self, gathered: Gathered) -> TapeId {
        gathered.train
    }

    /// Whether the gathered training steps run split ([`GpuTrainer::add_gathered`]).
    pub fn gathered_split(&self, gathered: Gathered) -> bool {
        self.store.is_split(gathered.train)
    }

    /// Records forward + loss of batch `slot` of a gathered source; adds to the metrics.
    pub fn record_gathered_eval(&self, eval: GatheredEval, slot: usize, pass: &mut wgpu::ComputePass<'_>) {
        self.store.record_at(eval.0, slot, pass);
    }

    /// Records forward + loss only (no gradients, no update); adds to the same metrics.
    pub fn record_eval(&self, pass: &mut wgpu::ComputePass<'_>) {
        self.store.record(self.eval, pass);
    }

    /// Convenience: `steps` training steps on the batch already in place, one command buffer,
    /// one compute pass, one submit. Does not wait for the GPU.
    pub fn train_steps(&self, ctx: &GpuContext, steps: usize) -> Result<(), LayersError> {
        self.check_trains()?;
        self.store.run(ctx, self.train, steps)
    }

    fn check_trains(&self) -> Result<(), LayersError> {
        if self.trains {
            return Ok(());
        }
        Err(LayersError::Spec("this GpuTrainer only evaluates (GpuTrainer::for_evaluation): it has no training step".into()))
    }

    /// Convenience: one evaluation of the batch in place, submitted. Does not wait.
    pub fn eval(&self, ctx: &GpuContext) -> Result<(), LayersError> {
        self.store.run(ctx, self.eval, 1)
    }

    /// Loss and accuracy accumulated on the GPU since the last call; resets them. Waits for the
    /// GPU (native targets). Errors if the loss is NaN or infinite, or if labels out of range
    /// were met.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn take_metrics(&self, ctx: &GpuContext) -> Result<Metrics, LayersError> {
        common::block_on(self.take_metrics_async(ctx))
    }

    /// [`GpuTrainer::take_metrics`] on every target: in a browser the read-back completes
    /// through the event loop, so training code awaits this instead.
    pub async fn take_metrics_async(&self, ctx: &GpuContext) -> Result<Metrics, LayersError> {
        let c = self.store.read_u32_async(ctx, self.net.counters, COUNTERS).await?;
        // Zero loss, rows, correct and bad labels; keep the step count (Adam needs it).
        self.store.write_u32(ctx, self.net.counters, &[0; COUNTER_STEP])?;
        self.net.metrics_from_counters(&c)
    }

    /// `[W1, b1, W2, b2, ...]`, `W: [in, out]`, `b: [1, out]`. Waits for the GPU (native targets).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn parameters(&self, ctx: &GpuContext) -> Result<Vec<Matrix>, LayersError> {
        common::block_on(self.parameters_async(ctx))
    }

    /// [`GpuTrainer::parameters`] on every target.
    pub async fn parameters_async(&self, ctx: &GpuContext) -> Result<Vec<Matrix>, LayersError> {
        self.read_layers(ctx, |l| l.params).await
    }

    /// The gradients of the last training step, shaped like [`GpuTrainer::parameters`] (native
    /// targets). Errors unless [`GpuTrainer::keep_gradients`] was on for that step.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn gradients(&self, ctx: &GpuContext) -> Result<Vec<Matrix>, LayersError> {
        if !self.keeps_gradients.load(Ordering::Relaxed) {
            return Err(LayersError::Spec(
                "this trainer does not keep its gradients: call GpuTrainer::keep_gradients(ctx, true) before the steps".into(),
            ));
        }
        common::block_on(self.read_layers(ctx, |l| l.grads))
    }

    async fn read_layers(&self, ctx: &GpuContext, which: impl Fn(&crate::Linear) -> TensorId) -> Result<Vec<Matrix>, LayersError> {
        let mut flat = Vec::new();
        for l in &self.net.linears {
            flat.push(self.store.read_f32_async(ctx, which(l), (l.inputs + 1) * l.outputs).await?);
        }
        Ok(unflatten_parameters(&self.net.spec, &flat))
    }

    /// Copies this trainer's parameters into `other`'s on the GPU (one submission of buffer
    /// copies; does not wait), leaving `other`'s optimizer state and metrics as they are. For an
    /// evaluator: the same network in bigger batches (stage 05 evaluates the test set in
    /// batches of 1,000 rows while training in batches of 64). Errors if the networks differ.
    pub fn copy_parameters_to(&self, ctx: &GpuContext, other: &GpuTrainer) -> Result<(), LayersError> {
        if self.net.spec != other.net.spec {
            return Err(LayersError::Spec(format!(
                "copy_parameters_to: the networks differ ({} and {})",
                self.net.spec.describe(),
                other.net.spec.describe()
            )));
        }
        ctx.scoped(|| {
            let mut encoder = ctx.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("copy parameters") });
            for (from, to) in self.net.linears.iter().zip(&other.net.linears) {
                let bytes = ((from.inputs + 1) * from.outputs * std::mem::size_of::<f32>()) as u64;
                encoder.copy_buffer_to_buffer(self.store.buffer(from.params), 0, other.store.buffer(to.params), 0, bytes);
            }
            ctx.queue.submit([encoder.finish()]);
        })?;
        Ok(())
    }

    /// Replaces the parameters (shapes checked: `[W1, b1, ...]`) and resets the optimizer state
    /// and step count. Takes effect at the next submit; reads nothing back.
    pub fn load_parameters(&self, ctx: &GpuContext, params: &[Matrix]) -> Result<(), LayersError> {
        let flat = flatten_parameters(&self.net.spec, params)?;
        // Queue writes, inside the error scope (a lost device is an `Err`, not a panic).
        ctx.scoped(|| {
            for (layer, p) in self.net.linears.iter().zip(&flat) {
                self.store.write_f32(ctx, layer.params, p)?;
                let state_len = self.net.tensors[layer.state.0].capacity(self.max_batch());
                self.store.write_f32(ctx, layer.state, &vec![0.0; state_len])?;
            }
            // The step count (and the step the fused dropout masks are drawn for) alone go back
            // to 0; the loss and accuracy sums stay.
            let step_offset = (COUNTER_STEP * std::mem::size_of::<u32>()) as u64;
            let zeros = [0u32; COUNTERS - COUNTER_STEP];
            ctx.queue.write_buffer(self.store.buffer(self.net.counters), step_offset, bytemuck::cast_slice(&zeros));
            Ok(())
        })?
    }

    /// Softmax probabilities `[rows, classes]` for `x: [rows, input]`, any number of rows (run
    /// in chunks of `max_batch`). Overwrites the input buffer; restores the batch size. Waits
    /// for the GPU (native targets).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn predict_probs(&self, ctx: &GpuContext, x: &Matrix) -> Result<Matrix, LayersError> {
        common::block_on(self.predict_probs_async(ctx, x))
    }

    /// [`GpuTrainer::predict_probs`] on every target.
    pub async fn predict_probs_async(&self, ctx: &GpuContext, x: &Matrix) -> Result<Matrix, LayersError> {
        let spec = &self.net.spec;
        if x.cols != spec.input() || x.rows == 0 {
            return Err(LayersError::Shape {
                what: "input".into(),
                expected: format!("[rows >= 1, {}]", spec.input()),
                got: format!("[{}, {}]", x.rows, x.cols),
            });
        }
        let previous = self.batch();
        let mut probs = Vec::with_capacity(x.rows * spec.output());
        for chunk in x.data.chunks(self.max_batch() * x.cols) {
            let rows = chunk.len() / x.cols;
            self.store.write_f32(ctx, self.net.input, chunk)?;
            self.set_batch(ctx, rows)?;
            self.store.run(ctx, self.predict, 1)?;
            probs.extend(self.store.read_f32_async(ctx, self.net.out, rows * spec.output()).await?);
        }
        self.set_batch(ctx, previous)?;
        Ok(Matrix::new(x.rows, spec.output(), probs)?)
    }
}
