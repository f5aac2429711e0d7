//! The dispatches that span two ops or read byte images: `forward_output` (a `LinearForward` and
//! the `OutputLayer` on top of it as one dispatch, plain, gathering or in the split step), the
//! gathering `linear_forward`, and the split step's `linear_update`.

use common::GpuContext;

use crate::gpu::dispatch::{ByteImages, Dispatch, StoreBuffers, check_groups};
use crate::gpu::kernels::{KernelId, Kernels};
use crate::gpu::prepare_linear::{forward_kernel, mask_counters, update_uniform};
use crate::tape::{Op, TensorId};
use crate::wgsl::{DropoutMask, ForwardOutputParams, GatherSlot, LinearParams, MASK_COUNTERS_BINDING, Split, Update};
use crate::{Activation, LayersError};


/// The gathering form of a first layer's `LinearForward` (see `ByteImages`): the same grid and
/// uniform, the byte images, labels, order and slots of `source` bound instead of x, and the
/// input and `labels` tensors bound as the copies it keeps for the rest of the step.
pub(crate) fn prepare_gathered(
    store: &StoreBuffers<'_>,
    ctx: &GpuContext,
    kernels: &Kernels,
    op: &Op,
    labels: TensorId,
    source: &ByteImages<'_>,
) -> Result<Dispatch, LayersError> {
    let Op::LinearForward { x, params, y, act, drop } = *op else {
        return Err(LayersError::Spec(format!("only a linear_forward can gather its input, not {}", op.kernel_name())));
    };
    let buf = |t: TensorId| &store.buffers[t.0];
    let (id, (gx, gy)) = forward_kernel(kernels, ctx, x.rows.at(store.max_batch), y.cols, true);
    let name = id.name();
    check_groups(ctx, name, gx.max(gy))?;
    let uniform = store.manager.uniform(
        ctx,
        name,
        &LinearParams {
            inputs: x.cols as u32,
            outputs: y.cols as u32,
            act: Activation::code(act),
            k_split: 0,
            drop: DropoutMask::new(drop),
        },
    );
    let pipeline = kernels.pipeline(ctx, id)?;
    let mut bound = gather_bindings(store, source, buf(params), buf(y.tensor), &uniform, buf(x.tensor), buf(labels));
    bound.push((MASK_COUNTERS_BINDING, mask_counters(store, drop)));
    let bind_group = bind_with_slot(store, ctx, name, &pipeline, &bound, 7, source)?;
    Ok(Dispatch::Gathered { pipeline, bind_group, groups: (gx as u32, gy as u32, 1), stride: source.stride, opt_uniform: None })
}

/// The buffers of a gathering forward (`forward_input_gather.wgsl` and `linear_forward.wgsl`'s
/// or `forward_output.wgsl`'s first five), by binding number; the slot (7) is bound apart.
fn gather_bindings<'a>(
    store: &StoreBuffers<'a>,
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
        (3, store.batch_uniform),
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
    store: &StoreBuffers<'_>,
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
        size: wgpu::BufferSize::new(std::mem::size_of::<GatherSlot>() as u64),
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
    store.manager.note_external(0, 1, 0);
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
/// rows' whole hidden layer. [`crate::GpuStore`] decides where it applies (`FusedTiles::merges`).
pub(crate) fn prepare_forward_output(
    store: &StoreBuffers<'_>,
    ctx: &GpuContext,
    kernels: &Kernels,
    forward: &Op,
    output: &Op,
    input: MergedInput<'_>,
) -> Result<Dispatch, LayersError> {
    let (
        Op::LinearForward { x, params, y, act, drop: forward_drop },
        Op::OutputLayer { h, params: out_params, labels, out, dh, drop, loss, counters, mode },
    ) = (forward, output)
    else {
        return Err(LayersError::Spec(format!("forward_output merges a linear_forward and an output_layer, not {} and {}", forward.kernel_name(), output.kernel_name())));
    };
    if h.tensor != y.tensor || h.cols != y.cols {
        return Err(LayersError::Spec("forward_output: the output layer must read the forward's output".into()));
    }
    if forward_drop != drop && (dh.is_some() || drop.is_some()) {
        return Err(LayersError::Spec("forward_output: dh must go through the dropout its forward draws".into()));
    }
    let buf = |t: TensorId| &store.buffers[t.0];
    let tiles = kernels.tiles().fitted(ctx.limits.max_compute_invocations_per_workgroup);
    let (dh_buf, hidden_act) = match dh {
        Some((v, a)) => (buf(v.tensor), Activation::code(Some(*a))),
        None => (&store.placeholders_rw[0], Activation::code(None)),
    };
    let id = match input {
        MergedInput::Tensor => KernelId::ForwardOutput,
        MergedInput::Gathered { partials: None, .. } => KernelId::ForwardOutputGather,
        MergedInput::Gathered { partials: Some(_), .. } => KernelId::ForwardOutputSplit,
    };
    let name = id.name();
    let uniform = store.manager.uniform(
        ctx,
        name,
        &ForwardOutputParams {
            inputs: y.cols as u32,
            classes: out.cols as u32,
            mode: *mode as u32,
            hidden_act,
            x_inputs: x.cols as u32,
            act: Activation::code(*act),
            partial_rows: store.max_batch as u32,
            loss: crate::wgsl::loss_code(*loss),
            drop: DropoutMask::new(*forward_drop),
        },
    );
    let groups = ctx.workgroups_1d(x.rows.at(store.max_batch).div_ceil(tiles.merged_tr as usize) as u64, 1)?;
    let out_bufs = [(11, buf(*out_params)), (12, buf(out.tensor)), (13, dh_buf), (14, buf(*counters))];
    let pipeline = kernels.pipeline(ctx, id)?;
    match input {
        MergedInput::Tensor => {
            let mut bound = vec![
                (0, buf(x.tensor)),
                (1, buf(*params)),
                (2, buf(y.tensor)),
                (3, store.batch_uniform),
                (4, &uniform),
                (10, buf(*labels)),
            ];
            bound.extend(out_bufs);
            let bind_group = store.manager.bind_group_at(ctx, name, &pipeline, &bound)?;
            Ok(Dispatch::Kernel { pipeline, bind_group, groups, opt_uniform: None })
        }
        MergedInput::Gathered { labels: kept, source, partials } => {
            let mut bound = gather_bindings(store, source, buf(*params), buf(y.tensor), &uniform, buf(x.tensor), buf(kept));
            bound.extend(out_bufs);
            bound.extend(partials.map(|p| (15, p)));
            let bind_group = bind_with_slot(store, ctx, name, &pipeline, &bound, 7, source)?;
            Ok(Dispatch::Gathered { pipeline, bind_group, groups, stride: source.stride, opt_uniform: None })
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
    store: &StoreBuffers<'_>,
    ctx: &GpuContext,
    kernels: &Kernels,
    op: &Op,
    source: &ByteImages<'_>,
    partials: &wgpu::Buffer,
    x: [&wgpu::Buffer; 2],
) -> Result<[[Dispatch; 2]; 2], LayersError> {
    let Op::LinearUpdate { first, second: Some(second), third: None, counters, opt } = op else {
        return Err(LayersError::Spec(format!("the split step's update is a two-layer linear_update, not {}", op.kernel_name())));
    };
    let id = KernelId::LinearUpdateSplit;
    let (update, groups) = update_uniform(ctx, &kernels.tiles(), &[*first, *second], *opt, id.name())?;
    let pipeline = kernels.pipeline(ctx, id)?;
    let buf = |t: TensorId| &store.buffers[t.0];
    let uniforms = [0, 1].map(|partials_only| {
        let split = Split { partials_only, partial_rows: store.max_batch as u32, _pad: [0; 2] };
        store.manager.uniform(ctx, id.name(), &Update { split, ..update })
    });
    let prepare = |parity: usize, uniform: &wgpu::Buffer| -> Result<Dispatch, LayersError> {
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
            (11, store.batch_uniform),
            (12, uniform),
            (13, source.images),
            (14, source.order),
            (16, partials),
            (17, x[1 - parity]),
        ];
        let bind_group = bind_with_slot(store, ctx, id.name(), &pipeline, &bound, 15, source)?;
        let groups = (groups as u32, 1, 1);
        let opt_uniform = Some(uniform.clone());
        Ok(Dispatch::Gathered { pipeline: pipeline.clone(), bind_group, groups, stride: source.stride, opt_uniform })
    };
    Ok([[prepare(0, &uniforms[0])?, prepare(0, &uniforms[1])?], [prepare(1, &uniforms[0])?, prepare(1, &uniforms[1])?]])
}
