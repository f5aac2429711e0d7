//! The WGSL kernels of this stage, compiled on first use and shared by every trainer that holds
//! the same [`Kernels`]. What each kernel's source is made of: the generated prelude of shared
//! constants (`wgsl.rs`), `shaders/common.wgsl`, `shaders/softmax_row.wgsl` for the two loss
//! kernels, then the kernel's own file (WGSL has no `#include`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use common::{GpuContext, GpuError};
use gpu_matmul::{Kernel, Matmul, Precision};

use crate::routing::DeviceFit;
use crate::tiles::FusedTiles;
use crate::{LayersError, wgsl};

const COMMON: &str = include_str!("../../shaders/common.wgsl");
const SOFTMAX_ROW: &str = include_str!("../../shaders/softmax_row.wgsl");
const LOSS: &str = include_str!("../../shaders/loss.wgsl");
const OUTPUT_ROWS: &str = include_str!("../../shaders/output_rows.wgsl");

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
    /// `linear_forward` reading its batch from byte images itself (`forward_input_gather.wgsl`).
    LinearForwardGather,
    /// The register-blocked forward for wide layers in big batches (`linear_forward_tiled.wgsl`).
    LinearForwardTiled,
    /// A wide layer's forward split over k on the tensor cores, f16 inputs and f32 sums
    /// (`linear_forward_coop.wgsl`): where the kernels' products take f16 inputs and the adapter
    /// has cooperative matrices ([`Kernels::coop_on`]).
    LinearForwardCoop,
    OutputLayer,
    /// The output layer of a wide hidden layer with few classes (`output_wide.wgsl`).
    OutputWide,
    /// `linear_forward` and `output_layer` in one dispatch (`forward_output.wgsl`).
    ForwardOutput,
    /// `forward_output` gathering its batch from byte images (`forward_input_gather.wgsl`).
    ForwardOutputGather,
    /// The split step's `forward_output`: gathering, its hidden layer's sums added up from the
    /// partial sums the previous update wrote (`forward_split_sums.wgsl`).
    ForwardOutputSplit,
    LinearBackwardInput,
    /// `linear_update` of one or two layers (the layer count is a constant of the kernel, so a
    /// kernel of two layers has no branch for a third).
    LinearUpdate,
    /// `linear_update` of three layers, on devices that bind their 16 storage buffers.
    LinearUpdateThree,
    /// The split step's `linear_update`: it also writes the next batch's partial sums of its
    /// tiles of the first layer (`linear_update_next.wgsl`).
    LinearUpdateSplit,
    /// `linear_update` with the gradients on the tensor cores (f16 inputs, f32 sums:
    /// `linear_update_coop.wgsl`), where [`Kernels::coop_on`] and a layer is wide.
    LinearUpdateCoop,
    /// `linear_update_coop` of three layers.
    LinearUpdateCoopThree,
    ActivationCopyForward,
    ActivationCopyBackward,
    DropoutForward,
    DropoutBackward,
    Mse,
}

impl KernelId {
    /// Every kernel.
    pub const ALL: [KernelId; 27] = [
        KernelId::BiasAdd,
        KernelId::ActivationForward,
        KernelId::ActivationBackward,
        KernelId::SoftmaxCe,
        KernelId::ColumnSum,
        KernelId::Sgd,
        KernelId::Adam,
        KernelId::LinearForward,
        KernelId::LinearForwardGather,
        KernelId::LinearForwardTiled,
        KernelId::LinearForwardCoop,
        KernelId::OutputLayer,
        KernelId::OutputWide,
        KernelId::ForwardOutput,
        KernelId::ForwardOutputGather,
        KernelId::ForwardOutputSplit,
        KernelId::LinearBackwardInput,
        KernelId::LinearUpdate,
        KernelId::LinearUpdateThree,
        KernelId::LinearUpdateSplit,
        KernelId::LinearUpdateCoop,
        KernelId::LinearUpdateCoopThree,
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
            KernelId::LinearForwardGather => "linear_forward (gathering)",
            KernelId::LinearForwardTiled => "linear_forward_tiled",
            KernelId::LinearForwardCoop => "linear_forward_coop",
            KernelId::OutputLayer => "output_layer",
            KernelId::OutputWide => "output_wide",
            KernelId::ForwardOutput => "forward_output",
            KernelId::ForwardOutputGather => "forward_output (gathering)",
            KernelId::ForwardOutputSplit => "forward_output (split)",
            KernelId::LinearBackwardInput => "linear_backward_input",
            KernelId::LinearUpdate => "linear_update",
            KernelId::LinearUpdateThree => "linear_update (three layers)",
            KernelId::LinearUpdateSplit => "linear_update (split)",
            KernelId::LinearUpdateCoop => "linear_update_coop",
            KernelId::LinearUpdateCoopThree => "linear_update_coop (three layers)",
            KernelId::ActivationCopyForward => "activation_copy_forward",
            KernelId::ActivationCopyBackward => "activation_copy_backward",
            KernelId::DropoutForward => "dropout_forward",
            KernelId::DropoutBackward => "dropout_backward",
            KernelId::Mse => "mse",
        }
    }

    /// Whether this kernel runs on the tensor cores (cooperative matrices, f16, subgroups of 32).
    pub fn needs_cooperative_matrix(self) -> bool {
        matches!(self, KernelId::LinearForwardCoop | KernelId::LinearUpdateCoop | KernelId::LinearUpdateCoopThree)
    }

    /// Whether this is one of the forms of `linear_update` or `linear_update_coop`.
    pub fn is_update(self) -> bool {
        matches!(
            self,
            KernelId::LinearUpdate
                | KernelId::LinearUpdateThree
                | KernelId::LinearUpdateSplit
                | KernelId::LinearUpdateCoop
                | KernelId::LinearUpdateCoopThree
        )
    }

    /// The layers this form of the update kernel moves at most on a device of `fit` (0: not an
    /// update kernel): its `UPD_LAYERS`.
    pub fn update_layers(self, fit: DeviceFit) -> u32 {
        match self {
            KernelId::LinearUpdate => fit.linear_update_layers.min(2),
            KernelId::LinearUpdateSplit | KernelId::LinearUpdateCoop => 2,
            KernelId::LinearUpdateThree | KernelId::LinearUpdateCoopThree => 3,
            _ => 0,
        }
    }

    /// Whether this is one of the split step's kernels.
    pub fn is_split(self) -> bool {
        matches!(self, KernelId::ForwardOutputSplit | KernelId::LinearUpdateSplit)
    }

    /// This kernel's own constants, as `(WGSL name, value)`, written into its prelude (the
    /// shared ones, like `WG`, are in every prelude): the grid constants the host divides by,
    /// the fused kernels' `tiles`, and the sizes `fit` chooses for the device.
    pub fn tile_constants(self, tiles: &FusedTiles, fit: DeviceFit) -> Vec<(&'static str, u32)> {
        match self {
            KernelId::ColumnSum => vec![("COLS", wgsl::COLUMN_SUM_COLS)],
            // activation_backward.wgsl's two kernels: the derivative from the saved output or input.
            KernelId::ActivationBackward => vec![("GRAD_OF_INPUT", 0)],
            KernelId::ActivationCopyBackward => vec![("GRAD_OF_INPUT", 1)],
            KernelId::LinearForward | KernelId::LinearForwardGather => vec![
                ("TN", tiles.forward_tn),
                ("KS", tiles.forward_ks),
                ("TR", tiles.forward_tr),
                ("U", tiles.forward_u),
                ("X_SHARED", fit.forward_x_shared),
                ("GATHER_ROWS", 1),
            ],
            KernelId::LinearForwardTiled => vec![
                ("FT_M", tiles.tiled_m),
                ("FT_N", tiles.tiled_n),
                ("FT_K", tiles.tiled_k),
                ("FT_S", tiles.tiled_s),
            ],
            KernelId::LinearForwardCoop => {
                vec![("CF_M", tiles.coop_m), ("CF_N", tiles.coop_n), ("COOP_LOADS", tiles.coop_loads)]
            }
            KernelId::LinearUpdateCoop | KernelId::LinearUpdateCoopThree => vec![
                ("UC_T", wgsl::COOP_UPDATE_T),
                ("UC_S", tiles.coop_update_batch_slices),
                ("UPD_LAYERS", self.update_layers(fit)),
            ],
            KernelId::OutputLayer => vec![
                ("OUT_WG", tiles.output_wg),
                ("OUT_SLICES", tiles.output_wg),
                ("OUT_Z_SHARED", wgsl::OUTPUT_Z_SHARED),
                ("W_SHARED", fit.output_w_shared),
                ("H_SHARED", fit.output_h_shared),
            ],
            KernelId::OutputWide => vec![
                ("OW_WG", wgsl::OUTPUT_WIDE_WG),
                ("OW_KPI", wgsl::OUTPUT_WIDE_KPI),
                ("OW_C", wgsl::OUTPUT_WIDE_CLASSES),
                ("OW_S", wgsl::OUTPUT_WIDE_SLICES),
                ("OW_SPLITS", tiles.k_splits),
            ],
            KernelId::ForwardOutput | KernelId::ForwardOutputGather | KernelId::ForwardOutputSplit => {
                let (tn, cb, ks, tr) = (tiles.merged_tn, tiles.merged_cb, tiles.merged_ks, tiles.merged_tr);
                let mut c = vec![
                    ("TN", tn),
                    ("CB", cb),
                    ("KS", ks),
                    ("TR", tr),
                    ("U", tiles.forward_u),
                    ("SCRATCH", ks * tr * tn * cb),
                    ("OUT_WG", tn * ks),
                    // A logit's k loop split at most 16 ways: more slices would make the
                    // serial sum of their partials the longer chain.
                    ("OUT_SLICES", 16),
                    ("OUT_Z_SHARED", tr * wgsl::MERGED_MAX_CLASSES),
                    ("W_SHARED", wgsl::MERGED_W_SHARED),
                ];
                if self != KernelId::ForwardOutput {
                    c.push(("X_SHARED", wgsl::MERGED_X_SHARED));
                    // The split step's forward keeps the labels only: the update gathered the rows.
                    c.push(("GATHER_ROWS", (self == KernelId::ForwardOutputGather) as u32));
                }
                if self == KernelId::ForwardOutputSplit {
                    // The update's tile side: the partial sums come in k-tiles of T.
                    c.push(("T", tiles.update_t));
                }
                c
            }
            KernelId::LinearUpdate | KernelId::LinearUpdateThree | KernelId::LinearUpdateSplit => {
                let slices = if self == KernelId::LinearUpdateSplit { tiles.split_step_batch_slices } else { tiles.update_batch_slices };
                let split = self == KernelId::LinearUpdateSplit;
                let mut c = vec![
                    ("T", tiles.update_t),
                    // The split step's last phase is written for 4 x 4 blocks.
                    ("UPD_B", if split { 4 } else { tiles.update_block }),
                    ("UPD_R", tiles.update_r),
                    ("UPDATE_BATCH_SLICES", slices),
                    ("UPD_PRE", tiles.update_preload as u32),
                    ("UPD_LAYERS", self.update_layers(fit)),
                ];
                if self == KernelId::LinearUpdateSplit {
                    c.push(("NEXT_R", wgsl::SPLIT_NEXT_R));
                }
                c
            }
            KernelId::LinearBackwardInput => {
                vec![
                    ("BI_K", wgsl::BACKWARD_INPUT_K),
                    ("BI_R", wgsl::BACKWARD_INPUT_R),
                    ("BI_J", wgsl::BACKWARD_INPUT_J),
                    ("BI_S", wgsl::BACKWARD_INPUT_SLICES),
                ]
            }
            _ => vec![],
        }
    }

    /// The files this kernel is made of, in order, as `(path, text)`, on a device of `fit`.
    pub fn files(self, fit: DeviceFit) -> Vec<(&'static str, &'static str)> {
        let body = match self {
            KernelId::BiasAdd => ("shaders/bias_add.wgsl", include_str!("../../shaders/bias_add.wgsl")),
            KernelId::ActivationForward => {
                ("shaders/activation_forward.wgsl", include_str!("../../shaders/activation_forward.wgsl"))
            }
            KernelId::ActivationBackward | KernelId::ActivationCopyBackward => {
                ("shaders/activation_backward.wgsl", include_str!("../../shaders/activation_backward.wgsl"))
            }
            KernelId::SoftmaxCe => ("shaders/softmax_ce.wgsl", include_str!("../../shaders/softmax_ce.wgsl")),
            KernelId::ColumnSum => ("shaders/column_sum.wgsl", include_str!("../../shaders/column_sum.wgsl")),
            KernelId::Sgd => ("shaders/sgd.wgsl", include_str!("../../shaders/sgd.wgsl")),
            KernelId::Adam => ("shaders/adam.wgsl", include_str!("../../shaders/adam.wgsl")),
            KernelId::LinearForward | KernelId::LinearForwardGather => {
                ("shaders/linear_forward.wgsl", include_str!("../../shaders/linear_forward.wgsl"))
            }
            KernelId::LinearForwardTiled => {
                ("shaders/linear_forward_tiled.wgsl", include_str!("../../shaders/linear_forward_tiled.wgsl"))
            }
            KernelId::LinearForwardCoop => {
                ("shaders/linear_forward_coop.wgsl", include_str!("../../shaders/linear_forward_coop.wgsl"))
            }
            KernelId::OutputLayer => ("shaders/output_layer.wgsl", include_str!("../../shaders/output_layer.wgsl")),
            KernelId::OutputWide => ("shaders/output_wide.wgsl", include_str!("../../shaders/output_wide.wgsl")),
            KernelId::ForwardOutput | KernelId::ForwardOutputGather | KernelId::ForwardOutputSplit => {
                ("shaders/forward_output.wgsl", include_str!("../../shaders/forward_output.wgsl"))
            }
            KernelId::LinearBackwardInput => {
                ("shaders/linear_backward_input.wgsl", include_str!("../../shaders/linear_backward_input.wgsl"))
            }
            KernelId::LinearUpdate | KernelId::LinearUpdateThree | KernelId::LinearUpdateSplit => {
                ("shaders/linear_update.wgsl", include_str!("../../shaders/linear_update.wgsl"))
            }
            KernelId::LinearUpdateCoop | KernelId::LinearUpdateCoopThree => {
                ("shaders/linear_update_coop.wgsl", include_str!("../../shaders/linear_update_coop.wgsl"))
            }
            KernelId::ActivationCopyForward => {
                ("shaders/activation_copy_forward.wgsl", include_str!("../../shaders/activation_copy_forward.wgsl"))
            }
            KernelId::DropoutForward => ("shaders/dropout_forward.wgsl", include_str!("../../shaders/dropout_forward.wgsl")),
            KernelId::DropoutBackward => ("shaders/dropout_backward.wgsl", include_str!("../../shaders/dropout_backward.wgsl")),
            KernelId::Mse => ("shaders/mse.wgsl", include_str!("../../shaders/mse.wgsl")),
        };
        let mut files = vec![("shaders/common.wgsl", COMMON)];
        // mse.wgsl adds its loss like the softmax kernels (loss.wgsl: the fixed-point loss sum).
        let output =
            matches!(self, KernelId::OutputLayer | KernelId::ForwardOutput | KernelId::ForwardOutputGather | KernelId::ForwardOutputSplit);
        if output || matches!(self, KernelId::SoftmaxCe | KernelId::Mse | KernelId::OutputWide) {
            files.push(("shaders/loss.wgsl", LOSS));
        }
        if output || self == KernelId::OutputWide {
            files.push(("shaders/row_softmax.wgsl", include_str!("../../shaders/row_softmax.wgsl")));
        }
        if output {
            files.push(("shaders/output_rows.wgsl", OUTPUT_ROWS));
        }
        if matches!(self, KernelId::OutputLayer | KernelId::OutputWide) {
            files.push(("shaders/output_params.wgsl", include_str!("../../shaders/output_params.wgsl")));
        }
        if self == KernelId::SoftmaxCe {
            files.push(("shaders/softmax_row.wgsl", SOFTMAX_ROW));
        }
        let activation = [
            KernelId::ActivationForward,
            KernelId::ActivationBackward,
            KernelId::ActivationCopyForward,
            KernelId::ActivationCopyBackward,
        ];
        if activation.contains(&self) {
            files.push(("shaders/activation_params.wgsl", include_str!("../../shaders/activation_params.wgsl")));
        }
        match self {
            KernelId::LinearForward | KernelId::LinearForwardTiled | KernelId::ForwardOutput => {
                files.push(("shaders/forward_input.wgsl", include_str!("../../shaders/forward_input.wgsl")))
            }
            KernelId::LinearForwardGather | KernelId::ForwardOutputGather | KernelId::ForwardOutputSplit => {
                files.push(("shaders/forward_input_gather.wgsl", include_str!("../../shaders/forward_input_gather.wgsl")))
            }
            _ => {}
        }
        // How the forwards stage their input rows: linear_forward's transposed, from x or as it
        // gathers them; forward_output's gathering forms row after row.
        let transposed = ("shaders/forward_transposed.wgsl", include_str!("../../shaders/forward_transposed.wgsl"));
        match self {
            KernelId::LinearForward => {
                files.push(transposed);
                files.push(("shaders/forward_transposed_plain.wgsl", include_str!("../../shaders/forward_transposed_plain.wgsl")));
            }
            KernelId::LinearForwardGather => {
                files.push(transposed);
                files.push(("shaders/forward_transposed_gather.wgsl", include_str!("../../shaders/forward_transposed_gather.wgsl")));
            }
            KernelId::ForwardOutputGather | KernelId::ForwardOutputSplit => {
                files.push(("shaders/forward_rows_staged.wgsl", include_str!("../../shaders/forward_rows_staged.wgsl")))
            }
            _ => {}
        }
        if self.is_update() {
            files.push(("shaders/linear_update_rows.wgsl", include_str!("../../shaders/linear_update_rows.wgsl")));
        }
        files.push(body);
        match self {
            KernelId::ForwardOutput | KernelId::ForwardOutputGather => {
                files.push(("shaders/forward_k_loop.wgsl", include_str!("../../shaders/forward_k_loop.wgsl")))
            }
            KernelId::ForwardOutputSplit => {
                files.push(("shaders/forward_split_sums.wgsl", include_str!("../../shaders/forward_split_sums.wgsl")))
            }
            id if id.is_update() => {
                // Layer b's and c's buffers where the kernel moves them (the split step runs only
                // where FusedTiles::runs_split_step, the tensor cores only on native adapters,
                // which bind 11), stand-ins elsewhere.
                let layers = self.update_layers(fit);
                files.push(if layers >= 2 {
                    ("shaders/linear_update_b.wgsl", include_str!("../../shaders/linear_update_b.wgsl"))
                } else {
                    ("shaders/linear_update_b_unbound.wgsl", include_str!("../../shaders/linear_update_b_unbound.wgsl"))
                });
                files.push(if layers == 3 {
                    ("shaders/linear_update_c.wgsl", include_str!("../../shaders/linear_update_c.wgsl"))
                } else {
                    ("shaders/linear_update_c_unbound.wgsl", include_str!("../../shaders/linear_update_c_unbound.wgsl"))
                });
                if self == KernelId::LinearUpdateSplit {
                    files.push(("shaders/linear_update_next.wgsl", include_str!("../../shaders/linear_update_next.wgsl")));
                } else if matches!(self, KernelId::LinearUpdate | KernelId::LinearUpdateThree) {
                    files.push(("shaders/linear_update_next_none.wgsl", include_str!("../../shaders/linear_update_next_none.wgsl")));
                }
            }
            _ => {}
        }
        files
    }

    /// The kernel's source with `tiles` on a device of `fit`: the generated prelude, then its
    /// files.
    pub fn source(self, tiles: &FusedTiles, fit: DeviceFit) -> String {
        // WGSL wants its `enable` directives before any declaration.
        let mut src = if self.needs_cooperative_matrix() {
            String::from("enable f16;\nenable wgpu_cooperative_matrix;\n")
        } else {
            String::new()
        };
        src.push_str(&wgsl::prelude(&self.tile_constants(tiles, fit)));
        for (_, text) in self.files(fit) {
            src.push('\n');
            src.push_str(text);
        }
        src
    }
}

/// Compiled pipelines, made the first time a trainer needs them. Share one `Arc<Kernels>`
/// between trainers to compile each kernel once per process.
pub struct Kernels {
    pipelines: Mutex<HashMap<KernelId, wgpu::ComputePipeline>>,
    matmul: Mutex<Option<Arc<Matmul>>>,
    bounds_checks: bool,
    tiles: FusedTiles,
    matmul_precision: Precision,
}

impl Default for Kernels {
    fn default() -> Self {
        Self {
            pipelines: Mutex::default(),
            matmul: Mutex::default(),
            bounds_checks: false,
            tiles: FusedTiles::DEFAULT,
            matmul_precision: Precision::F32,
        }
    }
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

    /// Kernels with other tile sizes for the fused kernels (see [`FusedTiles`]; checked against
    /// the adapter when a pipeline is built).
    pub fn with_tiles(tiles: FusedTiles) -> Arc<Self> {
        Arc::new(Self { tiles, ..Self::default() })
    }

    /// Kernels whose stage-03 products (composed tapes, routed layers) use `precision`:
    /// `Precision::F16Inputs` rounds the inputs of each product to f16 (a relative 2^-11 each,
    /// f32 sums) and runs on the tensor cores where the adapter has cooperative matrices; where
    /// it has none, the f32 kernel runs instead.
    pub fn with_matmul_precision(precision: Precision) -> Arc<Self> {
        Arc::new(Self { matmul_precision: precision, ..Self::default() })
    }

    /// The precision asked for the stage-03 products.
    pub fn matmul_precision(&self) -> Precision {
        self.matmul_precision
    }

    /// The precision the stage-03 products actually run at on this adapter (f16 inputs only
    /// where it has cooperative matrices).
    pub fn matmul_precision_on(&self, ctx: &GpuContext) -> Precision {
        Kernel::fastest(ctx, self.matmul_precision).precision()
    }

    /// Whether a wide layer's forward split over k runs on the tensor cores here
    /// (`linear_forward_coop`): the products take f16 inputs and the adapter has the cooperative
    /// matrices they need.
    pub fn coop_on(&self, ctx: &GpuContext) -> bool {
        self.matmul_precision_on(ctx) == Precision::F16Inputs
    }

    /// Kernels with both options (see [`Kernels::with_tiles`], [`Kernels::with_matmul_precision`]).
    pub fn with_options(tiles: FusedTiles, precision: Precision) -> Arc<Self> {
        Arc::new(Self { tiles, matmul_precision: precision, ..Self::default() })
    }

    /// The fused kernels' tile sizes.
    pub fn tiles(&self) -> FusedTiles {
        self.tiles
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
        if id.needs_cooperative_matrix() {
            gpu_matmul::coop_support(ctx).map_err(|why| GpuError::Validation(format!("{}: {why}", id.name())))?;
        }
        let fit = DeviceFit::for_limits(&ctx.limits);
        let mut tiles = self
            .tiles
            .fitted(ctx.limits.max_compute_invocations_per_workgroup)
            .forward_memory_fitted(ctx.limits.max_compute_workgroup_storage_size, fit.forward_x_shared);
        if id.is_split() {
            tiles = self.tiles.split_fitted(&ctx.limits).ok_or_else(|| GpuError::Validation(format!("{}: the device is too small", id.name())))?;
        }
        tiles.check(ctx.limits.max_compute_invocations_per_workgroup).map_err(GpuError::Validation)?;
        // A driver may not refuse a kernel that declares more workgroup memory than it has: on the
        // H200 such a linear_update did not finish.
        let update_bytes = tiles.update_needs().workgroup_bytes;
        if matches!(id, KernelId::LinearUpdate | KernelId::LinearUpdateThree) && update_bytes > ctx.limits.max_compute_workgroup_storage_size {
            return Err(GpuError::Validation(format!(
                "linear_update with tiles {:?} needs {update_bytes} bytes of workgroup memory; the adapter allows {}",
                self.tiles, ctx.limits.max_compute_workgroup_storage_size
            )));
        }
        let layout = match id {
            KernelId::LinearForwardGather | KernelId::ForwardOutputGather | KernelId::ForwardOutputSplit => {
                Some(gather_layout(ctx, id))
            }
            KernelId::LinearUpdateSplit => Some(split_update_layout(ctx)),
            _ => None,
        };
        let pipeline = build_pipeline(ctx, id.name(), &id.source(&tiles, fit), self.bounds_checks, layout.as_ref())?;
        cache.insert(id, pipeline.clone());
        Ok(pipeline)
    }

    /// Stage 03's fastest matmul at [`Kernels::matmul_precision`] on this adapter
    /// (`Kernel::fastest`), for the composed tapes and the routed layers.
    pub fn matmul(&self, ctx: &GpuContext) -> Result<Arc<Matmul>, LayersError> {
        let mut slot = self.matmul.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(m) = slot.as_ref() {
            return Ok(m.clone());
        }
        let m = Arc::new(Matmul::new(ctx, Kernel::fastest(ctx, self.matmul_precision))?);
        *slot = Some(m.clone());
        Ok(m)
    }
}

/// A compute pipeline for `main`, with the layout wgpu derives from the shader unless one is
/// given. Workgroup memory is not zero-initialised: every kernel here writes its shared arrays
/// before reading them, and zeroing costs time in every workgroup.
fn build_pipeline(
    ctx: &GpuContext,
    label: &str,
    wgsl: &str,
    bounds_checks: bool,
    layout: Option<&wgpu::PipelineLayout>,
) -> Result<wgpu::ComputePipeline, GpuError> {
    let checks =
        if bounds_checks { wgpu::ShaderRuntimeChecks::checked() } else { wgpu::ShaderRuntimeChecks::unchecked() };
    let Some(layout) = layout else {
        // SAFETY: every array index in these kernels is kept in range by the kernel itself (see
        // each shader's guards) and shared arrays are written before they are read; tests run
        // every kernel on awkward shapes, with smaller batches than the buffers hold, against
        // the CPU.
        return unsafe { ctx.compute_pipeline_trusted(label, wgsl, "main", checks) };
    };
    ctx.scoped(|| {
        let desc = wgpu::ShaderModuleDescriptor { label: Some(label), source: wgpu::ShaderSource::Wgsl(wgsl.into()) };
        // SAFETY: as above.
        let module = unsafe { ctx.device.create_shader_module_trusted(desc, checks) };
        ctx.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(label),
            layout: Some(layout),
            module: &module,
            entry_point: Some("main"),
            compilation_options: wgpu::PipelineCompilationOptions { constants: &[], zero_initialize_workgroup_memory: false },
            cache: None,
        })
    })
}

fn layout_entry(binding: u32, ty: wgpu::BufferBindingType, dynamic: bool) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer { ty, has_dynamic_offset: dynamic, min_binding_size: None },
        count: None,
    }
}

const READ: wgpu::BufferBindingType = wgpu::BufferBindingType::Storage { read_only: true };
const WRITE: wgpu::BufferBindingType = wgpu::BufferBindingType::Storage { read_only: false };

fn pipeline_layout(ctx: &GpuContext, label: &str, entries: &[wgpu::BindGroupLayoutEntry]) -> wgpu::PipelineLayout {
    let group = ctx.device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: Some(label), entries });
    ctx.device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some(label),
        bind_group_layouts: &[Some(&group)],
        immediate_size: 0,
    })
}

/// The gathering forward's layout (`id`: `linear_forward` or one of the `forward_output` forms),
/// spelled out because its `slot` uniform (binding 7) has a dynamic offset, which a layout
/// derived from the shader never has. Bindings as in `linear_forward.wgsl` and
/// `forward_input_gather.wgsl` (for `linear_forward`, the counters at 14); for `forward_output`,
/// also the output layer's (11-14), and the split form's partial sums (15).
fn gather_layout(ctx: &GpuContext, id: KernelId) -> wgpu::PipelineLayout {
    use wgpu::BufferBindingType::Uniform;
    let (entry, read, write) = (layout_entry, READ, WRITE);
    let mut entries = vec![
        entry(0, read, false),  // images
        entry(1, read, false),  // params
        entry(2, write, false), // y
        entry(3, Uniform, false),
        entry(4, Uniform, false),
        entry(5, read, false), // label bytes
        entry(6, read, false), // order
        entry(7, Uniform, true),
        entry(8, write, false), // x_out
        entry(9, write, false), // labels_out
    ];
    if id == KernelId::LinearForwardGather {
        entries.push(entry(14, read, false)); // counters (the dropout's mask step)
    } else {
        entries.extend([
            entry(11, read, false),  // out_params
            entry(12, write, false), // out
            entry(13, write, false), // dh
            entry(14, write, false), // counters
        ]);
    }
    if id == KernelId::ForwardOutputSplit {
        entries.push(entry(15, read, false)); // partials
    }
    pipeline_layout(ctx, id.name(), &entries)
}

/// The split step's `linear_update` layout: `linear_update.wgsl`'s bindings (both layers), then
/// `linear_update_next.wgsl`'s, whose `slot` (the next batch's) has a dynamic offset.
fn split_update_layout(ctx: &GpuContext) -> wgpu::PipelineLayout {
    use wgpu::BufferBindingType::Uniform;
    let (entry, read, write) = (layout_entry, READ, WRITE);
    let mut entries = Vec::new();
    for layer in [0, 5] {
        entries.extend([
            entry(layer, read, false),      // x
            entry(layer + 1, read, false),  // dy
            entry(layer + 2, write, false), // params
            entry(layer + 3, write, false), // grads
            entry(layer + 4, write, false), // state
        ]);
    }
    entries.extend([
        entry(10, write, false), // counters (Adam's step read, the dropout's mask step written)
        entry(11, Uniform, false),
        entry(12, Uniform, false),
        entry(13, read, false), // images
        entry(14, read, false), // order
        entry(15, Uniform, true),
        entry(16, write, false), // partials
        entry(17, write, false), // x_next
    ]);
    pipeline_layout(ctx, KernelId::LinearUpdateSplit.name(), &entries)
}
