//! The GPU tensor store: [`GpuStore`] allocates a list of tensors once (through the
//! [`BufferManager`]), turns each op of a tape into a prepared dispatch once (`plan.rs` says
//! which, the `prepare*.rs` files build them), and from then on only records.
//!
//! A recorded tape is its list of prepared dispatches, in the caller's compute pass: no buffer,
//! bind group or pipeline is made, nothing is read back, and the CPU does no arithmetic. The
//! batch size lives in one uniform buffer that every kernel reads, so a smaller last batch is one
//! 16-byte write, not a reallocation.

use std::sync::atomic::{AtomicUsize, Ordering};

use common::GpuContext;

use crate::LayersError;
use crate::gpu::buffers::{Allocations, BufferManager};
use crate::gpu::dispatch::{ByteImages, Dispatch, StoreBuffers};
use crate::gpu::kernels::{KernelId, Kernels};
use crate::gpu::plan::{KERNEL_FORWARD_SPLIT_COOP, Planned, coop_update, plan_ops};
use crate::gpu::prepare::prepare;
use crate::gpu::prepare_fused::{MergedInput, prepare_forward_output, prepare_gathered, prepare_split_update};
use crate::gpu::prepare_linear::{BelowSums, prepare_forward_split, prepare_output_wide};
use crate::tape::{Elem, Op, TensorId, TensorInfo};
use crate::wgsl::{Batch, Opt};

/// A prepared tape inside a [`GpuStore`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TapeId(usize);

/// Tensors on the GPU, and tapes of ops prepared as dispatches over them.
pub struct GpuStore {
    max_batch: usize,
    batch: AtomicUsize,
    manager: BufferManager,
    /// One buffer per tensor, in the order given to [`GpuStore::new`].
    buffers: Vec<wgpu::Buffer>,
    elems: Vec<Elem>,
    batch_uniform: wgpu::Buffer,
    /// Bound where a kernel has bindings the op does not use (the fused output layer's `dh`
    /// when there is no layer below it, the second layer of a one-layer linear_update): one
    /// read-only and three writable placeholders, so no buffer is bound twice.
    placeholder: wgpu::Buffer,
    placeholders_rw: [wgpu::Buffer; 3],
    /// Each tape's dispatches, with the kernel each runs.
    tapes: Vec<Vec<(&'static str, Dispatch)>>,
    /// What a split tape ([`GpuStore::add_split_tape`]) has beside its two dispatches.
    splits: Vec<Option<SplitDispatches>>,
}

/// A split tape's other dispatches: the update of odd steps (the tape's own is that of even
/// steps: the two swap the buffers of the batch's rows), and the prologues, recorded once before
/// each run of steps, that write the first batch's rows into buffer `[q]`.
struct SplitDispatches {
    update_odd: Dispatch,
    prologues: [Dispatch; 2],
}

impl GpuStore {
    /// What a prepared dispatch binds of this store (see [`StoreBuffers`]).
    fn buffers_for_prepare(&self) -> StoreBuffers<'_> {
        StoreBuffers {
            manager: &self.manager,
            buffers: &self.buffers,
            batch_uniform: &self.batch_uniform,
            placeholder: &self.placeholder,
            placeholders_rw: &self.placeholders_rw,
            max_batch: self.max_batch,
        }
    }

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
        let batch_uniform = manager.uniform(ctx, "batch", &Batch::new(max_batch));
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
            tapes: Vec::new(),
            splits: Vec::new(),
        })
    }

    /// Prepares `ops` (pipelines, uniforms, bind groups, workgroup counts) for recording. A
    /// `LinearForward` followed by the `OutputLayer` that reads its output becomes ONE
    /// `forward_output` dispatch where [`crate::FusedTiles::merges`] allows ([`crate::plan`] lists them).
    pub fn add_tape(&mut self, ctx: &GpuContext, kernels: &Kernels, ops: &[Op]) -> Result<TapeId, LayersError> {
        let dispatches = self.prepare_all(ctx, kernels, ops, None)?;
        self.push_tape(ctx, dispatches)
    }

    /// Like [`GpuStore::add_tape`], with the first op (a `LinearForward` of the input tensor)
    /// gathering its batches from `source` and keeping them in the input and `labels` tensors;
    /// record it with [`GpuStore::record_at`].
    pub fn add_gathered_tape(
        &mut self,
        ctx: &GpuContext,
        kernels: &Kernels,
        ops: &[Op],
        labels: TensorId,
        source: &ByteImages<'_>,
    ) -> Result<TapeId, LayersError> {
        if ops.is_empty() {
            return Err(LayersError::Spec("an empty tape gathers nothing".into()));
        }
        let dispatches = self.prepare_all(ctx, kernels, ops, Some((labels, source)))?;
        self.push_tape(ctx, dispatches)
    }

    /// Ops -> prepared dispatches, as [`plan`] says: two-layer updates split where the device needs it,
    /// forward + output layer merged where it allows, the first op gathering when `gather` is
    /// given.
    fn prepare_all(
        &self,
        ctx: &GpuContext,
        kernels: &Kernels,
        ops: &[Op],
        gather: Option<(TensorId, &ByteImages<'_>)>,
    ) -> Result<Vec<(&'static str, Dispatch)>, LayersError> {
        let max_batch = self.max_batch;
        let coop = kernels.coop_on(ctx);
        let (ops, planned) = plan_ops(ops, &kernels.tiles(), gather.is_some(), &ctx.limits, max_batch);
        // The partial sums of each forward split over k, shared with the output layer above it.
        let mut partials = std::collections::HashMap::new();
        for p in &planned {
            if let Planned::SplitForward(i) = *p
                && let Op::LinearForward { y, .. } = ops[i]
            {
                let bytes = 4 * (kernels.tiles().k_splits as usize * max_batch * y.cols) as u64;
                partials.insert(i, self.manager.storage(ctx, "partial sums of a forward split over k", bytes)?);
            }
        }
        planned
            .into_iter()
            .map(|p| {
                let dispatch = match (p, gather) {
                    (Planned::Merged(i), Some((labels, source))) if i == 0 => {
                        let input = MergedInput::Gathered { labels, source, partials: None };
                        prepare_forward_output(&self.buffers_for_prepare(), ctx, kernels, &ops[i], &ops[i + 1], input)?
                    }
                    (Planned::Merged(i), _) => prepare_forward_output(&self.buffers_for_prepare(), ctx, kernels, &ops[i], &ops[i + 1], MergedInput::Tensor)?,
                    (Planned::SplitForward(i), _) => prepare_forward_split(&self.buffers_for_prepare(), ctx, kernels, &ops[i], &partials[&i])?,
                    (Planned::SumsOutput(i), _) => {
                        let below = BelowSums { forward: &ops[i - 1], partials: &partials[&(i - 1)] };
                        prepare_output_wide(&self.buffers_for_prepare(), ctx, kernels, &ops[i], Some(below))?
                    }
                    (Planned::One(0), Some((labels, source))) => prepare_gathered(&self.buffers_for_prepare(), ctx, kernels, &ops[0], labels, source)?,
                    (Planned::One(i), _) => prepare(&self.buffers_for_prepare(), ctx, kernels, &ops[i])?,
                };
                let name = match p {
                    Planned::SplitForward(_) if coop && kernels.tiles().coop_forward_fits(&ctx.limits) => KERNEL_FORWARD_SPLIT_COOP,
                    Planned::One(i) if coop_update(coop, &kernels.tiles(), &ctx.limits, max_batch, &ops[i]) => {
                        KernelId::LinearUpdateCoop.name()
                    }
                    _ => p.name(&ops, gather.is_some(), &kernels.tiles(), &ctx.limits, max_batch),
                };
                Ok((name, dispatch))
            })
            .collect()
    }

    /// The SPLIT form of [`GpuStore::add_gathered_tape`], where it applies: `ops` must plan to
    /// two dispatches, a gathering `forward_output` and a two-layer `linear_update` whose first
    /// layer is the merged forward's, and the tiles and the device must allow it
    /// ([`crate::FusedTiles::runs_split_step`]); else `None`. Each update then also writes the next batch's
    /// partial sums of `x W1` (`shaders/linear_update_next.wgsl`) and the forward only adds
    /// them up; a prologue writes the first batch's. Record it with [`GpuStore::record_steps`].
    pub fn add_split_tape(
        &mut self,
        ctx: &GpuContext,
        kernels: &Kernels,
        ops: &[Op],
        labels: TensorId,
        source: &ByteImages<'_>,
    ) -> Result<Option<TapeId>, LayersError> {
        let tiles = kernels.tiles();
        let (ops, planned) = plan_ops(ops, &tiles, true, &ctx.limits, self.max_batch);
        let (Some(Op::LinearForward { x, params, y, .. }), Some(update)) = (ops.first(), ops.get(2)) else {
            return Ok(None);
        };
        // The update's layer a must be the merged forward's (the network lists the updates
        // from the last layer down, so it is usually layer b: swapped, since neither layer's
        // update reads the other's parameters).
        let update = match *update {
            Op::LinearUpdate { first, second: Some(second), third: None, counters, opt } if second.params == *params => {
                Op::LinearUpdate { first: second, second: Some(first), third: None, counters, opt }
            }
            ref op => op.clone(),
        };
        let first_layer = matches!(&update, Op::LinearUpdate { first, second: Some(_), third: None, .. } if first.params == *params && first.x.tensor == x.tensor);
        if !tiles.runs_split_step(&ctx.limits) || planned != [Planned::Merged(0), Planned::One(2)] || !first_layer {
            return Ok(None);
        }
        let k_tiles = (x.cols + 1).div_ceil(tiles.update_t as usize);
        let partials = self.manager.storage(ctx, "split step partial sums", 4 * (k_tiles * self.max_batch * y.cols) as u64)?;
        // The batch's rows: the input tensor on even steps, this buffer on odd ones.
        let x_odd = self.manager.storage(ctx, "split step rows (odd steps)", 4 * (self.max_batch * x.cols) as u64)?;
        let input = MergedInput::Gathered { labels, source, partials: Some(&partials) };
        let forward = prepare_forward_output(&self.buffers_for_prepare(), ctx, kernels, &ops[0], &ops[1], input)?;
        let [[even, prologue_into_odd], [odd, prologue_into_even]] =
            prepare_split_update(&self.buffers_for_prepare(), ctx, kernels, &update, source, &partials, [&self.buffers[x.tensor.0], &x_odd])?;
        let dispatches = vec![(KernelId::ForwardOutputSplit.name(), forward), (KernelId::LinearUpdateSplit.name(), even)];
        let id = self.push_tape(ctx, dispatches)?;
        self.splits[id.0] = Some(SplitDispatches { update_odd: odd, prologues: [prologue_into_even, prologue_into_odd] });
        Ok(Some(id))
    }

    fn push_tape(&mut self, ctx: &GpuContext, dispatches: Vec<(&'static str, Dispatch)>) -> Result<TapeId, LayersError> {
        self.tapes.push(dispatches);
        self.splits.push(None);
        let id = TapeId(self.tapes.len() - 1);
        self.set_batch(ctx, self.batch())?; // new matmul dispatches get the current batch
        Ok(id)
    }

    /// Records every dispatch of `tape` into `pass`.
    pub fn record(&self, tape: TapeId, pass: &mut wgpu::ComputePass<'_>) {
        self.record_at(tape, 0, pass);
    }

    /// Records every dispatch of `tape` into `pass`, a gathering one reading batch `slot`.
    pub fn record_at(&self, tape: TapeId, slot: usize, pass: &mut wgpu::ComputePass<'_>) {
        self.record_steps(tape, slot..slot + 1, pass);
    }

    // ANCHOR: record_steps
    /// Records `tape` once for each batch in `slots`, in order, into `pass`. A split tape
    /// records its prologue first (the rows and partial sums of batch `slots.start`), and each
    /// step's update those of the next batch of the range (the last one's, of its own batch
    /// again: unused); step `s` reads its rows from buffer `s % 2`.
    pub fn record_steps(&self, tape: TapeId, slots: std::ops::Range<usize>, pass: &mut wgpu::ComputePass<'_>) {
        let dispatches = &self.tapes[tape.0];
        match &self.splits[tape.0] {
            Some(split) if !slots.is_empty() => {
                split.prologues[slots.start % 2].record(pass, slots.start);
                for s in slots.clone() {
                    dispatches[0].1.record(pass, s);
                    let update = if s % 2 == 0 { &dispatches[1].1 } else { &split.update_odd };
                    update.record(pass, if s + 1 < slots.end { s + 1 } else { s });
                }
            }
            _ => slots.for_each(|slot| dispatches.iter().for_each(|(_, d)| d.record(pass, slot))),
        }
    }
    // ANCHOR_END: record_steps

    /// Whether `tape` runs split ([`GpuStore::add_split_tape`]).
    pub fn is_split(&self, tape: TapeId) -> bool {
        self.splits[tape.0].is_some()
    }

    /// Records `tape` `times` times into one pass and submits it. Does not wait.
    pub fn run(&self, ctx: &GpuContext, tape: TapeId, times: usize) -> Result<(), LayersError> {
        ctx.scoped(|| ctx.submit_pass("tape", |pass| (0..times).for_each(|_| self.record(tape, pass))))?;
        Ok(())
    }

    /// Records only dispatch `index` of `tape` (for timing one kernel at a time).
    pub fn record_one(&self, tape: TapeId, index: usize, pass: &mut wgpu::ComputePass<'_>) {
        self.tapes[tape.0][index].1.record(pass, 0);
    }

    /// The kernel each dispatch of `tape` runs, in order (a merged `forward_output` stands for
    /// two ops of the tape).
    pub fn dispatch_names(&self, tape: TapeId) -> Vec<&'static str> {
        self.tapes[tape.0].iter().map(|(name, _)| *name).collect()
    }

    /// Dispatches one recording of `tape` makes.
    pub fn dispatches(&self, tape: TapeId) -> usize {
        self.tapes[tape.0].len()
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
        ctx.queue.write_buffer(&self.batch_uniform, 0, bytemuck::bytes_of(&Batch::new(batch)));
        for (_, dispatch) in self.tapes.iter().flatten() {
            if let Dispatch::Matmul { call, dims } = dispatch {
                call.set_dims(ctx, dims.0.at(batch), dims.1.at(batch), dims.2.at(batch))?;
            }
        }
        self.batch.store(batch, Ordering::Relaxed);
        Ok(())
    }

    /// Rewrites the learning rate of every optimizer op (from the next submit on); the
    /// optimizer state is kept.
    pub fn set_learning_rate(&self, ctx: &GpuContext, lr: f32) {
        for u in self.opt_uniforms() {
            ctx.queue.write_buffer(u, Opt::LR_OFFSET, bytemuck::bytes_of(&lr));
        }
    }

    /// Sets whether every fused update writes its gradients out (from the next submit on).
    pub fn set_keep_gradients(&self, ctx: &GpuContext, keep: bool) {
        for u in self.opt_uniforms() {
            ctx.queue.write_buffer(u, Opt::KEEP_GRADS_OFFSET, bytemuck::bytes_of(&(keep as u32)));
        }
    }

    /// The `Opt` uniform of every optimizer and update dispatch, the split steps' included.
    fn opt_uniforms(&self) -> impl Iterator<Item = &wgpu::Buffer> {
        let split = self.splits.iter().flatten().flat_map(|s| s.prologues.iter().chain([&s.update_odd]));
        self.tapes.iter().flatten().map(|(_, d)| d).chain(split).filter_map(Dispatch::opt_uniform)
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

    /// Reads the first `len` values of f32 tensor `t` (waits for the GPU; native targets).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn read_f32(&self, ctx: &GpuContext, t: TensorId, len: usize) -> Result<Vec<f32>, LayersError> {
        common::block_on(self.read_f32_async(ctx, t, len))
    }

    /// Reads the first `len` values of u32 tensor `t` (waits for the GPU; native targets).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn read_u32(&self, ctx: &GpuContext, t: TensorId, len: usize) -> Result<Vec<u32>, LayersError> {
        common::block_on(self.read_u32_async(ctx, t, len))
    }

    /// [`GpuStore::read_f32`] on every target (in a browser, the only form).
    pub async fn read_f32_async(&self, ctx: &GpuContext, t: TensorId, len: usize) -> Result<Vec<f32>, LayersError> {
        Ok(ctx.read_async(&self.buffers[t.0], len).await?)
    }

    /// [`GpuStore::read_u32`] on every target (in a browser, the only form).
    pub async fn read_u32_async(&self, ctx: &GpuContext, t: TensorId, len: usize) -> Result<Vec<u32>, LayersError> {
        Ok(ctx.read_async(&self.buffers[t.0], len).await?)
    }
}
