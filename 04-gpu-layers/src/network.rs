//! The layers, written once for both devices, and the network that strings them together.
//!
//! A layer here is a small struct that knows its tensors and *emits* tensor operations
//! ([`Op`]) for its forward and backward passes; it never runs anything. [`Network`] (our
//! `Sequential`) allocates the tensor list, asks the layers for their ops, and keeps three
//! tapes: a training step, an evaluation, a prediction. The CPU and GPU trainers run those.
//!
//! [`Fusion`] picks the vocabulary. `Composed` uses the primitives (stage 03's matmul, bias add,
//! activation, softmax-CE, column sum, SGD/Adam): 14 ops per training step for one hidden layer.
//! `Fused` uses four kernels that each do several primitives in one dispatch: 3 ops per step
//! (the tests below list both tapes op by op).
//! The GPU trainer defaults to `Fused` (every dispatch costs microseconds of fixed overhead; see
//! the README), the CPU trainer to `Composed` (the reference). Both tapes compute the same math,
//! which the tests check op by op and step by step.

use crate::tape::{Dim, Elem, LayerUpdate, Mode, Op, TensorId, TensorInfo, Transpose, View};
use crate::wgsl::{COUNTER_BAD_LABELS, COUNTER_CORRECT, COUNTER_LOSS_HI, COUNTER_LOSS_LO, COUNTER_NON_FINITE, COUNTER_ROWS};
use crate::{Activation, LayersError, NetworkSpec, Optimizer};

/// Which ops the tapes are written with (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fusion {
    /// Primitive ops: matmul, bias add, activation, softmax-CE, column sum, optimizer.
    Composed,
    /// Fused layer kernels: linear forward, output layer, linear backward, linear update.
    Fused,
}

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

    /// x: `[B, in]` -> y: `[B, out]`, `y = act(x W + b)` in one fused op.
    pub fn forward_fused(&self, x: View, y: View, act: Option<Activation>) -> Op {
        Op::LinearForward { x, params: self.params, y, act }
    }

    /// dy: `[B, out]` -> dx: `[B, in]`, `dx = dy W^T` (dL/d this layer's input).
    pub fn backward_input(&self, dy: View, dx: View) -> Op {
        Op::Matmul { a: dy, b: self.weight(), out: dx, t: Transpose::B }
    }

    /// dy: `[B, out]`, h: `[B, in]` -> dx: `[B, in]`, `dx = (dy W^T) * act'(h)`, where `h` is the
    /// output of the layer below and `act` its activation (fused matmul + activation backward).
    pub fn backward_input_fused(&self, dy: View, h: View, act: Activation, dx: View) -> Op {
        Op::LinearBackwardInput { dy, params: self.params, h, act, dx }
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
    /// [`Linear::update`] in one kernel, which takes two layers at a time).
    pub fn update_fused(&self, x: View, dy: View) -> LayerUpdate {
        LayerUpdate { x, dy, params: self.params, grads: self.grads, state: self.state }
    }
}

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

pub use crate::wgsl::COUNTERS;

/// A multilayer perceptron as tensors and tapes: our `Sequential`.
#[derive(Debug, Clone, PartialEq)]
pub struct Network {
    pub spec: NetworkSpec,
    pub optimizer: Optimizer,
    pub fusion: Fusion,
    /// Every tensor the network uses, allocated once by the trainer.
    pub tensors: Vec<TensorInfo>,
    /// `[B, in]` f32: the batch.
    pub input: TensorId,
    /// `[B]` u32: the labels.
    pub labels: TensorId,
    /// `[1, COUNTERS]` u32: loss sum, rows, correct, bad labels, step.
    pub counters: TensorId,
    /// `[B, C]`: dL/dlogits after a training step, probabilities after eval/predict.
    pub out: TensorId,
    /// The logits `[B, C]` (composed tapes only; the fused output layer keeps them on chip).
    pub logits: Option<TensorId>,
    pub layers: Vec<Linear>,
    pub activation: ActivationLayer,
    pub loss: SoftmaxCrossEntropy,
    /// Output of each hidden layer (after its activation), `[B, width]`.
    pub hidden: Vec<TensorId>,
    /// dL/d pre-activation of each hidden layer, `[B, width]`.
    pub deltas: Vec<TensorId>,
    pub train: Vec<Op>,
    pub eval: Vec<Op>,
    pub predict: Vec<Op>,
}

impl Network {
    pub fn new(spec: &NetworkSpec, optimizer: Optimizer, fusion: Fusion) -> Result<Self, LayersError> {
        spec.validate()?;
        optimizer.validate()?;
        let mut tensors = Vec::new();
        let mut add = |name: String, rows: Dim, cols: usize, elem: Elem| {
            tensors.push(TensorInfo { name, rows, cols, elem });
            TensorId(tensors.len() - 1)
        };
        let input = add("input".into(), Dim::Batch, spec.input, Elem::F32);
        let labels = add("labels".into(), Dim::Batch, 1, Elem::U32);
        let counters = add("counters".into(), Dim::Fixed(1), COUNTERS, Elem::U32);
        let k = optimizer.state_per_parameter();
        let mut layers = Vec::new();
        let shapes = spec.layer_shapes();
        for (l, &(i, o)) in shapes.iter().enumerate() {
            let n = l + 1;
            layers.push(Linear {
                inputs: i,
                outputs: o,
                params: add(format!("params{n} [W{n}; b{n}]"), Dim::Fixed(i + 1), o, Elem::F32),
                grads: add(format!("grads{n}"), Dim::Fixed(i + 1), o, Elem::F32),
                state: add(format!("optimizer state{n}"), Dim::Fixed(k * (i + 1)), o, Elem::F32),
            });
        }
        let mut hidden = Vec::new();
        let mut deltas = Vec::new();
        for (l, &width) in spec.hidden.iter().enumerate() {
            hidden.push(add(format!("hidden{}", l + 1), Dim::Batch, width, Elem::F32));
            deltas.push(add(format!("delta{}", l + 1), Dim::Batch, width, Elem::F32));
        }
        let logits = (fusion == Fusion::Composed).then(|| add("logits".into(), Dim::Batch, spec.output, Elem::F32));
        let out = add("dlogits / probabilities".into(), Dim::Batch, spec.output, Elem::F32);
        let mut net = Self {
            spec: spec.clone(),
            optimizer,
            fusion,
            tensors,
            input,
            labels,
            counters,
            out,
            logits,
            layers,
            activation: ActivationLayer { act: spec.activation },
            loss: SoftmaxCrossEntropy,
            hidden,
            deltas,
            train: Vec::new(),
            eval: Vec::new(),
            predict: Vec::new(),
        };
        net.train = net.train_ops();
        net.eval = net.forward_ops(Mode::Eval);
        net.predict = net.forward_ops(Mode::Predict);
        Ok(net)
    }

    fn view(&self, t: TensorId) -> View {
        let info = &self.tensors[t.0];
        View { tensor: t, rows: info.rows, cols: info.cols }
    }

    /// The input of layer `l`: the batch for the first, the hidden output below otherwise.
    fn input_of(&self, l: usize) -> View {
        if l == 0 { self.view(self.input) } else { self.view(self.hidden[l - 1]) }
    }

    /// dL/d pre-activation of layer `l`: `out` (dL/dlogits) for the last layer.
    fn delta_of(&self, l: usize) -> View {
        if l + 1 == self.layers.len() { self.view(self.out) } else { self.view(self.deltas[l]) }
    }

    /// Forward through every layer, then the loss in `mode`.
    fn forward_ops(&self, mode: Mode) -> Vec<Op> {
        let last = self.layers.len() - 1;
        let mut ops = Vec::new();
        for l in 0..last {
            let (x, h) = (self.input_of(l), self.view(self.hidden[l]));
            match self.fusion {
                Fusion::Composed => {
                    ops.extend(self.layers[l].forward(x, h));
                    ops.push(self.activation.forward(h));
                }
                Fusion::Fused => ops.push(self.layers[l].forward_fused(x, h, Some(self.activation.act))),
            }
        }
        let (x, out) = (self.input_of(last), self.view(self.out));
        match (self.fusion, self.logits) {
            (Fusion::Composed, Some(logits)) => {
                let logits = self.view(logits);
                ops.extend(self.layers[last].forward(x, logits));
                ops.push(self.loss.forward_backward(logits, self.labels, out, self.counters, mode));
            }
            _ => {
                // The fused output layer also backpropagates into the last hidden layer.
                let dh = (mode == Mode::Train && last > 0).then(|| (self.delta_of(last - 1), self.activation.act));
                ops.push(Op::OutputLayer {
                    h: x,
                    params: self.layers[last].params,
                    labels: self.labels,
                    out,
                    dh,
                    counters: self.counters,
                    mode,
                });
            }
        }
        ops
    }

    /// Forward, loss, backward, and the optimizer step for every layer.
    fn train_ops(&self) -> Vec<Op> {
        let last = self.layers.len() - 1;
        let mut ops = self.forward_ops(Mode::Train);
        match self.fusion {
            Fusion::Composed => {
                for l in (0..=last).rev() {
                    ops.extend(self.layers[l].backward_params(self.input_of(l), self.delta_of(l)));
                    if l > 0 {
                        let below = self.delta_of(l - 1);
                        ops.push(self.layers[l].backward_input(self.delta_of(l), below));
                        ops.push(self.activation.backward(below, self.input_of(l)));
                    }
                }
                // Updates last: every backward op above reads the weights of this step.
                for l in (0..=last).rev() {
                    ops.push(self.layers[l].update(self.counters, self.optimizer));
                }
            }
            Fusion::Fused => {
                // The output layer produced delta_of(last - 1); continue below it.
                for l in (1..last).rev() {
                    let op = self.layers[l].backward_input_fused(
                        self.delta_of(l),
                        self.input_of(l),
                        self.activation.act,
                        self.delta_of(l - 1),
                    );
                    ops.push(op);
                }
                // Gradients and updates, two layers per dispatch.
                let updates: Vec<LayerUpdate> =
                    (0..=last).rev().map(|l| self.layers[l].update_fused(self.input_of(l), self.delta_of(l))).collect();
                for pair in updates.chunks(2) {
                    ops.push(Op::LinearUpdate {
                        first: pair[0],
                        second: pair.get(1).copied(),
                        counters: self.counters,
                        opt: self.optimizer,
                    });
                }
            }
        }
        ops
    }

    /// Checks one batch on the CPU side: `x: [rows, input]`, `labels: [rows]`, every label a
    /// class, `1 <= rows <= max_batch`.
    pub fn check_batch(&self, x_rows: usize, x_cols: usize, labels: &[u32], max_batch: usize) -> Result<(), LayersError> {
        if x_cols != self.spec.input {
            return Err(LayersError::Shape {
                what: "input batch".into(),
                expected: format!("[rows, {}] (the network's input width)", self.spec.input),
                got: format!("[{x_rows}, {x_cols}]"),
            });
        }
        if labels.len() != x_rows {
            return Err(LayersError::Shape {
                what: "labels".into(),
                expected: format!("{x_rows} labels (one per input row)"),
                got: format!("{} labels", labels.len()),
            });
        }
        if x_rows == 0 || x_rows > max_batch {
            return Err(LayersError::Batch { batch: x_rows, max_batch });
        }
        if let Some((row, &label)) = labels.iter().enumerate().find(|(_, l)| **l as usize >= self.spec.output) {
            return Err(LayersError::Label { row, label, classes: self.spec.output });
        }
        Ok(())
    }

    /// Turns the counters into metrics: an error for bad labels or a non-finite loss.
    pub(crate) fn metrics_from_counters(&self, c: &[u32]) -> Result<crate::Metrics, LayersError> {
        if c[COUNTER_BAD_LABELS] > 0 {
            return Err(LayersError::LabelsOnGpu { count: c[COUNTER_BAD_LABELS] as u64, classes: self.spec.output });
        }
        if c[COUNTER_NON_FINITE] > 0 {
            return Err(LayersError::NonFinite { what: format!("the loss of {} rows", c[COUNTER_NON_FINITE]) });
        }
        let fixed = (c[COUNTER_LOSS_HI] as u64) << 32 | c[COUNTER_LOSS_LO] as u64;
        let loss_sum = fixed as f64 / crate::cpu::LOSS_UNITS_PER_ONE;
        Ok(crate::Metrics { loss_sum, rows: c[COUNTER_ROWS] as u64, correct: c[COUNTER_CORRECT] as u64 })
    }
}

/// Parameter tensors `[(in + 1), out]` to the `[W, b]` pairs users see.
pub(crate) fn split_parameters(spec: &NetworkSpec, flat: &[Vec<f32>]) -> Vec<cpu_matrix::Matrix> {
    let mut out = Vec::with_capacity(2 * flat.len());
    for (&(i, o), p) in spec.layer_shapes().iter().zip(flat) {
        out.push(cpu_matrix::Matrix { rows: i, cols: o, data: p[..i * o].to_vec() });
        out.push(cpu_matrix::Matrix { rows: 1, cols: o, data: p[i * o..(i + 1) * o].to_vec() });
    }
    out
}

/// `[W, b]` pairs to parameter tensors `[(in + 1), out]` (shapes checked first).
pub(crate) fn join_parameters(spec: &NetworkSpec, params: &[cpu_matrix::Matrix]) -> Result<Vec<Vec<f32>>, LayersError> {
    spec.check_parameters(params)?;
    Ok(params.chunks_exact(2).map(|wb| [wb[0].data.as_slice(), wb[1].data.as_slice()].concat()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(ops: &[Op]) -> Vec<&'static str> {
        ops.iter().map(|o| o.kernel_name()).collect()
    }

    #[test]
    fn one_hidden_layer_tapes() {
        let spec = NetworkSpec::new(784, &[128], 10).unwrap();
        let fused = Network::new(&spec, Optimizer::sgd(0.1, 0.9), Fusion::Fused).unwrap();
        assert_eq!(names(&fused.train), ["linear_forward", "output_layer", "linear_update"]);
        assert_eq!(names(&fused.eval), ["linear_forward", "output_layer"]);
        let composed = Network::new(&spec, Optimizer::adam(1e-3), Fusion::Composed).unwrap();
        assert_eq!(
            names(&composed.train),
            [
                "matmul", "bias_add", "activation_forward", "matmul", "bias_add", "softmax_ce", // forward + loss
                "matmul", "column_sum", "matmul", "activation_backward", // layer 2 backward
                "matmul", "column_sum", // layer 1 backward
                "adam", "adam",
            ]
        );
    }

    #[test]
    fn the_docs_quote_these_tape_lengths() {
        let spec = NetworkSpec::new(784, &[128], 10).unwrap();
        let composed = Network::new(&spec, Optimizer::sgd(0.1, 0.9), Fusion::Composed).unwrap().train.len();
        let fused = Network::new(&spec, Optimizer::sgd(0.1, 0.9), Fusion::Fused).unwrap().train.len();
        let readme = include_str!("../README.md");
        for claim in [
            format!("{composed} dispatches per step down to {fused}"),
            format!("One training step of 784-128-10 is {composed} ops"),
            format!("the same math in {fused} ops"),
        ] {
            assert!(readme.contains(&claim), "README.md should say {claim:?}");
        }
        let docs = include_str!("network.rs");
        for claim in [format!("{composed} ops per training step"), format!("{fused} ops per step")] {
            assert!(docs.contains(&claim), "network.rs's docs should say {claim:?}");
        }
    }

    #[test]
    fn deeper_and_shallower_networks() {
        let deep = NetworkSpec::new(5, &[7, 6], 3).unwrap();
        let net = Network::new(&deep, Optimizer::sgd(0.1, 0.0), Fusion::Fused).unwrap();
        assert_eq!(
            names(&net.train),
            ["linear_forward", "linear_forward", "output_layer", "linear_backward_input", "linear_update", "linear_update"]
        );
        let none = NetworkSpec::new(5, &[], 3).unwrap();
        let net = Network::new(&none, Optimizer::sgd(0.1, 0.0), Fusion::Fused).unwrap();
        assert_eq!(names(&net.train), ["output_layer", "linear_update"]);
        let Op::OutputLayer { dh, .. } = &net.train[0] else { panic!() };
        assert!(dh.is_none(), "no layer below the output layer");
    }

    #[test]
    fn bad_batches_are_errors() {
        let spec = NetworkSpec::new(3, &[4], 2).unwrap();
        let net = Network::new(&spec, Optimizer::sgd(0.1, 0.0), Fusion::Fused).unwrap();
        assert!(net.check_batch(2, 3, &[0, 1], 8).is_ok());
        assert!(matches!(net.check_batch(2, 4, &[0, 1], 8), Err(LayersError::Shape { .. })));
        assert!(matches!(net.check_batch(2, 3, &[0], 8), Err(LayersError::Shape { .. })));
        assert!(matches!(net.check_batch(2, 3, &[0, 2], 8), Err(LayersError::Label { row: 1, label: 2, .. })));
        assert!(matches!(net.check_batch(9, 3, &[0; 9], 8), Err(LayersError::Batch { .. })));
        assert!(matches!(net.check_batch(0, 3, &[], 8), Err(LayersError::Batch { .. })));
    }
}
