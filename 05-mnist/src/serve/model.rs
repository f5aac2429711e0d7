//! The model the server predicts with: a snapshot of a network's parameters, taken after an
//! epoch (or loaded with `--model`), run on the CPU.
//!
//! Predicting one drawing is a 784x128 product, microseconds on a CPU: no reason to queue it
//! behind a training run on the GPU. So the snapshot is a [`CpuTrainer`] of its own, used only
//! for `predict_probs` (forward + softmax), behind a mutex because that reuses its buffers.

use std::sync::Mutex;

use cpu_matrix::Matrix;
use gpu_layers::{CpuTrainer, NetworkSpec, Optimizer};

use super::api::{PredictRequest, PredictResponse};
use super::error::ApiError;
use super::events::ModelInfo;
use crate::data::{CLASSES, PIXELS, normalize_into};

/// Rows per forward pass when classifying many images at once.
const MAX_ROWS: usize = 256;

pub struct ServeModel {
    spec: NetworkSpec,
    /// Where it came from, for the page: "loaded from model.safetensors", "run 2, epoch 3".
    origin: String,
    net: Mutex<CpuTrainer>,
}

impl ServeModel {
    /// A model from `params` (`[W1, b1, ...]`, `W: [in, out]`, `b: [1, out]`) shaped for `spec`.
    pub fn new(spec: &NetworkSpec, params: &[Matrix], origin: impl Into<String>) -> Result<Self, String> {
        // The optimizer is never used: this trainer only predicts.
        let mut net = CpuTrainer::new(spec, Optimizer::sgd(0.1, 0.0), MAX_ROWS, 0).map_err(|e| e.to_string())?;
        net.load_parameters(params).map_err(|e| e.to_string())?;
        Ok(Self { spec: spec.clone(), origin: origin.into(), net: Mutex::new(net) })
    }

    pub fn spec(&self) -> &NetworkSpec {
        &self.spec
    }

    pub fn info(&self) -> ModelInfo {
        ModelInfo { description: format!("{}, {}", self.spec.describe(), self.origin), hidden: self.spec.hidden.clone() }
    }

    /// Probabilities `[n, 10]` (row-major) for `pixels: [n, 784]` grey bytes, 0 = background.
    pub fn probabilities(&self, pixels: &[u8]) -> Result<Vec<f32>, String> {
        if pixels.is_empty() || pixels.len() % PIXELS != 0 {
            return Err(format!("{} bytes is not a whole number of 28x28 images", pixels.len()));
        }
        let rows = pixels.len() / PIXELS;
        let mut x = vec![0f32; pixels.len()];
        normalize_into(pixels, &mut x);
        let x = Matrix::new(rows, PIXELS, x).map_err(|e| e.to_string())?;
        let mut net = self.net.lock().unwrap_or_else(|p| p.into_inner());
        let probs = net.predict_probs(&x).map_err(|e| e.to_string())?;
        if probs.cols != CLASSES {
            return Err(format!("the model has {} outputs, MNIST has {CLASSES} classes", probs.cols));
        }
        Ok(probs.data)
    }

    /// The most probable digit of each of `pixels: [n, 784]`.
    pub fn classify(&self, pixels: &[u8]) -> Result<Vec<u8>, String> {
        let probs = self.probabilities(pixels)?;
        Ok(probs.chunks(CLASSES).map(|p| argmax(p) as u8).collect())
    }

    /// A drawing of any size: preprocessed like MNIST, then classified.
    pub fn predict_drawing(&self, req: &PredictRequest) -> Result<PredictResponse, ApiError> {
        let input = super::preprocess::to_mnist(&req.pixels, req.width, req.height).map_err(ApiError::invalid)?;
        let probabilities = self.probabilities(&input).map_err(ApiError::internal)?;
        let digit = argmax(&probabilities);
        Ok(PredictResponse { probabilities, digit, input })
    }
}

/// Index of the largest value (the first one on ties).
fn argmax(v: &[f32]) -> usize {
    v.iter().enumerate().fold(0, |best, (i, &x)| if x > v[best] { i } else { best })
}
