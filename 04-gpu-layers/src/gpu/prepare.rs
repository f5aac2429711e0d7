//! Op -> prepared dispatch: [`prepare`] routes each [`Op`] of a tape to the function of its
//! family (`prepare_basic.rs`, `prepare_linear.rs`; the merged and gathering dispatches are
//! `prepare_fused.rs`'s); the CPU reference runs the same ops in `cpu/run_op.rs`.

use common::GpuContext;

use crate::gpu::dispatch::{Dispatch, StoreBuffers};
use crate::gpu::kernels::Kernels;
use crate::gpu::prepare_basic::{prepare_column_sum, prepare_elementwise, prepare_loss, prepare_matmul, prepare_optimizer};
use crate::gpu::prepare_linear::{prepare_backward_input, prepare_linear_forward, prepare_linear_update, prepare_output_layer};
use crate::tape::Op;
use crate::{LayersError, MAX_CLASSES};

/// Builds the dispatch for one op of a tape over `store`'s tensors, made once, when
/// [`crate::GpuStore::add_tape`] takes the tape.
///
/// Every kernel binds its tensors in the order below, then the shared `batch` uniform (except
/// the optimizers, which do not read the batch), then its own uniform (`wgsl.rs`). `B` is the
/// largest batch (buffers and grids are sized for it; kernels skip rows past the live batch),
/// `WG`, `ROW_WG`, `COLS` and `T` the constants of `wgsl.rs`, `TN`, `TR` and `RPW` the fused
/// kernels' tile sizes (`FusedTiles`: `forward_tn`, `forward_tr`, `output_rows`, fewer rows when
/// that many rows' logits would not fit in workgroup memory).
///
/// | op | kernel | tensors bound | uniform | grid (workgroups) |
/// |---|---|---|---|---|
/// | `Matmul` | stage 03's `Matmul` (`Kernel::BEST`) | a, b, out | its own shape uniform | stage 03's tiles |
/// | `BiasAdd` | `bias_add` | y, bias | `BiasAddParams` | `B*cols / WG` |
/// | `Activate` | `activation_forward` | y | `ActivationParams` | `B*cols / WG` |
/// | `ActivateBackward` | `activation_backward` | dy, y | `ActivationParams` | `B*cols / WG` |
/// | `SoftmaxCrossEntropy` | `softmax_ce` | logits, labels, out, counters | `SoftmaxCeParams` | `B` (one per row) |
/// | `ColumnSum` | `column_sum` | x, out | `ColumnSumParams` | `cols / COLS` |
/// | `Update` (SGD) | `sgd` | params, grads, velocity | `Opt` | `len / WG` |
/// | `Update` (Adam) | `adam` | params, grads, moments, counters | `Opt` | `len / WG` |
/// | `LinearForward` | `linear_forward` | x, params, y | `LinearParams` | `(out / TN) x (B / TR)` |
/// | `LinearForward`, `B x out >= tiled_min`, not gathering | `linear_forward_tiled` | x, params, y | `LinearParams` | `(out / FT_N) x (B / FT_M)` |
/// | `OutputLayer` | `output_layer` | h, params, labels, out, dh, counters | `OutputLayerParams` | `B / RPW` |
/// | `OutputLayer`, `h` of at least `wide_min` columns, at most 16 classes | `output_wide` | h, params, labels, out, dh, counters, (placeholders) | `OutputLayerParams` | `B` (one per row) |
/// | `LinearForward` + `OutputLayer` (training), `FusedTiles::runs_k_split` | `linear_forward_tiled (k split)`, then `output_wide (sums)` | x, params, partials; then as `output_wide`, partials and the forward's params | `LinearParams` (`k_split`); `OutputLayerParams` (`sums`) | `(out / FT_N) x (B / FT_M) x k_splits`; `B` |
/// | the same pair, where the products take f16 inputs on an adapter with cooperative matrices | `linear_forward_coop (k split)`, then `output_wide (sums)` | as above | as above | `(out / coop_n) x (B / coop_m) x k_splits`; `B` |
/// | `LinearBackwardInput` | `linear_backward_input` | dy, params, h, dx | `LinearParams` | `in / 32 x B / 8` |
/// | `LinearUpdate` of one or two layers | `linear_update` | x, dy, params, grads, state (per layer), counters | `Update` | `T x T` tiles of its layers |
/// | `LinearUpdate` of three layers | `linear_update (three layers)` | as `linear_update` | `Update` | as `linear_update` |
/// | `LinearUpdate` with a layer that runs `linear_forward_tiled`, where the products take f16 inputs on an adapter with cooperative matrices | `linear_update_coop`, or of three layers `linear_update_coop (three layers)` | as `linear_update` | `Update` | `COOP_UPDATE_T x COOP_UPDATE_T` tiles of its layers |
/// | `LinearForward` + `OutputLayer`, gathered, split | `forward_output (split)` | images, params, y, batch, uniform, label bytes, order, slot, x, labels, out_params, out, dh, counters, partials | `ForwardOutputParams` | `B / merged_tr` |
/// | `LinearUpdate`, split | `linear_update (split)` | as `linear_update`, then images, order, the NEXT slot, partials, the next rows | `Update` (with `Split`) | as `linear_update` |
/// | `ActivateCopy` | `activation_copy_forward` | x, y | `ActivationParams` | `B*cols / WG` |
/// | `ActivateCopyBackward` | `activation_copy_backward` | dy, x | `ActivationParams` | `B*cols / WG` |
/// | `Dropout` | `dropout_forward` | x, y, mask, counters | `DropoutParams` | `B*cols / WG` |
/// | `DropoutBackward` | `dropout_backward` | dy, mask | `DropoutBackwardParams` | `B*cols / WG` |
/// | `MeanSquaredError` | `mse` | y, labels, out, counters | `MseParams` | `B / WG` (one invocation per row) |
///
/// (Each `/` rounds up; a 1-D grid past 65,535 workgroups spills into y, see
/// `common::workgroups_1d`.) Where an op leaves a binding unused (the output layer's `dh` with no
/// layer below, the second layer of a one-layer `linear_update`), a placeholder buffer of the
/// store is bound instead, so no buffer is bound twice. On a device that allows fewer than the 11
/// storage buffers of two layers (`DeviceFit`, a browser), `linear_update` takes one layer
/// per dispatch and leaves bindings 5-9 out altogether; only where it allows the 16 of three
/// does an update of three layers run as one dispatch (bindings 18-22 for the third).
pub(crate) fn prepare(store: &StoreBuffers<'_>, ctx: &GpuContext, kernels: &Kernels, op: &Op) -> Result<Dispatch, LayersError> {
    // The loss kernels keep a row of logits in workgroup memory.
    if let Op::SoftmaxCrossEntropy { out, .. } | Op::OutputLayer { out, .. } | Op::MeanSquaredError { out, .. } = op
        && out.cols > MAX_CLASSES
    {
        let name = op.kernel_name();
        return Err(LayersError::Spec(format!("{name}: {} classes; the loss kernels handle at most {MAX_CLASSES}", out.cols)));
    }
    let prepare = match op {
        Op::Matmul { .. } => prepare_matmul,
        Op::BiasAdd { .. }
        | Op::Activate { .. }
        | Op::ActivateBackward { .. }
        | Op::ActivateCopy { .. }
        | Op::ActivateCopyBackward { .. }
        | Op::Dropout { .. }
        | Op::DropoutBackward { .. } => prepare_elementwise,
        Op::SoftmaxCrossEntropy { .. } | Op::MeanSquaredError { .. } => prepare_loss,
        Op::ColumnSum { .. } => prepare_column_sum,
        Op::Update { .. } => prepare_optimizer,
        Op::LinearForward { .. } => prepare_linear_forward,
        Op::OutputLayer { .. } => prepare_output_layer,
        Op::LinearBackwardInput { .. } => prepare_backward_input,
        Op::LinearUpdate { .. } => prepare_linear_update,
    };
    prepare(store, ctx, kernels, op)
}
