//! The layer kernels' dispatches: `linear_forward` (or `linear_forward_tiled`, and its k split),
//! `output_layer` (or `output_wide`), `linear_backward_input` and `linear_update` (or
//! `linear_update_coop`), with their uniforms and grids.

use common::GpuContext;

use crate::gpu::dispatch::{Dispatch, StoreBuffers, check_groups, in_order};
use crate::gpu::kernels::{KernelId, Kernels};
use crate::gpu::plan::{KERNEL_FORWARD_SPLIT, KERNEL_FORWARD_SPLIT_COOP, coop_update, forward_kernel_id};
use crate::tape::{FusedDropout, LayerUpdate, Op, TensorId};
use crate::tiles::FusedTiles;
use crate::wgsl::{self, DropoutMask, LayerShape, LinearParams, Opt, OutputLayerParams, Split, Update};
use crate::{Activation, LayersError, Optimizer};

/// A `LinearForward` reading a ready input: `linear_forward` (`TN x TR` outputs per workgroup)
/// or `linear_forward_tiled` (`FT_N x FT_M`); x, params, y, the batch, [`LinearParams`].
pub(crate) fn prepare_linear_forward(store: &StoreBuffers<'_>, ctx: &GpuContext, kernels: &Kernels, op: &Op) -> Result<Dispatch, LayersError> {
    let Op::LinearForward { x, params, y, act, drop } = *op else {
        return Err(LayersError::Spec(format!("not a linear_forward: {}", op.kernel_name())));
    };
    let name = op.kernel_name();
    let (id, (gx, gy)) = forward_kernel(kernels, ctx, store.rows(&x), y.cols, false);
    check_groups(ctx, id.name(), gx.max(gy))?;
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
    let bound = [store.buf(x.tensor), store.buf(params), store.buf(y.tensor), store.batch_uniform];
    let mut numbered = in_order(&bound, &uniform);
    numbered.push((wgsl::MASK_COUNTERS_BINDING, mask_counters(store, drop)));
    store.kernel(ctx, kernels, name, id, &numbered, (gx as u32, gy as u32, 1))
}

/// What a kernel with an optional fused dropout binds as its counters (read only for the mask
/// step, and only with a dropout): the network's counters, or the read-only placeholder.
pub(crate) fn mask_counters<'a>(store: &StoreBuffers<'a>, drop: Option<FusedDropout>) -> &'a wgpu::Buffer {
    drop.map_or(store.placeholder, |d| store.buf(d.counters))
}

/// An `OutputLayer`: `output_wide` where [`FusedTiles::output_wide`] says so, else
/// `output_layer`, as many rows per workgroup as the tiles say and its logits hold (`RPW`); h,
/// params, labels, out, dh (or a placeholder), counters, the batch, [`OutputLayerParams`].
pub(crate) fn prepare_output_layer(store: &StoreBuffers<'_>, ctx: &GpuContext, kernels: &Kernels, op: &Op) -> Result<Dispatch, LayersError> {
    let Op::OutputLayer { h, params, labels, out, dh, drop, loss, counters, mode } = *op else {
        return Err(LayersError::Spec(format!("not an output_layer: {}", op.kernel_name())));
    };
    let tiles = kernels.tiles();
    if tiles.output_wide(h.cols, out.cols, &ctx.limits) {
        return prepare_output_wide(store, ctx, kernels, op, None);
    }
    let name = op.kernel_name();
    let (dh_buf, hidden_act) = match dh {
        Some((v, a)) => (store.buf(v.tensor), Activation::code(Some(a))),
        None => (&store.placeholders_rw[0], Activation::code(None)),
    };
    // As many rows per workgroup as the tiles say and the workgroup's logits hold.
    let rows_per_group = tiles.output_rows.min(wgsl::OUTPUT_Z_SHARED / out.cols.max(1) as u32).max(1);
    let params_u = OutputLayerParams {
        inputs: h.cols as u32,
        classes: out.cols as u32,
        mode: mode as u32,
        hidden_act,
        rows_per_group,
        sums: 0,
        below_inputs: 0,
        below_act: 0,
        drop: DropoutMask::new(drop),
        loss: wgsl::loss_code(loss),
        _pad: [0; 3],
    };
    let uniform = store.manager.uniform(ctx, name, &params_u);
    let bound = [
        store.buf(h.tensor),
        store.buf(params),
        store.buf(labels),
        store.buf(out.tensor),
        dh_buf,
        store.buf(counters),
        store.batch_uniform,
    ];
    let groups = ctx.workgroups_1d(store.rows(&h).div_ceil(rows_per_group as usize) as u64, 1)?;
    store.kernel(ctx, kernels, name, KernelId::OutputLayer, &in_order(&bound, &uniform), groups)
}

/// A `LinearBackwardInput`: `BACKWARD_INPUT_K` columns of dx by `BACKWARD_INPUT_R` rows per
/// workgroup; dy, params, h, dx, the batch, [`LinearParams`].
pub(crate) fn prepare_backward_input(store: &StoreBuffers<'_>, ctx: &GpuContext, kernels: &Kernels, op: &Op) -> Result<Dispatch, LayersError> {
    let Op::LinearBackwardInput { dy, params, h, act, dx, drop } = *op else {
        return Err(LayersError::Spec(format!("not a linear_backward_input: {}", op.kernel_name())));
    };
    let name = op.kernel_name();
    let gx = dx.cols.div_ceil(wgsl::BACKWARD_INPUT_K as usize);
    let gy = store.rows(&dx).div_ceil(wgsl::BACKWARD_INPUT_R as usize);
    check_groups(ctx, name, gx.max(gy))?;
    let uniform = store.manager.uniform(
        ctx,
        name,
        &LinearParams {
            inputs: dx.cols as u32,
            outputs: dy.cols as u32,
            act: Activation::code(Some(act)),
            k_split: 0,
            drop: DropoutMask::new(drop),
        },
    );
    let bound = [
        store.buf(dy.tensor),
        store.buf(params),
        store.buf(h.tensor),
        store.buf(dx.tensor),
        store.batch_uniform,
        &uniform,
        mask_counters(store, drop),
    ];
    let numbered: Vec<(u32, &wgpu::Buffer)> = (0..).zip(bound).collect();
    store.kernel(ctx, kernels, name, KernelId::LinearBackwardInput, &numbered, (gx as u32, gy as u32, 1))
}

/// A `LinearUpdate`: `linear_update` (or, with a wide layer and f16 inputs, `linear_update_coop`:
/// the same bindings and uniform, in tiles of `COOP_UPDATE_T`) over `T x T` tiles of its layers;
/// x, dy, params, grads, state of each layer (layer a at bindings 0-4, b at 5-9, c at 18-22;
/// placeholders for missing ones), counters, the batch, [`Update`]. An op of three layers runs
/// the kernels' three-layer form; the others bind as many layers as the device allows, up to
/// two (`DeviceFit::linear_update_layers`; `GpuStore::add_tape` gave every op at most that many).
pub(crate) fn prepare_linear_update(store: &StoreBuffers<'_>, ctx: &GpuContext, kernels: &Kernels, op: &Op) -> Result<Dispatch, LayersError> {
    let Op::LinearUpdate { counters, opt, .. } = *op else {
        return Err(LayersError::Spec(format!("not a linear_update: {}", op.kernel_name())));
    };
    let name = op.kernel_name();
    let tiles = kernels.tiles();
    let buf = |t: TensorId| store.buf(t);
    let coop = coop_update(kernels.coop_on(ctx), &tiles, &ctx.limits, store.max_batch, op);
    let layers = op.updated_layers();
    let three = layers.len() == 3;
    let (id, update_tiles) = match (coop, three) {
        (true, false) => (KernelId::LinearUpdateCoop, FusedTiles { update_t: wgsl::COOP_UPDATE_T, ..tiles }),
        (true, true) => (KernelId::LinearUpdateCoopThree, FusedTiles { update_t: wgsl::COOP_UPDATE_T, ..tiles }),
        (false, false) => (KernelId::LinearUpdate, tiles),
        (false, true) => (KernelId::LinearUpdateThree, tiles),
    };
    let fit = crate::routing::DeviceFit::for_limits(&ctx.limits);
    let declared = id.update_layers(fit) as usize;
    if layers.len() > declared || (three && fit.linear_update_layers < 3) {
        return Err(LayersError::Spec(format!(
            "{name}: {} layers in one dispatch of {} on a device that binds {} layers' buffers",
            layers.len(),
            id.name(),
            fit.linear_update_layers
        )));
    }
    let (u, groups) = update_uniform(ctx, &update_tiles, &layers, opt, name)?;
    let uniform = store.manager.uniform(ctx, name, &u);
    let [p0, p1, p2] = store.placeholders_rw;
    let placeholder = store.placeholder;
    let mut bound = Vec::new();
    for (slot, first_binding) in [0u32, 5, 18].into_iter().take(declared).enumerate() {
        let bufs: [&wgpu::Buffer; 5] = match layers.get(slot) {
            Some(l) => [buf(l.x.tensor), buf(l.dy.tensor), buf(l.params), buf(l.grads), buf(l.state)],
            None => [placeholder, placeholder, p0, p1, p2],
        };
        bound.extend((first_binding..).zip(bufs));
    }
    // The uniform last: `StoreBuffers::kernel` keeps it for the learning rate.
    bound.extend([(10, buf(counters)), (11, store.batch_uniform), (12, &uniform)]);
    store.kernel(ctx, kernels, name, id, &bound, (groups as u32, 1, 1))
}

/// `linear_update`'s uniform for `layers` (one to three) and its workgroups: `T x T` tiles of
/// each layer's `[(in + 1), out]` parameters, layer a's first. A missing layer starts at the
/// grid's size: no workgroup is its.
pub(crate) fn update_uniform(
    ctx: &GpuContext,
    tiles: &FusedTiles,
    layers: &[LayerUpdate],
    opt: Optimizer,
    name: &str,
) -> Result<(Update, usize), LayersError> {
    let t = tiles.update_t as usize;
    let tiles = |l: &LayerUpdate| ((l.x.cols + 1).div_ceil(t), l.dy.cols.div_ceil(t));
    let groups: usize = layers.iter().map(|l| tiles(l).0 * tiles(l).1).sum();
    check_groups(ctx, name, groups)?;
    let mut first_group = 0;
    let mut shape = |i: usize| match layers.get(i) {
        Some(l) => {
            let (tk, tn) = tiles(l);
            let s = LayerShape { inputs: l.x.cols as u32, outputs: l.dy.cols as u32, tiles_n: tn as u32, first_group: first_group as u32 };
            first_group += tk * tn;
            s
        }
        None => LayerShape { inputs: 0, outputs: 0, tiles_n: 1, first_group: groups as u32 },
    };
    let (a, b, c) = (shape(0), shape(1), shape(2));
    Ok((Update { opt: Opt::new(opt, 0, 0, 0), a, b, c, split: Split::NONE }, groups))
}

/// The kernel a `LinearForward` of `rows` (the tape's largest batch) x `cols` outputs runs,
/// and its grid: gathering its input (`gather`), `linear_forward`'s gathering form; else
/// `linear_forward_tiled` where [`FusedTiles::forward_tiled`] says so (`FT_N x FT_M`
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
    store: &StoreBuffers<'_>,
    ctx: &GpuContext,
    kernels: &Kernels,
    op: &Op,
    below: Option<BelowSums<'_>>,
) -> Result<Dispatch, LayersError> {
    let Op::OutputLayer { h, params, labels, out, dh, drop, loss, counters, mode } = *op else {
        return Err(LayersError::Spec(format!("output_wide runs an output_layer, not {}", op.kernel_name())));
    };
    let buf = |t: TensorId| &store.buffers[t.0];
    let (dh_buf, hidden_act) = match dh {
        Some((v, a)) => (buf(v.tensor), Activation::code(Some(a))),
        None => (&store.placeholders_rw[0], Activation::code(None)),
    };
    let sums = u32::from(below.is_some());
    let (partials, below_params, below_inputs, below_act) = match below {
        Some(BelowSums { forward: Op::LinearForward { x, params, act, drop: below_drop, .. }, partials }) => {
            if *below_drop != drop {
                return Err(LayersError::Spec("output_wide's sums: h's dropout must be the one its layer draws".into()));
            }
            (partials, buf(*params), x.cols as u32, Activation::code(*act))
        }
        Some(BelowSums { forward, .. }) => {
            return Err(LayersError::Spec(format!("output_wide sums the partials of a linear_forward, not {}", forward.kernel_name())));
        }
        None => (store.placeholder, store.placeholder, 0, 0),
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
        drop: DropoutMask::new(drop),
        loss: wgsl::loss_code(loss),
        _pad: [0; 3],
    };
    let uniform = store.manager.uniform(ctx, name, &params_u);
    let pipeline = kernels.pipeline(ctx, KernelId::OutputWide)?;
    let bound = [
        (0, buf(h.tensor)),
        (1, buf(params)),
        (2, buf(labels)),
        (3, buf(out.tensor)),
        (4, dh_buf),
        (5, buf(counters)),
        (6, store.batch_uniform),
        (7, &uniform),
        (8, partials),
        (9, below_params),
    ];
    let bind_group = store.manager.bind_group_at(ctx, name, &pipeline, &bound)?;
    let groups = ctx.workgroups_1d(h.rows.at(store.max_batch) as u64, 1)?;
    Ok(Dispatch::Kernel { pipeline, bind_group, groups, opt_uniform: None })
}

/// A `LinearForward` as `linear_forward_tiled` split over k into `FusedTiles::k_splits`
/// workgroups along z, each writing its raw partial sums `[split][batch][out]` into `partials`
/// (for the `output_wide` above it, [`prepare_output_wide`]); bindings as the unsplit kernel's,
/// `partials` in place of y.
pub(crate) fn prepare_forward_split(
    store: &StoreBuffers<'_>,
    ctx: &GpuContext,
    kernels: &Kernels,
    op: &Op,
    partials: &wgpu::Buffer,
) -> Result<Dispatch, LayersError> {
    let Op::LinearForward { x, params, y, act, .. } = *op else {
        return Err(LayersError::Spec(format!("only a linear_forward splits its k loop, not {}", op.kernel_name())));
    };
    let tiles = kernels.tiles();
    let buf = |t: TensorId| &store.buffers[t.0];
    let rows = x.rows.at(store.max_batch);
    let (id, (gx, gy)) = forward_kernel(kernels, ctx, rows, y.cols, false);
    if id != KernelId::LinearForwardTiled || tiles.k_splits < 2 {
        return Err(LayersError::Spec(format!("only linear_forward_tiled splits its k loop (2 ways or more), not {}", id.name())));
    }
    // On the tensor cores where the products take f16 inputs: the same partial sums, its own grid.
    let (id, (gx, gy), name) = if kernels.coop_on(ctx) && tiles.coop_forward_fits(&ctx.limits) {
        let grid = (y.cols.div_ceil(tiles.coop_n as usize), rows.div_ceil(tiles.coop_m as usize));
        (KernelId::LinearForwardCoop, grid, KERNEL_FORWARD_SPLIT_COOP)
    } else {
        (id, (gx, gy), KERNEL_FORWARD_SPLIT)
    };
    check_groups(ctx, name, gx.max(gy).max(tiles.k_splits as usize))?;
    let uniform = store.manager.uniform(
        ctx,
        name,
        // The raw partial sums take no mask: output_wide draws it as it finishes h.
        &LinearParams {
            inputs: x.cols as u32,
            outputs: y.cols as u32,
            act: Activation::code(act),
            k_split: tiles.k_splits,
            drop: DropoutMask::NONE,
        },
    );
    let pipeline = kernels.pipeline(ctx, id)?;
    let mut bound = vec![(0, buf(x.tensor)), (1, buf(params)), (2, partials), (3, store.batch_uniform), (4, &uniform)];
    if id == KernelId::LinearForwardTiled {
        bound.push((wgsl::MASK_COUNTERS_BINDING, store.placeholder));
    }
    let bind_group = store.manager.bind_group_at(ctx, name, &pipeline, &bound)?;
    Ok(Dispatch::Kernel { pipeline, bind_group, groups: (gx as u32, gy as u32, tiles.k_splits), opt_uniform: None })
}

