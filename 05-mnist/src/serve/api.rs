//! What the page sends: the JSON bodies of the API's requests, and the checks that turn a
//! request into something safe to run (what it gets back is in `crate::events`).
//!
//! Validation happens in two steps. serde rejects the wrong *shape* (unknown fields, a string
//! where a number belongs, a pixel of 300: `u8` cannot hold it), and `validate` rejects values
//! in range for their type but not for training (a learning rate of 0, 500 epochs). Both end up
//! as a 4xx answer with a sentence that names the field (see `error.rs`).

use serde::Deserialize;

use super::error::ApiError;

/// Limits on a drawing sent to `/api/predict`.
pub const MIN_SIDE: usize = 8;
pub const MAX_SIDE: usize = 1024;

/// The body of `POST /api/stop`: an empty object.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StopRequest {}

/// The body of `POST /api/predict`: a grey image, row-major, `width * height` bytes. Either
/// polarity works (the preprocessing inverts light backgrounds), any size from 8x8 to 1024x1024.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PredictRequest {
    pub width: usize,
    pub height: usize,
    pub pixels: Vec<u8>,
}

impl PredictRequest {
    pub fn validate(&self) -> Result<(), ApiError> {
        for (name, v) in [("width", self.width), ("height", self.height)] {
            if !(MIN_SIDE..=MAX_SIDE).contains(&v) {
                return Err(ApiError::invalid(format!("{name}: {v} is out of range; use {MIN_SIDE} to {MAX_SIDE}")));
            }
        }
        let want = self.width * self.height;
        if self.pixels.len() != want {
            return Err(ApiError::invalid(format!(
                "pixels: {} values for a {}x{} image; expected width * height = {want} grey values 0-255",
                self.pixels.len(),
                self.width,
                self.height
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn predict_checks_the_pixel_count() {
        let ok = PredictRequest { width: 8, height: 10, pixels: vec![0; 80] };
        ok.validate().unwrap();
        let short = PredictRequest { pixels: vec![0; 79], ..ok.clone() };
        assert!(short.validate().unwrap_err().to_string().contains("expected width * height = 80"));
        let tiny = PredictRequest { width: 4, height: 4, pixels: vec![0; 16] };
        assert!(tiny.validate().unwrap_err().to_string().starts_with("width:"));
    }
}
