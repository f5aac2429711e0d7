//! The network that strings the layers (`layers.rs`) together: [`Network`] (our
//! `Sequential`) allocates the tensor list for a [`NetworkSpec`]'s layers, asks the layers for
//! their ops, and keeps three tapes: a training step, an evaluation, a prediction. The CPU and
//! GPU trainers run those.
//!
//! [`Fusion`] picks the vocabulary. `Composed` uses the primitives (stage 03's matmul, bias add,
//! activation, softmax-CE or MSE, column sum, dropout, SGD/Adam) and writes any layer list:
//! 14 ops per training step for `784-128-relu-10`. `Fused` uses four kernels that each do several
//! primitives in one dispatch: 3 ops per step for the same network (the tests below list both
//! tapes op by op). The fused kernels cover the classic MLP: linear layers with exactly one ReLU,
//! tanh or sigmoid between two of them, each optionally followed by a dropout (drawn in the
//! kernel that writes the activation and again in the backward ones, never stored), flatten
//! allowed anywhere, and softmax cross-entropy or mean squared error. A GELU between two linear
//! layers runs as an elementwise op beside them (its derivative needs the pre-activation, which
//! the linear kernels then write instead of an activation). Any other list (two
//! activations in a row, a dropout not after an activation, an activation after the last linear
//! layer, ...) gets the composed tapes even when `Fused` is asked for: [`Network::fused_blocker`]
//! says why, and [`Network::fusion`] holds what was built.
//! Both trainers ask for `Fused`: on the GPU every dispatch costs microseconds of fixed
//! overhead, and on the CPU the fused ops (the fast CPU path, `cpu/fast.rs`) make one pass over memory where the
//! primitives make several (see the README). `Composed` on the CPU is the plain reference. Both
//! tapes compute the same math, which the tests check op by op and step by step. In the fused
//! tapes, a wide hidden layer can be *routed* ([`Network::with_routes`]): its products run as
//! stage 03's matmul with the primitive ops around them.

use std::collections::HashMap;

use crate::layers::{ActivationLayer, DropoutLayer, Linear, MeanSquaredError, SoftmaxCrossEntropy};
use crate::sequential::{Layer, Loss};
use crate::tape::{Dim, Elem, FusedDropout, LayerUpdate, Mode, Op, TensorId, TensorInfo, View};
use crate::wgsl::{COUNTER_BAD_LABELS, COUNTER_CORRECT, COUNTER_LOSS_HI, COUNTER_LOSS_LO, COUNTER_NON_FINITE, COUNTER_ROWS, COUNTERS};
use crate::{Activation, LayersError, NetworkSpec, Optimizer};

/// Which ops the tapes are written with (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fusion {
    /// Primitive ops: matmul, bias add, activation, softmax-CE, column sum, optimizer.
    Composed,
    /// Fused layer kernels: linear forward, output layer, linear backward, linear update.
    Fused,
}


/// A network as tensors and tapes: our `Sequential`.
#[derive(Debug, Clone, PartialEq)]
pub struct Network {
    pub spec: NetworkSpec,
    pub optimizer: Optimizer,
    /// The vocabulary the tapes were written with: `Composed` when `Fused` was asked for a
    /// network the fused kernels do not cover (see [`Network::fused_blocker`]).
    pub fusion: Fusion,
    /// Per linear layer: its products go through stage 03's matmul in the fused tapes (see
    /// [`Network::with_routes`]); all false in composed tapes.
    pub routed: Vec<bool>,
    /// Every tensor the network uses, allocated once by the trainer.
    pub tensors: Vec<TensorInfo>,
    /// `[B, in]` f32: the batch.
    pub input: TensorId,
    /// `[B]` u32: the labels.
    pub labels: TensorId,
    /// `[1, COUNTERS]` u32: loss sum, rows, correct, bad labels, step.
    pub counters: TensorId,
    /// `[B, C]`: dL/d(outputs) after a training step; probabilities (cross-entropy) or the
    /// outputs themselves (MSE) after eval/predict.
    pub out: TensorId,
    /// The linear layers, first to last (the ones with parameters).
    pub linears: Vec<Linear>,
    pub train: Vec<Op>,
    pub eval: Vec<Op>,
    pub predict: Vec<Op>,
}

/// The tensor list being built: tensors are made on first request and found again by key, so
/// the three tapes share them.
struct Tensors {
    list: Vec<TensorInfo>,
    made: HashMap<(usize, &'static str), TensorId>,
}

impl Tensors {
    fn add(&mut self, name: String, rows: Dim, cols: usize, elem: Elem) -> TensorId {
        self.list.push(TensorInfo { name, rows, cols, elem });
        TensorId(self.list.len() - 1)
    }

    /// The `[B, cols]` f32 tensor `role` of layer `layer` (0-based), made on first request.
    fn batch(&mut self, layer: usize, role: &'static str, what: &Layer, cols: usize) -> View {
        let t = match self.made.get(&(layer, role)) {
            Some(&t) => t,
            None => {
                let t = self.add(format!("layer {} {what} {role}", layer + 1), Dim::Batch, cols, Elem::F32);
                self.made.insert((layer, role), t);
                t
            }
        };
        View { tensor: t, rows: Dim::Batch, cols }
    }

    fn view(&self, t: TensorId) -> View {
        let info = &self.list[t.0];
        View { tensor: t, rows: info.rows, cols: info.cols }
    }
}

/// What a composed training step's backward pass needs from each layer's forward pass.
enum Saved {
    /// Linear layer `k` (0-based among the linear layers), at position `i` of the layer list,
    /// and its input.
    Linear { k: usize, i: usize, x: View },
    /// An activation that ran in place: its output.
    InPlace { act: Activation, y: View },
    /// An activation that wrote a separate tensor: its input.
    Copy { act: Activation, x: View },
    Dropout { mask: View },
}

impl Network {
    /// The tensors and tapes of `spec`, written with `fusion` where the fused kernels cover
    /// the network and with the composed ops otherwise. `seed` seeds the dropout masks.
    pub fn new(spec: &NetworkSpec, optimizer: Optimizer, fusion: Fusion, seed: u64) -> Result<Self, LayersError> {
        Self::with_routes(spec, optimizer, fusion, seed, &[])
    }

    /// Like [`Network::new`]; in the fused tapes, the hidden layers `l` with `routed[l]` run
    /// their products as [`Op::Matmul`]s (stage 03's kernels, which win on wide layers and big
    /// batches) with the primitive bias, activation, column sum and optimizer ops around them,
    /// instead of the fused layer kernels. Missing entries are false; the output layer is always
    /// the fused `output_layer`, and composed tapes ignore `routed`.
    pub fn with_routes(
        spec: &NetworkSpec,
        optimizer: Optimizer,
        fusion: Fusion,
        seed: u64,
        routed: &[bool],
    ) -> Result<Self, LayersError> {
        optimizer.validate()?;
        let fusion = if fusion == Fusion::Fused && Self::fused_blocker(spec).is_none() { Fusion::Fused } else { Fusion::Composed };
        let mut t = Tensors { list: Vec::new(), made: HashMap::new() };
        let input = t.add("input".into(), Dim::Batch, spec.input(), Elem::F32);
        let labels = t.add("labels".into(), Dim::Batch, 1, Elem::U32);
        let counters = t.add("counters".into(), Dim::Fixed(1), COUNTERS, Elem::U32);
        let k = optimizer.state_per_parameter();
        let mut linears = Vec::new();
        for (l, &(i, o)) in spec.layer_shapes().iter().enumerate() {
            let n = l + 1;
            linears.push(Linear {
                inputs: i,
                outputs: o,
                params: t.add(format!("params{n} [W{n}; b{n}]"), Dim::Fixed(i + 1), o, Elem::F32),
                grads: t.add(format!("grads{n}"), Dim::Fixed(i + 1), o, Elem::F32),
                state: t.add(format!("optimizer state{n}"), Dim::Fixed(k * (i + 1)), o, Elem::F32),
            });
        }
        let out = t.add("dL/doutputs / outputs".into(), Dim::Batch, spec.output(), Elem::F32);
        let hidden_layers = linears.len() - 1;
        let routed = (0..linears.len())
            .map(|l| fusion == Fusion::Fused && l < hidden_layers && routed.get(l).copied().unwrap_or(false))
            .collect();
        let mut net = Self {
            spec: spec.clone(),
            optimizer,
            fusion,
            routed,
            tensors: Vec::new(),
            input,
            labels,
            counters,
            out,
            linears,
            train: Vec::new(),
            eval: Vec::new(),
            predict: Vec::new(),
        };
        match fusion {
            Fusion::Fused => {
                let acts: Vec<Activation> = spec
                    .layers()
                    .iter()
                    .filter_map(|l| match l {
                        Layer::Activation(a) => Some(*a),
                        _ => None,
                    })
                    .collect();
                // The dropout after each hidden layer's activation, fused into its kernels.
                let mut drops: Vec<Option<FusedDropout>> = Vec::new();
                for (i, l) in spec.layers().iter().enumerate() {
                    match *l {
                        Layer::Activation(_) => drops.push(None),
                        Layer::Dropout(p) if p > 0.0 => {
                            if let Some(d) = drops.last_mut() {
                                *d = Some(FusedDropout { p, seed: dropout_seed(seed, i), counters });
                            }
                        }
                        _ => {}
                    }
                }
                // A routed layer runs the primitive ops, which have no fused dropout: neither its
                // output nor its input may have one.
                // Nor may a GELU layer's, whose pre-activation the routed ops do not keep.
                let gelu_at = |l: usize| acts.get(l) == Some(&Activation::Gelu);
                for l in 0..net.routed.len() {
                    let below = l > 0 && (drops.get(l - 1).copied().flatten().is_some() || gelu_at(l - 1));
                    if drops.get(l).copied().flatten().is_some() || gelu_at(l) || below {
                        net.routed[l] = false;
                    }
                }
                let mut hidden = Vec::new();
                let mut deltas = Vec::new();
                for (l, lin) in net.linears[..net.linears.len() - 1].iter().enumerate() {
                    hidden.push(t.add(format!("hidden{}", l + 1), Dim::Batch, lin.outputs, Elem::F32));
                    deltas.push(t.add(format!("delta{}", l + 1), Dim::Batch, lin.outputs, Elem::F32));
                }
                // A GELU layer keeps its pre-activation for its backward pass, and with a dropout
                // after it also the GELU's output and the mask.
                let mut gelu = Vec::new();
                for (l, lin) in net.linears[..net.linears.len() - 1].iter().enumerate() {
                    let n = l + 1;
                    let mut add = |role: &str| t.add(format!("{role}{n}"), Dim::Batch, lin.outputs, Elem::F32);
                    gelu.push((acts[l] == Activation::Gelu).then(|| Gelu {
                        pre: add("pre-activation"),
                        dropped: drops[l].map(|d| (add("GELU output"), add("dropout mask"), DropoutLayer { p: d.p, seed: d.seed })),
                    }));
                }
                let fused = FusedPlan { net: &net, t: &t, acts, drops, hidden, deltas, gelu };
                let (train, eval, predict) = (fused.train_ops(), fused.forward_ops(Mode::Eval), fused.forward_ops(Mode::Predict));
                net.train = train;
                net.eval = eval;
                net.predict = predict;
            }
            Fusion::Composed => {
                net.train = net.composed_ops(&mut t, Mode::Train, seed);
                net.eval = net.composed_ops(&mut t, Mode::Eval, seed);
                net.predict = net.composed_ops(&mut t, Mode::Predict, seed);
            }
        }
        net.tensors = t.list;
        Ok(net)
    }

    /// Whether the training tape's first op can gather its batch from byte images itself (see
    /// `GpuTrainer::add_gathered`): a fused `linear_forward` of the input (a hidden layer, not
    /// routed through stage 03's matmul).
    pub fn first_op_gathers(&self) -> bool {
        matches!(self.train.first(), Some(Op::LinearForward { x, .. }) if x.tensor == self.input)
    }

    /// Why the fused kernels cannot run `spec` (None when they can): they implement linear
    /// layers with exactly one activation between two of them, optionally followed by a dropout,
    /// and softmax cross-entropy or mean squared error. ReLU, tanh and sigmoid (and their dropout)
    /// run inside the linear kernels; GELU runs as an elementwise op of its own beside them (its
    /// derivative needs its input, which the linear kernels do not keep), its dropout too.
    pub fn fused_blocker(spec: &NetworkSpec) -> Option<String> {
        let layers: Vec<(usize, &Layer)> = spec.layers().iter().enumerate().filter(|(_, l)| !matches!(l, Layer::Flatten)).collect();
        let unfit = |a: (usize, &Layer), b: (usize, &Layer)| {
            Some(format!(
                "the fused kernels need one activation (and at most one dropout after it) between two linear layers, not {} then {} (layers {} and {})",
                a.1,
                b.1,
                a.0 + 1,
                b.0 + 1
            ))
        };
        let last = || Some("the fused kernels need a linear layer first and last".to_string());
        if !matches!(layers.first(), Some((_, Layer::Linear { .. }))) {
            return last();
        }
        let mut i = 1;
        while i < layers.len() {
            match layers[i].1 {
                Layer::Activation(_) => {}
                _ => return unfit(layers[i - 1], layers[i]),
            }
            i += 1;
            if matches!(layers.get(i), Some((_, Layer::Dropout(_)))) {
                i += 1;
            }
            match layers.get(i) {
                None => return last(),
                Some((_, Layer::Linear { .. })) => i += 1,
                Some(&l) => return unfit(layers[i - 1], l),
            }
        }
        None
    }

    /// A composed tape for `mode`: every layer as primitive ops, then (training) the backward
    /// pass from the loss down to the first linear layer, then the optimizer steps.
    fn composed_ops(&self, t: &mut Tensors, mode: Mode, seed: u64) -> Vec<Op> {
        let mut ops = Vec::new();
        let mut saved = Vec::new();
        let mut cur = t.view(self.input);
        // Whether `cur` is a tensor this network made and no in-place activation has touched
        // yet: only then may an activation overwrite it (the input belongs to the caller, and
        // an activation's output may be read by its backward pass).
        let mut fresh = false;
        let mut k = 0;
        for (i, layer) in self.spec.layers().iter().enumerate() {
            match *layer {
                Layer::Flatten => {}
                Layer::Linear { outputs, .. } => {
                    let y = t.batch(i, "out", layer, outputs);
                    ops.extend(self.linears[k].forward(cur, y));
                    saved.push(Saved::Linear { k, i, x: cur });
                    (cur, fresh, k) = (y, true, k + 1);
                }
                Layer::Activation(act) => {
                    let a = ActivationLayer { act };
                    if act.grad_from_output() && fresh {
                        ops.push(a.forward(cur));
                        saved.push(Saved::InPlace { act, y: cur });
                        fresh = false;
                    } else {
                        let y = t.batch(i, "out", layer, cur.cols);
                        ops.push(a.forward_copy(cur, y));
                        saved.push(Saved::Copy { act, x: cur });
                        (cur, fresh) = (y, true);
                    }
                }
                Layer::Dropout(p) => {
                    if mode == Mode::Train && p > 0.0 {
                        let d = DropoutLayer { p, seed: dropout_seed(seed, i) };
                        let (y, mask) = (t.batch(i, "out", layer, cur.cols), t.batch(i, "mask", layer, cur.cols));
                        ops.push(d.forward(cur, y, mask, self.counters));
                        saved.push(Saved::Dropout { mask });
                        (cur, fresh) = (y, true);
                    }
                }
            }
        }
        let out = t.view(self.out);
        ops.push(match self.spec.loss() {
            Loss::CrossEntropy => SoftmaxCrossEntropy.forward_backward(cur, self.labels, out, self.counters, mode),
            Loss::Mse => MeanSquaredError.forward_backward(cur, self.labels, out, self.counters, mode),
        });
        if mode != Mode::Train {
            return ops;
        }
        // Backward, last layer first; `grad` is dL/d(the current layer's output).
        let mut grad = out;
        for s in saved.iter().rev() {
            match *s {
                Saved::Linear { k, i, x } => {
                    let lin = &self.linears[k];
                    ops.extend(lin.backward_params(x, grad));
                    if k == 0 {
                        break; // nothing below the first linear layer has parameters
                    }
                    let dx = t.batch(i, "input gradient", &self.spec.layers()[i], lin.inputs);
                    ops.push(lin.backward_input(grad, dx));
                    grad = dx;
                }
                Saved::InPlace { act, y } => ops.push(ActivationLayer { act }.backward(grad, y)),
                Saved::Copy { act, x } => ops.push(ActivationLayer { act }.backward_copy(grad, x)),
                Saved::Dropout { mask } => ops.push(Op::DropoutBackward { dy: grad, mask }),
            }
        }
        // Updates last: every backward op above reads the weights of this step.
        for lin in self.linears.iter().rev() {
            ops.push(lin.update(self.counters, self.optimizer));
        }
        ops
    }

    /// Checks one batch on the CPU side: `x: [rows, input]`, `labels: [rows]`, every label a
    /// class, `1 <= rows <= max_batch`.
    pub fn check_batch(&self, x_rows: usize, x_cols: usize, labels: &[u32], max_batch: usize) -> Result<(), LayersError> {
        if x_cols != self.spec.input() {
            return Err(LayersError::Shape {
                what: "input batch".into(),
                expected: format!("[rows, {}] (the network's input width)", self.spec.input()),
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
        if let Some((row, &label)) = labels.iter().enumerate().find(|(_, l)| **l as usize >= self.spec.output()) {
            return Err(LayersError::Label { row, label, classes: self.spec.output() });
        }
        Ok(())
    }

    /// Errors on the first NaN or infinity in a batch `x: [rows, cols]`, naming where it is. A
    /// GPU may let a NaN input vanish (WGSL allows a compiler to assume floats are finite, and
    /// `max(NaN, 0)` may be 0), so bad inputs are refused before they reach a device.
    pub fn check_finite_input(x: &[f32], cols: usize) -> Result<(), LayersError> {
        match x.iter().position(|v| !v.is_finite()) {
            None => Ok(()),
            Some(i) => Err(LayersError::NonFinite { what: format!("input row {}, column {} ({})", i / cols.max(1), i % cols.max(1), x[i]) }),
        }
    }

    /// Turns the counters into metrics: an error for bad labels or a non-finite loss.
    pub(crate) fn metrics_from_counters(&self, c: &[u32]) -> Result<crate::Metrics, LayersError> {
        if c[COUNTER_BAD_LABELS] > 0 {
            return Err(LayersError::LabelsOnGpu { count: c[COUNTER_BAD_LABELS] as u64, classes: self.spec.output() });
        }
        if c[COUNTER_NON_FINITE] > 0 {
            return Err(LayersError::NonFinite { what: format!("the loss of {} rows", c[COUNTER_NON_FINITE]) });
        }
        let fixed = (c[COUNTER_LOSS_HI] as u64) << 32 | c[COUNTER_LOSS_LO] as u64;
        let loss_sum = fixed as f64 / crate::wgsl::LOSS_UNITS_PER_ONE;
        Ok(crate::Metrics { loss_sum, rows: c[COUNTER_ROWS] as u64, correct: c[COUNTER_CORRECT] as u64 })
    }
}

/// The fused tapes of a network the fused kernels cover: `acts[l]` is the activation after
/// linear layer `l`, `drops[l]` the dropout after it (training only), `hidden[l]`/`deltas[l]`
/// its output (masked, with a dropout) and dL/d its pre-activation, `gelu[l]` what a GELU layer
/// adds.
struct FusedPlan<'a> {
    net: &'a Network,
    t: &'a Tensors,
    acts: Vec<Activation>,
    drops: Vec<Option<FusedDropout>>,
    hidden: Vec<TensorId>,
    deltas: Vec<TensorId>,
    gelu: Vec<Option<Gelu>>,
}

/// A GELU hidden layer in the fused tapes: its linear kernel writes the pre-activation `pre`
/// (`[B, out]`, no activation), `activation_copy_forward` the GELU into the layer's output, or,
/// with a dropout, into the first tensor of `dropped`, which the composed dropout masks into
/// the output (the second tensor holds the mask). Backward: stage 03's matmul for dL/d output,
/// the dropout's mask, then GELU's derivative at `pre`.
#[derive(Clone, Copy)]
struct Gelu {
    pre: TensorId,
    dropped: Option<(TensorId, TensorId, DropoutLayer)>,
}

impl FusedPlan<'_> {
    /// The input of layer `l`: the batch for the first, the hidden output below otherwise.
    fn input_of(&self, l: usize) -> View {
        if l == 0 { self.t.view(self.net.input) } else { self.t.view(self.hidden[l - 1]) }
    }

    /// dL/d pre-activation of layer `l`: `out` (dL/dlogits) for the last layer.
    fn delta_of(&self, l: usize) -> View {
        if l + 1 == self.net.linears.len() { self.t.view(self.net.out) } else { self.t.view(self.deltas[l]) }
    }

    /// The dropout after hidden layer `l` in `mode` (only training drops units).
    fn drop(&self, l: usize, mode: Mode) -> Option<FusedDropout> {
        if mode == Mode::Train { self.drops[l] } else { None }
    }

    /// Forward through every layer, then the loss in `mode`.
    fn forward_ops(&self, mode: Mode) -> Vec<Op> {
        let layers = &self.net.linears;
        let last = layers.len() - 1;
        let mut ops = Vec::new();
        for (l, layer) in layers[..last].iter().enumerate() {
            let h = self.t.view(self.hidden[l]);
            if let Some(g) = self.gelu[l] {
                let pre = self.t.view(g.pre);
                ops.push(layer.forward_fused(self.input_of(l), pre, None, None));
                let gelu = ActivationLayer { act: Activation::Gelu };
                match g.dropped {
                    Some((a, mask, d)) if self.drop(l, mode).is_some() => {
                        ops.push(gelu.forward_copy(pre, self.t.view(a)));
                        ops.push(d.forward(self.t.view(a), h, self.t.view(mask), self.net.counters));
                    }
                    _ => ops.push(gelu.forward_copy(pre, h)),
                }
            } else if self.net.routed[l] {
                ops.extend(layer.forward(self.input_of(l), h));
                ops.push(ActivationLayer { act: self.acts[l] }.forward(h));
            } else {
                ops.push(layer.forward_fused(self.input_of(l), h, Some(self.acts[l]), self.drop(l, mode)));
            }
        }
        // The fused output layer also backpropagates into the last hidden layer (unless it is a
        // GELU layer: `train_ops` does that).
        let gelu_below = last > 0 && self.gelu[last - 1].is_some();
        let dh = (mode == Mode::Train && last > 0 && !gelu_below).then(|| (self.delta_of(last - 1), self.acts[last - 1]));
        ops.push(Op::OutputLayer {
            h: self.input_of(last),
            params: layers[last].params,
            labels: self.net.labels,
            out: self.t.view(self.net.out),
            dh,
            drop: if last > 0 && !gelu_below { self.drop(last - 1, mode) } else { None },
            loss: self.net.spec.loss(),
            counters: self.net.counters,
            mode,
        });
        ops
    }

    /// dL/d the pre-activation of GELU layer `l`, from layer `l + 1`'s: `delta_of(l + 1) W^T`
    /// (stage 03's matmul), times the dropout's mask, times GELU's derivative at the
    /// pre-activation, into `delta_of(l)`.
    fn gelu_backward(&self, l: usize, g: Gelu, ops: &mut Vec<Op>) {
        let dx = self.delta_of(l);
        ops.push(self.net.linears[l + 1].backward_input(self.delta_of(l + 1), dx));
        if let Some((_, mask, d)) = g.dropped {
            ops.push(d.backward(dx, self.t.view(mask)));
        }
        ops.push(ActivationLayer { act: Activation::Gelu }.backward_copy(dx, self.t.view(g.pre)));
    }

    /// Forward, loss, backward, and the optimizer step for every layer.
    fn train_ops(&self) -> Vec<Op> {
        let layers = &self.net.linears;
        let last = layers.len() - 1;
        let mut ops = self.forward_ops(Mode::Train);
        // The output layer produced delta_of(last - 1) (a GELU layer's here); continue below it.
        if let Some(g) = last.checked_sub(1).and_then(|l| self.gelu[l]) {
            self.gelu_backward(last - 1, g, &mut ops);
        }
        for l in (1..last).rev() {
            let below = self.delta_of(l - 1);
            if let Some(g) = self.gelu[l - 1] {
                self.gelu_backward(l - 1, g, &mut ops);
            } else if self.net.routed[l] {
                ops.push(layers[l].backward_input(self.delta_of(l), below));
                ops.push(ActivationLayer { act: self.acts[l - 1] }.backward(below, self.input_of(l)));
            } else {
                ops.push(layers[l].backward_input_fused(self.delta_of(l), self.input_of(l), self.acts[l - 1], self.drops[l - 1], below));
            }
        }
        // Routed layers: weight gradients by matmul, bias gradients by column sums, then the
        // elementwise optimizer step.
        for l in (0..last).rev().filter(|&l| self.net.routed[l]) {
            ops.extend(layers[l].backward_params(self.input_of(l), self.delta_of(l)));
            ops.push(layers[l].update(self.net.counters, self.net.optimizer));
        }
        // The other layers: gradients and updates, three layers per dispatch (where the device
        // binds fewer buffers, the GPU store splits them: `plan::layers_per_update`).
        let updates: Vec<LayerUpdate> = (0..=last)
            .rev()
            .filter(|&l| !self.net.routed[l])
            .map(|l| layers[l].update_fused(self.input_of(l), self.delta_of(l)))
            .collect();
        for layers in updates.chunks(3) {
            ops.push(Op::LinearUpdate {
                first: layers[0],
                second: layers.get(1).copied(),
                third: layers.get(2).copied(),
                counters: self.net.counters,
                opt: self.net.optimizer,
            });
        }
        ops
    }
}

/// The seed of the dropout at position `layer` of the list: every dropout layer draws its own
/// masks, all from the network's seed.
fn dropout_seed(seed: u64, layer: usize) -> u32 {
    let s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add((layer as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03));
    (s >> 32) as u32 ^ s as u32
}

/// Parameter tensors `[(in + 1), out]` to the `[W, b]` pairs users see.
pub(crate) fn unflatten_parameters(spec: &NetworkSpec, flat: &[Vec<f32>]) -> Vec<cpu_matrix::Matrix> {
    let mut out = Vec::with_capacity(2 * flat.len());
    for (&(i, o), p) in spec.layer_shapes().iter().zip(flat) {
        out.push(cpu_matrix::Matrix { rows: i, cols: o, data: p[..i * o].to_vec() });
        out.push(cpu_matrix::Matrix { rows: 1, cols: o, data: p[i * o..(i + 1) * o].to_vec() });
    }
    out
}

/// `[W, b]` pairs to parameter tensors `[(in + 1), out]` (shapes checked first).
pub(crate) fn flatten_parameters(spec: &NetworkSpec, params: &[cpu_matrix::Matrix]) -> Result<Vec<Vec<f32>>, LayersError> {
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
        let fused = Network::new(&spec, Optimizer::sgd(0.1, 0.9), Fusion::Fused, 0).unwrap();
        assert_eq!(names(&fused.train), ["linear_forward", "output_layer", "linear_update"]);
        assert_eq!(names(&fused.eval), ["linear_forward", "output_layer"]);
        let composed = Network::new(&spec, Optimizer::adam(1e-3), Fusion::Composed, 0).unwrap();
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
        let composed = Network::new(&spec, Optimizer::sgd(0.1, 0.9), Fusion::Composed, 0).unwrap().train.len();
        let fused = Network::new(&spec, Optimizer::sgd(0.1, 0.9), Fusion::Fused, 0).unwrap().train.len();
        let readme = include_str!("../README.md");
        for claim in [
            format!("The **composed** tape of 784-128-10 is {composed} ops"),
            format!("The **fused** tape does the same math in {fused} ops"),
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
        let net = Network::new(&deep, Optimizer::sgd(0.1, 0.0), Fusion::Fused, 0).unwrap();
        assert_eq!(
            names(&net.train),
            ["linear_forward", "linear_forward", "output_layer", "linear_backward_input", "linear_update"]
        );
        let none = NetworkSpec::new(5, &[], 3).unwrap();
        let net = Network::new(&none, Optimizer::sgd(0.1, 0.0), Fusion::Fused, 0).unwrap();
        assert_eq!(names(&net.train), ["output_layer", "linear_update"]);
        let Op::OutputLayer { dh, .. } = &net.train[0] else { panic!() };
        assert!(dh.is_none(), "no layer below the output layer");
    }

    #[test]
    fn other_layer_lists_fall_back_to_composed_tapes() {
        let opt = Optimizer::sgd(0.1, 0.0);
        // Different activations per layer are still fused.
        let spec = NetworkSpec::parse("5-7-sigmoid-6-tanh-3", Loss::CrossEntropy).unwrap();
        assert_eq!(Network::fused_blocker(&spec), None);
        assert_eq!(Network::new(&spec, opt, Fusion::Fused, 0).unwrap().fusion, Fusion::Fused);
        // So is dropout after an activation.
        let spec = NetworkSpec::parse("784-128-relu-dropout0.2-64-tanh-dropout0-10", Loss::CrossEntropy).unwrap();
        assert_eq!(Network::fused_blocker(&spec), None);
        // And mean squared error.
        let spec = NetworkSpec::parse("2-8-tanh-2", Loss::Mse).unwrap();
        assert_eq!(Network::fused_blocker(&spec), None);
        let net = Network::new(&spec, opt, Fusion::Fused, 0).unwrap();
        assert!(matches!(net.train[1], Op::OutputLayer { loss: Loss::Mse, .. }));
        for (text, loss, why) in [
            ("784-dropout0.2-128-relu-10", Loss::CrossEntropy, "first"),
            ("784-128-relu-dropout0.2-dropout0.1-10", Loss::CrossEntropy, "dropout"),
            ("4-8-relu-tanh-2", Loss::CrossEntropy, "ReLU then Tanh"),
            ("4-8-relu-2-sigmoid", Loss::CrossEntropy, "last"),
        ] {
            let spec = NetworkSpec::parse(text, loss).unwrap();
            let blocker = Network::fused_blocker(&spec).unwrap();
            assert!(blocker.contains(why), "{text}: {why:?} not in {blocker:?}");
            assert_eq!(Network::new(&spec, opt, Fusion::Fused, 0).unwrap().fusion, Fusion::Composed, "{text}");
        }
    }

    #[test]
    fn gelu_runs_beside_the_fused_kernels() {
        let opt = Optimizer::adam(1e-3);
        let spec = NetworkSpec::parse("784-128-gelu-10", Loss::CrossEntropy).unwrap();
        assert_eq!(Network::fused_blocker(&spec), None);
        let net = Network::new(&spec, opt, Fusion::Fused, 5).unwrap();
        assert_eq!(net.fusion, Fusion::Fused);
        assert_eq!(
            names(&net.train),
            ["linear_forward", "activation_copy_forward", "output_layer", "matmul", "activation_copy_backward", "linear_update"]
        );
        assert_eq!(names(&net.eval), ["linear_forward", "activation_copy_forward", "output_layer"]);
        // The linear kernel writes the pre-activation, which the GELU reads forward and backward.
        let Op::LinearForward { y: pre, act: None, drop: None, .. } = net.train[0] else { panic!("{:?}", net.train[0]) };
        let Op::ActivateCopy { x, act: Activation::Gelu, .. } = net.train[1] else { panic!("{:?}", net.train[1]) };
        let Op::ActivateCopyBackward { x: back, act: Activation::Gelu, .. } = net.train[4] else { panic!("{:?}", net.train[4]) };
        assert_eq!((x, back), (pre, pre));
        let Op::OutputLayer { dh: None, drop: None, .. } = net.train[2] else { panic!("{:?}", net.train[2]) };
        // A dropout after GELU is the composed dropout, training only; the layers above and below
        // keep their fused forms.
        let spec = NetworkSpec::parse("784-64-relu-dropout0.2-32-gelu-dropout0.1-16-tanh-10", Loss::CrossEntropy).unwrap();
        let net = Network::new(&spec, opt, Fusion::Fused, 5).unwrap();
        assert_eq!(net.fusion, Fusion::Fused);
        assert_eq!(
            names(&net.train),
            [
                "linear_forward", "linear_forward", "activation_copy_forward", "dropout_forward", "linear_forward", "output_layer",
                "matmul", "dropout_backward", "activation_copy_backward", "linear_backward_input",
                "linear_update", "linear_update",
            ]
        );
        let Op::Dropout { seed, p, .. } = net.train[3] else { panic!("{:?}", net.train[3]) };
        assert_eq!((seed, p), (dropout_seed(5, 5), 0.1));
        assert_eq!(
            names(&net.eval),
            ["linear_forward", "linear_forward", "activation_copy_forward", "linear_forward", "output_layer"]
        );
    }

    #[test]
    fn fused_dropout_rides_on_the_layer_kernels_in_training_only() {
        let spec = NetworkSpec::parse("784-512-relu-dropout0.2-256-relu-dropout0.2-10", Loss::CrossEntropy).unwrap();
        let net = Network::new(&spec, Optimizer::adam(1e-3), Fusion::Fused, 5).unwrap();
        assert_eq!(net.fusion, Fusion::Fused);
        assert_eq!(
            names(&net.train),
            ["linear_forward", "linear_forward", "output_layer", "linear_backward_input", "linear_update"]
        );
        // Its dispatches: one update of three layers where the device binds 16 storage buffers,
        // two (a pair, then layer 1) where it binds 11, three where it binds fewer.
        let tiles = crate::FusedTiles::for_network(64, &spec.layer_shapes());
        for (buffers, updates) in [(16, 1), (11, 2), (10, 3)] {
            let limits = wgpu::Limits { max_storage_buffers_per_shader_stage: buffers, ..crate::naga_check::lavapipe_limits() };
            let plan = crate::plan(&net.train, &tiles, false, &limits, 64);
            assert_eq!(plan.iter().filter(|&&n| n == "linear_update").count(), updates, "{buffers} buffers: {plan:?}");
            assert_eq!(plan.len(), 4 + updates, "{buffers} buffers: {plan:?}");
        }
        let drops: Vec<Option<FusedDropout>> = net
            .train
            .iter()
            .filter_map(|op| match *op {
                Op::LinearForward { drop, .. } | Op::OutputLayer { drop, .. } | Op::LinearBackwardInput { drop, .. } => Some(drop),
                _ => None,
            })
            .collect();
        // Layer 1's output (list position 3) and layer 2's (position 6), each its own seed: the
        // composed tape's seeds, so both tapes draw the same masks.
        let (d1, d2) = (drops[0].unwrap(), drops[1].unwrap());
        assert_eq!((d1.seed, d2.seed, d1.p), (dropout_seed(5, 2), dropout_seed(5, 5), 0.2));
        assert_eq!(drops, [Some(d1), Some(d2), Some(d2), Some(d1)], "forwards, then dh of h2, then dx of h1");
        for op in net.eval.iter().chain(&net.predict) {
            if let Op::LinearForward { drop, .. } | Op::OutputLayer { drop, .. } = op {
                assert!(drop.is_none(), "no dropout outside training");
            }
        }
        // A dropout of 0 is no dropout.
        let spec = NetworkSpec::parse("784-128-relu-dropout0-10", Loss::CrossEntropy).unwrap();
        let net = Network::new(&spec, Optimizer::adam(1e-3), Fusion::Fused, 5).unwrap();
        assert!(matches!(net.train[0], Op::LinearForward { drop: None, .. }));
    }

    #[test]
    fn dropout_runs_only_in_training_and_its_mask_goes_backward() {
        let spec = NetworkSpec::parse("784-256-relu-dropout0.2-10", Loss::CrossEntropy).unwrap();
        let net = Network::new(&spec, Optimizer::adam(1e-3), Fusion::Composed, 5).unwrap();
        assert_eq!(
            names(&net.train),
            [
                "matmul", "bias_add", "activation_forward", "dropout_forward", "matmul", "bias_add", "softmax_ce",
                "matmul", "column_sum", "matmul", "dropout_backward", "activation_backward", "matmul", "column_sum",
                "adam", "adam",
            ]
        );
        assert_eq!(names(&net.eval), ["matmul", "bias_add", "activation_forward", "matmul", "bias_add", "softmax_ce"]);
        let (Op::Dropout { mask, .. }, Op::DropoutBackward { mask: back, .. }) = (&net.train[3], &net.train[10]) else { panic!() };
        assert_eq!(mask, back, "the backward pass multiplies by the forward's mask");
        // GELU keeps its input (out of place); an activation on an activation's output copies.
        let spec = NetworkSpec::parse("3-4-gelu-relu-2", Loss::Mse).unwrap();
        let net = Network::new(&spec, Optimizer::sgd(0.1, 0.0), Fusion::Composed, 0).unwrap();
        assert_eq!(
            names(&net.train),
            [
                "matmul", "bias_add", "activation_copy_forward", "activation_forward", "matmul", "bias_add", "mse",
                "matmul", "column_sum", "matmul", "activation_backward", "activation_copy_backward", "matmul", "column_sum",
                "sgd", "sgd",
            ]
        );
    }

    #[test]
    fn bad_batches_are_errors() {
        let spec = NetworkSpec::new(3, &[4], 2).unwrap();
        let net = Network::new(&spec, Optimizer::sgd(0.1, 0.0), Fusion::Fused, 0).unwrap();
        assert!(net.check_batch(2, 3, &[0, 1], 8).is_ok());
        assert!(matches!(net.check_batch(2, 4, &[0, 1], 8), Err(LayersError::Shape { .. })));
        assert!(matches!(net.check_batch(2, 3, &[0], 8), Err(LayersError::Shape { .. })));
        assert!(matches!(net.check_batch(2, 3, &[0, 2], 8), Err(LayersError::Label { row: 1, label: 2, .. })));
        assert!(matches!(net.check_batch(9, 3, &[0; 9], 8), Err(LayersError::Batch { .. })));
        assert!(matches!(net.check_batch(0, 3, &[], 8), Err(LayersError::Batch { .. })));
    }
}

