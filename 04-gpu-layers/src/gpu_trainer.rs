//! The GPU side: [`GpuTape`] allocates a list of tensors once (through the [`BufferManager`])
//! and turns each op of a tape into a prepared dispatch once; [`GpuTrainer`] trains a network
//! with it, and from then on only records.
//!
//! A training step is the list of prepared dispatches of the train tape, recorded into the
//! caller's compute pass: no buffer, bind group or pipeline is made, nothing is read back, and
//! the CPU does no arithmetic. The batch size lives in one uniform buffer that every kernel
//! reads, so a smaller last batch is one 16-byte write, not a reallocation.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use common::{GpuContext, GpuError};
use cpu_matrix::Matrix;
use gpu_matmul::{GpuMatrix, MatmulCall, Transpose};

use crate::buffers::{Allocations, BufferManager};
use crate::kernels::{BatchUniform, KernelId, Kernels, OptUniform, Params4, UpdateUniform};
use crate::network::{COUNTER_STEP, COUNTERS, join_parameters, split_parameters};
use crate::tape::{Dim, Elem, LayerUpdate, Op, Product, TensorId, TensorInfo, View};
use crate::{Activation, Fusion, LayersError, Metrics, Network, NetworkSpec, Optimizer};

/// One prepared op: everything a recording needs, made once.
enum Step {
    Kernel {
        pipeline: wgpu::ComputePipeline,
        bind_group: wgpu::BindGroup,
        groups: (u32, u32, u32),
        /// The optimizer uniform of an update op (its `lr` sits at byte [`LR_OFFSET`]).
        opt_uniform: Option<wgpu::Buffer>,
    },
    /// Stage 03's matmul; `dims` are its `(m, k, n)`, some of which follow the batch.
    Matmul { call: MatmulCall, dims: (Dim, Dim, Dim) },
}

impl Step {
    fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        match self {
            Step::Kernel { pipeline, bind_group, groups, .. } => {
                pass.set_pipeline(pipeline);
                pass.set_bind_group(0, bind_group, &[]);
                pass.dispatch_workgroups(groups.0, groups.1, groups.2);
            }
            Step::Matmul { call, .. } => call.record(pass),
        }
    }
}

/// Where `lr` sits in `OptUniform` and `UpdateUniform` (after four u32).
const LR_OFFSET: u64 = 16;

/// A prepared tape inside a [`GpuTape`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgramId(usize);

/// Tensors on the GPU, and tapes of ops prepared as dispatches over them.
pub struct GpuTape {
    max_batch: usize,
    batch: AtomicUsize,
    manager: BufferManager,
    /// One buffer per tensor, in the order given to [`GpuTape::new`].
    buffers: Vec<wgpu::Buffer>,
    elems: Vec<Elem>,
    batch_uniform: wgpu::Buffer,
    /// Bound where a kernel has bindings the op does not use (the fused output layer's `dh`
    /// when there is no layer below it, the second layer of a one-layer linear_update): one
    /// read-only and three writable placeholders, so no buffer is bound twice.
    placeholder: wgpu::Buffer,
    placeholders_rw: [wgpu::Buffer; 3],
    programs: Vec<Vec<Step>>,
}

impl GpuTape {
    /// Allocates every tensor, zeroed, for batches of up to `max_batch` rows.
    pub fn new(ctx: &GpuContext, tensors: &[TensorInfo], max_batch: usize) -> Result<Self, LayersError> {
        if max_batch == 0 {
            return Err(LayersError::Batch { batch: 0, max_batch });
        }
        let manager = BufferManager::new();
        let mut buffers = Vec::with_capacity(tensors.len());
        for t in tensors {
            buffers.push(manager.storage(ctx, &t.name, 4 * t.capacity(max_batch) as u64)?);
        }
        let batch_uniform = manager.uniform(ctx, "batch", &BatchUniform::new(max_batch));
        let placeholder = manager.storage(ctx, "placeholder", 16)?;
        let placeholders_rw = [
            manager.storage(ctx, "placeholder rw 0", 16)?,
            manager.storage(ctx, "placeholder rw 1", 16)?,
            manager.storage(ctx, "placeholder rw 2", 16)?,
        ];
        Ok(Self {
            max_batch,
            batch: AtomicUsize::new(max_batch),
            manager,
            buffers,
            elems: tensors.iter().map(|t| t.elem).collect(),
            batch_uniform,
            placeholder,
            placeholders_rw,
            programs: Vec::new(),
        })
    }

    /// Prepares `ops` (pipelines, uniforms, bind groups, workgroup counts) for recording.
    pub fn add_program(&mut self, ctx: &GpuContext, kernels: &Kernels, ops: &[Op]) -> Result<ProgramId, LayersError> {
        let steps = ops.iter().map(|op| self.prepare(ctx, kernels, op)).collect::<Result<Vec<_>, _>>()?;
        self.programs.push(steps);
        let id = ProgramId(self.programs.len() - 1);
        self.set_batch(ctx, self.batch())?; // new matmul steps get the current batch
        Ok(id)
    }

    /// Records every dispatch of `program` into `pass`.
    pub fn record(&self, program: ProgramId, pass: &mut wgpu::ComputePass<'_>) {
        self.programs[program.0].iter().for_each(|s| s.record(pass));
    }

    /// Records `program` `times` times into one pass and submits it. Does not wait.
    pub fn run(&self, ctx: &GpuContext, program: ProgramId, times: usize) -> Result<(), LayersError> {
        let mut encoder = ctx.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("tape") });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some("tape"), timestamp_writes: None });
            (0..times).for_each(|_| self.record(program, &mut pass));
        }
        ctx.scoped(|| ctx.queue.submit([encoder.finish()]))?;
        Ok(())
    }

    /// Records only dispatch `index` of `program` (for timing one kernel at a time).
    pub fn record_one(&self, program: ProgramId, index: usize, pass: &mut wgpu::ComputePass<'_>) {
        self.programs[program.0][index].record(pass);
    }

    /// Dispatches one recording of `program` makes.
    pub fn dispatches(&self, program: ProgramId) -> usize {
        self.programs[program.0].len()
    }

    pub fn buffer(&self, t: TensorId) -> &wgpu::Buffer {
        &self.buffers[t.0]
    }

    pub fn max_batch(&self) -> usize {
        self.max_batch
    }

    /// The batch size the next submission runs with.
    pub fn batch(&self) -> usize {
        self.batch.load(Ordering::Relaxed)
    }

    /// Buffers, bind groups and bytes allocated so far.
    pub fn allocations(&self) -> Allocations {
        self.manager.allocations()
    }

    /// Sets the live batch size (1 to `max_batch`) for the NEXT SUBMISSION: it writes the batch
    /// uniform (and stage 03's shape uniforms) through the queue.
    pub fn set_batch(&self, ctx: &GpuContext, batch: usize) -> Result<(), LayersError> {
        if batch == 0 || batch > self.max_batch {
            return Err(LayersError::Batch { batch, max_batch: self.max_batch });
        }
        ctx.queue.write_buffer(&self.batch_uniform, 0, bytemuck::bytes_of(&BatchUniform::new(batch)));
        for step in self.programs.iter().flatten() {
            if let Step::Matmul { call, dims } = step {
                call.set_dims(ctx, dims.0.at(batch), dims.1.at(batch), dims.2.at(batch))?;
            }
        }
        self.batch.store(batch, Ordering::Relaxed);
        Ok(())
    }

    /// Rewrites the learning rate of every optimizer op (from the next submit on); the
    /// optimizer state is kept.
    pub fn set_learning_rate(&self, ctx: &GpuContext, lr: f32) {
        for step in self.programs.iter().flatten() {
            if let Step::Kernel { opt_uniform: Some(u), .. } = step {
                ctx.queue.write_buffer(u, LR_OFFSET, bytemuck::bytes_of(&lr));
            }
        }
    }

    /// Writes `data` at the start of f32 tensor `t` (takes effect at the next submit).
    pub fn write_f32(&self, ctx: &GpuContext, t: TensorId, data: &[f32]) -> Result<(), LayersError> {
        self.write(ctx, t, Elem::F32, bytemuck::cast_slice(data))
    }

    /// Writes `data` at the start of u32 tensor `t`.
    pub fn write_u32(&self, ctx: &GpuContext, t: TensorId, data: &[u32]) -> Result<(), LayersError> {
        self.write(ctx, t, Elem::U32, bytemuck::cast_slice(data))
    }

    fn write(&self, ctx: &GpuContext, t: TensorId, elem: Elem, bytes: &[u8]) -> Result<(), LayersError> {
        let buffer = &self.buffers[t.0];
        if self.elems[t.0] != elem || bytes.len() as u64 > buffer.size() {
            return Err(LayersError::Shape {
                what: format!("write to tensor {}", t.0),
                expected: format!("at most {} bytes of {:?}", buffer.size(), self.elems[t.0]),
                got: format!("{} bytes of {elem:?}", bytes.len()),
            });
        }
        if !bytes.is_empty() {
            ctx.queue.write_buffer(buffer, 0, bytes);
        }
        Ok(())
    }

    /// Reads the first `len` values of f32 tensor `t` (waits for the GPU).
    pub fn read_f32(&self, ctx: &GpuContext, t: TensorId, len: usize) -> Result<Vec<f32>, LayersError> {
        Ok(ctx.read(&self.buffers[t.0], len)?)
    }

    /// Reads the first `len` values of u32 tensor `t` (waits for the GPU).
    pub fn read_u32(&self, ctx: &GpuContext, t: TensorId, len: usize) -> Result<Vec<u32>, LayersError> {
        Ok(ctx.read(&self.buffers[t.0], len)?)
    }

    /// Builds the dispatch for one op: uniforms, bind group, workgroup counts.
    fn prepare(&self, ctx: &GpuContext, kernels: &Kernels, op: &Op) -> Result<Step, LayersError> {
        let placeholder = &self.placeholder;
        let m = &self.manager;
        let buf = |v: TensorId| &self.buffers[v.0];
        let rows = |v: &View| v.rows.at(self.max_batch);
        let batch = &self.batch_uniform;
        let name = op.kernel_name();
        let kernel = |id: KernelId, uniform: &wgpu::Buffer, bound: &[&wgpu::Buffer], groups: (u32, u32, u32)| {
            let pipeline = kernels.pipeline(ctx, id)?;
            let mut all = bound.to_vec();
            all.push(uniform);
            let bind_group = m.bind_group(ctx, name, &pipeline, &all)?;
            let opt_uniform = matches!(id, KernelId::Sgd | KernelId::Adam | KernelId::LinearUpdate).then(|| uniform.clone());
            Ok::<Step, LayersError>(Step::Kernel { pipeline, bind_group, groups, opt_uniform })
        };
        let p4 = |a: usize, b: usize, c: u32, d: u32| m.uniform(ctx, name, &Params4([a as u32, b as u32, c, d]));
        let elementwise = |len: usize| ctx.workgroups_1d(len as u64, 256);
        let per_row = |rows: usize| ctx.workgroups_1d(rows as u64, 1);
        let act = |a: Activation| Activation::code(Some(a));
        // The loss kernels keep a row of logits in workgroup memory.
        if let Op::SoftmaxCrossEntropy { out, .. } | Op::OutputLayer { out, .. } = op {
            if out.cols > crate::MAX_CLASSES {
                return Err(LayersError::Spec(format!(
                    "{name}: {} classes; the loss kernels handle at most {}",
                    out.cols,
                    crate::MAX_CLASSES
                )));
            }
        }
        match *op {
            Op::Matmul { a, b, out, product } => {
                let gm = |v: &View| GpuMatrix { buffer: buf(v.tensor).clone(), rows: rows(v), cols: v.cols };
                let (t, dims) = match product {
                    Product::AB => (Transpose::None, (a.rows, Dim::Fixed(a.cols), Dim::Fixed(b.cols))),
                    Product::AtB => (Transpose::A, (Dim::Fixed(a.cols), a.rows, Dim::Fixed(b.cols))),
                    Product::ABt => (Transpose::B, (a.rows, Dim::Fixed(a.cols), b.rows)),
                };
                let call = kernels.matmul(ctx)?.prepare(ctx, &gm(&a), &gm(&b), &gm(&out), t)?;
                // prepare made a shape uniform (32 bytes) and a bind group.
                m.note_external(1, 1, 32);
                Ok(Step::Matmul { call, dims })
            }
            Op::BiasAdd { y, bias, offset } => {
                kernel(KernelId::BiasAdd, &p4(y.cols, offset, 0, 0), &[buf(y.tensor), buf(bias), batch], elementwise(rows(&y) * y.cols)?)
            }
            Op::Activate { y, act: a } => {
                kernel(KernelId::ActivationForward, &p4(y.cols, act(a) as usize, 0, 0), &[buf(y.tensor), batch], elementwise(rows(&y) * y.cols)?)
            }
            Op::ActivateBackward { dy, y, act: a } => kernel(
                KernelId::ActivationBackward,
                &p4(dy.cols, act(a) as usize, 0, 0),
                &[buf(dy.tensor), buf(y.tensor), batch],
                elementwise(rows(&dy) * dy.cols)?,
            ),
            Op::SoftmaxCrossEntropy { logits, labels, out, counters, mode } => kernel(
                KernelId::SoftmaxCe,
                &p4(logits.cols, mode as usize, 0, 0),
                &[buf(logits.tensor), buf(labels), buf(out.tensor), buf(counters), batch],
                per_row(rows(&logits))?,
            ),
            Op::ColumnSum { x, out, offset } => {
                let groups = x.cols.div_ceil(32);
                check_groups(ctx, name, groups)?;
                kernel(KernelId::ColumnSum, &p4(x.cols, offset, 0, 0), &[buf(x.tensor), buf(out), batch], (groups as u32, 1, 1))
            }
            Op::Update { params, grads, state, counters, len, opt } => {
                let uniform = m.uniform(ctx, name, &OptUniform::new(opt, len, 0, 0));
                match opt {
                    Optimizer::Sgd { .. } => {
                        kernel(KernelId::Sgd, &uniform, &[buf(params), buf(grads), buf(state)], elementwise(len)?)
                    }
                    Optimizer::Adam { .. } => {
                        kernel(KernelId::Adam, &uniform, &[buf(params), buf(grads), buf(state), buf(counters)], elementwise(len)?)
                    }
                }
            }
            Op::LinearForward { x, params, y, act: a } => {
                let (gx, gy) = (y.cols.div_ceil(32), rows(&x).div_ceil(4));
                check_groups(ctx, name, gx.max(gy))?;
                kernel(
                    KernelId::LinearForward,
                    &p4(x.cols, y.cols, Activation::code(a), 0),
                    &[buf(x.tensor), buf(params), buf(y.tensor), batch],
                    (gx as u32, gy as u32, 1),
                )
            }
            Op::OutputLayer { h, params, labels, out, dh, counters, mode } => {
                let (dh_buf, dh_act) = match dh {
                    Some((v, a)) => (buf(v.tensor), act(a)),
                    None => (&self.placeholders_rw[0], 0),
                };
                kernel(
                    KernelId::OutputLayer,
                    &p4(h.cols, out.cols, mode as u32, dh_act),
                    &[buf(h.tensor), buf(params), buf(labels), buf(out.tensor), dh_buf, buf(counters), batch],
                    per_row(rows(&h))?,
                )
            }
            Op::LinearBackwardInput { dy, params, h, act: a, dx } => kernel(
                KernelId::LinearBackwardInput,
                &p4(dx.cols, dy.cols, act(a), 0),
                &[buf(dy.tensor), buf(params), buf(h.tensor), buf(dx.tensor), batch],
                elementwise(rows(&dx) * dx.cols)?,
            ),
            Op::LinearUpdate { first, second, counters, opt } => {
                // Workgroups: T x T tiles (T = 32) of each layer's [(in + 1), out] parameters.
                let tiles = |l: &LayerUpdate| ((l.x.cols + 1).div_ceil(32), l.dy.cols.div_ceil(32));
                let (ta, tb) = (tiles(&first), second.as_ref().map_or((0, 1), tiles));
                let groups = ta.0 * ta.1 + tb.0 * tb.1;
                check_groups(ctx, name, groups)?;
                let shape = |l: Option<&LayerUpdate>, t: (usize, usize), first_group: usize| {
                    let (i, o) = l.map_or((0, 0), |l| (l.x.cols, l.dy.cols));
                    [i as u32, o as u32, t.1 as u32, first_group as u32]
                };
                let uniform = UpdateUniform {
                    opt: OptUniform::new(opt, 0, 0, 0),
                    a: shape(Some(&first), ta, 0),
                    b: shape(second.as_ref(), tb, ta.0 * ta.1),
                };
                let [p0, p1, p2] = &self.placeholders_rw;
                let b_bufs: [&wgpu::Buffer; 5] = match &second {
                    Some(l) => [buf(l.x.tensor), buf(l.dy.tensor), buf(l.params), buf(l.grads), buf(l.state)],
                    None => [placeholder, placeholder, p0, p1, p2],
                };
                let bound = [
                    buf(first.x.tensor),
                    buf(first.dy.tensor),
                    buf(first.params),
                    buf(first.grads),
                    buf(first.state),
                    b_bufs[0],
                    b_bufs[1],
                    b_bufs[2],
                    b_bufs[3],
                    b_bufs[4],
                    buf(counters),
                    batch,
                ];
                kernel(KernelId::LinearUpdate, &m.uniform(ctx, name, &uniform), &bound, (groups as u32, 1, 1))
            }
        }
    }
}

/// Trains a [`NetworkSpec`] on the GPU. See the crate docs for the calling pattern.
pub struct GpuTrainer {
    net: Network,
    /// The current learning rate (f32 bits): `set_learning_rate` changes it through `&self`.
    lr: AtomicU32,
    tape: GpuTape,
    train: ProgramId,
    eval: ProgramId,
    predict: ProgramId,
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
        Self::with_options(ctx, &Kernels::new(), spec, optimizer, max_batch, seed, Fusion::Fused)
    }

    /// Like [`GpuTrainer::new`], sharing compiled `kernels` and choosing the tapes' [`Fusion`].
    pub fn with_options(
        ctx: &GpuContext,
        kernels: &Arc<Kernels>,
        spec: &NetworkSpec,
        optimizer: Optimizer,
        max_batch: usize,
        seed: u64,
        fusion: Fusion,
    ) -> Result<Self, LayersError> {
        let net = Network::new(spec, optimizer, fusion)?;
        let mut tape = GpuTape::new(ctx, &net.tensors, max_batch)?;
        let train = tape.add_program(ctx, kernels, &net.train)?;
        let eval = tape.add_program(ctx, kernels, &net.eval)?;
        let predict = tape.add_program(ctx, kernels, &net.predict)?;
        let lr = AtomicU32::new(optimizer.lr().to_bits());
        let trainer = Self { net, lr, tape, train, eval, predict };
        trainer.load_parameters(ctx, &spec.init_parameters(seed))?;
        Ok(trainer)
    }

    pub fn network(&self) -> &Network {
        &self.net
    }

    /// `[max_batch, input]` f32, row-major: write a batch here (e.g. with a gather kernel), then
    /// [`GpuTrainer::set_batch`] and record a step.
    pub fn input(&self) -> &wgpu::Buffer {
        self.tape.buffer(self.net.input)
    }

    /// `[max_batch]` u32: the labels of the batch in [`GpuTrainer::input`].
    pub fn labels(&self) -> &wgpu::Buffer {
        self.tape.buffer(self.net.labels)
    }

    pub fn max_batch(&self) -> usize {
        self.tape.max_batch()
    }

    /// The batch size the next submission runs with.
    pub fn batch(&self) -> usize {
        self.tape.batch()
    }

    /// Dispatches one recorded training step makes.
    pub fn dispatches_per_step(&self) -> usize {
        self.tape.dispatches(self.train)
    }

    /// The tape underneath, and the id of its training program (to time single kernels with
    /// [`GpuTape::record_one`]; the ops are `network().train`, in the same order).
    pub fn tape(&self) -> (&GpuTape, ProgramId) {
        (&self.tape, self.train)
    }

    /// Buffers, bind groups and bytes this trainer has allocated (all of it at construction).
    pub fn allocations(&self) -> Allocations {
        self.tape.allocations()
    }

    /// Sets the live batch size (1 to `max_batch`) for the NEXT SUBMISSION: it writes the batch
    /// uniform through the queue, so it applies to every step of that submission. A smaller
    /// last batch therefore goes in a submission of its own.
    pub fn set_batch(&self, ctx: &GpuContext, batch: usize) -> Result<(), LayersError> {
        self.tape.set_batch(ctx, batch)
    }

    /// Changes the learning rate from the next submission on, keeping the optimizer state
    /// (momentum, Adam's moments and step count). For schedules: call it between epochs.
    pub fn set_learning_rate(&self, ctx: &GpuContext, lr: f32) -> Result<(), LayersError> {
        self.net.optimizer.with_lr(lr).validate()?;
        self.tape.set_learning_rate(ctx, lr);
        self.lr.store(lr.to_bits(), Ordering::Relaxed);
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
        self.tape.write_f32(ctx, self.net.input, &x.data)?;
        self.tape.write_u32(ctx, self.net.labels, &labels)?;
        self.set_batch(ctx, x.rows)
    }

    /// Records one training step (forward, loss, backward, optimizer) into `pass`. The loss sum
    /// and correct count accumulate on the GPU; read them with [`GpuTrainer::take_metrics`].
    pub fn record_step(&self, pass: &mut wgpu::ComputePass<'_>) {
        self.tape.record(self.train, pass);
    }

    /// Records forward + loss only (no gradients, no update); adds to the same metrics.
    pub fn record_eval(&self, pass: &mut wgpu::ComputePass<'_>) {
        self.tape.record(self.eval, pass);
    }

    /// Convenience: `steps` training steps on the batch already in place, one command buffer,
    /// one compute pass, one submit. Does not wait for the GPU.
    pub fn train_steps(&self, ctx: &GpuContext, steps: usize) -> Result<(), LayersError> {
        self.tape.run(ctx, self.train, steps)
    }

    /// Convenience: one evaluation of the batch in place, submitted. Does not wait.
    pub fn eval(&self, ctx: &GpuContext) -> Result<(), LayersError> {
        self.tape.run(ctx, self.eval, 1)
    }

    /// Loss and accuracy accumulated on the GPU since the last call; resets them. Waits for the
    /// GPU. Errors if the loss is NaN or infinite, or if labels out of range were met.
    pub fn take_metrics(&self, ctx: &GpuContext) -> Result<Metrics, LayersError> {
        let c = self.tape.read_u32(ctx, self.net.counters, COUNTERS)?;
        // Zero loss, rows, correct and bad labels; keep the step count (Adam needs it).
        self.tape.write_u32(ctx, self.net.counters, &[0; COUNTER_STEP])?;
        self.net.metrics_from_counters(&c)
    }

    /// `[W1, b1, W2, b2, ...]`, `W: [in, out]`, `b: [1, out]`. Waits for the GPU.
    pub fn parameters(&self, ctx: &GpuContext) -> Result<Vec<Matrix>, LayersError> {
        self.read_layers(ctx, |l| l.params)
    }

    /// The gradients of the last training step, shaped like [`GpuTrainer::parameters`].
    pub fn gradients(&self, ctx: &GpuContext) -> Result<Vec<Matrix>, LayersError> {
        self.read_layers(ctx, |l| l.grads)
    }

    fn read_layers(&self, ctx: &GpuContext, which: impl Fn(&crate::Linear) -> TensorId) -> Result<Vec<Matrix>, LayersError> {
        let mut flat = Vec::new();
        for l in &self.net.layers {
            flat.push(self.tape.read_f32(ctx, which(l), (l.inputs + 1) * l.outputs)?);
        }
        Ok(split_parameters(&self.net.spec, &flat))
    }

    /// Replaces the parameters (shapes checked: `[W1, b1, ...]`) and resets the optimizer state
    /// and step count. Takes effect at the next submit.
    pub fn load_parameters(&self, ctx: &GpuContext, params: &[Matrix]) -> Result<(), LayersError> {
        let flat = join_parameters(&self.net.spec, params)?;
        for (layer, p) in self.net.layers.iter().zip(&flat) {
            self.tape.write_f32(ctx, layer.params, p)?;
            let state_len = self.net.tensors[layer.state.0].capacity(self.max_batch());
            self.tape.write_f32(ctx, layer.state, &vec![0.0; state_len])?;
        }
        let mut counters = self.tape.read_u32(ctx, self.net.counters, COUNTERS)?;
        counters[COUNTER_STEP] = 0;
        self.tape.write_u32(ctx, self.net.counters, &counters)
    }

    /// Softmax probabilities `[rows, classes]` for `x: [rows, input]`, any number of rows (run
    /// in chunks of `max_batch`). Overwrites the input buffer; restores the batch size.
    pub fn predict_probs(&self, ctx: &GpuContext, x: &Matrix) -> Result<Matrix, LayersError> {
        let spec = &self.net.spec;
        if x.cols != spec.input || x.rows == 0 {
            return Err(LayersError::Shape {
                what: "input".into(),
                expected: format!("[rows >= 1, {}]", spec.input),
                got: format!("[{}, {}]", x.rows, x.cols),
            });
        }
        let previous = self.batch();
        let mut probs = Vec::with_capacity(x.rows * spec.output);
        for chunk in x.data.chunks(self.max_batch() * x.cols) {
            let rows = chunk.len() / x.cols;
            self.tape.write_f32(ctx, self.net.input, chunk)?;
            self.set_batch(ctx, rows)?;
            self.tape.run(ctx, self.predict, 1)?;
            probs.extend(self.tape.read_f32(ctx, self.net.out, rows * spec.output)?);
        }
        self.set_batch(ctx, previous)?;
        Ok(Matrix::new(x.rows, spec.output, probs)?)
    }
}

/// Errors if a dispatch needs more workgroups in one dimension than the device allows.
fn check_groups(ctx: &GpuContext, what: &str, groups: usize) -> Result<(), GpuError> {
    let max = ctx.limits.max_compute_workgroups_per_dimension as usize;
    if groups > max {
        return Err(GpuError::TooLarge {
            what: format!("{what}: {groups} workgroups in one dimension (use a smaller batch or layer)"),
            bytes: groups as u64,
            limit: max as u64,
            limit_name: "max_compute_workgroups_per_dimension",
        });
    }
    Ok(())
}
