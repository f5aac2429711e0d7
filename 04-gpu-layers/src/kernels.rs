//! The WGSL kernels of this stage, compiled on first use and shared by every trainer that holds
//! the same [`Kernels`], plus the uniform structs they read.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use common::{GpuContext, GpuError};
use gpu_matmul::{Kernel, Matmul};

use crate::LayersError;

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
}

impl KernelId {
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
        }
    }

    /// The kernel's file, with the shared pieces it needs prepended.
    pub fn source(self) -> String {
        let body = match self {
            KernelId::BiasAdd => include_str!("../shaders/bias_add.wgsl"),
            KernelId::ActivationForward => include_str!("../shaders/activation_forward.wgsl"),
            KernelId::ActivationBackward => include_str!("../shaders/activation_backward.wgsl"),
            KernelId::SoftmaxCe => include_str!("../shaders/softmax_ce.wgsl"),
            KernelId::ColumnSum => include_str!("../shaders/column_sum.wgsl"),
            KernelId::Sgd => include_str!("../shaders/sgd.wgsl"),
            KernelId::Adam => include_str!("../shaders/adam.wgsl"),
            KernelId::LinearForward => include_str!("../shaders/linear_forward.wgsl"),
            KernelId::OutputLayer => include_str!("../shaders/output_layer.wgsl"),
            KernelId::LinearBackwardInput => include_str!("../shaders/linear_backward_input.wgsl"),
            KernelId::LinearUpdate => include_str!("../shaders/linear_update.wgsl"),
        };
        let softmax = if matches!(self, KernelId::SoftmaxCe | KernelId::OutputLayer) { SOFTMAX_ROW } else { "" };
        format!("{COMMON}\n{softmax}\n{body}")
    }
}

/// Compiled pipelines, made the first time a trainer needs them. Share one `Arc<Kernels>`
/// between trainers to compile each kernel once per program.
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
        let pipeline = build_pipeline(ctx, id.name(), &id.source(), self.bounds_checks)?;
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

/// `Batch` in `shaders/common.wgsl`: the live batch size, shared by every dispatch.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct BatchUniform {
    pub rows: u32,
    pub inv_rows: f32,
    pub _pad: [u32; 2],
}

impl BatchUniform {
    pub fn new(rows: usize) -> Self {
        Self { rows: rows as u32, inv_rows: 1.0 / rows as f32, _pad: [0; 2] }
    }
}

/// The four-u32 `Params` struct most kernels read (the meaning of each field is the kernel's).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct Params4(pub [u32; 4]);

/// `Opt` in `shaders/common.wgsl`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct OptUniform {
    pub count: u32,
    pub inputs: u32,
    pub outputs: u32,
    pub kind: u32,
    pub lr: f32,
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
}

/// `Update` in `shaders/linear_update.wgsl`: the optimizer and two layers' shapes, each
/// `[inputs, outputs, tiles along outputs, first workgroup]`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct UpdateUniform {
    pub opt: OptUniform,
    pub a: [u32; 4],
    pub b: [u32; 4],
}

impl OptUniform {
    pub fn new(opt: crate::Optimizer, count: usize, inputs: usize, outputs: usize) -> Self {
        let (kind, lr, beta1, beta2, eps) = match opt {
            crate::Optimizer::Sgd { lr, momentum } => (0, lr, momentum, 0.0, 0.0),
            crate::Optimizer::Adam { lr, beta1, beta2, eps } => (1, lr, beta1, beta2, eps),
        };
        Self { count: count as u32, inputs: inputs as u32, outputs: outputs as u32, kind, lr, beta1, beta2, eps }
    }
}
