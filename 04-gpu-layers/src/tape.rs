//! The small set of tensor operations both devices implement, and the "tape": one training step
//! (or evaluation, or prediction) written as a list of them.
//!
//! A tape here is a **hand-written list of ops**, not automatic differentiation: nothing records
//! a forward pass and replays it backwards. Each layer in `layers.rs` writes its own backward
//! ops next to its forward ones, and [`crate::Network`] strings them into three tapes (train,
//! eval, predict) once, when it is built. The layers never touch a device. They emit [`Op`]s
//! that name tensors by [`TensorId`]; the CPU runs a tape op by op with the CPU references in
//! `cpu/reference.rs` (`cpu/run_op.rs`, over a `CpuStore`), and the GPU turns each op into a
//! prepared dispatch once (`gpu/prepare.rs`: pipeline + bind group + workgroup counts) and
//! replays that list every step (`gpu/store.rs`). So the math of a layer is written once, and the CPU path is the reference
//! for the GPU path op by op.

use crate::{Activation, Loss, Optimizer};

/// A tensor of a network: an index into [`crate::Network::tensors`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TensorId(pub usize);

/// A dimension that is either the live batch size or fixed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dim {
    Batch,
    Fixed(usize),
}

impl Dim {
    /// The size for a given batch.
    pub fn at(self, batch: usize) -> usize {
        match self {
            Dim::Batch => batch,
            Dim::Fixed(n) => n,
        }
    }
}

/// Element type of a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elem {
    F32,
    U32,
}

/// One tensor: allocated once at `rows.at(max_batch) x cols` and reused by every step.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    pub rows: Dim,
    pub cols: usize,
    pub elem: Elem,
}

impl TensorInfo {
    /// Elements held at the largest batch.
    pub fn capacity(&self, max_batch: usize) -> usize {
        self.rows.at(max_batch) * self.cols
    }
}

/// A matrix inside a tensor: its first `rows x cols` values, row-major. (A layer's weight `W` is
/// the first `in x out` values of its parameter tensor `[(in + 1), out]`.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct View {
    pub tensor: TensorId,
    pub rows: Dim,
    pub cols: usize,
}

/// Which operand an [`Op::Matmul`] reads transposed: stage 02's (and stage 03's) `Transpose`.
/// `None`: `a [m, k] * b [k, n]`; `A`: `a^T * b` with a `[k, m]`, b `[k, n]` (weight gradients
/// `x^T dy`); `B`: `a * b^T` with a `[m, k]`, b `[n, k]` (input gradients `dy W^T`).
pub use cpu_matrix::Transpose;

/// What the loss op does with its row: see `shaders/softmax_row.wgsl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Write dL/dlogits, add loss/correct/rows to the counters, count the step.
    Train = 0,
    /// Write probabilities, add loss/correct/rows.
    Eval = 1,
    /// Write probabilities only; labels are not read.
    Predict = 2,
}

/// The tensor operations. Each has a WGSL kernel in `shaders/` and a CPU reference in `cpu/reference.rs`
/// (`Matmul` is stage 03's kernel on the GPU and stage 02's on the CPU). Shapes use `B` for the
/// live batch.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    // ---- primitives: the "composed" tapes use these -------------------------------------
    /// `out = op(a) * op(b)`, `op` the transpose `t` names (see [`Transpose`]).
    Matmul { a: View, b: View, out: View, t: Transpose },
    /// `y[r, c] += bias[offset + c]`; y: `[B, cols]`.
    BiasAdd { y: View, bias: TensorId, offset: usize },
    /// `y = act(y)` in place.
    Activate { y: View, act: Activation },
    /// `dy *= act'(y)` in place; y is the activation's output.
    ActivateBackward { dy: View, y: View, act: Activation },
    /// Softmax cross-entropy: logits `[B, C]`, labels `[B]` -> out `[B, C]` (dL/dlogits in
    /// training, probabilities otherwise) and the counters.
    SoftmaxCrossEntropy { logits: View, labels: TensorId, out: View, counters: TensorId, mode: Mode },
    /// `out[offset + c] = sum_r x[r, c]`; x: `[B, cols]`.
    ColumnSum { x: View, out: TensorId, offset: usize },
    /// One optimizer step over the whole of `params`/`grads` (`len` values); the state holds
    /// `len` values per [`Optimizer::state_per_parameter`]. Adam reads the step from `counters`.
    Update { params: TensorId, grads: TensorId, state: TensorId, counters: TensorId, len: usize, opt: Optimizer },

    // ---- fused: the "fused" tapes use these (each = a sequence of the primitives above) ------
    /// `y = act(x W + b)`, times the dropout mask with `drop`; x `[B, in]`, params
    /// `[(in + 1), out]` -> y `[B, out]`.
    LinearForward { x: View, params: TensorId, y: View, act: Option<Activation>, drop: Option<FusedDropout> },
    /// Logits `= h W + b`, softmax cross-entropy (or, with `loss`, mean squared error) into
    /// `out`, and (training) `dh = (dL/dz W^T) *
    /// act'(h)`, through h's dropout mask when `drop` (h's dropout) is given. h `[B, in]`, params
    /// `[(in + 1), C]` -> out `[B, C]`, dh `[B, in]`.
    OutputLayer {
        h: View,
        params: TensorId,
        labels: TensorId,
        out: View,
        dh: Option<(View, Activation)>,
        drop: Option<FusedDropout>,
        loss: Loss,
        counters: TensorId,
        mode: Mode,
    },
    /// `dx = (dy W^T) * act'(h)`, through h's dropout mask with `drop`; dy `[B, out]`, h
    /// `[B, in]` -> dx `[B, in]`.
    LinearBackwardInput { dy: View, params: TensorId, h: View, act: Activation, dx: View, drop: Option<FusedDropout> },
    /// For one to three layers: `grads = [x | 1]^T dy` (`[(in + 1), out]`), then the optimizer
    /// step on `params`. `third` only with `second`.
    LinearUpdate { first: LayerUpdate, second: Option<LayerUpdate>, third: Option<LayerUpdate>, counters: TensorId, opt: Optimizer },

    // ---- more layers: composed tapes only (the fused kernels do not cover them) ---------------
    /// `y = act(x)` into a separate tensor (the out-of-place form: GELU, or an activation on
    /// another activation's output). x, y: `[B, cols]`.
    ActivateCopy { x: View, y: View, act: Activation },
    /// `dy *= act'(x)` in place, with the activation's input x. dy, x: `[B, cols]`.
    ActivateCopyBackward { dy: View, x: View, act: Activation },
    /// Inverted dropout with probability `p`: `mask = 1 / (1 - p)` or 0 per element, drawn from a
    /// hash of (`seed`, the step in `counters`, element index); `y = x * mask`. x, y, mask:
    /// `[B, cols]`. Only in training tapes.
    Dropout { x: View, y: View, mask: View, counters: TensorId, seed: u32, p: f32 },
    /// `dy *= mask` in place (the mask of this step's [`Op::Dropout`]). dy, mask: `[B, cols]`.
    DropoutBackward { dy: View, mask: View },
    /// Mean squared error against one-hot labels: y `[B, C]`, labels `[B]` -> out `[B, C]`
    /// (dL/dy in training, y itself otherwise) and the counters, like
    /// [`Op::SoftmaxCrossEntropy`].
    MeanSquaredError { y: View, labels: TensorId, out: View, counters: TensorId, mode: Mode },
}

/// A dropout fused into the op that writes a hidden layer's output ([`Op::LinearForward`]) and
/// applied again by the ops that backpropagate through it ([`Op::OutputLayer`]'s dh,
/// [`Op::LinearBackwardInput`]): inverted dropout with probability `p`, the mask drawn from the
/// same hash as [`Op::Dropout`]'s, for the step in `counters` (`COUNTER_MASK_STEP`: the step
/// count when the step began). No mask is stored: the backward draws it again, and a kept
/// unit's activation output is its stored value times `1 - p`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FusedDropout {
    pub p: f32,
    pub seed: u32,
    pub counters: TensorId,
}

impl FusedDropout {
    /// The scale of a kept unit, `1 / (1 - p)`.
    pub fn scale(&self) -> f32 {
        1.0 / (1.0 - self.p)
    }

    /// `1 - p`: a kept unit's stored value times this is the activation's output.
    pub fn keep(&self) -> f32 {
        1.0 - self.p
    }

    /// The integer threshold below which a unit's hash drops it, `floor(p * 2^32)`.
    pub fn threshold(&self) -> u32 {
        dropout_threshold(self.p)
    }
}

/// Dropout's integer threshold: a unit is dropped when its hash is below `p * 2^32`, so the two
/// devices compare the same integers (no float rounding in the decision).
pub fn dropout_threshold(p: f32) -> u32 {
    ((p as f64 * 4_294_967_296.0).floor() as u64).min(u32::MAX as u64) as u32
}

/// One layer's part of [`Op::LinearUpdate`]: x `[B, in]`, dy `[B, out]`, params/grads
/// `[(in + 1), out]`, state `[(k * (in + 1)), out]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayerUpdate {
    pub x: View,
    pub dy: View,
    pub params: TensorId,
    pub grads: TensorId,
    pub state: TensorId,
}

impl Op {
    /// The kernel's name, as in `shaders/<name>.wgsl` (or "matmul" for stage 03's).
    pub fn kernel_name(&self) -> &'static str {
        match self {
            Op::Matmul { .. } => "matmul",
            Op::BiasAdd { .. } => "bias_add",
            Op::Activate { .. } => "activation_forward",
            Op::ActivateBackward { .. } => "activation_backward",
            Op::SoftmaxCrossEntropy { .. } => "softmax_ce",
            Op::ColumnSum { .. } => "column_sum",
            Op::Update { opt: Optimizer::Sgd { .. }, .. } => "sgd",
            Op::Update { opt: Optimizer::Adam { .. }, .. } => "adam",
            Op::LinearForward { .. } => "linear_forward",
            Op::OutputLayer { .. } => "output_layer",
            Op::LinearBackwardInput { .. } => "linear_backward_input",
            Op::LinearUpdate { .. } => "linear_update",
            Op::ActivateCopy { .. } => "activation_copy_forward",
            Op::ActivateCopyBackward { .. } => "activation_copy_backward",
            Op::Dropout { .. } => "dropout_forward",
            Op::DropoutBackward { .. } => "dropout_backward",
            Op::MeanSquaredError { .. } => "mse",
        }
    }

    /// The layers a [`Op::LinearUpdate`] moves, first to third; none for any other op.
    pub fn updated_layers(&self) -> Vec<LayerUpdate> {
        match *self {
            Op::LinearUpdate { first, second, third, .. } => std::iter::once(first).chain(second).chain(third).collect(),
            _ => Vec::new(),
        }
    }
}
