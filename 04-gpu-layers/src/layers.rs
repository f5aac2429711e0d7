//! The layers, written once for both devices. A layer here is a small struct that knows its
//! tensors and *emits* tensor operations ([`Op`]) for its forward and backward passes, primitive
//! or fused; it never runs anything. [`crate::Network`] strings them into tapes.

use crate::tape::{Dim, FusedDropout, LayerUpdate, Mode, Op, TensorId, Transpose, View};
use crate::{Activation, Optimizer};

/// A fully connected layer `y = x W + b`.
///
/// The weight is stored **(in, out)**, row-major: `W[i, o]` is at `i * out + o`, so `x W` reads
/// rows of `W` along the output dimension. The bias is stored as one more row below `W`: the
/// layer's parameter tensor is `[(in + 1), out]`, as if every input row had a constant `1`
/// appended. That makes the bias gradient the last row of `[x | 1]^T dy` and lets one kernel
/// update W and b together.
#[derive(Debug, Clone, PartialEq)]
pub struct Linear {
    pub inputs: usize,
    pub outputs: usize,
    /// `[(in + 1), out]`: W then b.
    pub params: TensorId,
    /// `[(in + 1), out]`: dL/dW then dL/db, from the last training step.
    pub grads: TensorId,
    /// `[(k * (in + 1)), out]`: the optimizer's `k` state values per parameter.
    pub state: TensorId,
}

// ANCHOR: linear_ops
impl Linear {
    /// `W` as a view: the first `in x out` values of the parameters.
    pub fn weight(&self) -> View {
        View { tensor: self.params, rows: Dim::Fixed(self.inputs), cols: self.outputs }
    }

    /// Where `b` starts inside the parameters.
    pub fn bias_offset(&self) -> usize {
        self.inputs * self.outputs
    }

    /// x: `[B, in]` -> y: `[B, out]`, `y = x W + b` (matmul, then bias add).
    pub fn forward(&self, x: View, y: View) -> Vec<Op> {
        vec![
            Op::Matmul { a: x, b: self.weight(), out: y, t: Transpose::None },
            Op::BiasAdd { y, bias: self.params, offset: self.bias_offset() },
        ]
    }

    /// x: `[B, in]` -> y: `[B, out]`, `y = act(x W + b)` in one fused op, times a dropout mask
    /// with `drop`.
    pub fn forward_fused(&self, x: View, y: View, act: Option<Activation>, drop: Option<FusedDropout>) -> Op {
        Op::LinearForward { x, params: self.params, y, act, drop }
    }

    /// dy: `[B, out]` -> dx: `[B, in]`, `dx = dy W^T` (dL/d this layer's input).
    pub fn backward_input(&self, dy: View, dx: View) -> Op {
        Op::Matmul { a: dy, b: self.weight(), out: dx, t: Transpose::B }
    }

    /// dy: `[B, out]`, h: `[B, in]` -> dx: `[B, in]`, `dx = (dy W^T) * act'(h)`, where `h` is the
    /// output of the layer below and `act` its activation (fused matmul + activation backward),
    /// `drop` its dropout, if any.
    pub fn backward_input_fused(&self, dy: View, h: View, act: Activation, drop: Option<FusedDropout>, dx: View) -> Op {
        Op::LinearBackwardInput { dy, params: self.params, h, act, dx, drop }
    }

    /// x: `[B, in]`, dy: `[B, out]` -> grads `[(in + 1), out]`: `dW = x^T dy` (matmul), and
    /// `db = sum over rows of dy` (column sum into the last row).
    pub fn backward_params(&self, x: View, dy: View) -> Vec<Op> {
        let g_w = View { tensor: self.grads, rows: Dim::Fixed(self.inputs), cols: self.outputs };
        vec![
            Op::Matmul { a: x, b: dy, out: g_w, t: Transpose::A },
            Op::ColumnSum { x: dy, out: self.grads, offset: self.bias_offset() },
        ]
    }

    /// One optimizer step on W and b together.
    pub fn update(&self, counters: TensorId, opt: Optimizer) -> Op {
        Op::Update {
            params: self.params,
            grads: self.grads,
            state: self.state,
            counters,
            len: (self.inputs + 1) * self.outputs,
            opt,
        }
    }

    /// This layer's part of a fused [`Op::LinearUpdate`] ([`Linear::backward_params`] and
    /// [`Linear::update`] in one kernel, which takes up to three layers at a time).
    pub fn update_fused(&self, x: View, dy: View) -> LayerUpdate {
        LayerUpdate { x, dy, params: self.params, grads: self.grads, state: self.state }
    }
}
// ANCHOR_END: linear_ops

/// An elementwise activation layer, applied in place to its input tensor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ActivationLayer {
    pub act: Activation,
}

impl ActivationLayer {
    /// y: `[B, n]` -> `[B, n]`, `y = act(y)`.
    pub fn forward(&self, y: View) -> Op {
        Op::Activate { y, act: self.act }
    }

    /// dy: `[B, n]`, y: `[B, n]` (this layer's output) -> dy `*= act'(y)`.
    pub fn backward(&self, dy: View, y: View) -> Op {
        Op::ActivateBackward { dy, y, act: self.act }
    }

    /// x: `[B, n]` -> y: `[B, n]`, `y = act(x)` into a separate tensor.
    pub fn forward_copy(&self, x: View, y: View) -> Op {
        Op::ActivateCopy { x, y, act: self.act }
    }

    /// dy: `[B, n]`, x: `[B, n]` (this layer's input) -> dy `*= act'(x)`.
    pub fn backward_copy(&self, dy: View, x: View) -> Op {
        Op::ActivateCopyBackward { dy, x, act: self.act }
    }
}

/// Inverted dropout with probability `p`, its mask drawn from a hash of (`seed`, step, element).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DropoutLayer {
    pub p: f32,
    pub seed: u32,
}

impl DropoutLayer {
    /// x: `[B, n]` -> y: `[B, n]` and mask `[B, n]` (training only: evaluation leaves it out).
    pub fn forward(&self, x: View, y: View, mask: View, counters: TensorId) -> Op {
        Op::Dropout { x, y, mask, counters, seed: self.seed, p: self.p }
    }

    /// dy: `[B, n]` -> dy `*= mask`, the mask of this step's forward pass.
    pub fn backward(&self, dy: View, mask: View) -> Op {
        Op::DropoutBackward { dy, mask }
    }
}

/// The loss: softmax over the logits, then the mean cross-entropy over the batch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SoftmaxCrossEntropy;

impl SoftmaxCrossEntropy {
    /// logits `[B, C]`, labels `[B]` -> out `[B, C]` (dL/dlogits when training, probabilities
    /// otherwise); loss, correct and row counts go to `counters`. Forward and backward in one op,
    /// because the gradient `(softmax - onehot) / B` needs nothing but the forward's softmax.
    pub fn forward_backward(&self, logits: View, labels: TensorId, out: View, counters: TensorId, mode: Mode) -> Op {
        Op::SoftmaxCrossEntropy { logits, labels, out, counters, mode }
    }
}

/// The other loss: mean squared error against the one-hot labels.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeanSquaredError;

impl MeanSquaredError {
    /// y `[B, C]`, labels `[B]` -> out `[B, C]` (dL/dy when training, y otherwise); loss,
    /// correct and row counts go to `counters`.
    pub fn forward_backward(&self, y: View, labels: TensorId, out: View, counters: TensorId, mode: Mode) -> Op {
        Op::MeanSquaredError { y, labels, out, counters, mode }
    }
}
