//! The GPU side of a tape: [`GpuTape`] allocates a list of tensors once (through the
//! [`BufferManager`]), turns each op of a tape into a prepared dispatch once (`gpu_dispatch.rs`),
//! and from then on only records.
//!
//! A recorded tape is its list of prepared dispatches, in the caller's compute pass: no buffer,
//! bind group or pipeline is made, nothing is read back, and the CPU does no arithmetic. The
//! batch size lives in one uniform buffer that every kernel reads, so a smaller last batch is one
//! 16-byte write, not a reallocation.

use std::sync::atomic::{AtomicUsize, Ordering};

use common::GpuContext;

use crate::{ByteImages, LayersError};
use crate::buffers::{Allocations, BufferManager};
use crate::gpu_dispatch::{
    BelowSums, KERNEL_FORWARD_SPLIT, KERNEL_FORWARD_SPLIT_COOP, KERNEL_OUTPUT_SUMS, MergedInput, Step, forward_kernel_id, prepare, prepare_forward_output,
    prepare_forward_split, prepare_gathered, prepare_output_wide, prepare_split_update,
};
use crate::kernels::{KernelId, Kernels};
use crate::tape::{Elem, LayerUpdate, Mode, Op, TensorId, TensorInfo};
use crate::wgsl::{Batch, FusedTiles, Opt};

/// A prepared tape inside a [`GpuTape`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TapeId(usize);

/// Tensors on the GPU, and tapes of ops prepared as dispatches over them.
pub struct GpuTape {
    pub(crate) max_batch: usize,
    batch: AtomicUsize,
    pub(crate) manager: BufferManager,
    /// One buffer per tensor, in the order given to [`GpuTape::new`].
    pub(crate) buffers: Vec<wgpu::Buffer>,
    elems: Vec<Elem>,
    pub(crate) batch_uniform: wgpu::Buffer,
    /// Bound where a kernel has bindings the op does not use (the fused output layer's `dh`
    /// when there is no layer below it, the second layer of a one-layer linear_update): one
    /// read-only and three writable placeholders, so no buffer is bound twice.
    pub(crate) placeholder: wgpu::Buffer,
    pub(crate) placeholders_rw: [wgpu::Buffer; 3],
    /// Each tape's dispatches, with the kernel each runs.
    tapes: Vec<Vec<(&'static str, Step)>>,
    /// What a split tape ([`GpuTape::add_split_tape`]) has beside its two steps.
    splits: Vec<Option<SplitSteps>>,
}

/// A split tape's other dispatches: the update of odd steps (the tape's own is that of even
/// steps: the two swap the buffers of the batch's rows), and the prologues, recorded once before
/// each run of steps, that write the first batch's rows into buffer `[q]`.
struct SplitSteps {
    update_odd: Step,
    prologues: [Step; 2],
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
    /// `forward_output` dispatch where [`FusedTiles::merges`] allows ([`plan`] lists them).
    pub fn add_tape(&mut self, ctx: &GpuContext, kernels: &Kernels, ops: &[Op]) -> Result<TapeId, LayersError> {
        let steps = self.prepare_all(ctx, kernels, ops, None)?;
        self.push_tape(ctx, steps)
    }

    /// Like [`GpuTape::add_tape`], with the first op (a `LinearForward` of the input tensor)
    /// gathering its batches from `source` and keeping them in the input and `labels` tensors;
    /// record it with [`GpuTape::record_at`].
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
        let steps = self.prepare_all(ctx, kernels, ops, Some((labels, source)))?;
        self.push_tape(ctx, steps)
    }

    /// Ops -> steps, as [`plan`] says: two-layer updates split where the device needs it,
    /// forward + output layer merged where it allows, the first op gathering when `gather` is
    /// given.
    fn prepare_all(
        &self,
        ctx: &GpuContext,
        kernels: &Kernels,
        ops: &[Op],
        gather: Option<(TensorId, &ByteImages<'_>)>,
    ) -> Result<Vec<(&'static str, Step)>, LayersError> {
        let max_batch = self.max_batch;
        let coop = kernels.coop_on(ctx);
        let (ops, planned) = plan_ops(ops, &kernels.tiles(), gather.is_some(), &ctx.limits, max_batch);
        // The partial sums of each forward split over k, shared with the output layer above it.
        let mut partials = std::collections::HashMap::new();
        for p in &planned {
            if let Planned::SplitForward(i) = *p
                && let Op::LinearForward { y, .. } = ops[i]
            {
                let bytes = 4 * (kernels.tiles().tiled_splits as usize * max_batch * y.cols) as u64;
                partials.insert(i, self.manager.storage(ctx, "partial sums of a forward split over k", bytes)?);
            }
        }
        planned
            .into_iter()
            .map(|p| {
                let step = match (p, gather) {
                    (Planned::Merged(i), Some((labels, source))) if i == 0 => {
                        let input = MergedInput::Gathered { labels, source, partials: None };
                        prepare_forward_output(self, ctx, kernels, &ops[i], &ops[i + 1], input)?
                    }
                    (Planned::Merged(i), _) => prepare_forward_output(self, ctx, kernels, &ops[i], &ops[i + 1], MergedInput::Tensor)?,
                    (Planned::SplitForward(i), _) => prepare_forward_split(self, ctx, kernels, &ops[i], &partials[&i])?,
                    (Planned::SumsOutput(i), _) => {
                        let below = BelowSums { forward: &ops[i - 1], partials: &partials[&(i - 1)] };
                        prepare_output_wide(self, ctx, kernels, &ops[i], Some(below))?
                    }
                    (Planned::One(0), Some((labels, source))) => prepare_gathered(self, ctx, kernels, &ops[0], labels, source)?,
                    (Planned::One(i), _) => prepare(self, ctx, kernels, &ops[i])?,
                };
                let name = match p {
                    Planned::SplitForward(_) if coop && kernels.tiles().coop_forward_fits(&ctx.limits) => KERNEL_FORWARD_SPLIT_COOP,
                    Planned::One(i) if coop_update(coop, &kernels.tiles(), &ctx.limits, max_batch, &ops[i]) => {
                        KernelId::LinearUpdateCoop.name()
                    }
                    _ => p.name(&ops, gather.is_some(), &kernels.tiles(), &ctx.limits, max_batch),
                };
                Ok((name, step))
            })
            .collect()
    }

    /// The SPLIT form of [`GpuTape::add_gathered_tape`], where it applies: `ops` must plan to
    /// two dispatches, a gathering `forward_output` and a two-layer `linear_update` whose first
    /// layer is the merged forward's, and the tiles and the device must allow it
    /// ([`FusedTiles::splits`]); else `None`. Each update then also writes the next batch's
    /// partial sums of `x W1` (`shaders/linear_update_next.wgsl`) and the forward only adds
    /// them up; a prologue writes the first batch's. Record it with [`GpuTape::record_steps`].
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
            Op::LinearUpdate { first, second: Some(second), counters, opt } if second.params == *params => {
                Op::LinearUpdate { first: second, second: Some(first), counters, opt }
            }
            ref op => op.clone(),
        };
        let first_layer = matches!(&update, Op::LinearUpdate { first, second: Some(_), .. } if first.params == *params && first.x.tensor == x.tensor);
        if !tiles.splits(&ctx.limits) || planned != [Planned::Merged(0), Planned::One(2)] || !first_layer {
            return Ok(None);
        }
        let k_tiles = (x.cols + 1).div_ceil(tiles.update_t as usize);
        let partials = self.manager.storage(ctx, "split step partial sums", 4 * (k_tiles * self.max_batch * y.cols) as u64)?;
        // The batch's rows: the input tensor on even steps, this buffer on odd ones.
        let x_odd = self.manager.storage(ctx, "split step rows (odd steps)", 4 * (self.max_batch * x.cols) as u64)?;
        let input = MergedInput::Gathered { labels, source, partials: Some(&partials) };
        let forward = prepare_forward_output(self, ctx, kernels, &ops[0], &ops[1], input)?;
        let [[even, prologue_into_odd], [odd, prologue_into_even]] =
            prepare_split_update(self, ctx, kernels, &update, source, &partials, [&self.buffers[x.tensor.0], &x_odd])?;
        let steps = vec![(KernelId::ForwardOutputSplit.name(), forward), (KernelId::LinearUpdateSplit.name(), even)];
        let id = self.push_tape(ctx, steps)?;
        self.splits[id.0] = Some(SplitSteps { update_odd: odd, prologues: [prologue_into_even, prologue_into_odd] });
        Ok(Some(id))
    }

    fn push_tape(&mut self, ctx: &GpuContext, steps: Vec<(&'static str, Step)>) -> Result<TapeId, LayersError> {
        self.tapes.push(steps);
        self.splits.push(None);
        let id = TapeId(self.tapes.len() - 1);
        self.set_batch(ctx, self.batch())?; // new matmul steps get the current batch
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

    /// Records `tape` once for each batch in `slots`, in order, into `pass`. A split tape
    /// records its prologue first (the rows and partial sums of batch `slots.start`), and each
    /// step's update those of the next batch of the range (the last one's, of its own batch
    /// again: unused); step `s` reads its rows from buffer `s % 2`.
    pub fn record_steps(&self, tape: TapeId, slots: std::ops::Range<usize>, pass: &mut wgpu::ComputePass<'_>) {
        let steps = &self.tapes[tape.0];
        match &self.splits[tape.0] {
            Some(split) if !slots.is_empty() => {
                split.prologues[slots.start % 2].record(pass, slots.start);
                for s in slots.clone() {
                    steps[0].1.record(pass, s);
                    let update = if s % 2 == 0 { &steps[1].1 } else { &split.update_odd };
                    update.record(pass, if s + 1 < slots.end { s + 1 } else { s });
                }
            }
            _ => slots.for_each(|slot| steps.iter().for_each(|(_, s)| s.record(pass, slot))),
        }
    }

    /// Whether `tape` runs split ([`GpuTape::add_split_tape`]).
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
        for (_, step) in self.tapes.iter().flatten() {
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
        let split_steps = self.splits.iter().flatten().flat_map(|s| s.prologues.iter().chain([&s.update_odd]));
        let steps = self.tapes.iter().flatten().map(|(_, s)| s).chain(split_steps);
        for u in steps.filter_map(Step::opt_uniform) {
            ctx.queue.write_buffer(u, Opt::LR_OFFSET, bytemuck::bytes_of(&lr));
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

    /// [`GpuTape::read_f32`] on every target (in a browser, the only form).
    pub async fn read_f32_async(&self, ctx: &GpuContext, t: TensorId, len: usize) -> Result<Vec<f32>, LayersError> {
        Ok(ctx.read_async(&self.buffers[t.0], len).await?)
    }

    /// [`GpuTape::read_u32`] on every target (in a browser, the only form).
    pub async fn read_u32_async(&self, ctx: &GpuContext, t: TensorId, len: usize) -> Result<Vec<u32>, LayersError> {
        Ok(ctx.read_async(&self.buffers[t.0], len).await?)
    }
}

/// `op`, or, on a device that cannot bind two layers' buffers at once (`pairs` false), a
/// two-layer `LinearUpdate` as two one-layer ones. Neither layer's update reads the other's
/// parameters, so two dispatches compute what one would.
fn one_layer_per_update(op: &Op, pairs: bool) -> Vec<Op> {
    match *op {
        Op::LinearUpdate { first, second: Some(second), counters, opt } if !pairs => vec![
            Op::LinearUpdate { first, second: None, counters, opt },
            Op::LinearUpdate { first: second, second: None, counters, opt },
        ],
        _ => vec![op.clone()],
    }
}

/// Whether the `LinearUpdate` `op` runs `linear_update_coop` (the gradients on the tensor cores,
/// f16 inputs): where the kernels' products take f16 inputs on this adapter (`coop`) and one of
/// its layers takes it ([`FusedTiles::coop_updates`] at `max_batch` rows).
pub(crate) fn coop_update(coop: bool, tiles: &FusedTiles, limits: &wgpu::Limits, max_batch: usize, op: &Op) -> bool {
    let Op::LinearUpdate { first, second, .. } = op else {
        return false;
    };
    let wide = |l: &LayerUpdate| tiles.coop_updates(max_batch, l.dy.cols, limits);
    coop && (wide(first) || second.as_ref().is_some_and(wide))
}

/// One dispatch of a planned tape: op `i` alone, or ops `i` and `i + 1` merged, or one of the
/// pair a `LinearForward` `i` split over k and the `OutputLayer` `i + 1` that adds up its partial
/// sums ([`FusedTiles::splits_k`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Planned {
    One(usize),
    Merged(usize),
    SplitForward(usize),
    SumsOutput(usize),
}

impl Planned {
    /// The kernel it runs (the first op gathers when `gather`) with `tiles` on a device of
    /// `limits`, in a tape sized for `max_batch` rows.
    fn name(self, ops: &[Op], gather: bool, tiles: &FusedTiles, limits: &wgpu::Limits, max_batch: usize) -> &'static str {
        match self {
            Planned::Merged(0) if gather => "forward_output (gathering)",
            Planned::Merged(_) => "forward_output",
            Planned::SplitForward(_) => KERNEL_FORWARD_SPLIT,
            Planned::SumsOutput(_) => KERNEL_OUTPUT_SUMS,
            Planned::One(i) => match ops[i] {
                Op::LinearForward { x, y, .. } => {
                    forward_kernel_id(tiles, limits, x.rows.at(max_batch), y.cols, gather && i == 0).name()
                }
                Op::OutputLayer { h, out, .. } if tiles.output_wide(h.cols, out.cols, limits) => KernelId::OutputWide.name(),
                ref op => op.kernel_name(),
            },
        }
    }
}

/// The dispatches a GPU tape of `ops` sized for `max_batch` rows makes with `tiles` on a
/// device of `limits` (the first op gathering its batch when `gather`), by kernel name, without
/// a device: what [`GpuTape::add_tape`] and [`GpuTape::add_gathered_tape`] will prepare.
pub fn plan(ops: &[Op], tiles: &FusedTiles, gather: bool, limits: &wgpu::Limits, max_batch: usize) -> Vec<&'static str> {
    let (ops, planned) = plan_ops(ops, tiles, gather, limits, max_batch);
    planned.into_iter().map(|p| p.name(&ops, gather, tiles, limits, max_batch)).collect()
}

/// `ops` with two-layer updates split where the device binds too few buffers, and the
/// dispatches they become.
fn plan_ops(ops: &[Op], tiles: &FusedTiles, gather: bool, limits: &wgpu::Limits, max_batch: usize) -> (Vec<Op>, Vec<Planned>) {
    let pairs = crate::wgsl::DeviceFit::for_limits(limits).linear_update_pairs;
    let ops: Vec<Op> = ops.iter().flat_map(|op| one_layer_per_update(op, pairs)).collect();
    let mut planned = Vec::with_capacity(ops.len());
    let mut i = 0;
    while i < ops.len() {
        if let Some(next) = ops.get(i + 1)
            && merges(&ops[i], next, tiles, gather && i == 0, limits)
        {
            planned.push(Planned::Merged(i));
            i += 2;
        } else if let Some(next) = ops.get(i + 1)
            && !(gather && i == 0)
            && splits_k(&ops[i], next, tiles, limits, max_batch)
        {
            planned.extend([Planned::SplitForward(i), Planned::SumsOutput(i + 1)]);
            i += 2;
        } else {
            planned.push(Planned::One(i));
            i += 1;
        }
    }
    (ops, planned)
}

/// Whether `forward` (reading a ready input) and `output` run as a `linear_forward_tiled` split
/// over k and an `output_wide` that adds up its partial sums: a `LinearForward` and the
/// training `OutputLayer` that reads exactly its output (with the same activation for dh), on
/// shapes and a device the tiles allow ([`FusedTiles::splits_k`]). Evaluation and prediction
/// keep the unsplit forward: their tapes, often sized for far larger batches, then need no
/// buffer of partial sums.
fn splits_k(forward: &Op, output: &Op, tiles: &FusedTiles, limits: &wgpu::Limits, max_batch: usize) -> bool {
    let (Op::LinearForward { x, y, act, .. }, Op::OutputLayer { h, out, dh, mode: Mode::Train, .. }) = (forward, output) else {
        return false;
    };
    let same_act = dh.is_none_or(|(_, a)| Some(a) == *act);
    h.tensor == y.tensor && h.cols == y.cols && same_act && tiles.splits_k(x.rows.at(max_batch), y.cols, out.cols, limits)
}

/// Whether `forward` and `output` run merged as one `forward_output` dispatch: a
/// `LinearForward` and the `OutputLayer` that reads exactly its output (with the same
/// activation for dh), on shapes and a device the tiles allow ([`FusedTiles::merges`]).
fn merges(forward: &Op, output: &Op, tiles: &FusedTiles, gather: bool, limits: &wgpu::Limits) -> bool {
    let (Op::LinearForward { y, act, .. }, Op::OutputLayer { h, out, dh, .. }) = (forward, output) else {
        return false;
    };
    let same_act = dh.is_none_or(|(_, a)| Some(a) == *act);
    h.tensor == y.tensor && h.cols == y.cols && same_act && tiles.merges(y.cols, out.cols, gather, limits)
}
