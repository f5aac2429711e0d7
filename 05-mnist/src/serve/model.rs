//! The model the server predicts with: a snapshot of a network's parameters, taken after an
//! epoch (or loaded with `--model`), run on the CPU.
//!
//! Predicting one drawing is a 784x128 product, microseconds on a CPU: no reason to queue it
//! behind a training run on the GPU. So each snapshot gets a CPU [`Classifier`] of its own,
//! behind a mutex because a forward pass reuses its buffers.

use std::path::Path;
use std::sync::Mutex;

use super::api::PredictRequest;
use super::error::ApiError;
use crate::data::CLASSES;
use crate::error::Result;
use crate::events::{ModelInfo, PredictResponse};
use crate::model_io::{Classifier, Model, argmax, load_model};
use crate::preprocess::to_mnist;

pub struct ServeModel {
    model: Model,
    /// Where it came from, for the page: "loaded from model.safetensors", "run 2, after epoch 3".
    origin: String,
    classifier: Mutex<Classifier>,
}

impl ServeModel {
    pub fn new(model: Model, origin: impl Into<String>) -> Result<Self> {
        let classifier = Mutex::new(model.classifier()?);
        Ok(Self { model, origin: origin.into(), classifier })
    }

    /// A model saved by `mnist train --save` (checked like `mnist eval` checks it).
    pub fn load(path: &Path) -> Result<Self> {
        let model = load_model(path)?;
        Self::new(model, format!("loaded from {}", path.display()))
    }

    pub fn model(&self) -> &Model {
        &self.model
    }

    pub fn info(&self) -> ModelInfo {
        ModelInfo::new(&self.model, &self.origin)
    }

    /// Outputs `[n, 10]` (row-major) for `pixels: [n, 784]` grey bytes, 0 = background:
    /// probabilities for a cross-entropy model, scores for an MSE one.
    pub fn probabilities(&self, pixels: &[u8]) -> Result<Vec<f32>> {
        self.classifier.lock().unwrap_or_else(|p| p.into_inner()).probabilities(pixels)
    }

    /// The class with the largest output for each of `pixels: [n, 784]`.
    pub fn classify(&self, pixels: &[u8]) -> Result<Vec<u8>> {
        Ok(self.probabilities(pixels)?.chunks(CLASSES).map(argmax).collect())
    }

    /// A drawing of any size: preprocessed like MNIST (`preprocess::to_mnist`), then classified;
    /// the outputs are named after the model's loss (`model_io::Outputs`).
    pub fn predict_drawing(&self, req: &PredictRequest) -> Result<PredictResponse, ApiError> {
        let input = to_mnist(&req.pixels, req.width, req.height).map_err(ApiError::invalid)?;
        let values = self.probabilities(&input).map_err(|e| ApiError::internal(e.to_string()))?;
        Ok(PredictResponse::new(self.model.spec.loss(), values, input))
    }
}
