//! Every refusal the server gives is a status code and a JSON body `{"error": "<sentence>"}`
//! that says what was wrong and what to do, so the page can show it as it is.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

#[derive(Serialize)]
struct Body<'a> {
    error: &'a str,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self { status, message: message.into() }
    }

    /// Well-formed JSON with a value out of range: 422 Unprocessable Entity.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, message)
    }

    /// The request is fine but the server's state refuses it (a second training run, no model
    /// to predict with): 409 Conflict.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ApiError {}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(Body { error: &self.message })).into_response()
    }
}

/// axum's own JSON refusals keep their status (400 for broken JSON, 415 without a JSON
/// content type, 422 for the wrong shape, 413 for a body over the limit) and get our JSON body.
/// `body_text()` already names the field and the problem, e.g. "Failed to deserialize the JSON
/// body into the target type: lr: invalid type: string \"fast\", expected f32 at line 1 column 11".
impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        let status = rejection.status();
        let hint = match status {
            StatusCode::UNSUPPORTED_MEDIA_TYPE => " (send the header Content-Type: application/json)",
            StatusCode::PAYLOAD_TOO_LARGE => " (the body is over the size limit)",
            _ => "",
        };
        ApiError::new(status, format!("{}{hint}", rejection.body_text()))
    }
}
