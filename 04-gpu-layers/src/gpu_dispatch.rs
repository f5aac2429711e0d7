//! Op -> dispatch: how each [`Op`] of a tape becomes one prepared GPU dispatch (a pipeline, a
//! bind group and a workgroup grid), made once when [`GpuTape::add_tape`] takes the tape. The
//! CPU mirror is `cpu_dispatch.rs`.
//!
//! Every kernel binds its tensors in the order below, then the shared `batch` uniform (except
//! the optimizers, which do not read the batch), then its own uniform (`wgsl.rs`). `B` is the
//! largest batch (buffers and grids are sized for it; kernels skip rows past the live batch),
//! `WG`, `ROW_WG`, `COLS` and `T` the constants of `wgsl.rs`, `TN`, `TR` and `RPW` the fused
//! kernels' tile sizes (`FusedTiles`: `forward_tn`, `forward_tr`, `output_rows`, fewer rows when
//! that many rows' logits would not fit in workgroup memory).
//!
//! | op | kernel | tensors bound | uniform | grid (workgroups) |
//! |---|---|---|---|---|
//! | `Matmul` | stage 03's `Matmul` (`Kernel::BEST`) | a, b, out | its own shape uniform | stage 03's tiles |
//! | `BiasAdd` | `bias_add` | y, bias | `BiasAddParams` | `B*cols / WG` |
//! | `Activate` | `activation_forward` | y | `ActivationParams` | `B*cols / WG` |
//! | `ActivateBackward` | `activation_backward` | dy, y | `ActivationParams` | `B*cols / WG` |
//! | `SoftmaxCrossEntropy` | `softmax_ce` | logits, labels, out, counters | `SoftmaxCeParams` | `B` (one per row) |
//! | `ColumnSum` | `column_sum` | x, out | `ColumnSumParams` | `cols / COLS` |
//! | `Update` (SGD) | `sgd` | params, grads, velocity | `Opt` | `len / WG` |
//! | `Update` (Adam) | `adam` | params, grads, moments, counters | `Opt` | `len / WG` |
//! | `LinearForward` | `linear_forward` | x, params, y | `LinearParams` | `(out / TN) x (B / TR)` |
//! | `LinearForward`, `B x out >= tiled_min`, not gathering | `linear_forward_tiled` | x, params, y | `LinearParams` | `(out / FT_N) x (B / FT_M)` |
//! | `OutputLayer` | `output_layer` | h, params, labels, out, dh, counters | `OutputLayerParams` | `B / RPW` |
//! | `OutputLayer`, `h` of at least `wide_min` columns, at most 16 classes | `output_wide` | h, params, labels, out, dh, counters, (placeholders) | `OutputLayerParams` | `B` (one per row) |
//! | `LinearForward` + `OutputLayer` (training), `FusedTiles::splits_k` | `linear_forward_tiled (k split)`, then `output_wide (sums)` | x, params, partials; then as `output_wide`, partials and the forward's params | `LinearParams` (`k_split`); `OutputLayerParams` (`sums`) | `(out / FT_N) x (B / FT_M) x tiled_splits`; `B` |
//! | the same pair, where the products take f16 inputs on an adapter with cooperative matrices | `linear_forward_coop (k split)`, then `output_wide (sums)` | as above | as above | `(out / coop_n) x (B / coop_m) x tiled_splits`; `B` |
//! | `LinearBackwardInput` | `linear_backward_input` | dy, params, h, dx | `LinearParams` | `in / 32 x B / 8` |
//! | `LinearUpdate` | `linear_update` | x, dy, params, grads, state (x2), counters | `Update` | `T x T` tiles of both layers |
//! | `LinearUpdate` with a layer that runs `linear_forward_tiled`, where the products take f16 inputs on an adapter with cooperative matrices | `linear_update_coop` | as `linear_update` | `Update` | `COOP_UPDATE_T x COOP_UPDATE_T` tiles of both layers |
//! | `LinearForward` + `OutputLayer`, gathered, split | `forward_output (split)` | images, params, y, batch, uniform, label bytes, order, slot, x, labels, out_params, out, dh, counters, partials | `ForwardOutputParams` | `B / merged_tr` |
//! | `LinearUpdate`, split | `linear_update (split)` | as `linear_update`, then images, order, the NEXT slot, partials, the next rows | `Update` (with `Split`) | as `linear_update` |
//! | `ActivateCopy` | `activation_copy_forward` | x, y | `ActivationParams` | `B*cols / WG` |
//! | `ActivateCopyBackward` | `activation_copy_backward` | dy, x | `ActivationParams` | `B*cols / WG` |
//! | `Dropout` | `dropout_forward` | x, y, mask, counters | `DropoutParams` | `B*cols / WG` |
//! | `DropoutBackward` | `dropout_backward` | dy, mask | `DropoutBackwardParams` | `B*cols / WG` |
//! | `MeanSquaredError` | `mse` | y, labels, out, counters | `MseParams` | `B / WG` (one invocation per row) |
//!
//! (Each `/` rounds up; a 1-D grid past 65,535 workgroups spills into y, see
//! `common::workgroups_1d`.) Where an op leaves a binding unused (the output layer's `dh` with no
//! layer below, the second layer of a one-layer `linear_update`), a placeholder buffer of the
//! tape is bound instead, so no buffer is bound twice. On a device that allows fewer than the 11
//! storage buffers of two layers (`wgsl::DeviceFit`, a browser), `linear_update` takes one layer
//! per dispatch and leaves bindings 5-9 out altogether.

use common::{GpuContext, GpuError};
use gpu_matmul::{GpuMatrix, MatmulCall};

use crate::gpu_tape::GpuTape;
use crate::kernels::{KernelId, Kernels};
use crate::tape::{Dim, LayerUpdate, Op, TensorId, Transpose, View};
use crate::wgsl::{
    self, ActivationParams, BiasAddParams, ColumnSumParams, DropoutBackwardParams, DropoutParams, ForwardOutputParams, LayerShape,
    LinearParams, MseParams, Opt, OutputLayerParams, SoftmaxCeParams, Update,
};
use crate::{Activation, ByteImages, LayersError, MAX_CLASSES, Optimizer};

/// One prepared op: everything a recording needs, made once.
pub(crate) enum Step {
    Kernel {
        pipeline: wgpu::ComputePipeline,
        bind_group: wgpu::BindGroup,
        groups: (u32, u32, u32),
        /// The optimizer uniform of an update op (its `lr` sits at byte [`Opt::LR_OFFSET`]).
        opt_uniform: Option<wgpu::Buffer>,
    },
    /// Stage 03's matmul; `dims` are its `(m, k, n)`, some of which follow the batch.
    Matmul { call: MatmulCall, dims: (Dim, Dim, Dim) },
    /// A dispatch that reads a batch of a gathering source (the gathering forward, the split
    /// step's update): its `slot` uniform is bound at `slot * stride`.
    Gathered {
        pipeline: wgpu::ComputePipeline,
        bind_group: wgpu::BindGroup,
        groups: (u32, u32, u32),
        stride: u64,
        /// As for `Kernel`: the split step's update has one.
        opt_uniform: Option<wgpu::Buffer>,
    },
}

impl Step {
    /// The optimizer uniform of an update step, whose learning rate the host rewrites.
    pub fn opt_uniform(&self) -> Option<&wgpu::Buffer> {
        match self {
            Step::Kernel { opt_uniform, .. } | Step::Gathered { opt_uniform, .. } => opt_uniform.as_ref(),
            Step::Matmul { .. } => None,
        }
    }

    /// Records the dispatch; a gathering one reads batch `slot` of its source.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, slot: usize) {
        match self {
            Step::Kernel { pipeline, bind_group, groups, .. } => {
                pass.set_pipeline(pipeline);
                pass.set_bind_group(0, bind_group, &[]);
                pass.dispatch_workgroups(groups.0, groups.1, groups.2);
            }
            Step::Matmul { call, .. } => call.record(pass),
            Step::Gathered { pipeline, bind_group, groups, stride, .. } => {
                pass.set_pipeline(pipeline);
                pass.set_bind_group(0, bind_group, &[(slot as u64 * stride) as u32]);
                pass.dispatch_workgroups(groups.0, groups.1, groups.2);
            }
        }
    }
}

/// The gathering form of a first layer's `LinearForward` (see `ByteImages`): the same grid and
/// uniform, the byte images, labels, order and slots of `source` bound instead of x, and the
/// input and `labels` tensors bound as the copies it keeps for the rest of the step.
pub(crate) fn prepare_gathered(
    tape: &GpuTape,
    ctx: &GpuContext,
    kernels: &Kernels,
    op: &Op,
    labels: TensorId,
    source: &ByteImages<'_>,
) -> Result<Step, LayersError> {
    let Op::LinearForward { x, params, y, act } = *op else {
        return Err(LayersError::Spec(format!("only a linear_forward can gather its input, not {}", op.kernel_name())));
    };
    let buf = |t: TensorId| &tape.buffers[t.0];
    let (id, (gx, gy)) = forward_kernel(kernels, ctx, x.rows.at(tape.max_batch), y.cols, true);
    let name = id.name();
    check_groups(ctx, name, gx.max(gy))?;
    let uniform = tape.manager.uniform(
        ctx,
        name,
        &LinearParams { inputs: x.cols as u32, outputs: y.cols as u32, act: Activation::code(act), k_split: 0 },
    );
    let pipeline = kernels.pipeline(ctx, id)?;
    let bound = gather_bindings(tape, source, buf(params), buf(y.tensor), &uniform, buf(x.tensor), buf(labels));
    let bind_group = bind_with_slot(tape, ctx, name, &pipeline, &bound, 7, source)?;
    Ok(Step::Gathered { pipeline, bind_group, groups: (gx as u32, gy as u32, 1), stride: source.stride, opt_uniform: None })
}

/// The buffers of a gathering forward (`forward_input_gather.wgsl` and `linear_forward.wgsl`'s
/// or `forward_output.wgsl`'s first five), by binding number; the slot (7) is bound apart.
fn gather_bindings<'a>(
    tape: &'a GpuTape,
    source: &ByteImages<'a>,
    params: &'a wgpu::Buffer,
    y: &'a wgpu::Buffer,
    uniform: &'a wgpu::Buffer,
    x: &'a wgpu::Buffer,
    labels: &'a wgpu::Buffer,
) -> Vec<(u32, &'a wgpu::Buffer)> {
    vec![
        (0, source.images),
        (1, params),
        (2, y),
        (3, &tape.batch_uniform),
        (4, uniform),
        (5, source.labels),
        (6, source.order),
        (8, x),
        (9, labels),
    ]
}

/// A bind group for `pipeline` with `bound` at their binding numbers and the first batch slot of
/// `source` at binding `slot` (bound with a dynamic offset when recorded).
fn bind_with_slot(
    tape: &GpuTape,
    ctx: &GpuContext,
    name: &str,
    pipeline: &wgpu::ComputePipeline,
    bound: &[(u32, &wgpu::Buffer)],
    slot: u32,
    source: &ByteImages<'_>,
) -> Result<wgpu::BindGroup, LayersError> {
    let slot_resource = wgpu::BindingResource::Buffer(wgpu::BufferBinding {
        buffer: source.slots,
        offset: 0,
        size: wgpu::BufferSize::new(std::mem::size_of::<wgsl::GatherSlot>() as u64),
    });
    let mut entries: Vec<wgpu::BindGroupEntry> =
        bound.iter().map(|&(binding, b)| wgpu::BindGroupEntry { binding, resource: b.as_entire_binding() }).collect();
    entries.push(wgpu::BindGroupEntry { binding: slot, resource: slot_resource });
    let bind_group = ctx.scoped(|| {
        ctx.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(name),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &entries,
        })
    })?;
    tape.manager.note_external(0, 1, 0);
    Ok(bind_group)
}

/// Where a merged `forward_output` reads its batch: the tensor x of its `LinearForward`, or byte
/// images gathered by the dispatch itself, keeping the rows in x and the labels in `labels`; in
/// the split step (`partials` given) its hidden layer's sums come from the partial sums the
/// previous update wrote.
pub(crate) enum MergedInput<'a> {
    Tensor,
    Gathered { labels: TensorId, source: &'a ByteImages<'a>, partials: Option<&'a wgpu::Buffer> },
}

/// The `LinearForward` `forward` and the `OutputLayer` `output` on top of it as ONE dispatch,
/// `forward_output`: the bindings of `linear_forward` (0-4; 5-9 when gathering), the labels at
/// 10 (from the tensor; gathered ones are read from the bytes), and the output layer's
/// out_params, out, dh and counters at 11-14. Grid: `ceil(B / merged_tr)` workgroups, each its
/// rows' whole hidden layer. [`GpuTape`] decides where it applies (`FusedTiles::merges`).
pub(crate) fn prepare_forward_output(
    tape: &GpuTape,
    ctx: &GpuContext,
    kernels: &Kernels,
    forward: &Op,
    output: &Op,
    input: MergedInput<'_>,
) -> Result<Step, LayersError> {
    let (Op::LinearForward { x, params, y, act }, Op::OutputLayer { h, params: out_params, labels, out, dh, counters, mode }) =
        (forward, output)
    else {
        return Err(LayersError::Spec(format!("forward_output merges a linear_forward and an output_layer, not {} and {}", forward.kernel_name(), output.kernel_name())));
    };
    if h.tensor != y.tensor || h.cols != y.cols {
        return Err(LayersError::Spec("forward_output: the output layer must read the forward's output".into()));
    }
    let buf = |t: TensorId| &tape.buffers[t.0];
    let tiles = kernels.tiles().fitted(ctx.limits.max_compute_invocations_per_workgroup);
    let (dh_buf, hidden_act) = match dh {
        Some((v, a)) => (buf(v.tensor), Activation::code(Some(*a))),
        None => (&tape.placeholders_rw[0], Activation::code(None)),
    };
    let id = match input {
        MergedInput::Tensor => KernelId::ForwardOutput,
        MergedInput::Gathered { partials: None, .. } => KernelId::ForwardOutputGather,
        MergedInput::Gathered { partials: Some(_), .. } => KernelId::ForwardOutputSplit,
    };
    let name = id.name();
    let uniform = tape.manager.uniform(
        ctx,
        name,
        &ForwardOutputParams {
            inputs: y.cols as u32,
            classes: out.cols as u32,
            mode: *mode as u32,
            hidden_act,
            x_inputs: x.cols as u32,
            act: Activation::code(*act),
            partial_rows: tape.max_batch as u32,
            _pad: 0,
        },
    );
    let groups = ctx.workgroups_1d(x.rows.at(tape.max_batch).div_ceil(tiles.merged_tr as usize) as u64, 1)?;
    let out_bufs = [(11, buf(*out_params)), (12, buf(out.tensor)), (13, dh_buf), (14, buf(*counters))];
    let pipeline = kernels.pipeline(ctx, id)?;
    match input {
        MergedInput::Tensor => {
            let mut bound = vec![
                (0, buf(x.tensor)),
                (1, buf(*params)),
                (2, buf(y.tensor)),
                (3, &tape.batch_uniform),
                (4, &uniform),
                (10, buf(*labels)),
            ];
            bound.extend(out_bufs);
            let bind_group = tape.manager.bind_group_at(ctx, name, &pipeline, &bound)?;
            Ok(Step::Kernel { pipeline, bind_group, groups, opt_uniform: None })
        }
        MergedInput::Gathered { labels: kept, source, partials } => {
            let mut bound = gather_bindings(tape, source, buf(*params), buf(y.tensor), &uniform, buf(x.tensor), buf(kept));
            bound.extend(out_bufs);
            bound.extend(partials.map(|p| (15, p)));
            let bind_group = bind_with_slot(tape, ctx, name, &pipeline, &bound, 7, source)?;
            Ok(Step::Gathered { pipeline, bind_group, groups, stride: source.stride, opt_uniform: None })
        }
    }
}

/// The split step's `linear_update` of `op` (two layers, the first reading the gathered input)
/// for each parity `p` of the step: `[p][0]` the dispatch of every step, which reads the
/// batch's rows from `x[p]` and also writes the next batch's rows into `x[1 - p]` and its
/// partial sums of the first layer into `partials` (`[k-tiles][B][out]`); `[p][1]` the
/// prologue, which only writes the next batch's rows and partial sums (`Split::partials_only`).
/// All bind the source's slots with a dynamic offset, the NEXT batch's.
pub(crate) fn prepare_split_update(
    tape: &GpuTape,
    ctx: &GpuContext,
    kernels: &Kernels,
    op: &Op,
    source: &ByteImages<'_>,
    partials: &wgpu::Buffer,
    x: [&wgpu::Buffer; 2],
) -> Result<[[Step; 2]; 2], LayersError> {
    let Op::LinearUpdate { first, second: Some(second), counters, opt } = op else {
        return Err(LayersError::Spec(format!("the split step's update is a two-layer linear_update, not {}", op.kernel_name())));
    };
    let id = KernelId::LinearUpdateSplit;
    let (update, groups) = update_uniform(ctx, &kernels.tiles(), first, Some(second), *opt, id.name())?;
    let pipeline = kernels.pipeline(ctx, id)?;
    let buf = |t: TensorId| &tape.buffers[t.0];
    let uniforms = [0, 1].map(|partials_only| {
        let split = wgsl::Split { partials_only, partial_rows: tape.max_batch as u32, _pad: [0; 2] };
        tape.manager.uniform(ctx, id.name(), &Update { split, ..update })
    });
    let prepare = |parity: usize, uniform: &wgpu::Buffer| -> Result<Step, LayersError> {
        let bound = [
            (0, x[parity]),
            (1, buf(first.dy.tensor)),
            (2, buf(first.params)),
            (3, buf(first.grads)),
            (4, buf(first.state)),
            (5, buf(second.x.tensor)),
            (6, buf(second.dy.tensor)),
            (7, buf(second.params)),
            (8, buf(second.grads)),
            (9, buf(second.state)),
            (10, buf(*counters)),
            (11, &tape.batch_uniform),
            (12, uniform),
            (13, source.images),
            (14, source.order),
            (16, partials),
            (17, x[1 - parity]),
        ];
        let bind_group = bind_with_slot(tape, ctx, id.name(), &pipeline, &bound, 15, source)?;
        let groups = (groups as u32, 1, 1);
        let opt_uniform = Some(uniform.clone());
        Ok(Step::Gathered { pipeline: pipeline.clone(), bind_group, groups, stride: source.stride, opt_uniform })
    };
    Ok([[prepare(0, &uniforms[0])?, prepare(0, &uniforms[1])?], [prepare(1, &uniforms[0])?, prepare(1, &uniforms[1])?]])
}

/// `linear_update`'s uniform for `first` and (if any) `second`, and its workgroups: `T x T`
/// tiles of each layer's `[(in + 1), out]` parameters, layer a's first.
fn update_uniform(
    ctx: &GpuContext,
    tiles: &crate::FusedTiles,
    first: &LayerUpdate,
    second: Option<&LayerUpdate>,
    opt: Optimizer,
    name: &str,
) -> Result<(Update, usize), LayersError> {
    let t = tiles.update_t as usize;
    let tiles = |l: &LayerUpdate| ((l.x.cols + 1).div_ceil(t), l.dy.cols.div_ceil(t));
    let (ta, tb) = (tiles(first), second.map_or((0, 1), tiles));
    let groups = ta.0 * ta.1 + tb.0 * tb.1;
    check_groups(ctx, name, groups)?;
    let shape = |l: Option<&LayerUpdate>, tiles: (usize, usize), first_group: usize| {
        let (i, o) = l.map_or((0, 0), |l| (l.x.cols, l.dy.cols));
        LayerShape { inputs: i as u32, outputs: o as u32, tiles_n: tiles.1 as u32, first_group: first_group as u32 }
    };
    let update = Update {
        opt: Opt::new(opt, 0, 0, 0),
        a: shape(Some(first), ta, 0),
        b: shape(second, tb, ta.0 * ta.1),
        split: wgsl::Split::NONE,
    };
    Ok((update, groups))
}

/// The kernel a `LinearForward` of `rows` (the tape's largest batch) x `cols` outputs runs,
/// and its grid: gathering its input (`gather`), `linear_forward`'s gathering form; else
/// `linear_forward_tiled` where [`crate::FusedTiles::forward_tiled`] says so (`FT_N x FT_M`
/// outputs per workgroup), else `linear_forward` (`TN x TR`).
pub(crate) fn forward_kernel(kernels: &Kernels, ctx: &GpuContext, rows: usize, cols: usize, gather: bool) -> (KernelId, (usize, usize)) {
    let tiles = kernels.tiles();
    let id = forward_kernel_id(&tiles, &ctx.limits, rows, cols, gather);
    if id == KernelId::LinearForwardTiled {
        (id, (cols.div_ceil(tiles.tiled_n as usize), rows.div_ceil(tiles.tiled_m as usize)))
    } else {
        (id, (cols.div_ceil(tiles.forward_tn as usize), rows.div_ceil(tiles.forward_tr as usize)))
    }
}

/// [`forward_kernel`]'s choice alone, without a device.
pub(crate) fn forward_kernel_id(tiles: &crate::FusedTiles, limits: &wgpu::Limits, rows: usize, cols: usize, gather: bool) -> KernelId {
    if gather {
        KernelId::LinearForwardGather
    } else if tiles.forward_tiled(rows, cols, limits) {
        KernelId::LinearForwardTiled
    } else {
        KernelId::LinearForward
    }
}

/// Builds the dispatch for one op of a tape over `tape`'s tensors (see the table above).
pub(crate) fn prepare(tape: &GpuTape, ctx: &GpuContext, kernels: &Kernels, op: &Op) -> Result<Step, LayersError> {
    let m = &tape.manager;
    let buf = |t: TensorId| &tape.buffers[t.0];
    let rows = |v: &View| v.rows.at(tape.max_batch);
    let batch = &tape.batch_uniform;
    let name = op.kernel_name();
    let tiles = kernels.tiles();
    // Binds `bound` at 0, 1, ... and the op's uniform last, or, where `numbers` are given, each
    // at its own binding number (the one-layer linear_update, whose bindings 5-9 are absent).
    let kernel_at = |id: KernelId, uniform: &wgpu::Buffer, bound: &[&wgpu::Buffer], numbers: Option<&[u32]>, groups: (u32, u32, u32)| {
        let pipeline = kernels.pipeline(ctx, id)?;
        let mut all = bound.to_vec();
        all.push(uniform);
        let numbered: Vec<(u32, &wgpu::Buffer)> = match numbers {
            Some(n) => n.iter().copied().zip(all).collect(),
            None => (0..).zip(all).collect(),
        };
        let bind_group = m.bind_group_at(ctx, name, &pipeline, &numbered)?;
        let opt_uniform =
            matches!(id, KernelId::Sgd | KernelId::Adam | KernelId::LinearUpdate | KernelId::LinearUpdateCoop).then(|| uniform.clone());
        Ok::<Step, LayersError>(Step::Kernel { pipeline, bind_group, groups, opt_uniform })
    };
    let kernel = |id, uniform, bound: &[&wgpu::Buffer], groups| kernel_at(id, uniform, bound, None, groups);
    let elementwise = |len: usize| ctx.workgroups_1d(len as u64, wgsl::WG);
    let per_row = |rows: usize| ctx.workgroups_1d(rows as u64, 1);
    let act = |a: Activation| Activation::code(Some(a));
    let u32_ = |n: usize| n as u32;
    // The loss kernels keep a row of logits in workgroup memory.
    if let Op::SoftmaxCrossEntropy { out, .. } | Op::OutputLayer { out, .. } | Op::MeanSquaredError { out, .. } = op
        && out.cols > MAX_CLASSES
    {
        return Err(LayersError::Spec(format!("{name}: {} classes; the loss kernels handle at most {MAX_CLASSES}", out.cols)));
    }
    match *op {
        Op::Matmul { a, b, out, t } => {
            let gm = |v: &View| GpuMatrix { buffer: buf(v.tensor).clone(), rows: rows(v), cols: v.cols };
            // (m, k, n) of the product, as views whose rows may follow the batch.
            let dims = match t {
                Transpose::None => (a.rows, Dim::Fixed(a.cols), Dim::Fixed(b.cols)),
                Transpose::A => (Dim::Fixed(a.cols), a.rows, Dim::Fixed(b.cols)),
                Transpose::B => (a.rows, Dim::Fixed(a.cols), b.rows),
            };
            let call = kernels.matmul(ctx)?.prepare(ctx, &gm(&a), &gm(&b), &gm(&out), t)?;
            // prepare made a shape uniform (32 bytes) and a bind group.
            m.note_external(1, 1, 32);
            Ok(Step::Matmul { call, dims })
        }
        Op::BiasAdd { y, bias, offset } => kernel(
            KernelId::BiasAdd,
            &m.uniform(ctx, name, &BiasAddParams { cols: u32_(y.cols), offset: u32_(offset), _pad: [0; 2] }),
            &[buf(y.tensor), buf(bias), batch],
            elementwise(rows(&y) * y.cols)?,
        ),
        Op::Activate { y, act: a } => kernel(
            KernelId::ActivationForward,
            &m.uniform(ctx, name, &ActivationParams { cols: u32_(y.cols), act: act(a), _pad: [0; 2] }),
            &[buf(y.tensor), batch],
            elementwise(rows(&y) * y.cols)?,
        ),
        Op::ActivateBackward { act: Activation::Gelu, .. } => Err(crate::cpu_dispatch::gelu_in_place()),
        Op::ActivateBackward { dy, y, act: a } => kernel(
            KernelId::ActivationBackward,
            &m.uniform(ctx, name, &ActivationParams { cols: u32_(dy.cols), act: act(a), _pad: [0; 2] }),
            &[buf(dy.tensor), buf(y.tensor), batch],
            elementwise(rows(&dy) * dy.cols)?,
        ),
        Op::SoftmaxCrossEntropy { logits, labels, out, counters, mode } => kernel(
            KernelId::SoftmaxCe,
            &m.uniform(ctx, name, &SoftmaxCeParams { classes: u32_(logits.cols), mode: mode as u32, _pad: [0; 2] }),
            &[buf(logits.tensor), buf(labels), buf(out.tensor), buf(counters), batch],
            per_row(rows(&logits))?,
        ),
        Op::ColumnSum { x, out, offset } => {
            let groups = x.cols.div_ceil(wgsl::COLUMN_SUM_COLS as usize);
            check_groups(ctx, name, groups)?;
            kernel(
                KernelId::ColumnSum,
                &m.uniform(ctx, name, &ColumnSumParams { cols: u32_(x.cols), offset: u32_(offset), _pad: [0; 2] }),
                &[buf(x.tensor), buf(out), batch],
                (groups as u32, 1, 1),
            )
        }
        Op::Update { params, grads, state, counters, len, opt } => {
            let u = m.uniform(ctx, name, &Opt::new(opt, len, 0, 0));
            match opt {
                Optimizer::Sgd { .. } => kernel(KernelId::Sgd, &u, &[buf(params), buf(grads), buf(state)], elementwise(len)?),
                Optimizer::Adam { .. } => {
                    kernel(KernelId::Adam, &u, &[buf(params), buf(grads), buf(state), buf(counters)], elementwise(len)?)
                }
            }
        }
        Op::LinearForward { x, params, y, act: a } => {
            let (id, (gx, gy)) = forward_kernel(kernels, ctx, rows(&x), y.cols, false);
            check_groups(ctx, id.name(), gx.max(gy))?;
            kernel(
                id,
                &m.uniform(ctx, name, &LinearParams { inputs: u32_(x.cols), outputs: u32_(y.cols), act: Activation::code(a), k_split: 0 }),
                &[buf(x.tensor), buf(params), buf(y.tensor), batch],
                (gx as u32, gy as u32, 1),
            )
        }
        Op::OutputLayer { h, out, .. } if tiles.output_wide(h.cols, out.cols, &ctx.limits) => {
            prepare_output_wide(tape, ctx, kernels, op, None)
        }
        Op::OutputLayer { h, params, labels, out, dh, counters, mode } => {
            let (dh_buf, hidden_act) = match dh {
                Some((v, a)) => (buf(v.tensor), act(a)),
                None => (&tape.placeholders_rw[0], Activation::code(None)),
            };
            // As many rows per workgroup as the tiles say and the workgroup's logits hold.
            let rows_per_group = tiles.output_rows.min(wgsl::OUTPUT_Z_SHARED / out.cols.max(1) as u32).max(1);
            let params_u = OutputLayerParams {
                inputs: u32_(h.cols),
                classes: u32_(out.cols),
                mode: mode as u32,
                hidden_act,
                rows_per_group,
                sums: 0,
                below_inputs: 0,
                below_act: 0,
            };
            kernel(
                KernelId::OutputLayer,
                &m.uniform(ctx, name, &params_u),
                &[buf(h.tensor), buf(params), buf(labels), buf(out.tensor), dh_buf, buf(counters), batch],
                per_row(rows(&h).div_ceil(rows_per_group as usize))?,
            )
        }
        Op::LinearBackwardInput { dy, params, h, act: a, dx } => {
            // BACKWARD_INPUT_K columns of dx by BACKWARD_INPUT_R rows per workgroup.
            let gx = dx.cols.div_ceil(wgsl::BACKWARD_INPUT_K as usize);
            let gy = rows(&dx).div_ceil(wgsl::BACKWARD_INPUT_R as usize);
            check_groups(ctx, name, gx.max(gy))?;
            kernel(
                KernelId::LinearBackwardInput,
                &m.uniform(ctx, name, &LinearParams { inputs: u32_(dx.cols), outputs: u32_(dy.cols), act: act(a), k_split: 0 }),
                &[buf(dy.tensor), buf(params), buf(h.tensor), buf(dx.tensor), batch],
                (gx as u32, gy as u32, 1),
            )
        }
        Op::ActivateCopy { x, y, act: a } => kernel(
            KernelId::ActivationCopyForward,
            &m.uniform(ctx, name, &ActivationParams { cols: u32_(y.cols), act: act(a), _pad: [0; 2] }),
            &[buf(x.tensor), buf(y.tensor), batch],
            elementwise(rows(&y) * y.cols)?,
        ),
        Op::ActivateCopyBackward { dy, x, act: a } => kernel(
            KernelId::ActivationCopyBackward,
            &m.uniform(ctx, name, &ActivationParams { cols: u32_(dy.cols), act: act(a), _pad: [0; 2] }),
            &[buf(dy.tensor), buf(x.tensor), batch],
            elementwise(rows(&dy) * dy.cols)?,
        ),
        Op::Dropout { x, y, mask, counters, seed, p } => {
            let params = DropoutParams { cols: u32_(y.cols), seed, threshold: crate::cpu::dropout_threshold(p), scale: 1.0 / (1.0 - p) };
            kernel(
                KernelId::DropoutForward,
                &m.uniform(ctx, name, &params),
                &[buf(x.tensor), buf(y.tensor), buf(mask.tensor), buf(counters), batch],
                elementwise(rows(&y) * y.cols)?,
            )
        }
        Op::DropoutBackward { dy, mask } => kernel(
            KernelId::DropoutBackward,
            &m.uniform(ctx, name, &DropoutBackwardParams { cols: u32_(dy.cols), _pad: [0; 3] }),
            &[buf(dy.tensor), buf(mask.tensor), batch],
            elementwise(rows(&dy) * dy.cols)?,
        ),
        Op::MeanSquaredError { y, labels, out, counters, mode } => kernel(
            KernelId::Mse,
            &m.uniform(ctx, name, &MseParams { classes: u32_(y.cols), mode: mode as u32, _pad: [0; 2] }),
            &[buf(y.tensor), buf(labels), buf(out.tensor), buf(counters), batch],
            elementwise(rows(&y))?,
        ),
        Op::LinearUpdate { first, second, counters, opt } => {
            // With a wide layer and f16 inputs, the gradients on the tensor cores: the same
            // bindings and uniform, in tiles of COOP_UPDATE_T.
            let coop = crate::gpu_tape::coop_update(kernels.coop_on(ctx), &tiles, &ctx.limits, tape.max_batch, op);
            let (id, update_tiles) = if coop {
                (KernelId::LinearUpdateCoop, crate::FusedTiles { update_t: wgsl::COOP_UPDATE_T, ..tiles })
            } else {
                (KernelId::LinearUpdate, tiles)
            };
            let (u, groups) = update_uniform(ctx, &update_tiles, &first, second.as_ref(), opt, name)?;
            let uniform = m.uniform(ctx, name, &u);
            let a_bufs = [buf(first.x.tensor), buf(first.dy.tensor), buf(first.params), buf(first.grads), buf(first.state)];
            if !wgsl::DeviceFit::for_limits(&ctx.limits).linear_update_pairs {
                // The one-layer kernel (GpuTape::add_tape gave every layer its own op): layer a's
                // buffers, then the counters, the batch and the uniform at bindings 10-12.
                if second.is_some() {
                    return Err(LayersError::Spec(format!("{name}: two layers in one dispatch on a device that allows one")));
                }
                let bound = [a_bufs[0], a_bufs[1], a_bufs[2], a_bufs[3], a_bufs[4], buf(counters), batch];
                let numbers = [0, 1, 2, 3, 4, 10, 11, 12];
                return kernel_at(id, &uniform, &bound, Some(&numbers), (groups as u32, 1, 1));
            }
            let [p0, p1, p2] = &tape.placeholders_rw;
            let placeholder = &tape.placeholder;
            let b_bufs: [&wgpu::Buffer; 5] = match &second {
                Some(l) => [buf(l.x.tensor), buf(l.dy.tensor), buf(l.params), buf(l.grads), buf(l.state)],
                None => [placeholder, placeholder, p0, p1, p2],
            };
            let bound = [
                a_bufs[0],
                a_bufs[1],
                a_bufs[2],
                a_bufs[3],
                a_bufs[4],
                b_bufs[0],
                b_bufs[1],
                b_bufs[2],
                b_bufs[3],
                b_bufs[4],
                buf(counters),
                batch,
            ];
            kernel(id, &uniform, &bound, (groups as u32, 1, 1))
        }
    }
}

/// The layer below an `output_wide` that computes `h` from partial sums: the split
/// `linear_forward_tiled` (`forward`, a `LinearForward`) and the buffer of its partial sums.
pub(crate) struct BelowSums<'a> {
    pub forward: &'a Op,
    pub partials: &'a wgpu::Buffer,
}

/// An `OutputLayer` as `output_wide`: one row per workgroup, bindings as `output_layer`'s (h, params,
/// labels, out, dh, counters at 0-5, the batch and its uniform at 6-7), then at 8-9 the partial sums
/// of the layer below and that layer's parameters (for its bias) when `below` is given, else
/// placeholders. With `below`, it computes `h = act(sum of the partials + b)` itself and writes it.
pub(crate) fn prepare_output_wide(
    tape: &GpuTape,
    ctx: &GpuContext,
    kernels: &Kernels,
    op: &Op,
    below: Option<BelowSums<'_>>,
) -> Result<Step, LayersError> {
    let Op::OutputLayer { h, params, labels, out, dh, counters, mode } = *op else {
        return Err(LayersError::Spec(format!("output_wide runs an output_layer, not {}", op.kernel_name())));
    };
    let buf = |t: TensorId| &tape.buffers[t.0];
    let (dh_buf, hidden_act) = match dh {
        Some((v, a)) => (buf(v.tensor), Activation::code(Some(a))),
        None => (&tape.placeholders_rw[0], Activation::code(None)),
    };
    let sums = u32::from(below.is_some());
    let (partials, below_params, below_inputs, below_act) = match below {
        Some(BelowSums { forward: Op::LinearForward { x, params, act, .. }, partials }) => {
            (partials, buf(*params), x.cols as u32, Activation::code(*act))
        }
        Some(BelowSums { forward, .. }) => {
            return Err(LayersError::Spec(format!("output_wide sums the partials of a linear_forward, not {}", forward.kernel_name())));
        }
        None => (&tape.placeholder, &tape.placeholder, 0, 0),
    };
    let name = KernelId::OutputWide.name();
    let params_u = OutputLayerParams {
        inputs: h.cols as u32,
        classes: out.cols as u32,
        mode: mode as u32,
        hidden_act,
        rows_per_group: 1,
        sums,
        below_inputs,
        below_act,
    };
    let uniform = tape.manager.uniform(ctx, name, &params_u);
    let pipeline = kernels.pipeline(ctx, KernelId::OutputWide)?;
    let bound = [
        (0, buf(h.tensor)),
        (1, buf(params)),
        (2, buf(labels)),
        (3, buf(out.tensor)),
        (4, dh_buf),
        (5, buf(counters)),
        (6, &tape.batch_uniform),
        (7, &uniform),
        (8, partials),
        (9, below_params),
    ];
    let bind_group = tape.manager.bind_group_at(ctx, name, &pipeline, &bound)?;
    let groups = ctx.workgroups_1d(h.rows.at(tape.max_batch) as u64, 1)?;
    Ok(Step::Kernel { pipeline, bind_group, groups, opt_uniform: None })
}

/// A `LinearForward` as `linear_forward_tiled` split over k into `FusedTiles::tiled_splits`
/// workgroups along z, each writing its raw partial sums `[split][batch][out]` into `partials`
/// (for the `output_wide` above it, [`prepare_output_wide`]); bindings as the unsplit kernel's,
/// `partials` in place of y.
pub(crate) fn prepare_forward_split(
    tape: &GpuTape,
    ctx: &GpuContext,
    kernels: &Kernels,
    op: &Op,
    partials: &wgpu::Buffer,
) -> Result<Step, LayersError> {
    let Op::LinearForward { x, params, y, act } = *op else {
        return Err(LayersError::Spec(format!("only a linear_forward splits its k loop, not {}", op.kernel_name())));
    };
    let tiles = kernels.tiles();
    let buf = |t: TensorId| &tape.buffers[t.0];
    let rows = x.rows.at(tape.max_batch);
    let (id, (gx, gy)) = forward_kernel(kernels, ctx, rows, y.cols, false);
    if id != KernelId::LinearForwardTiled || tiles.tiled_splits < 2 {
        return Err(LayersError::Spec(format!("only linear_forward_tiled splits its k loop (2 ways or more), not {}", id.name())));
    }
    // On the tensor cores where the products take f16 inputs: the same partial sums, its own grid.
    let (id, (gx, gy), name) = if kernels.coop_on(ctx) && tiles.coop_forward_fits(&ctx.limits) {
        let grid = (y.cols.div_ceil(tiles.coop_n as usize), rows.div_ceil(tiles.coop_m as usize));
        (KernelId::LinearForwardCoop, grid, KERNEL_FORWARD_SPLIT_COOP)
    } else {
        (id, (gx, gy), KERNEL_FORWARD_SPLIT)
    };
    check_groups(ctx, name, gx.max(gy).max(tiles.tiled_splits as usize))?;
    let uniform = tape.manager.uniform(
        ctx,
        name,
        &LinearParams { inputs: x.cols as u32, outputs: y.cols as u32, act: Activation::code(act), k_split: tiles.tiled_splits },
    );
    let pipeline = kernels.pipeline(ctx, id)?;
    let bound = [(0, buf(x.tensor)), (1, buf(params)), (2, partials), (3, &tape.batch_uniform), (4, &uniform)];
    let bind_group = tape.manager.bind_group_at(ctx, name, &pipeline, &bound)?;
    Ok(Step::Kernel { pipeline, bind_group, groups: (gx as u32, gy as u32, tiles.tiled_splits), opt_uniform: None })
}

/// The names the split pair's two dispatches go by.
pub(crate) const KERNEL_FORWARD_SPLIT: &str = "linear_forward_tiled (k split)";
pub(crate) const KERNEL_FORWARD_SPLIT_COOP: &str = "linear_forward_coop (k split)";
pub(crate) const KERNEL_OUTPUT_SUMS: &str = "output_wide (sums)";

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
