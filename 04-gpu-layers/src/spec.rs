//! What a network is: its layer sizes, its hidden activation, its optimizer, and how its
//! parameters start. Both trainers (CPU and GPU) are built from the same [`NetworkSpec`].

use cpu_matrix::Matrix;

use crate::LayersError;

/// The most classes the softmax kernels handle: one row's logits live in workgroup memory
/// (`MAX_CLASSES` floats = 4 KiB; see `shaders/softmax_row.wgsl`).
pub const MAX_CLASSES: usize = 1024;

/// The activation after every hidden layer. The output layer has none: its logits go into the
/// softmax cross-entropy loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Activation {
    /// `max(z, 0)`; derivative `1` where the output is positive, else `0`.
    Relu,
    /// `tanh(z)`; derivative `1 - y^2`, written with the output `y`.
    Tanh,
}

impl Activation {
    /// The number the shaders use (`ACT_*` in `shaders/common.wgsl`); 0 means "none".
    pub(crate) fn code(act: Option<Activation>) -> u32 {
        match act {
            None => 0,
            Some(Activation::Relu) => 1,
            Some(Activation::Tanh) => 2,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Activation::Relu => "relu",
            Activation::Tanh => "tanh",
        }
    }
}

/// A multilayer perceptron: `input -> hidden[0] -> ... -> output`, the hidden layers followed
/// by `activation`, the output by softmax cross-entropy.
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkSpec {
    pub input: usize,
    pub hidden: Vec<usize>,
    pub output: usize,
    pub activation: Activation,
}

impl NetworkSpec {
    /// A network with ReLU hidden layers (change it with [`NetworkSpec::with_activation`]).
    pub fn new(input: usize, hidden: &[usize], output: usize) -> Result<Self, LayersError> {
        let spec = Self { input, hidden: hidden.to_vec(), output, activation: Activation::Relu };
        spec.validate()?;
        Ok(spec)
    }

    pub fn with_activation(mut self, activation: Activation) -> Self {
        self.activation = activation;
        self
    }

    /// Checks the sizes: every layer at least 1 wide, 2 to [`MAX_CLASSES`] classes.
    pub fn validate(&self) -> Result<(), LayersError> {
        if self.input == 0 || self.hidden.contains(&0) {
            return Err(LayersError::Spec(format!("every layer needs at least one unit, got {}", self.describe())));
        }
        if self.output < 2 || self.output > MAX_CLASSES {
            return Err(LayersError::Spec(format!(
                "the output layer needs 2 to {MAX_CLASSES} classes, got {}",
                self.output
            )));
        }
        Ok(())
    }

    /// `(inputs, outputs)` of each linear layer, first to last.
    pub fn layer_shapes(&self) -> Vec<(usize, usize)> {
        let mut sizes = vec![self.input];
        sizes.extend(&self.hidden);
        sizes.push(self.output);
        sizes.windows(2).map(|w| (w[0], w[1])).collect()
    }

    /// Number of trainable numbers (weights and biases).
    pub fn parameter_count(&self) -> usize {
        self.layer_shapes().iter().map(|(i, o)| (i + 1) * o).sum()
    }

    /// `784-128-10 relu`.
    pub fn describe(&self) -> String {
        let mut parts = vec![self.input.to_string()];
        parts.extend(self.hidden.iter().map(|h| h.to_string()));
        parts.push(self.output.to_string());
        format!("{} {}", parts.join("-"), self.activation.name())
    }

    /// Seeded starting parameters `[W1, b1, W2, b2, ...]`, `W: [in, out]`, `b: [1, out]`.
    ///
    /// Layers followed by ReLU get He initialisation (uniform, variance `2 / in`), which keeps
    /// the activations' scale steady through ReLUs; layers followed by tanh, and the output
    /// layer, get Glorot initialisation (uniform, variance `2 / (in + out)`). Biases start at 0.
    pub fn init_parameters(&self, seed: u64) -> Vec<Matrix> {
        let shapes = self.layer_shapes();
        let last = shapes.len() - 1;
        let mut params = Vec::with_capacity(2 * shapes.len());
        for (l, &(i, o)) in shapes.iter().enumerate() {
            let limit = if l < last && self.activation == Activation::Relu {
                (6.0 / i as f32).sqrt()
            } else {
                (6.0 / (i + o) as f32).sqrt()
            };
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
    fn wrong_parameter_shapes_are_named() {
        let spec = NetworkSpec::new(3, &[4], 2).unwrap();
        let mut p = spec.init_parameters(0);
        p[2] = Matrix::zeros(4, 3);
        let err = spec.check_parameters(&p).unwrap_err().to_string();
        assert!(err.contains("W2") && err.contains("4x2") && err.contains("4x3"), "{err}");
    }
}
