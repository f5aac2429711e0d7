//! Which kernel an op runs on a device: what each fused kernel needs of a device ([`Needs`]),
//! the sizes fitted to its limits ([`DeviceFit`], [`FusedTiles::fitted`]), the rules that pick
//! a merged, tiled, wide, k split or split step kernel, and which hidden layers go through
//! stage 03's matmul ([`Routing`]).

use gpu_matmul::Precision;

use crate::tiles::FusedTiles;
use crate::wgsl::{COOP_UPDATE_T, MERGED_MAX_CLASSES, MERGED_W_SHARED, MERGED_X_SHARED, OUTPUT_WIDE_CLASSES, OUTPUT_WIDE_SLICES, OUTPUT_WIDE_WG, SPLIT_NEXT_R};

/// Which hidden layers the GPU trainer's fused tapes run through stage 03's matmul kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Routing {
    /// By shape: [`routes_by_shape`], the rule measured on the H200.
    Auto,
    /// Every layer through the fused layer kernels.
    Never,
    /// Every hidden layer through stage 03's matmul.
    Always,
}

/// The size of a hidden layer's products, `max_batch x outputs`, from which stage 03's f32
/// matmul (kernel 05, with separate bias, activation, column-sum and optimizer dispatches) beats
/// the fused layer kernels on the H200 (`gpu-layers --sweep`, wide-layer table of
/// `results/h200-sweep.txt`, the fused step with `linear_forward_tiled` from 128 Ki outputs):
/// at 512 x 2048 228.4 against 240.5 us per step, 1024 x 1024 244.3 against 245.7; at 512 x 1024
/// 151.8 against 130.3, 256 x 2048 148.2 against 130.3, 1024 x 512 191.1 against 155.2.
pub const ROUTE_MIN_F32: usize = 1024 * 1024;
/// The same for the f16-input matmul (kernel 08, tensor cores) against the fused tensor-core
/// kernels (`linear_forward_coop`, `linear_update_coop`; the wide-layer grid of
/// `results/h200-tensor-cores/grid.txt`, us per SGD step): routed at 512 x 2048 128.4 against
/// 170.9 fused, 1024 x 1024 128.2 against 158.0; left fused at 1024 x 512 91.7 against 112.8
/// routed, 512 x 1024 87.2 against 88.9, and 256 x 2048 94.4 against 91.7 (the one cell this
/// rule gets wrong, by 3%). (Before the tensor-core kernels the fused f16 step ran the f32
/// kernels, and the rule was 512 Ki.)
pub const ROUTE_MIN_F16: usize = 1024 * 1024;

/// Whether a hidden layer `[inputs] -> [outputs]` trained in batches of up to `max_batch` rows
/// goes through stage 03's matmul under [`Routing::Auto`], whose products run at `precision`.
/// The rule measured on the H200 (all widths with 784 inputs): `max_batch * outputs` at least
/// [`ROUTE_MIN_F32`], or [`ROUTE_MIN_F16`] for f16 inputs on tensor cores.
pub fn routes_by_shape(max_batch: usize, inputs: usize, outputs: usize, precision: Precision) -> bool {
    let _ = inputs; // the measured rule does not depend on it
    let min = if precision == Precision::F16Inputs { ROUTE_MIN_F16 } else { ROUTE_MIN_F32 };
    max_batch.saturating_mul(outputs) >= min
}

// ---- what the fused kernels need of a device, and their sizes fitted to it -----------------

impl FusedTiles {
    /// What the (unsplit) `linear_update` with these tiles needs of a device: its invocations;
    /// the round's rows of x and dy or the slices' partial sums, whichever is larger, as vec4;
    /// 16 storage buffers in its three-layer form (three layers and the counters; 11 for two).
    pub fn update_needs(&self) -> Needs {
        let (t, r, s) = (self.update_t, self.update_r, self.update_batch_slices);
        let vec4s = (2 * r * (t / 4)).max(s * t * (t / 4));
        Needs { invocations: self.update_invocations(), workgroup_bytes: 16 * vec4s, storage_buffers: UPDATE_TRIPLE_BUFFERS }
    }

    /// What `linear_forward_tiled` with these tiles needs of a device: its invocations; the
    /// round's x and W tiles or the slices' partial sums, whichever is larger, as vec4; the
    /// storage buffers its files declare.
    pub fn tiled_needs(&self) -> Needs {
        let (m, n, k, s) = (self.tiled_m, self.tiled_n, self.tiled_k, self.tiled_s);
        let tiles = m * k / 4 + k * n / 4;
        let partials = (s - 1) * m * n / 4;
        let vec4s = tiles.max(partials).max(1);
        Needs { invocations: self.tiled_invocations(), workgroup_bytes: 16 * vec4s, storage_buffers: 5 }
    }

    /// What `linear_forward_coop` with these tiles needs of a device: a subgroup of 32 per
    /// 32 x 32 of its tile; its x and W tiles in f16 (rows padded by 8 halves) and its f32
    /// output tile (rows padded by 4); 3 storage buffers.
    pub fn coop_forward_needs(&self) -> Needs {
        let (m, n) = (self.coop_m, self.coop_n);
        let bytes = 2 * (m * (32 + 8) + 32 * (n + 8)) + 4 * m * (n + 4);
        Needs { invocations: 32 * (m / 32) * (n / 32), workgroup_bytes: bytes, storage_buffers: 3 }
    }

    /// Whether the device has room for `linear_forward_coop` with these tiles (its invocations
    /// and workgroup memory; the cooperative matrices themselves are `Kernels::coop_on`'s).
    pub fn coop_forward_fits(&self, limits: &wgpu::Limits) -> bool {
        let needs = self.coop_forward_needs();
        needs.invocations <= limits.max_compute_invocations_per_workgroup
            && needs.workgroup_bytes <= limits.max_compute_workgroup_storage_size
    }

    /// What `linear_update_coop` needs of a device: 128 invocations per slice; a round's x and
    /// dy rows in f16 (32 rows of [`COOP_UPDATE_T`] + 8 halves) and an f32 gradient tile per
    /// slice (rows padded by 4); 16 storage buffers in its three-layer form (11 for two).
    pub fn coop_update_needs(&self) -> Needs {
        let (t, s) = (COOP_UPDATE_T, self.coop_update_batch_slices);
        Needs { invocations: 128 * s, workgroup_bytes: 2 * 2 * 32 * (t + 8) + s * 4 * t * (t + 4), storage_buffers: UPDATE_TRIPLE_BUFFERS }
    }

    /// What `output_wide` needs of a device: its invocations; the partial logits of every
    /// invocation, the slices' sums and the logits; the storage buffers it declares.
    pub fn output_wide_needs() -> Needs {
        let (wg, c, s) = (OUTPUT_WIDE_WG, OUTPUT_WIDE_CLASSES, OUTPUT_WIDE_SLICES);
        Needs { invocations: wg, workgroup_bytes: 4 * (c * wg + c * s + c), storage_buffers: 8 }
    }

    /// What `forward_output` with these tiles needs of a device (a test checks it against naga's
    /// count of the compiled kernel): `TN x KS` invocations; workgroup memory for the partial
    /// sums `[KS][TR][TN x CB]`, h `[TR][TN x CB]`, `[W2; b2]` (`MERGED_W_SHARED`), the logits
    /// `[TR][MERGED_MAX_CLASSES]`, plus the staged input rows
    /// (`MERGED_X_SHARED`) when gathering; 8 storage buffers, 11 when gathering.
    pub fn merged_needs(&self, gather: bool) -> Needs {
        let (tn, cb, ks, tr) = (self.merged_tn, self.merged_cb, self.merged_ks, self.merged_tr);
        let floats = ks * tr * tn * cb + tr * tn * cb + MERGED_W_SHARED + tr * MERGED_MAX_CLASSES;
        let x = if gather { MERGED_X_SHARED } else { 0 };
        Needs { invocations: tn * ks, workgroup_bytes: 4 * (floats + x), storage_buffers: if gather { 11 } else { 8 } }
    }

    /// What the split step's two kernels need of a device (a test checks it against naga):
    /// `forward_output` gathering plus the partial sums (one storage buffer more); and
    /// `linear_update` of two layers (with `split_step_batch_slices` batch slices) plus the images, the
    /// order, the partial sums and the next batch's rows (15 storage buffers), with the next batch's chunk `[NEXT_R][T]` and the moved tile `[T][T]` in
    /// workgroup memory beside its own.
    pub fn split_needs(&self) -> [Needs; 2] {
        let forward = self.merged_needs(true);
        // The split update is the unsplit one in 4 x 4 blocks with `split_step_batch_slices` slices
        // (two layers), plus its last phase.
        let unsplit = FusedTiles { update_batch_slices: self.split_step_batch_slices, update_block: 4, ..*self }.update_needs();
        let t = self.update_t;
        let update = Needs {
            invocations: unsplit.invocations,
            workgroup_bytes: unsplit.workgroup_bytes + 4 * (SPLIT_NEXT_R * t + t * t),
            storage_buffers: 15,
        };
        [Needs { storage_buffers: forward.storage_buffers + 1, ..forward }, update]
    }

    /// These tiles on a device that allows `max_invocations` per workgroup (WebGPU's default is
    /// 256): the forward's k slices, the output layer's invocations and the update's batch
    /// slices halved until each kernel fits. Only sizes inside a workgroup change, never the
    /// grid (`TN`, `TR`, rows per output workgroup), so the host sizes the same grid either way;
    /// the results are the same up to the order of the sums.
    pub fn fitted(self, max_invocations: u32) -> FusedTiles {
        let mut t = self;
        while t.forward_tn * t.forward_ks > max_invocations && t.forward_ks > 1 {
            t.forward_ks /= 2;
        }
        while t.output_wg > max_invocations && t.output_wg > t.output_rows.max(1) {
            t.output_wg /= 2;
        }
        while t.update_invocations() > max_invocations && t.update_batch_slices > 1 {
            t.update_batch_slices /= 2;
        }
        while (t.update_t / 4) * (t.update_t / 4) * t.split_step_batch_slices > max_invocations && t.split_step_batch_slices > 1 {
            t.split_step_batch_slices /= 2;
        }
        while t.merged_tn * t.merged_ks > max_invocations && t.merged_ks > 1 {
            t.merged_ks /= 2;
        }
        while t.tiled_invocations() > max_invocations && t.tiled_s > 1 {
            t.tiled_s /= 2;
        }
        t
    }

    /// These tiles with `linear_forward`'s k slices (`KS`) halved until its partial sums
    /// (`KS x TR x TN` floats) and the input rows its gathering form stages (`x_shared` floats,
    /// [`DeviceFit::forward_x_shared`]) fit `storage` bytes of workgroup memory. Like
    /// [`FusedTiles::fitted`], only sizes inside a workgroup change.
    pub fn forward_memory_fitted(self, storage: u32, x_shared: u32) -> FusedTiles {
        let mut t = self;
        let bytes = |t: &FusedTiles| 4 * (t.forward_ks * t.forward_tr * t.forward_tn + x_shared);
        while bytes(&t) > storage && t.forward_ks > 1 {
            t.forward_ks /= 2;
        }
        t
    }

    /// The tiles the split kernels are built with on a device with `limits`: [`FusedTiles::fitted`],
    /// with `split_step_batch_slices` halved until the split update fits the device's workgroup memory (8
    /// slices take 44 KiB, which the H200's 48 KiB allow and lavapipe's 32 KiB do not: there it
    /// takes 4); `None` where even one slice, or the other needs, do not fit.
    pub fn split_fitted(&self, limits: &wgpu::Limits) -> Option<FusedTiles> {
        let mut t = self.fitted(limits.max_compute_invocations_per_workgroup);
        let fits = |n: &Needs| {
            n.invocations <= limits.max_compute_invocations_per_workgroup
                && n.workgroup_bytes <= limits.max_compute_workgroup_storage_size
                && n.storage_buffers <= limits.max_storage_buffers_per_shader_stage
        };
        while !fits(&t.split_needs()[1]) && t.split_step_batch_slices > 1 {
            t.split_step_batch_slices /= 2;
        }
        t.split_needs().iter().all(fits).then_some(t)
    }
}

/// The kernel sizes that depend on the device. WebGPU guarantees only 256 invocations, 16 KiB
/// of workgroup memory and 8 storage buffers per shader stage, and a browser may offer no more;
/// native adapters offer 1,024, 32-48 KiB and dozens, where the larger choices are faster. The
/// results are the same either way: only how large a layer `output_layer` and the gathering
/// `linear_forward` stage in workgroup memory (784-128-10 is staged with both) and how many
/// layers `linear_update` takes per dispatch change here; how many invocations the fused
/// kernels use is [`FusedTiles::fitted`]'s job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DeviceFit {
    /// Floats of `[W; b]` and of the workgroup's rows of `h` that `output_layer` can stage (WGSL
    /// `W_SHARED`, `H_SHARED`); larger layers are read from memory instead.
    pub output_w_shared: u32,
    pub output_h_shared: u32,
    /// Floats of input rows the gathering `linear_forward` stages (WGSL `X_SHARED`); with more
    /// (`TR x inputs`), it reads the bytes in its k loop instead.
    pub forward_x_shared: u32,
    /// Layers per `linear_update` dispatch: three (16 storage buffers), two (11) or one (6).
    pub linear_update_layers: u32,
}

impl DeviceFit {
    /// The larger choices, which every native adapter of this project allows (lavapipe, the
    /// H200).
    pub const LARGE: Self =
        Self { output_w_shared: 4096, output_h_shared: 1024, forward_x_shared: 4096, linear_update_layers: 3 };
    /// What [`DeviceFit::LARGE`]'s kernels need with [`FusedTiles::DEFAULT`], each the most of
    /// any kernel: 512 invocations per workgroup (`linear_forward`), 25,600 bytes of workgroup
    /// memory (`output_layer`) and 16 storage buffers (`linear_update` of three layers). A test
    /// measures all three with naga.
    pub const LARGE_NEEDS: Needs = Needs { invocations: 512, workgroup_bytes: 25_600, storage_buffers: UPDATE_TRIPLE_BUFFERS };
    /// The choices within WebGPU's default limits (with [`FusedTiles::fitted`] to 256
    /// invocations).
    pub const WEBGPU_DEFAULTS: Self =
        Self { output_w_shared: 2048, output_h_shared: 512, forward_x_shared: 2048, linear_update_layers: 1 };

    /// Each choice of [`DeviceFit::LARGE`] where the device allows it, else the one of
    /// [`DeviceFit::WEBGPU_DEFAULTS`].
    pub fn for_limits(limits: &wgpu::Limits) -> Self {
        let (large, small, needs) = (Self::LARGE, Self::WEBGPU_DEFAULTS, Self::LARGE_NEEDS);
        let pick = |fits: bool, a, b| if fits { a } else { b };
        let stage = limits.max_compute_workgroup_storage_size >= needs.workgroup_bytes;
        Self {
            output_w_shared: pick(stage, large.output_w_shared, small.output_w_shared),
            output_h_shared: pick(stage, large.output_h_shared, small.output_h_shared),
            forward_x_shared: pick(stage, large.forward_x_shared, small.forward_x_shared),
            linear_update_layers: match limits.max_storage_buffers_per_shader_stage {
                n if n >= UPDATE_TRIPLE_BUFFERS => 3,
                n if n >= UPDATE_PAIR_BUFFERS => 2,
                _ => 1,
            },
        }
    }
}

/// Storage buffers `linear_update` binds for two layers (5 each and the counters) and for three.
const UPDATE_PAIR_BUFFERS: u32 = 11;
const UPDATE_TRIPLE_BUFFERS: u32 = 16;

/// What a set of kernels needs of a device, per workgroup or per dispatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Needs {
    pub invocations: u32,
    pub workgroup_bytes: u32,
    pub storage_buffers: u32,
}

// ---- which fused kernel an op runs ---------------------------------------------------------

impl FusedTiles {
    /// Whether a `LinearForward` of `rows x outputs` (rows: the batch the tape is sized for)
    /// that reads a ready input runs `linear_forward_tiled`: at least [`FusedTiles::tiled_min`]
    /// outputs, on a device that allows its invocations and workgroup memory. (It never gathers
    /// its batch: a trainer whose first layer runs it gathers with a separate dispatch,
    /// `GpuTrainer::can_gather`.)
    pub fn forward_tiled(&self, rows: usize, outputs: usize, limits: &wgpu::Limits) -> bool {
        let t = self.fitted(limits.max_compute_invocations_per_workgroup);
        let needs = t.tiled_needs();
        (rows * outputs) as u64 >= self.tiled_min as u64
            && needs.invocations <= limits.max_compute_invocations_per_workgroup
            && needs.workgroup_bytes <= limits.max_compute_workgroup_storage_size
    }

    /// Whether an `OutputLayer` on `inputs` columns of `h` with `classes` classes runs
    /// `output_wide`: at least [`FusedTiles::wide_min`] inputs, at most [`crate::wgsl::OUTPUT_WIDE_CLASSES`]
    /// classes, on a device that allows its invocations and workgroup memory
    /// ([`FusedTiles::output_wide_needs`]; not WebGPU's default 16 KiB).
    pub fn output_wide(&self, inputs: usize, classes: usize, limits: &wgpu::Limits) -> bool {
        let needs = Self::output_wide_needs();
        inputs as u64 >= self.wide_min as u64
            && classes <= OUTPUT_WIDE_CLASSES as usize
            && needs.invocations <= limits.max_compute_invocations_per_workgroup
            && needs.workgroup_bytes <= limits.max_compute_workgroup_storage_size
    }

    /// Whether a `LinearForward` of `rows x outputs` (reading a ready input) and the
    /// `OutputLayer` of `classes` on top of it run as a split `linear_forward_tiled` and an
    /// `output_wide` that adds up its partial sums: [`FusedTiles::k_splits`] is above 1, the
    /// forward runs tiled, the output layer wide, and the partial sums (`k_splits` times the
    /// forward's output) fit one buffer of the device.
    pub fn runs_k_split(&self, rows: usize, outputs: usize, classes: usize, limits: &wgpu::Limits) -> bool {
        let bytes = 4 * self.k_splits as u64 * rows as u64 * outputs as u64;
        self.k_splits > 1
            && self.forward_tiled(rows, outputs, limits)
            && self.output_wide(outputs, classes, limits)
            && bytes <= limits.max_storage_buffer_binding_size.min(limits.max_buffer_size)
    }

    /// Whether a layer of `outputs` outputs, in a tape sized for `rows` rows, has its gradient
    /// computed by `linear_update_coop` where the products take f16 inputs on an adapter with
    /// cooperative matrices: its forward runs tiled ([`FusedTiles::forward_tiled`]), it has at
    /// least [`FusedTiles::coop_min`] outputs, and the device has room for the kernel.
    pub fn coop_updates(&self, rows: usize, outputs: usize, limits: &wgpu::Limits) -> bool {
        let needs = self.coop_update_needs();
        self.forward_tiled(rows, outputs, limits)
            && outputs >= self.coop_min as usize
            && needs.invocations <= limits.max_compute_invocations_per_workgroup
            && needs.workgroup_bytes <= limits.max_compute_workgroup_storage_size
            && needs.storage_buffers <= limits.max_storage_buffers_per_shader_stage
    }

    /// Whether a `LinearForward` to `hidden` columns and the `OutputLayer` of `classes` on top
    /// of it run merged as `forward_output` on a device with `limits`, `gather` when the
    /// forward gathers its batch: the tiles say so, the layer fits the workgroup
    /// (`hidden <= merged_tn x merged_cb`, `classes <= MERGED_MAX_CLASSES`), and the device
    /// allows its invocations, workgroup memory and storage buffers ([`FusedTiles::merged_needs`]).
    pub fn merges(&self, hidden: usize, classes: usize, gather: bool, limits: &wgpu::Limits) -> bool {
        let t = self.fitted(limits.max_compute_invocations_per_workgroup);
        let needs = t.merged_needs(gather);
        t.merge
            && hidden <= (t.merged_tn * t.merged_cb) as usize
            && classes <= MERGED_MAX_CLASSES as usize
            && needs.invocations <= limits.max_compute_invocations_per_workgroup
            && needs.workgroup_bytes <= limits.max_compute_workgroup_storage_size
            && needs.storage_buffers <= limits.max_storage_buffers_per_shader_stage
    }

    /// Whether a gathered step whose first hidden layer runs merged (`forward_output`) runs
    /// split on a device with `limits` ([`FusedTiles::split`]): the tiles say so, and the device
    /// allows what the two split kernels need ([`FusedTiles::split_fitted`]).
    pub fn runs_split_step(&self, limits: &wgpu::Limits) -> bool {
        self.split && self.split_fitted(limits).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KernelId;
    use crate::sweep_variants::sweep_variants;
    use crate::naga_check::{compile, lavapipe_limits, needs};

    #[test]
    fn every_kernel_fits_the_limits_of_its_device_fit() {
        // What a browser may not exceed (WebGPU's defaults), and what LARGE claims to need.
        let defaults = wgpu::Limits::defaults();
        let webgpu = Needs {
            invocations: defaults.max_compute_invocations_per_workgroup,
            workgroup_bytes: defaults.max_compute_workgroup_storage_size,
            storage_buffers: defaults.max_storage_buffers_per_shader_stage,
        };
        for (fit, limit) in [(DeviceFit::WEBGPU_DEFAULTS, webgpu), (DeviceFit::LARGE, DeviceFit::LARGE_NEEDS)] {
            let mut most = Needs { invocations: 0, workgroup_bytes: 0, storage_buffers: 0 };
            // The merged forward_output runs only where FusedTiles::merges allows it (below).
            // The split step's kernels run only where FusedTiles::runs_split_step allows them (below).
            // output_wide runs only where FusedTiles::output_wide allows it (below).
            // linear_forward_coop runs only on adapters with cooperative matrices (native ones).
            // The three-layer updates run only where the device binds their 16 buffers.
            let conditional = |id: &KernelId| {
                id.name().starts_with("forward_output")
                    || id.is_split()
                    || *id == KernelId::OutputWide
                    || id.needs_cooperative_matrix()
                    || id.update_layers(fit) > fit.linear_update_layers
            };
            for id in KernelId::ALL.into_iter().filter(|id| !conditional(id)) {
                let tiles = FusedTiles::DEFAULT.fitted(limit.invocations);
                let n = needs(&compile(id.name(), &id.source(&tiles, fit)));
                assert!(n.invocations <= limit.invocations, "{} with {fit:?}: {n:?}", id.name());
                assert!(n.workgroup_bytes <= limit.workgroup_bytes, "{} with {fit:?}: {n:?}", id.name());
                assert!(n.storage_buffers <= limit.storage_buffers, "{} with {fit:?}: {n:?}", id.name());
                most.invocations = most.invocations.max(n.invocations);
                most.workgroup_bytes = most.workgroup_bytes.max(n.workgroup_bytes);
                most.storage_buffers = most.storage_buffers.max(n.storage_buffers);
            }
            if fit == DeviceFit::LARGE {
                assert_eq!(most, DeviceFit::LARGE_NEEDS, "LARGE_NEEDS must say what the kernels need");
            }
        }
        assert_eq!(DeviceFit::for_limits(&defaults), DeviceFit::WEBGPU_DEFAULTS);
        // lavapipe's limits; SwiftShader's in Chromium (256 invocations, 32 KiB, 10 buffers).
        let lavapipe = lavapipe_limits();
        assert_eq!(DeviceFit::for_limits(&lavapipe), DeviceFit::LARGE);
        let swiftshader =
            wgpu::Limits { max_compute_workgroup_storage_size: 32768, max_storage_buffers_per_shader_stage: 10, ..defaults };
        let fit = DeviceFit::for_limits(&swiftshader);
        assert_eq!((fit.output_w_shared, fit.forward_x_shared, fit.linear_update_layers), (4096, 4096, 1));
        // Chromium's on the H100 (16 storage buffers): three layers per update.
        let h100 = wgpu::Limits { max_storage_buffers_per_shader_stage: 16, ..swiftshader };
        assert_eq!(DeviceFit::for_limits(&h100).linear_update_layers, 3);
        let eleven = wgpu::Limits { max_storage_buffers_per_shader_stage: 11, ..swiftshader };
        assert_eq!(DeviceFit::for_limits(&eleven).linear_update_layers, 2);
        let webgpu_tiles = FusedTiles::DEFAULT.fitted(256);
        assert_eq!((webgpu_tiles.forward_ks, webgpu_tiles.output_wg, webgpu_tiles.update_batch_slices), (8, 256, 4));
    }

    #[test]
    fn merged_needs_say_what_forward_output_needs_and_lavapipe_runs_it() {
        for (what, tiles) in sweep_variants() {
            for (id, gather) in [(KernelId::ForwardOutput, false), (KernelId::ForwardOutputGather, true)] {
                let n = needs(&compile(id.name(), &id.source(&tiles, DeviceFit::LARGE)));
                assert_eq!(n, tiles.merged_needs(gather), "{} with {what}", id.name());
            }
        }
        // The CI machine's adapter (lavapipe: 1,024 invocations, 32 KiB) merges MNIST's
        // 784-128-10 with the defaults, plain or gathering. WebGPU's defaults (256 invocations,
        // 16 KiB, 8 storage buffers) merge only the plain form, its k loop split 8 ways instead
        // of 32: gathering needs 11 buffers. A hidden layer wider than the workgroup's columns,
        // or more than 32 classes, is never merged.
        let defaults = wgpu::Limits::defaults();
        let lavapipe = lavapipe_limits();
        let d = FusedTiles::DEFAULT;
        assert!(d.merges(128, 10, true, &lavapipe) && d.merges(128, 10, false, &lavapipe));
        assert!(!d.merges(129, 10, false, &lavapipe) && !d.merges(128, 33, false, &lavapipe));
        assert!(!d.merges(128, 10, true, &defaults) && d.merges(128, 10, false, &defaults));
        assert_eq!(d.fitted(256).merged_ks, 8);
        assert!(!FusedTiles { merge: false, ..d }.merges(128, 10, false, &lavapipe));
    }

    #[test]
    fn split_needs_say_what_the_split_kernels_need_and_lavapipe_runs_them() {
        for (what, tiles) in sweep_variants() {
            let [forward, update] = tiles.split_needs();
            for (id, want) in [(KernelId::ForwardOutputSplit, forward), (KernelId::LinearUpdateSplit, update)] {
                let n = needs(&compile(id.name(), &id.source(&tiles, DeviceFit::LARGE)));
                assert_eq!(n, want, "{} with {what}", id.name());
            }
        }
        // lavapipe (the CI machine's adapter) runs the default split step; WebGPU's defaults (8
        // storage buffers) and SwiftShader's 10 do not, nor tiles that turn it off.
        let defaults = wgpu::Limits::defaults();
        let lavapipe = lavapipe_limits();
        let d = FusedTiles::DEFAULT;
        assert!(d.runs_split_step(&lavapipe));
        // 8 batch slices (44 KiB) on the H200's 48 KiB, 4 (28 KiB) on lavapipe's 32 KiB.
        let h200 = wgpu::Limits { max_compute_workgroup_storage_size: 49152, ..lavapipe.clone() };
        assert_eq!(d.split_fitted(&h200).map(|t| t.split_step_batch_slices), Some(8));
        assert_eq!(d.split_fitted(&lavapipe).map(|t| t.split_step_batch_slices), Some(4));
        assert!(!d.runs_split_step(&defaults));
        assert!(!d.runs_split_step(&wgpu::Limits { max_storage_buffers_per_shader_stage: 14, ..lavapipe.clone() }));
        assert!(!FusedTiles { split: false, ..d }.runs_split_step(&lavapipe));
    }

    #[test]
    fn a_network_with_a_layer_of_512_outputs_takes_the_big_batch_forward_and_output_tiles() {
        let mnist = [(784, 128), (128, 10)];
        let two = [(784, 512), (512, 256), (256, 10)];
        assert_eq!(FusedTiles::for_network(64, &mnist), FusedTiles::DEFAULT);
        assert_eq!(FusedTiles::for_network(64, &[(784, 256), (256, 10)]), FusedTiles::DEFAULT);
        // Every batch, one hidden layer or two: 4 rows, 512 invocations of the output layer.
        let big = FusedTiles::for_network(128, &two);
        assert_eq!(big, FusedTiles { forward_tr: 4, output_wg: 512, ..FusedTiles::DEFAULT });
        assert_eq!(FusedTiles::for_network(64, &two), big);
        assert_eq!(FusedTiles::for_network(17, &two), big);
        assert_eq!(FusedTiles::for_network(64, &[(784, 512), (512, 10)]), big);
        assert_eq!(FusedTiles::for_network(256, &mnist), FusedTiles::for_batch(256));
        // 784-1024-10 at batch 256: the tiled forward, split over k.
        let wide = FusedTiles::for_network(256, &[(784, 1024), (1024, 10)]);
        assert_eq!(wide, FusedTiles { k_splits: 2, ..big });
        assert!(wide.runs_k_split(256, 1024, 10, &lavapipe_limits()));
    }

    #[test]
    fn tiled_needs_say_what_linear_forward_tiled_needs_and_which_layers_take_it() {
        for (what, tiles) in sweep_variants() {
            let id = KernelId::LinearForwardTiled;
            let n = needs(&compile(id.name(), &id.source(&tiles, DeviceFit::LARGE)));
            assert_eq!(n, tiles.tiled_needs(), "{} with {what}", id.name());
        }
        // The default rule: 784-1024 at batch 256 (262,144 outputs) and 784-512 at 256 take the
        // tiled forward; MNIST's 784-128 at 64 (8,192) does not; never where the device has
        // too few invocations or too little workgroup memory for it, whatever the shape.
        let defaults = wgpu::Limits::defaults();
        let d = FusedTiles::DEFAULT;
        assert!(d.forward_tiled(256, 1024, &defaults) && d.forward_tiled(256, 512, &defaults));
        assert!(!d.forward_tiled(64, 128, &defaults) && !d.forward_tiled(64, 1024, &defaults));
        let small = wgpu::Limits { max_compute_workgroup_storage_size: 8192, ..defaults.clone() };
        assert!(!d.forward_tiled(256, 1024, &small));
        let few = wgpu::Limits { max_compute_invocations_per_workgroup: 64, ..defaults.clone() };
        assert_eq!(d.fitted(64).tiled_s, 1);
        assert!(!d.forward_tiled(256, 1024, &few));
        assert!(!FusedTiles { tiled_min: u32::MAX, ..d }.forward_tiled(4096, 4096, &defaults));
    }

    #[test]
    fn coop_needs_say_what_the_tensor_core_kernels_need() {
        for (what, tiles) in sweep_variants() {
            let id = KernelId::LinearForwardCoop;
            let n = needs(&compile(id.name(), &id.source(&tiles, DeviceFit::LARGE)));
            assert_eq!(n, tiles.coop_forward_needs(), "{} with {what}", id.name());
        }
        for (id, buffers) in [(KernelId::LinearUpdateCoopThree, 16), (KernelId::LinearUpdateCoop, 11)] {
            for s in [1, 2] {
                let tiles = FusedTiles { coop_update_batch_slices: s, ..FusedTiles::DEFAULT };
                let n = needs(&compile(id.name(), &id.source(&tiles, DeviceFit::LARGE)));
                assert_eq!(n, Needs { storage_buffers: buffers, ..tiles.coop_update_needs() }, "{} with {s} slices", id.name());
            }
        }
        for s in [1, 2] {
            let tiles = FusedTiles { coop_update_batch_slices: s, ..FusedTiles::DEFAULT };
            // The H200's 48 KiB hold both kernels.
            assert!(tiles.coop_update_needs().workgroup_bytes <= 48 * 1024);
        }
        // Lavapipe's 32 KiB hold the forward only (the update with its default two slices).
        assert!(FusedTiles::DEFAULT.coop_update_needs().workgroup_bytes > 32 * 1024);
        assert!(FusedTiles::DEFAULT.coop_forward_needs().workgroup_bytes <= 48 * 1024);
        // The update's rule: 784-1024 and 784-256 at batch 512 take it, 784-128 at 1024 (a tiled
        // forward) does not, nor 784-1024 at 64 (not tiled), nor a device with 32 KiB.
        let h200 = wgpu::Limits { max_compute_workgroup_storage_size: 49152, ..lavapipe_limits() };
        let d = FusedTiles::DEFAULT;
        assert!(d.coop_updates(256, 1024, &h200) && d.coop_updates(512, 256, &h200));
        assert!(!d.coop_updates(1024, 128, &h200) && !d.coop_updates(64, 1024, &h200));
        assert!(!d.coop_updates(256, 1024, &lavapipe_limits()));
        assert!(d.coop_forward_fits(&h200) && !d.coop_forward_fits(&wgpu::Limits::defaults()));
    }

    #[test]
    fn update_needs_say_what_linear_update_needs() {
        for (what, tiles) in sweep_variants() {
            for (id, buffers) in [(KernelId::LinearUpdateThree, 16), (KernelId::LinearUpdate, 11)] {
                let n = needs(&compile(id.name(), &id.source(&tiles, DeviceFit::LARGE)));
                assert_eq!(n, Needs { storage_buffers: buffers, ..tiles.update_needs() }, "{} with {what}", id.name());
            }
        }
        // 8 x 8 blocks in tiles of 64 with 4 slices would take 64 KiB: more than any device here.
        let big = FusedTiles { update_block: 8, update_t: 64, ..FusedTiles::DEFAULT };
        assert_eq!(big.update_needs().workgroup_bytes, 65536);
    }

    #[test]
    fn the_forward_fits_a_device_with_many_invocations_and_little_workgroup_memory() {
        // The deep network's tiles with 32 slices (4 rows: 16 KiB of partial sums, `--sweep`'s
        // `forward KS 32`) on devices that allow 1,024 invocations but 16 or 28 KiB of workgroup
        // memory, and on lavapipe (32 KiB).
        let deep = FusedTiles::for_network(64, &[(784, 512), (512, 256), (256, 10)]);
        let tiles = FusedTiles { forward_ks: 32, ..deep };
        for (storage, ks) in [(16384, 16), (28672, 16), (32768, 32)] {
            let limits = wgpu::Limits { max_compute_invocations_per_workgroup: 1024, max_compute_workgroup_storage_size: storage, ..lavapipe_limits() };
            let fit = DeviceFit::for_limits(&limits);
            let t = tiles.fitted(1024).forward_memory_fitted(storage, fit.forward_x_shared);
            assert_eq!(t.forward_ks, ks, "{storage} bytes");
            for id in [KernelId::LinearForward, KernelId::LinearForwardGather] {
                let n = needs(&compile(id.name(), &id.source(&t, fit)));
                assert!(n.workgroup_bytes <= storage, "{} with {storage} bytes: {n:?}", id.name());
            }
        }
    }

    #[test]
    fn output_wide_needs_say_what_it_needs_and_which_layers_take_it() {
        let id = KernelId::OutputWide;
        let n = needs(&compile(id.name(), &id.source(&FusedTiles::DEFAULT, DeviceFit::LARGE)));
        assert_eq!(n, FusedTiles::output_wide_needs());
        // The default rule: 784-1024-10's and 784-512-256-10's output layers (1,024 and 256
        // inputs, 10 classes) take it, 784-128-10's does not (it merges anyway), nor 17 classes,
        // nor WebGPU's default 16 KiB of workgroup memory; lavapipe (the CI machine) runs it.
        let (defaults, lavapipe) = (wgpu::Limits::defaults(), lavapipe_limits());
        let d = FusedTiles::DEFAULT;
        assert!(d.output_wide(1024, 10, &lavapipe) && d.output_wide(256, 10, &lavapipe) && d.output_wide(256, 16, &lavapipe));
        assert!(!d.output_wide(128, 10, &lavapipe) && !d.output_wide(1024, 17, &lavapipe));
        assert!(!d.output_wide(1024, 10, &defaults));
        assert!(!FusedTiles { wide_min: u32::MAX, ..d }.output_wide(4096, 10, &lavapipe));
    }
}
