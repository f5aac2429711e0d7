//! Saving and loading a trained network as safetensors, and running it on the CPU.
//!
//! [safetensors](https://huggingface.co/docs/safetensors) is a JSON header (names, dtypes,
//! shapes, byte ranges, free-form string metadata) followed by raw little-endian tensor bytes:
//! safe to load (no code runs), and readable from Python with `safetensors.numpy.load_file`.
//! Our layout, for `784-256-relu-dropout0.2-10` (the tensors are numbered by linear layer):
//! ```text
//! layers.0.weight  F32 [784, 256]   W1, row-major [in, out]: y = x W + b
//! layers.0.bias    F32 [256]
//! layers.1.weight  F32 [256, 10]
//! layers.1.bias    F32 [10]
//! metadata: format = mnist-mlp-v2,
//!           layers = 784-256-relu-dropout0.2-10   (stage 04's text form: every layer, in order)
//!           loss = cross-entropy (or mse), init = he,glorot (how each linear layer started),
//!           dataset = mnist (or fashion: the class names), input_norm = (p/255 - 0.1307) / 0.3081
//! ```
//! Version 1 files (`format = mnist-mlp-v1`: `input`, `hidden` as a comma list, `output`,
//! `activation`) still load, as MNIST models with that activation between their linear layers.
//! Loading trusts nothing: the metadata must describe a valid network, every tensor it implies
//! must be present with the right dtype and shape, no other tensor may be there, and every
//! value must be finite.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::Path;

use cpu_matrix::Matrix;
use gpu_layers::{Activation, CpuTrainer, Layer, Loss, NetworkSpec, Optimizer};
use safetensors::{Dtype, SafeTensors, tensor::TensorView};

use crate::data::{CLASSES, PIXELS, normalize_into};
use crate::datasets::DatasetKind;
use crate::error::{MnistError, Result};

/// The value of the `format` metadata key that [`save_model`] writes.
pub const FORMAT: &str = "mnist-mlp-v2";
/// The first format (hidden sizes and one activation), still read.
pub const FORMAT_V1: &str = "mnist-mlp-v1";

/// A trained network: its layers, its parameters `[W1, b1, W2, b2, ...]`, `W: [in, out]`,
/// `b: [1, out]` (stage 04's layout), and the data set it was trained on (for class names).
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    pub spec: NetworkSpec,
    pub params: Vec<Matrix>,
    pub dataset: DatasetKind,
}

impl Model {
    /// Checks `params` against `spec` (count and shapes). The data set is MNIST; change it
    /// with [`Model::with_dataset`].
    pub fn new(spec: NetworkSpec, params: Vec<Matrix>) -> Result<Self> {
        spec.check_parameters(&params)?;
        Ok(Self { spec, params, dataset: DatasetKind::Mnist })
    }

    pub fn with_dataset(mut self, dataset: DatasetKind) -> Self {
        self.dataset = dataset;
        self
    }

    /// A CPU network with these parameters, for `eval` and `predict`.
    pub fn classifier(&self) -> Result<Classifier> {
        Classifier::new(self)
    }
}

fn tensor_names(layer: usize) -> (String, String) {
    (format!("layers.{layer}.weight"), format!("layers.{layer}.bias"))
}

/// Writes `model` to `path` as safetensors (through a temporary file and a rename).
#[cfg(not(target_arch = "wasm32"))]
pub fn save_model(path: &Path, model: &Model) -> Result<()> {
    let data = model_bytes(model).map_err(|msg| MnistError::Model { path: path.to_path_buf(), msg })?;
    crate::download::write_atomically(path, &data)
}

/// `model` as the bytes of a safetensors file (what [`save_model`] writes; a browser offers
/// them as a download). `Err` says what could not be serialized.
pub fn model_bytes(model: &Model) -> Result<Vec<u8>, String> {
    let spec = &model.spec;
    let bytes: Vec<Vec<u8>> = model.params.iter().map(|m| m.data.iter().flat_map(|v| v.to_le_bytes()).collect()).collect();
    let mut tensors = BTreeMap::new();
    for (l, &(i, o)) in spec.layer_shapes().iter().enumerate() {
        let (w, b) = tensor_names(l);
        let view = |k: usize, shape: Vec<usize>| TensorView::new(Dtype::F32, shape, &bytes[k]).map_err(|e| e.to_string());
        tensors.insert(w, view(2 * l, vec![i, o])?);
        tensors.insert(b, view(2 * l + 1, vec![o])?);
    }
    let init: Vec<&str> = spec.inits().iter().map(|i| i.name()).collect();
    let metadata = HashMap::from([
        ("format".to_string(), FORMAT.to_string()),
        ("layers".to_string(), spec.layers_string()),
        ("loss".to_string(), spec.loss().name().to_string()),
        ("init".to_string(), init.join(",")),
        ("dataset".to_string(), model.dataset.name().to_string()),
        ("input_norm".to_string(), "(p/255 - 0.1307) / 0.3081".to_string()),
    ]);
    safetensors::serialize(tensors, Some(metadata)).map_err(|e| format!("serializing: {e}"))
}

/// The largest safetensors header accepted. Ours is about 600 bytes; other tools' metadata
/// can be longer, but a megabyte of JSON is not a model header.
pub const MAX_HEADER_BYTES: u64 = 1 << 20;
/// The most parameters a network may have, trained or loaded: 2^28 floats is 1 GiB per copy,
/// and training keeps several (weights, gradients, Adam's two moments). `--hidden 99999999999`
/// is refused by `TrainConfig::validate` instead of aborting on a failed allocation.
pub const MAX_PARAMETERS: usize = 1 << 28;
/// The largest tensor data accepted: the largest network `mnist train` makes
/// ([`MAX_PARAMETERS`] f32 values, 1 GiB).
pub const MAX_DATA_BYTES: u64 = 4 * MAX_PARAMETERS as u64;

/// Reads and checks a model written by [`save_model`]. The file is streamed (see
/// [`read_model_bytes`]): a wrong file, even an endless one like `/dev/zero`, fails at once.
pub fn load_model(path: &Path) -> Result<Model> {
    let file = std::fs::File::open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => MnistError::Model {
            path: path.to_path_buf(),
            msg: "file not found. Train and save one first: `mnist train --save PATH`".to_string(),
        },
        _ => MnistError::io(path, e),
    })?;
    let bad = |msg| MnistError::Model { path: path.to_path_buf(), msg };
    let bytes = read_model_bytes(std::io::BufReader::new(file)).map_err(bad)?;
    parse_model(&bytes).map_err(bad)
}

/// The bytes of a safetensors file, read from a stream in the order of the format: the 8-byte
/// header length, the header (at most [`MAX_HEADER_BYTES`]), which says how many bytes of
/// tensor data follow (at most [`MAX_DATA_BYTES`]), then exactly that many bytes, then nothing.
/// Memory use is bounded by what the stream really holds, never by what the header claims.
pub fn read_model_bytes(mut r: impl Read) -> Result<Vec<u8>, String> {
    let io = |e: std::io::Error| format!("read error ({e})");
    let mut bytes = Vec::new();
    (&mut r).take(8).read_to_end(&mut bytes).map_err(io)?;
    let Ok(len) = <[u8; 8]>::try_from(bytes.as_slice()) else {
        return Err(format!("not a safetensors file: {} bytes, too short for the 8-byte header length", bytes.len()));
    };
    let header_len = u64::from_le_bytes(len);
    if header_len == 0 || header_len > MAX_HEADER_BYTES {
        return Err(format!(
            "not a safetensors file: its first 8 bytes announce a header of {header_len} bytes (a model's header \
             holds 2 to {MAX_HEADER_BYTES} bytes of JSON)"
        ));
    }
    (&mut r).take(header_len).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 != 8 + header_len {
        return Err(format!("not a safetensors file: truncated in its {header_len}-byte header"));
    }
    let header: safetensors::tensor::Metadata =
        serde_json::from_slice(&bytes[8..]).map_err(|e| format!("not a safetensors file (its header: {e})"))?;
    let data_len = header.data_len() as u64;
    if data_len > MAX_DATA_BYTES {
        return Err(format!(
            "the header announces {data_len} bytes of tensors, more than the {} MiB of the largest network \
             `mnist train` makes",
            MAX_DATA_BYTES >> 20
        ));
    }
    let start = bytes.len();
    (&mut r).take(data_len).read_to_end(&mut bytes).map_err(io)?;
    let got = (bytes.len() - start) as u64;
    if got != data_len {
        return Err(format!("not a safetensors file: truncated: the header announces {data_len} bytes of tensors, the file has {got}"));
    }
    let mut one = [0u8; 1];
    if r.read(&mut one).map_err(io)? != 0 {
        return Err(format!("not a safetensors file: trailing bytes after the {data_len} bytes of tensors the header announces"));
    }
    Ok(bytes)
}

/// [`load_model`] on bytes; `Err` says what is wrong.
pub fn parse_model(bytes: &[u8]) -> Result<Model, String> {
    let (_, header) = SafeTensors::read_metadata(bytes).map_err(|e| format!("not a safetensors file ({e})"))?;
    let st = SafeTensors::deserialize(bytes).map_err(|e| format!("not a safetensors file ({e})"))?;
    let meta = header.metadata().as_ref().ok_or("no metadata: not written by `mnist train --save`")?;
    let get = |key: &str| meta.get(key).ok_or_else(|| format!("metadata key `{key}` is missing"));
    let (spec, dataset) = match get("format")?.as_str() {
        FORMAT => spec_v2(meta)?,
        FORMAT_V1 => (spec_v1(meta)?, DatasetKind::Mnist),
        other => return Err(format!("format `{other}`, expected `{FORMAT}` (or the older `{FORMAT_V1}`)")),
    };
    if spec.input() != PIXELS || spec.output() != CLASSES {
        return Err(format!("a {} -> {} network; these models map 784 pixels to 10 classes", spec.input(), spec.output()));
    }

    let shapes = spec.layer_shapes();
    let expected: Vec<(String, Vec<usize>)> = shapes
        .iter()
        .enumerate()
        .flat_map(|(l, &(i, o))| {
            let (w, b) = tensor_names(l);
            [(w, vec![i, o]), (b, vec![o])]
        })
        .collect();
    let mut extra: Vec<&str> = st.names().into_iter().filter(|n| !expected.iter().any(|(e, _)| e == n)).collect();
    extra.sort();
    if !extra.is_empty() {
        return Err(format!("unexpected tensors {extra:?} for a {} network", spec.describe()));
    }
    let mut params = Vec::with_capacity(expected.len());
    for (name, shape) in &expected {
        let t = st.tensor(name).map_err(|_| format!("tensor `{name}` is missing (a {} network needs it)", spec.describe()))?;
        if t.dtype() != Dtype::F32 {
            return Err(format!("tensor `{name}` is {:?}, expected F32", t.dtype()));
        }
        if t.shape() != shape.as_slice() {
            return Err(format!("tensor `{name}` has shape {:?}, expected {shape:?} for a {} network", t.shape(), spec.describe()));
        }
        let values: Vec<f32> = t.data().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        if let Some(i) = values.iter().position(|v| !v.is_finite()) {
            return Err(format!("tensor `{name}` holds {} at index {i}", values[i]));
        }
        let (rows, cols) = if shape.len() == 2 { (shape[0], shape[1]) } else { (1, shape[0]) };
        params.push(Matrix::new(rows, cols, values).map_err(|e| e.to_string())?);
    }
    Ok(Model::new(spec, params).map_err(|e| e.to_string())?.with_dataset(dataset))
}

/// The network of a version 2 file: the `layers` text form, the `loss`, the `dataset`; `init`
/// must name one initialisation per linear layer.
fn spec_v2(meta: &HashMap<String, String>) -> Result<(NetworkSpec, DatasetKind), String> {
    let get = |key: &str| meta.get(key).ok_or_else(|| format!("metadata key `{key}` is missing"));
    let loss = Loss::parse(get("loss")?).map_err(|e| e.to_string())?;
    let spec = NetworkSpec::parse(get("layers")?, loss).map_err(|e| e.to_string())?;
    let dataset = get("dataset")?;
    let dataset = DatasetKind::from_name(dataset).ok_or_else(|| format!("unknown dataset `{dataset}` (mnist or fashion)"))?;
    let init: Vec<&str> = get("init")?.split(',').map(str::trim).collect();
    if init.len() != spec.layer_shapes().len() || init.iter().any(|i| !matches!(*i, "he" | "glorot")) {
        return Err(format!("metadata `init` = `{}`: expected he or glorot for each of the {} linear layers", init.join(","), spec.layer_shapes().len()));
    }
    Ok((spec, dataset))
}

/// The network of a version 1 file: `input`, `hidden` (comma list), `output`, `activation`.
fn spec_v1(meta: &HashMap<String, String>) -> Result<NetworkSpec, String> {
    let get = |key: &str| meta.get(key).ok_or_else(|| format!("metadata key `{key}` is missing"));
    let size = |key: &str, text: &str| -> Result<usize, String> {
        text.trim().parse::<usize>().map_err(|_| format!("metadata `{key}` = `{text}` is not a size"))
    };
    let input = size("input", get("input")?)?;
    let output = size("output", get("output")?)?;
    let hidden_text = get("hidden")?;
    let hidden = if hidden_text.trim().is_empty() {
        Vec::new()
    } else {
        hidden_text.split(',').map(|h| size("hidden", h)).collect::<Result<Vec<_>, _>>()?
    };
    let activation = match get("activation")?.as_str() {
        "relu" => Activation::Relu,
        "tanh" => Activation::Tanh,
        other => return Err(format!("unknown activation `{other}`")),
    };
    Ok(NetworkSpec::new(input, &hidden, output).map_err(|e| e.to_string())?.with_activation(activation))
}

/// A network on the CPU that classifies u8 images (normalized like training).
pub struct Classifier {
    net: CpuTrainer,
    /// The parameter of largest magnitude, `(|value|, tensor name)`: what an error about
    /// non-finite outputs points at.
    largest: (f32, String),
}

/// Images per forward pass.
const CHUNK: usize = 500;

/// The largest bound on a model's outputs that [`Classifier::new`] accepts: a quarter of
/// f32's largest value, so that neither a sum in the forward pass nor the softmax's
/// `x - max` (up to twice the bound) can overflow.
pub const MAX_OUTPUT_BOUND: f64 = f32::MAX as f64 / 4.0;

impl Classifier {
    /// A classifier for `model`, or [`MnistError::UnusableModel`] when its weights, finite as
    /// loading checks, are so large that some input could make the forward pass overflow f32
    /// ([`value_bounds`]). Every way a model is used (eval, predict, serve, the page) makes
    /// one of these, so they all refuse such a model with this same message.
    pub fn new(model: &Model) -> Result<Self> {
        let mut largest = (0.0f32, String::new());
        for (k, p) in model.params.iter().enumerate() {
            let (w, b) = tensor_names(k / 2);
            let m = p.data.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            if m > largest.0 || largest.1.is_empty() {
                largest = (m, if k % 2 == 0 { w } else { b });
            }
        }
        model.spec.check_parameters(&model.params)?;
        let bounds = value_bounds(model);
        if let Some((layer, &bound)) = bounds.iter().enumerate().find(|&(_, &b)| too_large(b)) {
            let (value, tensor) = &largest;
            return Err(MnistError::UnusableModel(overflow_message(
                &format!("the values after linear layer {layer} can reach {bound:.1e} for some image"),
                *value,
                tensor,
            )));
        }
        // The optimizer is never used: this network only predicts.
        let mut net = CpuTrainer::new(&model.spec, Optimizer::sgd(0.1, 0.0), CHUNK, 0)?;
        net.load_parameters(&model.params)?;
        Ok(Self { net, largest })
    }

    /// `images: [n, 784]` u8 -> outputs `[n, 10]` row-major: probabilities for a cross-entropy
    /// model, scores for an MSE one ([`Outputs`]).
    pub fn probabilities(&mut self, images: &[u8]) -> Result<Vec<f32>> {
        if !images.len().is_multiple_of(PIXELS) {
            return Err(MnistError::InvalidArgument(format!("{} bytes is not a whole number of 28x28 images", images.len())));
        }
        let mut out = Vec::with_capacity(images.len() / PIXELS * CLASSES);
        for chunk in images.chunks(CHUNK * PIXELS) {
            let rows = chunk.len() / PIXELS;
            let mut x = Matrix::zeros(rows, PIXELS);
            normalize_into(chunk, &mut x.data);
            let p = self.net.predict_probs(&x)?;
            // Finite weights can still overflow f32 on the way (1e30 * 1e30): the softmax then
            // gives NaN, and argmax a silent "0". Say so instead.
            // (`Classifier::new` refuses the models this could happen with; a second line of defence.)
            if let Some(i) = p.data.iter().position(|v| !v.is_finite()) {
                let (value, tensor) = &self.largest;
                let what = format!("its outputs are NaN or infinite (image {})", out.len() / CLASSES + i / CLASSES);
                return Err(MnistError::UnusableModel(overflow_message(&what, *value, tensor)));
            }
            out.extend_from_slice(&p.data);
        }
        Ok(out)
    }

    /// `images: [n, 784]` u8 -> the most probable digit of each.
    pub fn predict(&mut self, images: &[u8]) -> Result<Vec<u8>> {
        Ok(self.probabilities(images)?.chunks(CLASSES).map(argmax).collect())
    }
}

/// The sentence after "the model cannot classify: ".
fn overflow_message(what: &str, value: f32, tensor: &str) -> String {
    format!(
        "{what}: the weights are finite but so large that the forward pass overflows f32 (the largest \
         magnitude is {value:e}, in `{tensor}`). Train the model again (with a smaller --lr if its training diverged)"
    )
}

/// Bounds on the values the forward pass computes, for any input image: one per linear layer
/// (counting from 0), the largest magnitude its outputs (and partial sums) can reach; the list
/// stops at the first bound over [`MAX_OUTPUT_BOUND`] (or not finite). Worked in f64, unit by unit, from the input
/// bound (a normalized pixel lies in `[-0.43, 2.83]`): a linear layer's unit `j` is at most
/// `sum_i |W[i][j]| * bound_i + |b[j]|` (a bound on each partial sum too, whatever the order of
/// summation); ReLU, GELU and dropout (the identity when predicting) do not grow a value,
/// tanh and sigmoid keep it within 1. Trained models sit many orders of magnitude below.
pub fn value_bounds(model: &Model) -> Vec<f64> {
    let pixel = f64::from(normalize_bound());
    let mut bound = vec![pixel; model.spec.input()];
    let mut worst_of_each = Vec::new();
    let mut linear = 0;
    for layer in model.spec.layers() {
        match layer {
            Layer::Linear { inputs, outputs } => {
                let (w, b) = (&model.params[2 * linear], &model.params[2 * linear + 1]);
                let mut next: Vec<f64> = b.data.iter().map(|v| f64::from(v.abs())).collect();
                for (i, row) in w.data.chunks(*outputs).enumerate().take(*inputs) {
                    let bi = bound[i];
                    for (n, &wij) in next.iter_mut().zip(row) {
                        *n += f64::from(wij.abs()) * bi;
                    }
                }
                let worst = next.iter().fold(0.0f64, |m, &v| if v.is_nan() || v > m { v } else { m });
                worst_of_each.push(worst);
                if too_large(worst) {
                    break;
                }
                bound = next;
                linear += 1;
            }
            Layer::Activation(Activation::Tanh | Activation::Sigmoid) => bound.iter_mut().for_each(|v| *v = v.min(1.0)),
            Layer::Activation(Activation::Relu | Activation::Gelu) | Layer::Dropout(_) | Layer::Flatten => {}
        }
    }
    worst_of_each
}

/// Over [`MAX_OUTPUT_BOUND`], infinite or NaN.
fn too_large(bound: f64) -> bool {
    bound.is_nan() || bound > MAX_OUTPUT_BOUND
}

/// The largest magnitude of a normalized pixel (`(p / 255 - mean) / std` for p in 0..=255).
fn normalize_bound() -> f32 {
    let mut x = [0.0f32; 2];
    normalize_into(&[0, 255], &mut x);
    x[0].abs().max(x[1].abs())
}

/// A model's ten outputs for one image, named for what they are: `mnist serve`'s answer to
/// `POST /api/predict` and the page's own prediction (`05-mnist/wasm`) put them beside the
/// digit, tagged with the model's loss (the `loss` of the `model` event):
/// - `"loss": "cross-entropy"`, `"probabilities"`: softmax, each in `[0, 1]`, summing to 1;
/// - `"loss": "mse"`, `"outputs"`: the raw outputs, scores trained towards the one-hot label
///   that can fall below 0 or pass 1, so not probabilities.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "loss", rename_all = "kebab-case")]
pub enum Outputs {
    CrossEntropy { probabilities: Vec<f32> },
    Mse { outputs: Vec<f32> },
}

impl Outputs {
    /// `values`, the outputs of a model trained with `loss` ([`Classifier::probabilities`]).
    pub fn new(loss: Loss, values: Vec<f32>) -> Self {
        match loss {
            Loss::CrossEntropy => Outputs::CrossEntropy { probabilities: values },
            Loss::Mse => Outputs::Mse { outputs: values },
        }
    }
}

/// Index of the largest value (the first one on ties).
pub fn argmax(row: &[f32]) -> u8 {
    let mut best = 0;
    for (i, &v) in row.iter().enumerate() {
        if v > row[best] {
            best = i;
        }
    }
    best as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(hidden: &[usize]) -> Model {
        let spec = NetworkSpec::new(PIXELS, hidden, CLASSES).unwrap();
        let params = spec.init_parameters(7);
        Model::new(spec, params).unwrap()
    }

    #[test]
    fn save_then_load_is_identical() {
        let dir = tempfile::tempdir().unwrap();
        for hidden in [&[][..], &[16], &[12, 8]] {
            let m = model(hidden);
            let path = dir.path().join("m.safetensors");
            save_model(&path, &m).unwrap();
            assert_eq!(load_model(&path).unwrap(), m);
        }
    }

    #[test]
    fn a_missing_model_says_how_to_make_one() {
        let dir = tempfile::tempdir().unwrap();
        let err = load_model(&dir.path().join("none.safetensors")).unwrap_err().to_string();
        assert!(err.contains("not found") && err.contains("mnist train --save"), "{err}");
        assert!(!err.contains("MNIST_DIR"), "{err}");
    }

    #[test]
    fn broken_files_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.safetensors");
        let m = model(&[16]);
        save_model(&path, &m).unwrap();
        let good = std::fs::read(&path).unwrap();

        let err = parse_model(b"definitely not a model").unwrap_err();
        assert!(err.contains("not a safetensors file"), "{err}");
        let err = parse_model(&good[..good.len() - 100]).unwrap_err();
        assert!(err.contains("not a safetensors file"), "{err}");

        // Metadata that says 32 hidden units for 16-unit tensors.
        let (from, to) = (b"\"layers\":\"784-16-relu-10\"", b"\"layers\":\"784-32-relu-10\"");
        let at = good.windows(from.len()).position(|w| w == from).expect("hidden in the header");
        let mut edited = good.clone();
        edited[at..at + to.len()].copy_from_slice(to);
        let err = parse_model(&edited).unwrap_err();
        assert!(err.contains("layers.0.weight") && err.contains("[784, 16]") && err.contains("[784, 32]"), "{err}");

        // A NaN weight.
        let mut nan = m.clone();
        nan.params[2].data[5] = f32::NAN;
        save_model(&path, &nan).unwrap();
        assert!(load_model(&path).unwrap_err().to_string().contains("NaN"));

        // A missing file names the path.
        assert!(load_model(&dir.path().join("none.safetensors")).unwrap_err().to_string().contains("none.safetensors"));
    }

    #[test]
    fn wrong_tensor_sets_and_dtypes_are_named() {
        let zeros = vec![0u8; 784 * 10 * 4];
        let meta = |hidden: &str| {
            Some(HashMap::from([
                ("format".to_string(), FORMAT_V1.to_string()),
                ("input".to_string(), "784".to_string()),
                ("hidden".to_string(), hidden.to_string()),
                ("output".to_string(), "10".to_string()),
                ("activation".to_string(), "relu".to_string()),
            ]))
        };
        // Only the first layer of two.
        let t = BTreeMap::from([
            ("layers.0.weight".to_string(), TensorView::new(Dtype::F32, vec![784, 10], &zeros[..784 * 40]).unwrap()),
            ("layers.0.bias".to_string(), TensorView::new(Dtype::F32, vec![10], &zeros[..40]).unwrap()),
        ]);
        let bytes = safetensors::serialize(t, meta("4")).unwrap();
        let err = parse_model(&bytes).unwrap_err();
        assert!(err.contains("layers.0.weight") && err.contains("[784, 4]"), "{err}");
        // Softmax regression with f16 weights.
        let t = BTreeMap::from([
            ("layers.0.weight".to_string(), TensorView::new(Dtype::F16, vec![784, 10], &zeros[..784 * 20]).unwrap()),
            ("layers.0.bias".to_string(), TensorView::new(Dtype::F32, vec![10], &zeros[..40]).unwrap()),
        ]);
        let err = parse_model(&safetensors::serialize(t, meta("")).unwrap()).unwrap_err();
        assert!(err.contains("F16"), "{err}");
        // An extra tensor.
        let t = BTreeMap::from([
            ("layers.0.weight".to_string(), TensorView::new(Dtype::F32, vec![784, 10], &zeros[..784 * 40]).unwrap()),
            ("layers.0.bias".to_string(), TensorView::new(Dtype::F32, vec![10], &zeros[..40]).unwrap()),
            ("layers.9.bias".to_string(), TensorView::new(Dtype::F32, vec![10], &zeros[..40]).unwrap()),
        ]);
        let err = parse_model(&safetensors::serialize(t, meta("")).unwrap()).unwrap_err();
        assert!(err.contains("unexpected tensors") && err.contains("layers.9.bias"), "{err}");
    }

    #[test]
    fn huge_finite_weights_are_an_error_not_a_silent_zero() {
        // Every weight 1e30: finite, but the second layer's sums overflow to infinity, and the
        // softmax of infinities is NaN.
        let mut m = model(&[8]);
        for v in m.params.iter_mut().flat_map(|p| p.data.iter_mut()) {
            *v = 1e30;
        }
        let err = m.classifier().err().unwrap().to_string();
        assert!(err.contains("the model cannot classify") && err.contains("overflows f32"), "{err}");
        assert!(err.contains("1e30") && err.contains("layers.0.weight") && err.contains("linear layer 1"), "{err}");
    }

    #[test]
    fn weights_that_overflow_into_a_silent_answer_are_refused_when_the_classifier_is_made() {
        // 3e38 throughout the first layer: each hidden sum overflows (to -inf on MNIST's dark
        // background), ReLU turns it into 0, so the outputs are the last bias, finite: every
        // image is "class 0", and an accuracy could be printed. The bound refuses the model
        // before any image.
        let mut m = model(&[8]);
        m.params[0].data.iter_mut().for_each(|v| *v = 3e38);
        m.params[3].data[0] = 1.0;
        let err = m.classifier().err().unwrap().to_string();
        assert!(err.contains("overflows f32") && err.contains("linear layer 0"), "{err}");
        // A trained-size model is far within the bound.
        let m = model(&[8]);
        assert!(value_bounds(&m).iter().all(|&b| b < 1e6), "{:?}", value_bounds(&m));
        m.classifier().unwrap();
    }

    #[test]
    fn the_bound_is_above_every_output_computed() {
        // Weights that push the outputs high but keep them finite, and an MSE model (its
        // outputs are the last layer's values): the bound is above every output for these images.
        let mut m = model(&[16]);
        for v in m.params.iter_mut().flat_map(|p| p.data.iter_mut()) {
            *v = v.abs() * 10.0;
        }
        let m = Model { spec: m.spec.clone().with_loss(Loss::Mse), ..m };
        let bounds = value_bounds(&m);
        assert_eq!(bounds.len(), 2, "{bounds:?}");
        let images: Vec<u8> = (0..20 * PIXELS).map(|i| (i * 131 % 256) as u8).collect();
        let outputs = m.classifier().unwrap().probabilities(&images).unwrap();
        let most = outputs.iter().fold(0.0f64, |a, &v| a.max(f64::from(v.abs())));
        assert!(most > 1.0 && most <= bounds[1], "{most} vs {bounds:?}");
    }

    #[test]
    fn model_files_are_streamed_with_caps() {
        // `/dev/zero`: a header length of 0, refused after reading 8 bytes.
        let err = read_model_bytes(std::io::repeat(0)).unwrap_err();
        assert!(err.contains("header of 0 bytes"), "{err}");
        // 0xFF...: a header of 2^64 - 1 bytes.
        assert!(read_model_bytes(std::io::repeat(0xFF)).unwrap_err().contains("a header of 18446744073709551615 bytes"));
        let m = model(&[16]);
        let mut good = Vec::new();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.safetensors");
        save_model(&path, &m).unwrap();
        good.extend(std::fs::read(&path).unwrap());
        assert_eq!(parse_model(&read_model_bytes(good.as_slice()).unwrap()).unwrap(), m);
        // A good model followed by an endless stream: refused at the first extra byte.
        let err = read_model_bytes(good.as_slice().chain(std::io::repeat(0))).unwrap_err();
        assert!(err.contains("trailing bytes"), "{err}");
        assert!(read_model_bytes(&good[..good.len() - 1]).unwrap_err().contains("truncated"));
        // A header that announces 4 GiB of tensors: refused before reading them.
        let header = br#"{"w":{"dtype":"F32","shape":[1073741824],"data_offsets":[0,4294967296]}}"#;
        let mut big = (header.len() as u64).to_le_bytes().to_vec();
        big.extend_from_slice(header);
        let err = read_model_bytes(big.as_slice().chain(std::io::repeat(0))).unwrap_err();
        assert!(err.contains("4294967296 bytes of tensors") && err.contains("1024 MiB"), "{err}");
    }

    #[test]
    fn classifier_probabilities_sum_to_one() {
        let m = model(&[8]);
        let mut c = m.classifier().unwrap();
        let images: Vec<u8> = (0..3 * PIXELS).map(|i| (i * 31 % 256) as u8).collect();
        let p = c.probabilities(&images).unwrap();
        assert_eq!(p.len(), 30);
        for row in p.chunks(10) {
            assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5);
        }
        assert_eq!(c.predict(&images).unwrap().len(), 3);
        assert_eq!(argmax(&[0.1, 0.7, 0.2]), 1);
    }

    #[test]
    fn layer_lists_loss_and_dataset_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.safetensors");
        for (text, loss) in [("flatten-784-32-gelu-dropout0.25-16-sigmoid-10", Loss::CrossEntropy), ("784-10-tanh", Loss::Mse)] {
            let spec = NetworkSpec::parse(text, loss).unwrap();
            let params = spec.init_parameters(1);
            let m = Model::new(spec, params).unwrap().with_dataset(DatasetKind::Fashion);
            save_model(&path, &m).unwrap();
            assert_eq!(load_model(&path).unwrap(), m, "{text}");
        }
        let bytes = std::fs::read(&path).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        for want in ["\"layers\":\"784-10-tanh\"", "\"loss\":\"mse\"", "\"init\":\"glorot\"", "\"dataset\":\"fashion\""] {
            assert!(text.contains(want), "{want} not in the header");
        }
    }

    /// A file in the first format (hidden sizes and one activation), written the way
    /// `mnist train --save` wrote them, still loads.
    #[test]
    fn version_1_files_still_load() {
        let spec = NetworkSpec::new(PIXELS, &[16], CLASSES).unwrap().with_activation(Activation::Tanh);
        let params = spec.init_parameters(5);
        let bytes: Vec<Vec<u8>> = params.iter().map(|m| m.data.iter().flat_map(|v| v.to_le_bytes()).collect()).collect();
        let shapes = [vec![784, 16], vec![16], vec![16, 10], vec![10]];
        let names = ["layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias"];
        let tensors: BTreeMap<String, TensorView> =
            (0..4).map(|k| (names[k].to_string(), TensorView::new(Dtype::F32, shapes[k].clone(), &bytes[k]).unwrap())).collect();
        let meta = HashMap::from([
            ("format".to_string(), FORMAT_V1.to_string()),
            ("input".to_string(), "784".to_string()),
            ("hidden".to_string(), "16".to_string()),
            ("output".to_string(), "10".to_string()),
            ("activation".to_string(), "tanh".to_string()),
            ("input_norm".to_string(), "(p/255 - 0.1307) / 0.3081".to_string()),
        ]);
        let m = parse_model(&safetensors::serialize(tensors, Some(meta)).unwrap()).unwrap();
        assert_eq!(m.spec.layers_string(), "784-16-tanh-10");
        assert_eq!((m.params, m.dataset), (params, DatasetKind::Mnist));
    }

    #[test]
    fn bad_version_2_metadata_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.safetensors");
        save_model(&path, &model(&[16])).unwrap();
        let good = std::fs::read(&path).unwrap();
        for (from, to, want) in [
            (&b"\"loss\":\"cross-entropy\""[..], &b"\"loss\":\"cross-entrop_\""[..], "not a loss"),
            (b"\"init\":\"he,glorot\"", b"\"init\":\"he,he,he,he\"", "init"),
            (b"\"dataset\":\"mnist\"", b"\"dataset\":\"cifar\"", "unknown dataset"),
            (b"\"layers\":\"784-16-relu-10\"", b"\"layers\":\"784-16-relu-11\"", "10 classes"),
            (b"\"layers\":\"784-16-relu-10\"", b"\"layers\":\"784-16-relx-10\"", "is not a layer"),
        ] {
            let at = good.windows(from.len()).position(|w| w == from).expect("key in the header");
            let mut edited = good[..at].to_vec();
            edited.extend_from_slice(to);
            edited.extend_from_slice(&good[at + from.len()..]);
            // A longer value shifts the data: fix the header length (first 8 bytes).
            let header = u64::from_le_bytes(good[..8].try_into().unwrap()) + to.len() as u64 - from.len() as u64;
            edited[..8].copy_from_slice(&header.to_le_bytes());
            let err = parse_model(&edited).unwrap_err();
            assert!(err.contains(want), "{want:?} not in {err:?}");
        }
    }
}
