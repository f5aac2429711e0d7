//! The primitive ops' dispatches: stage 03's matmul, the elementwise kernels (bias add,
//! activations, dropout), the losses (softmax cross-entropy, MSE), the column sum and the
//! optimizers (SGD, Adam).

use common::GpuContext;
use gpu_matmul::GpuMatrix;

use crate::gpu::dispatch::{Dispatch, StoreBuffers, check_groups, in_order};
use crate::gpu::kernels::{KernelId, Kernels};
use crate::tape::{Dim, Op, Transpose, View};
use crate::wgsl::{
    self, ActivationParams, BiasAddParams, ColumnSumParams, DropoutBackwardParams, DropoutParams, MseParams, Opt, SoftmaxCeParams,
};
use crate::{Activation, LayersError, Optimizer};

/// A `Matmul` as stage 03's matmul (`Kernel::BEST`): a, b, out and its own shape uniform, whose
/// `(m, k, n)` follow the batch where the views' rows do.
pub(crate) fn prepare_matmul(store: &StoreBuffers<'_>, ctx: &GpuContext, kernels: &Kernels, op: &Op) -> Result<Dispatch, LayersError> {
    let Op::Matmul { a, b, out, t } = *op else {
        return Err(LayersError::Spec(format!("not a matmul: {}", op.kernel_name())));
    };
    let gm = |v: &View| GpuMatrix { buffer: store.buf(v.tensor).clone(), rows: store.rows(v), cols: v.cols };
    // (m, k, n) of the product, as views whose rows may follow the batch.
    let dims = match t {
        Transpose::None => (a.rows, Dim::Fixed(a.cols), Dim::Fixed(b.cols)),
        Transpose::A => (Dim::Fixed(a.cols), a.rows, Dim::Fixed(b.cols)),
        Transpose::B => (a.rows, Dim::Fixed(a.cols), b.rows),
    };
    let call = kernels.matmul(ctx)?.prepare(ctx, &gm(&a), &gm(&b), &gm(&out), t)?;
    // prepare made a shape uniform (32 bytes) and a bind group.
    store.manager.note_external(1, 1, 32);
    Ok(Dispatch::Matmul { call, dims })
}

/// The elementwise ops, one invocation per element (`B*cols / WG` workgroups): `BiasAdd`, the
/// activations in place and out of place, `Dropout` and `DropoutBackward`.
pub(crate) fn prepare_elementwise(store: &StoreBuffers<'_>, ctx: &GpuContext, kernels: &Kernels, op: &Op) -> Result<Dispatch, LayersError> {
    let name = op.kernel_name();
    let (m, buf, batch) = (store.manager, |t| store.buf(t), store.batch_uniform);
    let act = |a: Activation| Activation::code(Some(a));
    let activation = |v: &View, a| ActivationParams { cols: v.cols as u32, act: act(a), _pad: [0; 2] };
    let (id, uniform, bound, view) = match *op {
        Op::BiasAdd { y, bias, offset } => {
            let u = m.uniform(ctx, name, &BiasAddParams { cols: y.cols as u32, offset: offset as u32, _pad: [0; 2] });
            (KernelId::BiasAdd, u, vec![buf(y.tensor), buf(bias), batch], y)
        }
        Op::Activate { y, act: a } => (KernelId::ActivationForward, m.uniform(ctx, name, &activation(&y, a)), vec![buf(y.tensor), batch], y),
        Op::ActivateBackward { act: Activation::Gelu, .. } => return Err(LayersError::gelu_in_place()),
        Op::ActivateBackward { dy, y, act: a } => {
            (KernelId::ActivationBackward, m.uniform(ctx, name, &activation(&dy, a)), vec![buf(dy.tensor), buf(y.tensor), batch], dy)
        }
        Op::ActivateCopy { x, y, act: a } => {
            (KernelId::ActivationCopyForward, m.uniform(ctx, name, &activation(&y, a)), vec![buf(x.tensor), buf(y.tensor), batch], y)
        }
        Op::ActivateCopyBackward { dy, x, act: a } => {
            (KernelId::ActivationCopyBackward, m.uniform(ctx, name, &activation(&dy, a)), vec![buf(dy.tensor), buf(x.tensor), batch], dy)
        }
        Op::Dropout { x, y, mask, counters, seed, p } => {
            let params =
                DropoutParams { cols: y.cols as u32, seed, threshold: crate::cpu::reference::dropout_threshold(p), scale: 1.0 / (1.0 - p) };
            let bound = vec![buf(x.tensor), buf(y.tensor), buf(mask.tensor), buf(counters), batch];
            (KernelId::DropoutForward, m.uniform(ctx, name, &params), bound, y)
        }
        Op::DropoutBackward { dy, mask } => {
            let u = m.uniform(ctx, name, &DropoutBackwardParams { cols: dy.cols as u32, _pad: [0; 3] });
            (KernelId::DropoutBackward, u, vec![buf(dy.tensor), buf(mask.tensor), batch], dy)
        }
        _ => return Err(LayersError::Spec(format!("not an elementwise op: {name}"))),
    };
    let groups = ctx.workgroups_1d((store.rows(&view) * view.cols) as u64, wgsl::WG)?;
    store.kernel(ctx, kernels, name, id, &in_order(&bound, &uniform), groups)
}

/// The losses: `SoftmaxCrossEntropy` (one workgroup per row) and `MeanSquaredError` (one
/// invocation per row); their input, labels, out, counters, the batch and a `MODE_*` code.
pub(crate) fn prepare_loss(store: &StoreBuffers<'_>, ctx: &GpuContext, kernels: &Kernels, op: &Op) -> Result<Dispatch, LayersError> {
    let name = op.kernel_name();
    let (buf, batch) = (|t| store.buf(t), store.batch_uniform);
    let (id, uniform, input, labels, out, counters, groups) = match *op {
        Op::SoftmaxCrossEntropy { logits, labels, out, counters, mode } => {
            let u = store.manager.uniform(ctx, name, &SoftmaxCeParams { classes: logits.cols as u32, mode: mode as u32, _pad: [0; 2] });
            (KernelId::SoftmaxCe, u, logits, labels, out, counters, ctx.workgroups_1d(store.rows(&logits) as u64, 1)?)
        }
        Op::MeanSquaredError { y, labels, out, counters, mode } => {
            let u = store.manager.uniform(ctx, name, &MseParams { classes: y.cols as u32, mode: mode as u32, _pad: [0; 2] });
            (KernelId::Mse, u, y, labels, out, counters, ctx.workgroups_1d(store.rows(&y) as u64, wgsl::WG)?)
        }
        _ => return Err(LayersError::Spec(format!("not a loss: {name}"))),
    };
    let bound = [buf(input.tensor), buf(labels), buf(out.tensor), buf(counters), batch];
    store.kernel(ctx, kernels, name, id, &in_order(&bound, &uniform), groups)
}

/// A `ColumnSum`: each workgroup sums `COLUMN_SUM_COLS` neighbouring columns; x, out, the batch,
/// [`ColumnSumParams`].
pub(crate) fn prepare_column_sum(store: &StoreBuffers<'_>, ctx: &GpuContext, kernels: &Kernels, op: &Op) -> Result<Dispatch, LayersError> {
    let Op::ColumnSum { x, out, offset } = *op else {
        return Err(LayersError::Spec(format!("not a column_sum: {}", op.kernel_name())));
    };
    let name = op.kernel_name();
    let groups = x.cols.div_ceil(wgsl::COLUMN_SUM_COLS as usize);
    check_groups(ctx, name, groups)?;
    let uniform = store.manager.uniform(ctx, name, &ColumnSumParams { cols: x.cols as u32, offset: offset as u32, _pad: [0; 2] });
    let bound = [store.buf(x.tensor), store.buf(out), store.batch_uniform];
    store.kernel(ctx, kernels, name, KernelId::ColumnSum, &in_order(&bound, &uniform), (groups as u32, 1, 1))
}

/// An `Update`: `sgd` (params, grads, velocity) or `adam` (params, grads, moments, counters),
/// one invocation per parameter, [`Opt`] (no batch uniform).
pub(crate) fn prepare_optimizer(store: &StoreBuffers<'_>, ctx: &GpuContext, kernels: &Kernels, op: &Op) -> Result<Dispatch, LayersError> {
    let Op::Update { params, grads, state, counters, len, opt } = *op else {
        return Err(LayersError::Spec(format!("not an update: {}", op.kernel_name())));
    };
    let name = op.kernel_name();
    let uniform = store.manager.uniform(ctx, name, &Opt::new(opt, len, 0, 0));
    let groups = ctx.workgroups_1d(len as u64, wgsl::WG)?;
    let (buf, uniform) = (|t| store.buf(t), &uniform);
    match opt {
        Optimizer::Sgd { .. } => {
            store.kernel(ctx, kernels, name, KernelId::Sgd, &in_order(&[buf(params), buf(grads), buf(state)], uniform), groups)
        }
        Optimizer::Adam { .. } => {
            let bound = [buf(params), buf(grads), buf(state), buf(counters)];
            store.kernel(ctx, kernels, name, KernelId::Adam, &in_order(&bound, uniform), groups)
        }
    }
}
