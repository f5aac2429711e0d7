//! The WGSL kernels of this stage, compiled on first use and shared by every trainer that holds
//! the same [`Kernels`]. What each kernel's source is made of: the generated prelude of shared
//! constants (`wgsl.rs`), `shaders/common.wgsl`, `shaders/softmax_row.wgsl` for the two loss
//! kernels, then the kernel's own file (WGSL has no `#include`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use common::{GpuContext, GpuError};
use gpu_matmul::{Kernel, Matmul};

use crate::{LayersError, wgsl};

const COMMON: &str = include_str!("../shaders/common.wgsl");
const SOFTMAX_ROW: &str = include_str!("../shaders/softmax_row.wgsl");

/// One kernel of `shaders/`, named like its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KernelId {
    BiasAdd,
    ActivationForward,
    ActivationBackward,
    SoftmaxCe,
    ColumnSum,
    Sgd,
    Adam,
    LinearForward,
    OutputLayer,
    LinearBackwardInput,
    LinearUpdate,
    ActivationCopyForward,
    ActivationCopyBackward,
    DropoutForward,
    DropoutBackward,
    Mse,
}

impl KernelId {
    /// Every kernel.
    pub const ALL: [KernelId; 16] = [
        KernelId::BiasAdd,
        KernelId::ActivationForward,
        KernelId::ActivationBackward,
        KernelId::SoftmaxCe,
        KernelId::ColumnSum,
        KernelId::Sgd,
        KernelId::Adam,
        KernelId::LinearForward,
        KernelId::OutputLayer,
        KernelId::LinearBackwardInput,
        KernelId::LinearUpdate,
        KernelId::ActivationCopyForward,
        KernelId::ActivationCopyBackward,
        KernelId::DropoutForward,
        KernelId::DropoutBackward,
        KernelId::Mse,
    ];

    pub fn name(self) -> &'static str {
        match self {
            KernelId::BiasAdd => "bias_add",
            KernelId::ActivationForward => "activation_forward",
            KernelId::ActivationBackward => "activation_backward",
            KernelId::SoftmaxCe => "softmax_ce",
            KernelId::ColumnSum => "column_sum",
            KernelId::Sgd => "sgd",
            KernelId::Adam => "adam",
            KernelId::LinearForward => "linear_forward",
            KernelId::OutputLayer => "output_layer",
            KernelId::LinearBackwardInput => "linear_backward_input",
            KernelId::LinearUpdate => "linear_update",
            KernelId::ActivationCopyForward => "activation_copy_forward",
            KernelId::ActivationCopyBackward => "activation_copy_backward",
            KernelId::DropoutForward => "dropout_forward",
            KernelId::DropoutBackward => "dropout_backward",
            KernelId::Mse => "mse",
        }
    }

    /// This kernel's own constants, as `(WGSL name, value)`, written into its prelude (the
    /// shared ones, like `WG`, are in every prelude): the grid constants the host divides by,
    /// and the sizes `fit` chooses for the device.
    pub fn tile_constants(self, fit: wgsl::DeviceFit) -> Vec<(&'static str, u32)> {
        match self {
            KernelId::ColumnSum => vec![("COLS", wgsl::COLUMN_SUM_COLS)],
            KernelId::LinearForward => {
                vec![("TN", wgsl::LINEAR_FORWARD_TN), ("TR", wgsl::LINEAR_FORWARD_TR), ("KS", fit.linear_forward_ks)]
            }
            KernelId::OutputLayer => vec![("W_SHARED", fit.output_w_shared), ("H_SHARED", fit.output_h_shared)],
            KernelId::LinearUpdate => vec![("T", wgsl::LINEAR_UPDATE_T)],
            _ => Vec::new(),
        }
    }

    /// The files this kernel is made of, in order, as `(path, text)`, on a device of `fit`.
    pub fn files(self, fit: wgsl::DeviceFit) -> Vec<(&'static str, &'static str)> {
        let body = match self {
            KernelId::BiasAdd => ("shaders/bias_add.wgsl", include_str!("../shaders/bias_add.wgsl")),
            KernelId::ActivationForward => {
                ("shaders/activation_forward.wgsl", include_str!("../shaders/activation_forward.wgsl"))
            }
            KernelId::ActivationBackward => {
                ("shaders/activation_backward.wgsl", include_str!("../shaders/activation_backward.wgsl"))
            }
            KernelId::SoftmaxCe => ("shaders/softmax_ce.wgsl", include_str!("../shaders/softmax_ce.wgsl")),
            KernelId::ColumnSum => ("shaders/column_sum.wgsl", include_str!("../shaders/column_sum.wgsl")),
            KernelId::Sgd => ("shaders/sgd.wgsl", include_str!("../shaders/sgd.wgsl")),
            KernelId::Adam => ("shaders/adam.wgsl", include_str!("../shaders/adam.wgsl")),
            KernelId::LinearForward => ("shaders/linear_forward.wgsl", include_str!("../shaders/linear_forward.wgsl")),
            KernelId::OutputLayer => ("shaders/output_layer.wgsl", include_str!("../shaders/output_layer.wgsl")),
            KernelId::LinearBackwardInput => {
                ("shaders/linear_backward_input.wgsl", include_str!("../shaders/linear_backward_input.wgsl"))
            }
            KernelId::LinearUpdate => ("shaders/linear_update.wgsl", include_str!("../shaders/linear_update.wgsl")),
            KernelId::ActivationCopyForward => {
                ("shaders/activation_copy_forward.wgsl", include_str!("../shaders/activation_copy_forward.wgsl"))
            }
            KernelId::ActivationCopyBackward => {
                ("shaders/activation_copy_backward.wgsl", include_str!("../shaders/activation_copy_backward.wgsl"))
            }
            KernelId::DropoutForward => ("shaders/dropout_forward.wgsl", include_str!("../shaders/dropout_forward.wgsl")),
            KernelId::DropoutBackward => ("shaders/dropout_backward.wgsl", include_str!("../shaders/dropout_backward.wgsl")),
            KernelId::Mse => ("shaders/mse.wgsl", include_str!("../shaders/mse.wgsl")),
        };
        let mut files = vec![("shaders/common.wgsl", COMMON)];
        // mse.wgsl uses softmax_row.wgsl's add_loss (the fixed-point loss sum).
        if matches!(self, KernelId::SoftmaxCe | KernelId::OutputLayer | KernelId::Mse) {
            files.push(("shaders/softmax_row.wgsl", SOFTMAX_ROW));
        }
        files.push(body);
        if self == KernelId::LinearUpdate {
            files.push(if fit.linear_update_pairs {
                ("shaders/linear_update_b.wgsl", include_str!("../shaders/linear_update_b.wgsl"))
            } else {
                ("shaders/linear_update_b_unbound.wgsl", include_str!("../shaders/linear_update_b_unbound.wgsl"))
            });
        }
        files
    }

    /// The kernel's source for a device of `fit`: the generated prelude, then its files.
    pub fn source(self, fit: wgsl::DeviceFit) -> String {
        let mut src = wgsl::prelude(&self.tile_constants(fit));
        for (_, text) in self.files(fit) {
            src.push('\n');
            src.push_str(text);
        }
        src
    }
}

/// Compiled pipelines, made the first time a trainer needs them. Share one `Arc<Kernels>`
/// between trainers to compile each kernel once per process.
#[derive(Default)]
pub struct Kernels {
    pipelines: Mutex<HashMap<KernelId, wgpu::ComputePipeline>>,
    matmul: Mutex<Option<Arc<Matmul>>>,
    bounds_checks: bool,
}

impl Kernels {
    /// Kernels compiled WITHOUT the bounds checks naga adds to every array access: every
    /// kernel here keeps its indices in range itself (rows below the live batch, k below the
    /// layer width, ...), which the tests check on awkward shapes with poisoned outputs. The
    /// checks cost real time in the hot loops (the README measures it).
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Kernels compiled with naga's bounds checks (an out-of-range read returns 0 and an
    /// out-of-range write is dropped), to measure what the checks cost or to debug a kernel.
    pub fn with_bounds_checks() -> Arc<Self> {
        Arc::new(Self { bounds_checks: true, ..Self::default() })
    }

    /// Whether these kernels were compiled with naga's bounds checks.
    pub fn bounds_checks(&self) -> bool {
        self.bounds_checks
    }

    /// The pipeline of `id`, compiled now if it is the first request.
    pub fn pipeline(&self, ctx: &GpuContext, id: KernelId) -> Result<wgpu::ComputePipeline, GpuError> {
        let mut cache = self.pipelines.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = cache.get(&id) {
            return Ok(p.clone());
        }
        let source = id.source(wgsl::DeviceFit::for_limits(&ctx.limits));
        let pipeline = build_pipeline(ctx, id.name(), &source, self.bounds_checks)?;
        cache.insert(id, pipeline.clone());
        Ok(pipeline)
    }

    /// Stage 03's best matmul, for the composed tapes.
    pub fn matmul(&self, ctx: &GpuContext) -> Result<Arc<Matmul>, LayersError> {
        let mut slot = self.matmul.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(m) = slot.as_ref() {
            return Ok(m.clone());
        }
        let m = Arc::new(Matmul::new(ctx, Kernel::BEST)?);
        *slot = Some(m.clone());
        Ok(m)
    }
}

/// A compute pipeline for `main`. Workgroup memory is not zero-initialised: every kernel here
/// writes its shared arrays before reading them, and zeroing costs time in every workgroup.
fn build_pipeline(ctx: &GpuContext, label: &str, wgsl: &str, bounds_checks: bool) -> Result<wgpu::ComputePipeline, GpuError> {
    let checks =
        if bounds_checks { wgpu::ShaderRuntimeChecks::checked() } else { wgpu::ShaderRuntimeChecks::unchecked() };
    // SAFETY: every array index in these kernels is kept in range by the kernel itself (see each
    // shader's guards) and shared arrays are written before they are read; tests run every
    // kernel on awkward shapes, with smaller batches than the buffers hold, against the CPU.
    unsafe { ctx.compute_pipeline_trusted(label, wgsl, "main", checks) }
}
