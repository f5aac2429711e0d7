//! The layers a user chooses, PyTorch style: `Sequential([Flatten, Linear(784, 128), ReLU,
//! Dropout(0.2), Linear(128, 10)])` with a loss at the end. This file only *describes* networks
//! (the [`Layer`] list, the [`Loss`], the weight initialisation each linear layer gets, and a
//! one-line text form for the command line and the model files); `spec.rs` checks a list and
//! `network.rs` turns it into tensors and ops.
//!
//! The text form is the list of layers separated by `-`. A number is a width: the first number
//! is the input width, every later number `N` is a `Linear(previous width, N)`. The other
//! layers are named: `relu`, `tanh`, `sigmoid`, `gelu`, `dropoutP` (P the probability of
//! dropping a unit, e.g. `dropout0.2`) and `flatten`. So
//!
//! ```text
//! 784-256-relu-dropout0.2-128-relu-10
//!   = Linear(784, 256), ReLU, Dropout(0.2), Linear(256, 128), ReLU, Linear(128, 10)
//! ```
//!
//! Names are case-insensitive and spaces around `-` are ignored. [`layers_to_string`] writes the
//! same form back (`parse_layers(layers_to_string(l)) == l`).

use std::fmt;

use crate::LayersError;

/// An elementwise activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Activation {
    /// `max(z, 0)`; derivative `1` where the output is positive, else `0`.
    Relu,
    /// `tanh(z)`; derivative `1 - y^2`, written with the output `y`.
    Tanh,
    /// `1 / (1 + e^-z)`; derivative `y (1 - y)`, written with the output `y`.
    Sigmoid,
    /// `0.5 z (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3)))`, the tanh form of GELU (PyTorch's
    /// `GELU(approximate="tanh")`; WGSL has no `erf`). Its derivative needs the input `z`: GELU
    /// is not monotonic, so the output does not determine it.
    Gelu,
}

impl Activation {
    /// The number the shaders use (`ACT_*` in `shaders/common.wgsl`); 0 means "none".
    pub(crate) fn code(act: Option<Activation>) -> u32 {
        match act {
            None => 0,
            Some(Activation::Relu) => 1,
            Some(Activation::Tanh) => 2,
            Some(Activation::Sigmoid) => 3,
            Some(Activation::Gelu) => 4,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Activation::Relu => "relu",
            Activation::Tanh => "tanh",
            Activation::Sigmoid => "sigmoid",
            Activation::Gelu => "gelu",
        }
    }

    /// Whether the derivative can be written with the output (so the activation may run in
    /// place): true for ReLU, tanh and sigmoid, false for GELU.
    pub fn grad_from_output(self) -> bool {
        self != Activation::Gelu
    }
}

/// One layer of a sequential network. Shapes use `B` for the batch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Layer {
    /// A no-op on rows that are already flat (`[B, n] -> [B, n]`), there for familiarity:
    /// PyTorch networks on images start with one.
    Flatten,
    /// `y = x W + b`: `[B, inputs] -> [B, outputs]`, W stored `(inputs, outputs)`.
    Linear { inputs: usize, outputs: usize },
    /// An elementwise activation, `[B, n] -> [B, n]`.
    Activation(Activation),
    /// Inverted dropout with probability `p` in `[0, 1)`: during training each unit is zeroed
    /// with probability `p` and the kept ones are scaled by `1 / (1 - p)`, so the expected value
    /// is unchanged and evaluation needs no rescaling: at evaluation and prediction it is the
    /// identity. `[B, n] -> [B, n]`.
    Dropout(f32),
}

impl fmt::Display for Layer {
    /// PyTorch's names: `Linear(784, 128)`, `ReLU`, `Dropout(0.2)`, ...
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Layer::Flatten => write!(f, "Flatten"),
            Layer::Linear { inputs, outputs } => write!(f, "Linear({inputs}, {outputs})"),
            Layer::Activation(Activation::Relu) => write!(f, "ReLU"),
            Layer::Activation(Activation::Tanh) => write!(f, "Tanh"),
            Layer::Activation(Activation::Sigmoid) => write!(f, "Sigmoid"),
            Layer::Activation(Activation::Gelu) => write!(f, "GELU"),
            Layer::Dropout(p) => write!(f, "Dropout({p})"),
        }
    }
}

/// The loss after the last layer. Both compare the network's `C` outputs with an integer label
/// per row; accuracy counts rows whose largest output is the label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Loss {
    /// Softmax over the outputs, then the cross-entropy of the label, averaged over the rows.
    #[default]
    CrossEntropy,
    /// Mean squared error against the one-hot label, averaged over rows and outputs
    /// (PyTorch's `MSELoss()` with one-hot targets): `mean (y - onehot)^2`.
    Mse,
}

impl Loss {
    pub fn name(self) -> &'static str {
        match self {
            Loss::CrossEntropy => "cross-entropy",
            Loss::Mse => "mse",
        }
    }

    /// `cross-entropy` (or `ce`) and `mse`, any case.
    pub fn parse(text: &str) -> Result<Self, LayersError> {
        match text.trim().to_ascii_lowercase().as_str() {
            "cross-entropy" | "crossentropy" | "ce" => Ok(Loss::CrossEntropy),
            "mse" => Ok(Loss::Mse),
            other => Err(LayersError::Spec(format!("`{other}` is not a loss: use cross-entropy or mse"))),
        }
    }
}

/// How a linear layer's weights start (biases start at 0). Chosen by the activation that follows
/// the layer (looking past dropout and flatten): He for ReLU and GELU, Glorot otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Init {
    /// Uniform with variance `2 / in` (limit `sqrt(6 / in)`): keeps the scale steady through ReLUs.
    He,
    /// Uniform with variance `2 / (in + out)` (limit `sqrt(6 / (in + out))`): for tanh, sigmoid
    /// and the output layer.
    Glorot,
}

impl Init {
    pub fn name(self) -> &'static str {
        match self {
            Init::He => "he",
            Init::Glorot => "glorot",
        }
    }

    /// The uniform distribution's limit for a `[inputs, outputs]` weight.
    pub fn limit(self, inputs: usize, outputs: usize) -> f32 {
        match self {
            Init::He => (6.0 / inputs as f32).sqrt(),
            Init::Glorot => (6.0 / (inputs + outputs) as f32).sqrt(),
        }
    }
}

/// The longest width the text form accepts (a larger one is refused before anything is
/// allocated; the trainers have their own limits on top).
const MAX_WIDTH_DIGITS: usize = 9;

/// Parses the text form (see the module docs) into layers. Only the grammar is checked here;
/// [`crate::NetworkSpec::sequential`] checks the shapes.
pub fn parse_layers(text: &str) -> Result<Vec<Layer>, LayersError> {
    let bad = |msg: String| Err(LayersError::Spec(msg));
    let mut layers = Vec::new();
    let mut width: Option<usize> = None;
    for (n, raw) in text.split('-').enumerate() {
        let token = raw.trim().to_ascii_lowercase();
        if token.is_empty() {
            return bad(format!("layer list `{}`: part {} is empty (two `-` in a row?)", text.trim(), n + 1));
        }
        if token.bytes().all(|b| b.is_ascii_digit()) {
            if token.len() > MAX_WIDTH_DIGITS {
                return bad(format!("`{token}` is too wide for a layer"));
            }
            let w: usize = token.parse().map_err(|_| LayersError::Spec(format!("`{token}` is not a width")))?;
            if w == 0 {
                return bad(format!("a width of 0 in `{}`: every layer needs at least one unit", text.trim()));
            }
            if let Some(inputs) = width {
                layers.push(Layer::Linear { inputs, outputs: w });
            }
            width = Some(w);
            continue;
        }
        let layer = match token.as_str() {
            "relu" => Layer::Activation(Activation::Relu),
            "tanh" => Layer::Activation(Activation::Tanh),
            "sigmoid" => Layer::Activation(Activation::Sigmoid),
            "gelu" => Layer::Activation(Activation::Gelu),
            "flatten" => Layer::Flatten,
            t if t.starts_with("dropout") => {
                let p = t["dropout".len()..].trim_start_matches('(').trim_end_matches(')');
                if p.is_empty() {
                    return bad("`dropout` needs its probability, e.g. dropout0.2".into());
                }
                match p.parse::<f32>() {
                    Ok(p) => Layer::Dropout(p),
                    Err(_) => return bad(format!("`{raw}`: `{p}` is not a probability; write e.g. dropout0.2", raw = raw.trim())),
                }
            }
            _ => {
                return bad(format!(
                    "`{}` is not a layer: use a width (128), relu, tanh, sigmoid, gelu, dropoutP (dropout0.2) or flatten",
                    raw.trim()
                ));
            }
        };
        layers.push(layer);
    }
    if !layers.iter().any(|l| matches!(l, Layer::Linear { .. })) {
        return bad(format!(
            "layer list `{}` has no linear layer: give the input width and at least one more (784-10 is softmax regression)",
            text.trim()
        ));
    }
    Ok(layers)
}

/// The text form of `layers` (see the module docs): `784-128-relu-10`.
pub fn layers_to_string(layers: &[Layer]) -> String {
    let mut parts = Vec::new();
    let mut seen_linear = false;
    for layer in layers {
        match *layer {
            Layer::Flatten => parts.push("flatten".to_string()),
            Layer::Linear { inputs, outputs } => {
                if !seen_linear {
                    parts.push(inputs.to_string());
                    seen_linear = true;
                }
                parts.push(outputs.to_string());
            }
            Layer::Activation(a) => parts.push(a.name().to_string()),
            Layer::Dropout(p) => parts.push(format!("dropout{p}")),
        }
    }
    parts.join("-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_form_round_trips() {
        let layers = parse_layers("784-256-relu-dropout0.2-128-ReLU - 10").unwrap();
        assert_eq!(
            layers,
            [
                Layer::Linear { inputs: 784, outputs: 256 },
                Layer::Activation(Activation::Relu),
                Layer::Dropout(0.2),
                Layer::Linear { inputs: 256, outputs: 128 },
                Layer::Activation(Activation::Relu),
                Layer::Linear { inputs: 128, outputs: 10 },
            ]
        );
        assert_eq!(layers_to_string(&layers), "784-256-relu-dropout0.2-128-relu-10");
        for text in ["flatten-784-10", "2-8-tanh-2-sigmoid", "4-gelu-3-dropout(0.5)-sigmoid-2", "relu-5-3"] {
            let l = parse_layers(text).unwrap();
            assert_eq!(parse_layers(&layers_to_string(&l)).unwrap(), l, "{text}");
        }
        assert_eq!(parse_layers("4-dropout(0.5)-2").unwrap()[0], Layer::Dropout(0.5));
    }

    #[test]
    fn bad_text_says_what_to_write() {
        for (text, want) in [
            ("784", "no linear layer"),
            ("relu", "no linear layer"),
            ("784--10", "empty"),
            ("784-0-10", "at least one unit"),
            ("784-12x-10", "is not a layer"),
            ("784-softmax-10", "is not a layer"),
            ("784-dropout-10", "needs its probability"),
            ("784-dropoutx-10", "not a probability"),
            ("784-99999999999999-10", "too wide"),
        ] {
            let err = parse_layers(text).unwrap_err().to_string();
            assert!(err.contains(want), "{text}: {want:?} not in {err:?}");
        }
    }

    #[test]
    fn layers_print_like_pytorch() {
        assert_eq!(Layer::Linear { inputs: 784, outputs: 128 }.to_string(), "Linear(784, 128)");
        assert_eq!(Layer::Activation(Activation::Gelu).to_string(), "GELU");
        assert_eq!(Layer::Dropout(0.25).to_string(), "Dropout(0.25)");
        assert_eq!(Loss::parse("MSE").unwrap(), Loss::Mse);
        assert!(Loss::parse("hinge").is_err());
    }
}
