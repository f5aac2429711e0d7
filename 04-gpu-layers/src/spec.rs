//! What a network is: its layers (a [`Layer`] list ending in a [`Loss`], checked here), its
//! optimizer, and how its parameters start. Both trainers (CPU and GPU) are built from the same
//! [`NetworkSpec`].

use cpu_matrix::Matrix;

use crate::LayersError;
use crate::sequential::{Activation, Init, Layer, Loss, layers_to_string, parse_layers};

/// The most classes the loss kernels handle: one row's logits live in workgroup memory
/// (`MAX_CLASSES` floats = 4 KiB; see `shaders/softmax_row.wgsl`).
pub const MAX_CLASSES: usize = 1024;

/// A sequential network: its layers and its loss, shapes checked. Build one with
/// [`NetworkSpec::sequential`] (any layer list), [`NetworkSpec::parse`] (the text form of
/// `sequential.rs`, `784-128-relu-10`), or [`NetworkSpec::new`] (the short form: widths, ReLU
/// between them, softmax cross-entropy).
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkSpec {
    layers: Vec<Layer>,
    loss: Loss,
    input: usize,
    output: usize,
}

impl NetworkSpec {
    /// `Linear(input, hidden[0]), ReLU, ..., Linear(.., output)` with softmax cross-entropy
    /// (change the activations with [`NetworkSpec::with_activation`]).
    pub fn new(input: usize, hidden: &[usize], output: usize) -> Result<Self, LayersError> {
        let mut widths = vec![input];
        widths.extend(hidden);
        widths.push(output);
        let mut layers = Vec::new();
        for (l, w) in widths.windows(2).enumerate() {
            if l > 0 {
                layers.push(Layer::Activation(Activation::Relu));
            }
            layers.push(Layer::Linear { inputs: w[0], outputs: w[1] });
        }
        Self::sequential(layers, Loss::CrossEntropy)
    }

    /// Any layer list and loss, checked: at least one linear layer, each linear layer's inputs
    /// equal to the width before it, dropout probabilities in `[0, 1)`, 2 to [`MAX_CLASSES`]
    /// outputs. Errors name the layer: `layer 3 (Linear(64, 10)) takes 64 inputs, but layer 1
    /// (Linear(784, 128)) gives 128`.
    pub fn sequential(layers: Vec<Layer>, loss: Loss) -> Result<Self, LayersError> {
        let bad = |msg: String| Err(LayersError::Spec(msg));
        let mut width: Option<(usize, usize)> = None; // (width, the layer that set it)
        for (i, layer) in layers.iter().enumerate() {
            let n = i + 1;
            match *layer {
                Layer::Linear { inputs, outputs } => {
                    if inputs == 0 || outputs == 0 {
                        return bad(format!("layer {n} ({layer}): every layer needs at least one unit"));
                    }
                    if let Some((w, from)) = width
                        && w != inputs
                    {
                        return bad(format!(
                            "layer {n} ({layer}) takes {inputs} inputs, but layer {from} ({}) gives {w}",
                            layers[from - 1]
                        ));
                    }
                    width = Some((outputs, n));
                }
                Layer::Dropout(p) => {
                    if !(0.0..1.0).contains(&p) {
                        return bad(format!(
                            "layer {n} ({layer}): p is the probability of dropping a unit and must be in [0, 1)"
                        ));
                    }
                }
                Layer::Flatten | Layer::Activation(_) => {}
            }
        }
        let linears: Vec<(usize, usize)> = layers
            .iter()
            .filter_map(|l| match *l {
                Layer::Linear { inputs, outputs } => Some((inputs, outputs)),
                _ => None,
            })
            .collect();
        let (Some(&(input, _)), Some(&(_, output))) = (linears.first(), linears.last()) else {
            return bad(format!("the network [{}] has no Linear layer; it needs at least one", describe_list(&layers)));
        };
        if !(2..=MAX_CLASSES).contains(&output) {
            return bad(format!("the last Linear layer gives {output} outputs; the {} loss needs 2 to {MAX_CLASSES} classes", loss.name()));
        }
        Ok(Self { layers, loss, input, output })
    }

    /// The text form (`784-256-relu-dropout0.2-10`, see `sequential.rs`), checked like
    /// [`NetworkSpec::sequential`].
    pub fn parse(text: &str, loss: Loss) -> Result<Self, LayersError> {
        Self::sequential(parse_layers(text)?, loss)
    }

    /// The same network with every activation replaced by `activation`.
    pub fn with_activation(mut self, activation: Activation) -> Self {
        for l in &mut self.layers {
            if let Layer::Activation(a) = l {
                *a = activation;
            }
        }
        self
    }

    /// The same layers with another loss.
    pub fn with_loss(mut self, loss: Loss) -> Self {
        self.loss = loss;
        self
    }

    pub fn layers(&self) -> &[Layer] {
        &self.layers
    }

    pub fn loss(&self) -> Loss {
        self.loss
    }

    /// Width of an input row (the first linear layer's inputs).
    pub fn input(&self) -> usize {
        self.input
    }

    /// Outputs (classes) of the last linear layer.
    pub fn output(&self) -> usize {
        self.output
    }

    /// `(inputs, outputs)` of each linear layer, first to last.
    pub fn layer_shapes(&self) -> Vec<(usize, usize)> {
        self.layers
            .iter()
            .filter_map(|l| match *l {
                Layer::Linear { inputs, outputs } => Some((inputs, outputs)),
                _ => None,
            })
            .collect()
    }

    /// Whether any layer is a dropout with `p > 0` (training then draws masks).
    pub fn has_dropout(&self) -> bool {
        self.layers.iter().any(|l| matches!(l, Layer::Dropout(p) if *p > 0.0))
    }

    /// Number of trainable numbers (weights and biases).
    pub fn parameter_count(&self) -> usize {
        self.layer_shapes().iter().map(|(i, o)| (i + 1) * o).sum()
    }

    /// The text form of the layers: `784-128-relu-10`.
    pub fn layers_string(&self) -> String {
        layers_to_string(&self.layers)
    }

    /// The layers, and the loss when it is not cross-entropy: `784-128-relu-10`,
    /// `2-8-tanh-2-sigmoid mse`.
    pub fn describe(&self) -> String {
        match self.loss {
            Loss::CrossEntropy => self.layers_string(),
            other => format!("{} {}", self.layers_string(), other.name()),
        }
    }

    /// The initialisation of each linear layer, first to last: He when the next activation
    /// (looking past dropout and flatten) is ReLU or GELU, else Glorot.
    pub fn inits(&self) -> Vec<Init> {
        let mut inits = Vec::new();
        for (i, layer) in self.layers.iter().enumerate() {
            if let Layer::Linear { .. } = layer {
                let next = self.layers[i + 1..].iter().find(|l| !matches!(l, Layer::Dropout(_) | Layer::Flatten));
                let he = matches!(next, Some(Layer::Activation(Activation::Relu | Activation::Gelu)));
                inits.push(if he { Init::He } else { Init::Glorot });
            }
        }
        inits
    }

    /// Seeded starting parameters `[W1, b1, W2, b2, ...]`, `W: [in, out]`, `b: [1, out]`: each
    /// weight uniform in `[-limit, limit]` of its [`Init`] (see [`NetworkSpec::inits`]), biases 0.
    pub fn init_parameters(&self, seed: u64) -> Vec<Matrix> {
        let shapes = self.layer_shapes();
        let mut params = Vec::with_capacity(2 * shapes.len());
        for (l, (&(i, o), init)) in shapes.iter().zip(self.inits()).enumerate() {
            let limit = init.limit(i, o);
            let layer_seed = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(l as u64 + 1);
            params.push(Matrix::random_uniform(i, o, -limit, limit, layer_seed));
            params.push(Matrix::zeros(1, o));
        }
        params
    }
    /// Checks a parameter list `[W1, b1, ...]` against this network's shapes.
    pub fn check_parameters(&self, params: &[Matrix]) -> Result<(), LayersError> {
        let shapes = self.layer_shapes();
        if params.len() != 2 * shapes.len() {
            return Err(LayersError::Shape {
                what: "parameter list".into(),
                expected: format!("{} matrices (W and b for each of {} layers)", 2 * shapes.len(), shapes.len()),
                got: format!("{} matrices", params.len()),
            });
        }
        for (l, &(i, o)) in shapes.iter().enumerate() {
            for (k, want) in [(2 * l, (i, o)), (2 * l + 1, (1, o))] {
                let got = params[k].shape();
                if got != want {
                    let name = if k % 2 == 0 { "W" } else { "b" };
                    return Err(LayersError::Shape {
                        what: format!("{name}{} (layer {})", l + 1, l + 1),
                        expected: format!("{}x{}", want.0, want.1),
                        got: format!("{}x{}", got.0, got.1),
                    });
                }
            }
        }
        Ok(())
    }
}

/// `Linear(784, 128), ReLU, ...` for error messages.
fn describe_list(layers: &[Layer]) -> String {
    layers.iter().map(|l| l.to_string()).collect::<Vec<_>>().join(", ")
}

/// How parameters move against their gradients. The state (velocity, or Adam's moments) lives
/// next to the parameters, on the device that trains them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Optimizer {
    /// `v = momentum * v + g; p -= lr * v` (PyTorch's form; `momentum = 0` is plain SGD).
    Sgd { lr: f32, momentum: f32 },
    /// Adam with bias correction: `m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;`
    /// `p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)`. The step `t` is counted on
    /// the device, so many steps can be recorded with no CPU work between them.
    Adam { lr: f32, beta1: f32, beta2: f32, eps: f32 },
}

impl Optimizer {
    pub fn sgd(lr: f32, momentum: f32) -> Self {
        Optimizer::Sgd { lr, momentum }
    }

    /// Adam with the usual `beta1 = 0.9, beta2 = 0.999, eps = 1e-8`.
    pub fn adam(lr: f32) -> Self {
        Optimizer::Adam { lr, beta1: 0.9, beta2: 0.999, eps: 1e-8 }
    }

    /// The learning rate.
    pub fn lr(&self) -> f32 {
        match *self {
            Optimizer::Sgd { lr, .. } | Optimizer::Adam { lr, .. } => lr,
        }
    }

    /// The same optimizer with another learning rate.
    pub fn with_lr(self, lr: f32) -> Self {
        match self {
            Optimizer::Sgd { momentum, .. } => Optimizer::Sgd { lr, momentum },
            Optimizer::Adam { beta1, beta2, eps, .. } => Optimizer::Adam { lr, beta1, beta2, eps },
        }
    }

    /// State values kept per parameter: 1 (SGD's velocity) or 2 (Adam's m and v).
    pub fn state_per_parameter(&self) -> usize {
        match self {
            Optimizer::Sgd { .. } => 1,
            Optimizer::Adam { .. } => 2,
        }
    }

    pub fn validate(&self) -> Result<(), LayersError> {
        let bad = |what: &str, v: f32| Err(LayersError::Spec(format!("optimizer {what} = {v} is out of range")));
        let (lr, rest): (f32, Vec<(&str, f32, f32, f32)>) = match *self {
            Optimizer::Sgd { lr, momentum } => (lr, vec![("momentum", momentum, 0.0, 1.0)]),
            Optimizer::Adam { lr, beta1, beta2, eps } => {
                (lr, vec![("beta1", beta1, 0.0, 1.0), ("beta2", beta2, 0.0, 1.0), ("eps", eps, f32::MIN_POSITIVE, 1.0)])
            }
        };
        if !(lr.is_finite() && lr > 0.0) {
            return bad("lr", lr);
        }
        for (name, v, lo, hi) in rest {
            if !(v >= lo && v < hi) {
                return bad(name, v);
            }
        }
        Ok(())
    }

    pub fn describe(&self) -> String {
        match self {
            Optimizer::Sgd { lr, momentum } => format!("SGD lr {lr} momentum {momentum}"),
            Optimizer::Adam { lr, beta1, beta2, eps } => format!("Adam lr {lr} betas ({beta1}, {beta2}) eps {eps:e}"),
        }
    }
}

/// Loss and accuracy summed over the rows seen since the last `take_metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Metrics {
    /// Sum of the per-row cross-entropy losses.
    pub loss_sum: f64,
    /// Rows seen.
    pub rows: u64,
    /// Rows whose largest logit was the label.
    pub correct: u64,
}

impl Metrics {
    /// Mean loss per row (NaN when no rows were seen).
    pub fn mean_loss(&self) -> f64 {
        self.loss_sum / self.rows as f64
    }

    /// Fraction of rows classified correctly (NaN when no rows were seen).
    pub fn accuracy(&self) -> f64 {
        self.correct as f64 / self.rows as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sequential::{Init, Layer, Loss};

    #[test]
    fn shapes_and_counts() {
        let spec = NetworkSpec::new(784, &[128], 10).unwrap();
        assert_eq!(spec.layer_shapes(), vec![(784, 128), (128, 10)]);
        assert_eq!(spec.parameter_count(), 785 * 128 + 129 * 10);
        let p = spec.init_parameters(1);
        assert_eq!(p.len(), 4);
        spec.check_parameters(&p).unwrap();
        assert!(p[0].data.iter().any(|&v| v != 0.0) && p[1].data.iter().all(|&v| v == 0.0));
        assert_ne!(p[0].data, spec.init_parameters(2)[0].data, "the seed must matter");
    }

    #[test]
    fn bad_specs_are_errors() {
        assert!(NetworkSpec::new(0, &[4], 2).is_err());
        assert!(NetworkSpec::new(3, &[0], 2).is_err());
        assert!(NetworkSpec::new(3, &[4], 1).is_err());
        assert!(NetworkSpec::new(3, &[], MAX_CLASSES + 1).is_err());
        assert!(Optimizer::sgd(-1.0, 0.9).validate().is_err());
        assert!(Optimizer::sgd(0.1, 1.0).validate().is_err());
        assert!(Optimizer::sgd(f32::NAN, 0.0).validate().is_err());
        assert!(Optimizer::adam(1e-3).validate().is_ok());
    }

    #[test]
    fn shape_errors_name_the_layer() {
        let relu = Layer::Activation(Activation::Relu);
        let lin = |inputs, outputs| Layer::Linear { inputs, outputs };
        let cases: [(Vec<Layer>, &str); 5] = [
            (vec![lin(784, 128), relu, lin(64, 10)], "layer 3 (Linear(64, 10)) takes 64 inputs, but layer 1 (Linear(784, 128)) gives 128"),
            (vec![Layer::Flatten, lin(784, 128), Layer::Dropout(1.0), lin(128, 10)], "layer 3 (Dropout(1))"),
            (vec![lin(4, 0), lin(0, 2)], "layer 1 (Linear(4, 0))"),
            (vec![Layer::Flatten, relu], "has no Linear layer"),
            (vec![lin(4, 1)], "gives 1 outputs"),
        ];
        for (layers, want) in cases {
            let err = NetworkSpec::sequential(layers, Loss::CrossEntropy).unwrap_err().to_string();
            assert!(err.contains(want), "{want:?} not in {err:?}");
        }
        let err = NetworkSpec::parse("784-128-relu-dropoutnan-10", Loss::Mse).unwrap_err().to_string();
        assert!(err.contains("layer 3 (Dropout(NaN))"), "{err}");
    }

    #[test]
    fn the_short_form_is_relu_between_widths_and_init_follows_the_activation() {
        let spec = NetworkSpec::new(784, &[256, 128], 10).unwrap();
        assert_eq!(spec.layers_string(), "784-256-relu-128-relu-10");
        assert_eq!(spec, NetworkSpec::parse("784-256-relu-128-relu-10", Loss::CrossEntropy).unwrap());
        assert_eq!(spec.inits(), [Init::He, Init::He, Init::Glorot]);
        let spec = NetworkSpec::parse("4-8-dropout0.5-gelu-8-tanh-3-sigmoid", Loss::Mse).unwrap();
        assert_eq!(spec.inits(), [Init::He, Init::Glorot, Init::Glorot]);
        assert_eq!((spec.input(), spec.output(), spec.has_dropout()), (4, 3, true));
        assert_eq!(spec.describe(), "4-8-dropout0.5-gelu-8-tanh-3-sigmoid mse");
        assert_eq!(NetworkSpec::new(2, &[4], 2).unwrap().with_activation(Activation::Tanh).layers_string(), "2-4-tanh-2");
    }

    #[test]
    fn wrong_parameter_shapes_are_named() {
        let spec = NetworkSpec::new(3, &[4], 2).unwrap();
        let mut p = spec.init_parameters(0);
        p[2] = Matrix::zeros(4, 3);
        let err = spec.check_parameters(&p).unwrap_err().to_string();
        assert!(err.contains("W2") && err.contains("4x2") && err.contains("4x3"), "{err}");
    }
}
