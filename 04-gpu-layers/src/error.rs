//! One error type for the layers, the trainers and their GPU work.
//!
//! Shape errors say which tensor was wrong, what it should have been and what it was, so the
//! caller can fix the call without reading this crate.

use std::fmt;

use common::GpuError;
use cpu_matrix::MatrixError;
use gpu_matmul::MatmulError;

/// Everything that can go wrong when building or training a network.
#[derive(Debug, Clone, PartialEq)]
pub enum LayersError {
    /// The GPU refused something (limits, validation, out of memory, device lost).
    Gpu(GpuError),
    /// A matmul from stage 03 refused its operands.
    Matmul(MatmulError),
    /// A CPU matrix operation refused its operands.
    Matrix(MatrixError),
    /// A network description that cannot be built (a layer of width 0, a bad hyperparameter).
    Spec(String),
    /// A tensor of the wrong shape: `what` names it, `expected`/`got` give the shapes.
    Shape { what: String, expected: String, got: String },
    /// A batch larger than the trainer was built for, or empty.
    Batch { batch: usize, max_batch: usize },
    /// A label outside `0..classes` (row `row` of the batch).
    Label { row: usize, label: u32, classes: usize },
    /// Labels outside `0..classes` that a GPU kernel met (it cannot return an error itself, so
    /// it counts them and `take_metrics` reports them).
    LabelsOnGpu { count: u64, classes: usize },
    /// The loss became NaN or infinite: the learning rate is too high or the input holds NaN.
    NonFinite { what: String },
}

impl fmt::Display for LayersError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayersError::Gpu(e) => write!(f, "{e}"),
            LayersError::Matmul(e) => write!(f, "{e}"),
            LayersError::Matrix(e) => write!(f, "{e}"),
            LayersError::Spec(msg) => write!(f, "bad network description: {msg}"),
            LayersError::Shape { what, expected, got } => {
                write!(f, "{what} has the wrong shape: expected {expected}, got {got}")
            }
            LayersError::Batch { batch, max_batch } => write!(
                f,
                "a batch of {batch} rows does not fit: this trainer holds 1 to {max_batch} rows \
                 (build it with a larger max_batch, or split the batch)"
            ),
            LayersError::Label { row, label, classes } => write!(
                f,
                "label {label} in row {row} is not a class: the network has {classes} outputs (0..{})",
                classes.saturating_sub(1)
            ),
            LayersError::LabelsOnGpu { count, classes } => write!(
                f,
                "{count} labels on the GPU were outside 0..{classes}; those rows were skipped. \
                 Check the labels written into GpuTrainer::labels()"
            ),
            LayersError::NonFinite { what } => write!(
                f,
                "{what} is not finite (NaN or infinity): lower the learning rate, or check the input for NaN"
            ),
        }
    }
}

impl LayersError {
    /// GELU's derivative needs its input: the in-place activation backward cannot compute it (the
    /// networks never ask; a hand-written tape might). Both devices refuse it with this error.
    pub(crate) fn gelu_in_place() -> Self {
        LayersError::Spec(
            "GELU's backward pass needs its input, which Op::ActivateBackward does not have: use Op::ActivateCopy and \
             Op::ActivateCopyBackward"
                .into(),
        )
    }
}

impl std::error::Error for LayersError {}

impl From<GpuError> for LayersError {
    fn from(e: GpuError) -> Self {
        LayersError::Gpu(e)
    }
}

impl From<MatmulError> for LayersError {
    fn from(e: MatmulError) -> Self {
        LayersError::Matmul(e)
    }
}

impl From<MatrixError> for LayersError {
    fn from(e: MatrixError) -> Self {
        LayersError::Matrix(e)
    }
}
