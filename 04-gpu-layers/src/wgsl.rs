//! The contract between this crate's Rust and its WGSL: every number both sides must agree on,
//! defined once, here, and the uniform struct each kernel reads.
//!
//! - **Constants.** Workgroup sizes and tiles the host divides by to size a grid, the counter
//!   indices, and the activation / optimizer / loss-mode codes are Rust constants (or Rust
//!   enums). [`prelude`] writes them into the top of every kernel's source as WGSL `const`s, the
//!   way stage 03's `specialize` writes its tile sizes, so the shader files never spell them.
//!   Constants only a kernel itself uses (its reduction lanes, its staging sizes) stay in its
//!   file, next to the loop they shape.
//! - **Uniforms.** Each kernel's parameters are a `#[repr(C)]` struct here with the same name
//!   and fields as the WGSL struct (`BiasAddParams`, `OutputLayerParams`, ...). A test compiles
//!   every kernel with naga and checks each struct's size against the WGSL's layout.
//!
//! A kernel's source is then `prelude + common.wgsl [+ softmax_row.wgsl] + its file` (see
//! [`crate::KernelId::source`]).

use std::fmt::Write;

use crate::tape::{FusedDropout, Mode};
use crate::{Activation, Loss, MAX_CLASSES, Optimizer};

// ---- workgroup sizes and tiles the host divides by ------------------------------------------

/// Elementwise kernels (`bias_add`, `activation_*`, `sgd`, `adam`):
/// one invocation per element, `WG` per workgroup, so `len.div_ceil(WG)` workgroups.
pub const WG: u32 = 256;
/// `linear_backward_input`: values of k (columns of dx) per workgroup, rows per workgroup, and
/// the chunk of j (columns of dy) staged at a time (one invocation per k and row: 256). In
/// 784-512-256-10's step at batch 64 on the H200 (`gpu-layers --bench-only --hidden 512,256`,
/// `results/h200-backward-input-tiles/`), µs alone: 32 x 8 x 64 5.53-5.55, 32 x 8 x 32
/// 6.72-6.80, 32 x 4 x 32 6.95-6.97, 64 x 4 x 32 7.49-7.52, 32 x 16 x 32 7.74-7.75.
pub const BACKWARD_INPUT_K: u32 = 32;
pub const BACKWARD_INPUT_R: u32 = 8;
pub const BACKWARD_INPUT_J: u32 = 64;
/// `linear_backward_input`: slices of each chunk of j, summed at the end (four rows per
/// invocation, so `K x R / 4 x SLICES` = 256 invocations).
pub const BACKWARD_INPUT_SLICES: u32 = 4;
/// `softmax_ce`: one workgroup of `ROW_WG` invocations per row.
pub const ROW_WG: u32 = 64;
/// `column_sum`: each workgroup sums `COLUMN_SUM_COLS` neighbouring columns (WGSL `COLS`).
pub const COLUMN_SUM_COLS: u32 = 32;

/// `output_layer`: floats of logits one workgroup keeps (WGSL `OUT_Z_SHARED`): a workgroup
/// takes at most `OUT_Z_SHARED / classes` rows.
pub const OUTPUT_Z_SHARED: u32 = MAX_CLASSES as u32;

/// `output_wide`: invocations per workgroup (one row each), values of k each invocation holds per
/// chunk, classes held in registers (the most it takes), and slices per class in its sum.
pub const OUTPUT_WIDE_WG: u32 = 256;
pub const OUTPUT_WIDE_KPI: u32 = 4;
pub const OUTPUT_WIDE_CLASSES: u32 = 16;
pub const OUTPUT_WIDE_SLICES: u32 = 16;


/// `linear_update_coop` (a wide layer's gradient on the tensor cores, f16 inputs): the side of
/// the square tile of parameters each workgroup moves (WGSL `UC_T`; 4 subgroups of 32 x 32).
pub const COOP_UPDATE_T: u32 = 64;

/// `forward_output`: the most classes it merges (its logits take `TR x MERGED_MAX_CLASSES`
/// floats of workgroup memory).
pub const MERGED_MAX_CLASSES: u32 = 32;
/// `forward_output`: floats of the output layer's `[W; b]` it stages (WGSL `W_SHARED`; MNIST's
/// 129 x 10 = 1,290 fit); a larger output layer reads its weights from memory.
pub const MERGED_W_SHARED: u32 = 1536;
/// The split step's `linear_update`: rows of the next batch per chunk of its partial sums
/// (WGSL `NEXT_R`; an MNIST batch of 64 in one).
pub const SPLIT_NEXT_R: u32 = 64;
/// `forward_output`, gathering: floats of input rows it stages (WGSL `X_SHARED`; 2 x 784 fit).
/// Every variant `--sweep` times then fits the 32 KiB of workgroup memory of lavapipe (the CI
/// machine's adapter; at most 32,016 bytes, with 2 rows per workgroup), so the tests run them there.
pub const MERGED_X_SHARED: u32 = 2048;

// ---- the counters tensor ----------------------------------------------------------------------

/// The counters tensor: `[loss low, loss high, rows, correct, bad labels, non-finite, step,
/// mask step]`.
/// The loss sum is a 64-bit fixed-point number in units of 2^-20 (see `cpu::loss_to_fixed`).
pub const COUNTERS: usize = 8;
/// Fixed-point units per 1.0 of loss: the loss sum is counted in units of 2^-20 (`loss.wgsl`
/// adds `v * 1048576`).
pub const LOSS_UNITS_PER_ONE: f64 = 1048576.0;
pub(crate) const COUNTER_LOSS_LO: usize = 0;
pub(crate) const COUNTER_LOSS_HI: usize = 1;
pub(crate) const COUNTER_ROWS: usize = 2;
pub(crate) const COUNTER_CORRECT: usize = 3;
pub(crate) const COUNTER_BAD_LABELS: usize = 4;
pub(crate) const COUNTER_NON_FINITE: usize = 5;
pub(crate) const COUNTER_STEP: usize = 6;
/// The step the fused kernels draw their dropout masks for: the step count when the step began.
/// The loss counts the step in the middle of it (in the same dispatch as a merged forward
/// reads it), so the fused masks read this copy, which only the weight updates write, at the
/// end of every step (`common.wgsl`, `DropoutMask`).
pub(crate) const COUNTER_MASK_STEP: usize = 7;
/// Where `linear_forward` and `linear_forward_tiled` bind the counters they read the mask step
/// from (as `forward_output` binds its own).
pub(crate) const MASK_COUNTERS_BINDING: u32 = 14;

// ---- codes -------------------------------------------------------------------------------------

/// `Opt::kind` / `OPT_*` in WGSL.
pub(crate) const OPT_SGD: u32 = 0;
pub(crate) const OPT_ADAM: u32 = 1;

/// `OutputLayerParams::loss` / `LOSS_*` in WGSL: the fused output layers' loss.
pub(crate) fn loss_code(loss: Loss) -> u32 {
    match loss {
        Loss::CrossEntropy => 0,
        Loss::Mse => 1,
    }
}

/// Every shared constant, as `(WGSL name, value)`.
fn shared_constants() -> Vec<(&'static str, u32)> {
    vec![
        ("WG", WG),
        ("ROW_WG", ROW_WG),
        ("MAX_CLASSES", MAX_CLASSES as u32),
        ("ACT_NONE", Activation::code(None)),
        ("ACT_RELU", Activation::code(Some(Activation::Relu))),
        ("ACT_TANH", Activation::code(Some(Activation::Tanh))),
        ("ACT_SIGMOID", Activation::code(Some(Activation::Sigmoid))),
        ("ACT_GELU", Activation::code(Some(Activation::Gelu))),
        ("OPT_SGD", OPT_SGD),
        ("OPT_ADAM", OPT_ADAM),
        ("LOSS_CE", loss_code(Loss::CrossEntropy)),
        ("LOSS_MSE", loss_code(Loss::Mse)),
        ("MODE_TRAIN", Mode::Train as u32),
        ("MODE_EVAL", Mode::Eval as u32),
        ("MODE_PREDICT", Mode::Predict as u32),
        ("COUNTER_LOSS_LO", COUNTER_LOSS_LO as u32),
        ("COUNTER_LOSS_HI", COUNTER_LOSS_HI as u32),
        ("COUNTER_ROWS", COUNTER_ROWS as u32),
        ("COUNTER_CORRECT", COUNTER_CORRECT as u32),
        ("COUNTER_BAD_LABELS", COUNTER_BAD_LABELS as u32),
        ("COUNTER_NON_FINITE", COUNTER_NON_FINITE as u32),
        ("COUNTER_STEP", COUNTER_STEP as u32),
        ("COUNTER_MASK_STEP", COUNTER_MASK_STEP as u32),
    ]
}

/// The WGSL `const` lines a kernel starts with: the shared constants, then `tiles` (the
/// kernel's own tile constants, from [`crate::KernelId::tile_constants`]).
pub fn prelude(tiles: &[(&str, u32)]) -> String {
    let mut s = String::from("// Generated from src/wgsl.rs: the numbers the Rust side and the kernels share.\n");
    for (name, value) in shared_constants().iter().chain(tiles) {
        let _ = writeln!(s, "const {name}: u32 = {value}u;");
    }
    s
}

// ---- uniform structs, one per kernel (same names and fields as the WGSL) -----------------------

/// `Batch` (`common.wgsl`): the live batch size, one buffer shared by every dispatch.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct Batch {
    pub rows: u32,
    pub inv_rows: f32,
    pub _pad: [u32; 2],
}

impl Batch {
    pub fn new(rows: usize) -> Self {
        Self { rows: rows as u32, inv_rows: 1.0 / rows as f32, _pad: [0; 2] }
    }
}

/// `bias_add.wgsl`: `y: [batch, cols]`; the bias starts at `offset` in its tensor.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct BiasAddParams {
    pub cols: u32,
    pub offset: u32,
    pub _pad: [u32; 2],
}

/// `activation_params.wgsl`, read by the four activation kernels (`activation_forward.wgsl`,
/// `activation_copy_forward.wgsl`, `activation_backward.wgsl`): `[batch, cols]`, an `ACT_*` code.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct ActivationParams {
    pub cols: u32,
    pub act: u32,
    pub _pad: [u32; 2],
}

/// `softmax_ce.wgsl`: `[batch, classes]` logits, a `MODE_*` code.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct SoftmaxCeParams {
    pub classes: u32,
    pub mode: u32,
    pub _pad: [u32; 2],
}

/// `column_sum.wgsl`: `x: [batch, cols]`; the sums go to `out[offset..offset + cols]`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct ColumnSumParams {
    pub cols: u32,
    pub offset: u32,
    pub _pad: [u32; 2],
}

/// `linear_forward.wgsl` and `linear_backward_input.wgsl`: a layer `[inputs] -> [outputs]` and
/// an `ACT_*` code (of this layer's output, or of the layer below for the backward kernel).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct LinearParams {
    pub inputs: u32,
    pub outputs: u32,
    pub act: u32,
    /// `linear_forward_tiled`: the workgroups its k loop is split over (grid z), each writing
    /// raw partial sums for `output_wide`; 0 or 1: not split, it writes `act(x W + b)`.
    pub k_split: u32,
    /// The dropout of this layer's output (the forward kernels) or of h (the backward one).
    pub drop: DropoutMask,
}

/// `output_layer.wgsl`: `h: [batch, inputs]` -> `[batch, classes]`, a `MODE_*` code, the
/// `ACT_*` code of `h` (`ACT_NONE`: no layer below, no `dh`) and the rows each workgroup takes.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct OutputLayerParams {
    pub inputs: u32,
    pub classes: u32,
    pub mode: u32,
    pub hidden_act: u32,
    /// Rows per workgroup (the grid has `ceil(B / rows_per_group)` workgroups).
    pub rows_per_group: u32,
    /// `output_wide` only: 1 when it computes `h` itself from the layer below's partial sums
    /// (`linear_forward_tiled` split over k), with that layer's inputs and `ACT_*` code.
    pub sums: u32,
    pub below_inputs: u32,
    pub below_act: u32,
    /// h's dropout: for dh, and for h itself in `output_wide`'s sums.
    pub drop: DropoutMask,
    /// [`loss_code`]: softmax cross-entropy or mean squared error.
    pub loss: u32,
    pub _pad: [u32; 3],
}

/// `forward_output.wgsl`: the output layer's fields as in [`OutputLayerParams`] (h's width,
/// classes, a `MODE_*` code, the `ACT_*` code for dh), then the hidden layer's: x's width and
/// its activation.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct ForwardOutputParams {
    pub inputs: u32,
    pub classes: u32,
    pub mode: u32,
    pub hidden_act: u32,
    pub x_inputs: u32,
    pub act: u32,
    /// The split step: rows per k-tile of the partial sums (the tape's largest batch).
    pub partial_rows: u32,
    /// The output layer's loss ([`loss_code`]).
    pub loss: u32,
    /// The hidden layer's dropout (its forward and dh).
    pub drop: DropoutMask,
}

/// `Opt` (`common.wgsl`), read by `sgd.wgsl`, `adam.wgsl` and (inside [`Update`])
/// `linear_update.wgsl`. Its `lr` sits at byte [`Opt::LR_OFFSET`].
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct Opt {
    pub count: u32,
    pub inputs: u32,
    pub outputs: u32,
    pub kind: u32,
    pub lr: f32,
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
    /// 1: the fused updates also write the gradients out (`GpuTrainer::keep_gradients`).
    pub keep_grads: u32,
    pub _pad: [u32; 3],
}

impl Opt {
    /// Where `lr` sits in `Opt`, and so in `Update` (which starts with one).
    pub const LR_OFFSET: u64 = std::mem::offset_of!(Opt, lr) as u64;
    /// Where `keep_grads` sits, the same way.
    pub const KEEP_GRADS_OFFSET: u64 = std::mem::offset_of!(Opt, keep_grads) as u64;

    pub fn new(opt: Optimizer, count: usize, inputs: usize, outputs: usize) -> Self {
        let (kind, lr, beta1, beta2, eps) = match opt {
            Optimizer::Sgd { lr, momentum } => (OPT_SGD, lr, momentum, 0.0, 0.0),
            Optimizer::Adam { lr, beta1, beta2, eps } => (OPT_ADAM, lr, beta1, beta2, eps),
        };
        Self { count: count as u32, inputs: inputs as u32, outputs: outputs as u32, kind, lr, beta1, beta2, eps, keep_grads: 0, _pad: [0; 3] }
    }
}

/// `LayerShape` (`linear_update.wgsl`): one layer of a fused update.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct LayerShape {
    pub inputs: u32,
    pub outputs: u32,
    /// Tiles along the outputs.
    pub tiles_n: u32,
    /// The first workgroup of this layer.
    pub first_group: u32,
}

/// `Split` (`linear_update.wgsl`): in the split step's prologue `partials_only` is 1 (no
/// update, only the first batch's partial sums); `partial_rows` the rows per k-tile of them.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct Split {
    pub partials_only: u32,
    pub partial_rows: u32,
    pub _pad: [u32; 2],
}

impl Split {
    pub const NONE: Split = Split { partials_only: 0, partial_rows: 0, _pad: [0; 2] };
}

/// `Update` (`linear_update.wgsl`): the optimizer, up to three layers, and the split step's part.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct Update {
    pub opt: Opt,
    pub a: LayerShape,
    pub b: LayerShape,
    pub c: LayerShape,
    pub split: Split,
}

/// `GatherSlot` (`forward_input_gather.wgsl`): where batch s of an epoch starts in the order,
/// its rows, and the normalization `x = pixel * scale + shift`. One per batch in a uniform
/// buffer, bound with a dynamic offset (see [`crate::ByteImages`]).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct GatherSlot {
    pub first: u32,
    pub count: u32,
    pub scale: f32,
    pub shift: f32,
}

/// `dropout_forward.wgsl`: `[batch, cols]`, the layer's seed, the integer threshold below which
/// a unit is dropped (`floor(p * 2^32)`) and the scale of the kept ones (`1 / (1 - p)`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct DropoutParams {
    pub cols: u32,
    pub seed: u32,
    pub threshold: u32,
    pub scale: f32,
}

/// `DropoutMask` (`common.wgsl`): a dropout fused into the kernel that writes a hidden layer's
/// output: its seed, the threshold below which a unit is dropped (`floor(p * 2^32)`, 0 for no
/// dropout), the scale of kept units (`1 / (1 - p)`) and `1 - p`, which turns a kept unit's
/// stored value back into the activation's output for the backward pass.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct DropoutMask {
    pub seed: u32,
    pub threshold: u32,
    pub scale: f32,
    pub keep: f32,
}

impl DropoutMask {
    /// No dropout: every helper in `common.wgsl` returns its input unchanged.
    pub const NONE: DropoutMask = DropoutMask { seed: 0, threshold: 0, scale: 1.0, keep: 1.0 };

    pub fn new(drop: Option<FusedDropout>) -> Self {
        match drop {
            None => Self::NONE,
            Some(d) => Self {
                seed: d.seed,
                threshold: d.threshold(),
                scale: d.scale(),
                keep: d.keep(),
            },
        }
    }
}

/// `dropout_backward.wgsl`: `[batch, cols]`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct DropoutBackwardParams {
    pub cols: u32,
    pub _pad: [u32; 3],
}

/// `mse.wgsl`: `[batch, classes]` outputs, a `MODE_*` code.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct MseParams {
    pub classes: u32,
    pub mode: u32,
    pub _pad: [u32; 2],
}

/// `(WGSL struct name, size of the Rust struct)` for every uniform struct, for the layout test.
#[cfg(test)]
pub(crate) const UNIFORMS: [(&str, usize); 17] = [
    ("DropoutMask", size_of::<DropoutMask>()),
    ("Batch", size_of::<Batch>()),
    ("BiasAddParams", size_of::<BiasAddParams>()),
    ("ActivationParams", size_of::<ActivationParams>()),
    ("SoftmaxCeParams", size_of::<SoftmaxCeParams>()),
    ("ColumnSumParams", size_of::<ColumnSumParams>()),
    ("LinearParams", size_of::<LinearParams>()),
    ("OutputLayerParams", size_of::<OutputLayerParams>()),
    ("ForwardOutputParams", size_of::<ForwardOutputParams>()),
    ("Opt", size_of::<Opt>()),
    ("LayerShape", size_of::<LayerShape>()),
    ("Split", size_of::<Split>()),
    ("Update", size_of::<Update>()),
    ("GatherSlot", size_of::<GatherSlot>()),
    ("DropoutParams", size_of::<DropoutParams>()),
    ("DropoutBackwardParams", size_of::<DropoutBackwardParams>()),
    ("MseParams", size_of::<MseParams>()),
];


#[cfg(test)]
mod tests {
    use super::*;
    use crate::KernelId;
    use crate::naga_check::compile;
    use crate::routing::DeviceFit;
    use crate::tiles::FusedTiles;

    #[test]
    fn every_kernel_compiles_with_the_prelude_and_its_uniforms_match_rust() {
        let mut seen = std::collections::HashSet::new();
        for id in KernelId::ALL {
            let module = compile(id.name(), &id.source(&FusedTiles::DEFAULT, DeviceFit::LARGE));
            let mut layouter = naga::proc::Layouter::default();
            layouter.update(module.to_ctx()).unwrap();
            for (handle, ty) in module.types.iter() {
                let Some(name) = ty.name.as_deref() else { continue };
                if let Some(&(_, size)) = UNIFORMS.iter().find(|(n, _)| *n == name) {
                    assert_eq!(layouter[handle].size as usize, size, "{}: WGSL struct {name} vs its Rust struct", id.name());
                    seen.insert(name.to_string());
                }
            }
        }
        for (name, _) in UNIFORMS {
            assert!(seen.contains(name), "no kernel declares the uniform struct {name}");
        }
    }

    #[test]
    fn the_shader_files_leave_the_shared_numbers_to_the_prelude() {
        // A kernel that spelled a shared constant itself would fail to compile (naga refuses a
        // redefinition), but a bare number can slip in: no shader file may declare these names.
        let tiles = KernelId::ALL
            .iter()
            .flat_map(|id| id.tile_constants(&FusedTiles::DEFAULT, DeviceFit::LARGE))
            .map(|(n, _)| n);
        let names: Vec<&str> = shared_constants().iter().map(|(n, _)| *n).chain(tiles).collect();
        for id in KernelId::ALL {
            for (file, text) in [DeviceFit::LARGE, DeviceFit::WEBGPU_DEFAULTS].iter().flat_map(|&fit| id.files(fit)) {
                for name in &names {
                    assert!(!text.contains(&format!("const {name}:")), "{file} declares {name}; it comes from src/wgsl.rs");
                }
            }
        }
        assert!(prelude(&[("T", 32)]).contains("const T: u32 = 32u;\n"));
        assert!(prelude(&[]).contains(&format!("const MAX_CLASSES: u32 = {MAX_CLASSES}u;\n")));
    }

    #[test]
    fn lr_offset_is_where_the_kernels_read_it() {
        let opt = Opt::new(Optimizer::sgd(0.25, 0.5), 0, 0, 0);
        let bytes = bytemuck::bytes_of(&opt);
        let at = Opt::LR_OFFSET as usize;
        assert_eq!(f32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()), 0.25);
        let none = LayerShape { inputs: 0, outputs: 0, tiles_n: 0, first_group: 0 };
        let update = Update { opt, a: none, b: none, c: none, split: Split::NONE };
        let bytes = bytemuck::bytes_of(&update);
        assert_eq!(f32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()), 0.25);
    }
}
