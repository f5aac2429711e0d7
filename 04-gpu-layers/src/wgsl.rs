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

use crate::tape::Mode;
use crate::{Activation, MAX_CLASSES, Optimizer};

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

/// The tile sizes of the three fused kernels, written into their preludes. `Kernels::new` uses
/// [`FusedTiles::DEFAULT`], the fastest combination `gpu-layers --sweep` measured on the H200 for
/// the MNIST step; `Kernels::with_tiles` takes others (the sweep, the tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FusedTiles {
    /// `linear_forward`: columns per workgroup (WGSL `TN`, `workgroup_size.x`).
    pub forward_tn: u32,
    /// `linear_forward`: slices of the k loop (`KS`, `workgroup_size.y`).
    pub forward_ks: u32,
    /// `linear_forward`: rows per workgroup, one accumulator each per invocation (`TR`).
    pub forward_tr: u32,
    /// `linear_forward`: weight loads in flight per invocation before the first multiply (`U`).
    pub forward_u: u32,
    /// `output_layer`: invocations per workgroup (`OUT_WG`).
    pub output_wg: u32,
    /// `output_layer`: rows per workgroup, at most.
    pub output_rows: u32,
    /// `linear_update`: slices of the batch per workgroup, `(T / 4)^2` invocations each
    /// (`UPD_RS`).
    pub update_slices: u32,
    /// `linear_update`: each workgroup owns a `T x T` tile of one layer's parameters (`T`: 16,
    /// 32 or 64); its invocations own 4 x 4 blocks of it.
    pub update_t: u32,
    /// `linear_update`: the side of each invocation's block of parameters (`UPD_B`: 4 or 8, at
    /// most `T / 2`); the split step's update always takes 4.
    pub update_block: u32,
    /// `linear_update`: rows of the batch staged per round (`UPD_R`: 32, 64 or 128), as vec4
    /// quads of the tile's x and dy columns: `2 x UPD_R x T / 4` vec4 of workgroup memory, which
    /// then holds the slices' partial sums (`UPD_RS x (T / 4)^2 x 4` vec4), whichever is larger.
    pub update_r: u32,
    /// `linear_update`: whether each invocation loads the parameters it moves (and their
    /// optimizer state) before the rounds over the batch, so the loads overlap them (`UPD_PRE`
    /// 1), or after the gradient is summed (0), which holds 4-12 fewer registers through the
    /// rounds.
    pub update_preload: bool,
    /// Whether a `LinearForward` and the `OutputLayer` on top of it run as ONE dispatch,
    /// `forward_output` (where the shapes and the device allow it: [`FusedTiles::merges`]).
    pub merge: bool,
    /// Whether a gathered training step of one merged hidden layer runs SPLIT: each
    /// `linear_update` also writes the next batch's partial sums of `x W1` for its tile of `W1`,
    /// and `forward_output` only adds them up (where the device allows it:
    /// [`FusedTiles::splits`]; `GpuTrainer::record_gathered_steps`).
    pub split: bool,
    /// The split step's `linear_update`: slices of the batch per workgroup (its `UPD_RS`; the
    /// unsplit kernel's is `update_slices`). More invocations share its last phase, the next
    /// batch's partial sums.
    pub split_slices: u32,
    /// `forward_output`: columns per block (WGSL `TN`, `workgroup_size.x`); each invocation
    /// takes `merged_cb` blocks, so a hidden layer of up to `merged_tn x merged_cb` is merged.
    pub merged_tn: u32,
    /// `forward_output`: column blocks per invocation (`CB`).
    pub merged_cb: u32,
    /// `forward_output`: slices of the k loop (`KS`, `workgroup_size.y`).
    pub merged_ks: u32,
    /// `forward_output`: rows per workgroup (`TR`); it uses `forward_u` loads in flight (the
    /// sweep's "forward U" variants change both forwards).
    pub merged_tr: u32,
    /// A `LinearForward` of at least this many outputs (`batch x width`, the batch the tape is
    /// sized for) runs `linear_forward_tiled` (a register-blocked matmul with the bias and the
    /// activation fused) instead of `linear_forward`, where the device allows it
    /// ([`FusedTiles::forward_tiled`]); `u32::MAX`: never.
    pub tiled_min: u32,
    /// `linear_forward_tiled`: rows per workgroup (`FT_M`, a multiple of 4).
    pub tiled_m: u32,
    /// `linear_forward_tiled`: columns per workgroup (`FT_N`, a multiple of 4).
    pub tiled_n: u32,
    /// `linear_forward_tiled`: values of k staged per round (`FT_K`: 16, 32, 64 or 128).
    pub tiled_k: u32,
    /// `linear_forward_tiled`: slices of each k round (`FT_S`: 1, 2, 4 or 8, at most `FT_K / 4`).
    pub tiled_s: u32,
    /// An `OutputLayer` on an `h` of at least this many columns, with at most
    /// [`OUTPUT_WIDE_CLASSES`] classes, runs `output_wide` (each invocation holds a few columns
    /// of `h` and all classes) instead of `output_layer`, where the device allows it
    /// ([`FusedTiles::output_wide`]); `u32::MAX`: never.
    pub wide_min: u32,
    /// Workgroups the k loop of a `linear_forward_tiled` is split over (grid z) when an
    /// `output_wide` reads its output: each writes raw partial sums, and `output_wide` adds
    /// them up with the bias and the activation ([`FusedTiles::splits_k`]); 1: never split.
    pub tiled_splits: u32,
    /// `linear_forward_coop` (a forward split over k on the tensor cores, where the products take
    /// f16 inputs): rows of the output per workgroup (`CF_M`: 32 or 64, a subgroup per 32).
    pub coop_m: u32,
    /// `linear_forward_coop`: columns of the output per workgroup (`CF_N`: 32 or 64).
    pub coop_n: u32,
    /// `linear_update_coop`: the fewest outputs of a layer whose gradient it computes
    /// ([`FusedTiles::coop_updates`]). In the wide-layer grid of `gpu-layers --sweep --grid` on the
    /// H200 (`results/h200-tensor-cores/`), the tensor-core step was slower at every batch for
    /// 128 hidden units (91.3 against 71.8 us at batch 1024, the one such cell with enough
    /// outputs for the tiled forward's rule) and faster wherever that rule takes a layer of 256
    /// or more.
    pub coop_min: u32,
    /// `linear_forward_coop`: how its invocations read the tiles they stage (`COOP_LOADS`): 0, a
    /// quad each as four 4-byte loads; 1, a quad each as one 16-byte load where the rows are
    /// whole quads; 2, single values, neighbouring invocations neighbouring values.
    pub coop_loads: u32,
    /// `linear_update_coop`: slices of each round of the batch (`UC_S`): 2, 256 invocations
    /// (2 slices x 4 subgroups of 32 x 32 parameters, 16 parameters each); 1, 128 invocations
    /// (each subgroup takes the whole round, 32 parameters each), half the workgroup memory. On
    /// the H200 at 784-1024, batch 256, one slice took 40.4 us against 26.5 with two
    /// (`results/h200-tensor-cores/10-update-slices/`).
    pub coop_update_slices: u32,
}

impl FusedTiles {
    /// The fastest of `gpu-layers --sweep`'s variants on the H200 for the MNIST step (784-128-10,
    /// batch 64), each change measured alone (the sweeps in `results/`): the forward with 2 rows
    /// per workgroup (5.80 us against 7.00 with 4), the output layer with one row per
    /// workgroup of 256 invocations (5.22 against 6.04 with 4 rows; 11.39 with 64
    /// invocations), the update with the batch split 4 ways (4.73 against 11.95 unsplit); the
    /// merged forward_output with one row per workgroup, 32 columns x 4 blocks per invocation and
    /// its k loop split 32 ways (9.79 us alone against 11.54 for its first tiles, 2 rows and
    /// 64 x 2 columns split 16 ways: `results/h200-sweep-merged-first.txt`,
    /// `results/h200-sweep-merged-second.txt`); `linear_forward_tiled` from 128 Ki outputs, where
    /// it starts to beat `linear_forward` in the wide-layer grid of `results/h200-sweep.txt`,
    /// with 32 x 64 outputs per workgroup, rounds of 32 and 2 slices (26.2 us alone at 784-1024,
    /// batch 256, against 29.5-41.1 for each neighbouring size:
    /// `results/h200-sweep-1024-b256.txt`).
    pub const DEFAULT: FusedTiles = FusedTiles {
        forward_tn: 32,
        forward_ks: 16,
        forward_tr: 2,
        forward_u: 8,
        output_wg: 256,
        output_rows: 1,
        update_slices: 4,
        update_t: 32,
        update_block: 4,
        update_r: 64,
        update_preload: true,
        merge: true,
        split: true,
        split_slices: 8,
        merged_tn: 32,
        merged_cb: 4,
        merged_ks: 32,
        merged_tr: 1,
        tiled_min: 128 * 1024,
        tiled_m: 32,
        tiled_n: 64,
        tiled_k: 32,
        tiled_s: 2,
        wide_min: 256,
        tiled_splits: 1,
        coop_m: 64,
        coop_n: 64,
        coop_loads: 0,
        coop_min: 256,
        coop_update_slices: 2,
    };

    /// The tiles for batches of up to `max_batch` rows: [`FusedTiles::DEFAULT`], and above 64
    /// rows 4 forward rows per workgroup (each weight read shared by more rows) and an output
    /// layer of 512 invocations per row (at 784-1024-10, batch 256, on the H200: 14.6 us alone
    /// against 19.0 with 256; at 784-512-10, batch 512, 18.9 against 21.2; `--sweep --hidden
    /// 1024 --batch 256` and `--hidden 512 --batch 512`, `results/h200-sweep-1024-b256.txt`).
    /// The widths and batches of `--sweep`'s wide-layer table are measured with these.
    pub fn for_batch(max_batch: usize) -> FusedTiles {
        if max_batch > 64 { FusedTiles::BIG_ROWS } else { FusedTiles::DEFAULT }
    }

    /// [`FusedTiles::DEFAULT`] with 4 forward rows per workgroup and 512 output-layer
    /// invocations per row: the tiles of big batches and of wide layers.
    const BIG_ROWS: FusedTiles = FusedTiles { forward_tr: 4, output_wg: 512, ..FusedTiles::DEFAULT };

    /// The tiles for a network whose layers are `[inputs] -> [outputs]` (`shapes`, first to last)
    /// in batches of up to `max_batch` rows: [`FusedTiles::for_batch`], and the same bigger
    /// forward and output tiles in smaller batches where a layer has at least 512 outputs. At
    /// 784-512-10, batch 64, on the H200 (`gpu-layers --sweep --hidden 512 --batch 64`,
    /// `results/h200-sweep-512-b64.txt`): `linear_forward` with 4 rows per workgroup 9.31 us
    /// alone against 11.44 with 2, `output_layer` with 512 invocations 7.01 against 8.46; at
    /// 784-256-10 they were even (7.39 against 7.28; 5.26 against 5.42), and at 784-128-10 the
    /// merged `forward_output` uses neither.
    /// A network with a layer of at least `tiled_min` outputs at `max_batch` rows (a tiled
    /// forward) takes [`FusedTiles::WIDE`].
    pub fn for_network(max_batch: usize, shapes: &[(usize, usize)]) -> FusedTiles {
        let d = FusedTiles::DEFAULT;
        if shapes.iter().any(|&(_, outputs)| (max_batch * outputs) as u64 >= d.tiled_min as u64) {
            FusedTiles::WIDE
        } else if shapes.iter().any(|&(_, outputs)| outputs >= 512) {
            FusedTiles::BIG_ROWS
        } else {
            FusedTiles::for_batch(max_batch)
        }
    }

    /// [`FusedTiles::BIG_ROWS`] for a network with a layer that runs the tiled forward: its k
    /// loop split 2 ways, `output_wide` adding up the slices (at 784-1024-10, batch 256, on the
    /// H200: the forward 21.60 us alone against 27.88 unsplit, 24.59 split 4 ways and 29.56 8
    /// ways, `output_wide` 7.86 against 7.19; a step 62.22 against 69.06; `gpu-layers --sweep
    /// --hidden 1024 --batch 256 --variants "never wide,tiled splits,update B"`,
    /// `results/h200-sweep-1024-b256-splits.txt`).
    const WIDE: FusedTiles = FusedTiles { tiled_splits: 2, ..FusedTiles::BIG_ROWS };

    /// The variants `gpu-layers --sweep` times, each [`FusedTiles::DEFAULT`] with ONE value
    /// changed, as `(what changed, tiles)`; the first is the default itself. The tests run every
    /// fused kernel with each of them.
    pub fn sweep() -> Vec<(String, FusedTiles)> {
        let d = FusedTiles::DEFAULT;
        let mut out = vec![("default".to_string(), d)];
        let mut add = |what: String, t: FusedTiles| {
            if t != d {
                out.push((what, t));
            }
        };
        for v in [16, 64] {
            add(format!("forward TN {v}"), FusedTiles { forward_tn: v, ..d });
        }
        for v in [8, 32] {
            add(format!("forward KS {v}"), FusedTiles { forward_ks: v, ..d });
        }
        for v in [1, 4, 8] {
            add(format!("forward TR {v}"), FusedTiles { forward_tr: v, ..d });
        }
        for v in [4, 16] {
            add(format!("forward U {v}"), FusedTiles { forward_u: v, ..d });
        }
        for v in [64, 128, 512, 1024] {
            add(format!("output WG {v}"), FusedTiles { output_wg: v, ..d });
        }
        for v in [2, 4, 8] {
            add(format!("output rows {v}"), FusedTiles { output_rows: v, ..d });
        }
        for v in [1, 2, 8] {
            add(format!("update slices {v}"), FusedTiles { update_slices: v, ..d });
        }
        add("update T 16".into(), FusedTiles { update_t: 16, ..d });
        // (The split kernel's slices too where 8 would not divide the round's quads.)
        add("update T 64 slices 2".into(), FusedTiles { update_t: 64, update_slices: 2, split_slices: 2, ..d });
        add("update R 32".into(), FusedTiles { update_r: 32, split_slices: 4, ..d });
        add("update R 128".into(), FusedTiles { update_r: 128, ..d });
        add("update params late".into(), FusedTiles { update_preload: false, ..d });
        // 8 x 8 blocks per invocation: 64 multiply-adds per 4 loads of workgroup memory (tiles of
        // 64 with 2 slices, or of 32 with 8: 128 invocations, 32 KiB of workgroup memory).
        add("update B 8 T 64 slices 2".into(), FusedTiles { update_block: 8, update_t: 64, update_slices: 2, split_slices: 2, ..d });
        add("update B 8 slices 8".into(), FusedTiles { update_block: 8, update_slices: 8, ..d });
        for v in [2, 4] {
            add(format!("split slices {v}"), FusedTiles { split_slices: v, ..d });
        }
        add("not merged".into(), FusedTiles { merge: false, ..d });
        add("merged KS 16".into(), FusedTiles { merged_ks: 16, ..d });
        add("merged KS 16 TR 2".into(), FusedTiles { merged_ks: 16, merged_tr: 2, ..d });
        add("merged TN 64 CB 2 KS 16".into(), FusedTiles { merged_tn: 64, merged_cb: 2, merged_ks: 16, ..d });
        add("merged TN 128 CB 1 KS 8".into(), FusedTiles { merged_tn: 128, merged_cb: 1, merged_ks: 8, ..d });
        // linear_forward_tiled on every layer it can take, then one of its sizes changed; and
        // never (linear_forward everywhere).
        let tiled = FusedTiles { tiled_min: 1, ..d };
        add("tiled".into(), tiled);
        add("tiled S 1".into(), FusedTiles { tiled_s: 1, ..tiled });
        add("tiled S 4".into(), FusedTiles { tiled_s: 4, ..tiled });
        add("tiled M 64".into(), FusedTiles { tiled_m: 64, ..tiled });
        add("tiled N 128".into(), FusedTiles { tiled_n: 128, ..tiled });
        add("tiled M 16".into(), FusedTiles { tiled_m: 16, ..tiled });
        for k in [16, 64, 128] {
            add(format!("tiled K {k}"), FusedTiles { tiled_k: k, ..tiled });
        }
        add("never tiled".into(), FusedTiles { tiled_min: u32::MAX, ..d });
        // output_wide on every output layer it can take, and never (output_layer everywhere).
        add("output wide".into(), FusedTiles { wide_min: 1, ..d });
        add("never wide".into(), FusedTiles { wide_min: u32::MAX, ..d });
        // The tiled forward's k loop split over workgroups, output_wide adding up the slices.
        for v in [2, 4, 8] {
            add(format!("tiled splits {v}"), FusedTiles { tiled_splits: v, ..d });
        }
        // Two changes together, for wide layers in big batches: the split forward and the update
        // in 8 x 8 blocks.
        for v in [2, 4] {
            let b8 = FusedTiles { update_block: 8, update_t: 64, update_slices: 2, split_slices: 2, ..d };
            add(format!("tiled splits {v} update B 8 T 64 slices 2"), FusedTiles { tiled_splits: v, ..b8 });
        }
        // The split forward on the tensor cores (`--matmul f16-inputs`; elsewhere these run
        // linear_forward_tiled split as above): 32 x 32 or 32 x 64 outputs per workgroup.
        for v in [2, 4] {
            add(format!("tiled splits {v} coop 32 x 32"), FusedTiles { tiled_splits: v, coop_m: 32, coop_n: 32, ..d });
        }
        add("tiled splits 2 coop 32 x 64".into(), FusedTiles { tiled_splits: 2, coop_m: 32, ..d });
        for v in [1, 2] {
            add(format!("tiled splits 2 coop loads {v}"), FusedTiles { tiled_splits: 2, coop_loads: v, ..d });
        }
        // The update on the tensor cores with one slice per round (128 invocations).
        add("tiled splits 2 coop update slices 1".into(), FusedTiles { tiled_splits: 2, coop_update_slices: 1, ..d });
        out
    }

    /// `linear_update`'s invocations per workgroup: a block of the tile each (`update_block` on a
    /// side), per slice of the batch.
    pub fn update_invocations(&self) -> u32 {
        let blocks = self.update_t / self.update_block.max(1);
        blocks * blocks * self.update_slices
    }

    /// What the (unsplit) `linear_update` with these tiles needs of a device: its invocations;
    /// the round's rows of x and dy or the slices' partial sums, whichever is larger, as vec4;
    /// 11 storage buffers (two layers).
    pub fn update_needs(&self) -> Needs {
        let (t, r, s) = (self.update_t, self.update_r, self.update_slices);
        let vec4s = (2 * r * (t / 4)).max(s * t * (t / 4));
        Needs { invocations: self.update_invocations(), workgroup_bytes: 16 * vec4s, storage_buffers: 11 }
    }

    /// `linear_forward_tiled`'s invocations per workgroup: a 4 x 4 block of outputs each, per
    /// slice of the k rounds.
    pub fn tiled_invocations(&self) -> u32 {
        (self.tiled_m / 4) * (self.tiled_n / 4) * self.tiled_s
    }

    /// What `linear_forward_tiled` with these tiles needs of a device: its invocations; the
    /// round's x and W tiles or the slices' partial sums, whichever is larger, as vec4; the
    /// storage buffers its files declare.
    pub fn tiled_needs(&self) -> Needs {
        let (m, n, k, s) = (self.tiled_m, self.tiled_n, self.tiled_k, self.tiled_s);
        let tiles = m * k / 4 + k * n / 4;
        let partials = (s - 1) * m * n / 4;
        let vec4s = tiles.max(partials).max(1);
        Needs { invocations: self.tiled_invocations(), workgroup_bytes: 16 * vec4s, storage_buffers: 4 }
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
    /// slice (rows padded by 4); 11 storage buffers (two layers).
    pub fn coop_update_needs(&self) -> Needs {
        let (t, s) = (COOP_UPDATE_T, self.coop_update_slices);
        Needs { invocations: 128 * s, workgroup_bytes: 2 * 2 * 32 * (t + 8) + s * 4 * t * (t + 4), storage_buffers: 11 }
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
    /// `output_wide`: at least [`FusedTiles::wide_min`] inputs, at most [`OUTPUT_WIDE_CLASSES`]
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
    /// `output_wide` that adds up its partial sums: [`FusedTiles::tiled_splits`] is above 1, the
    /// forward runs tiled, the output layer wide, and the partial sums (`tiled_splits` times the
    /// forward's output) fit one buffer of the device.
    pub fn splits_k(&self, rows: usize, outputs: usize, classes: usize, limits: &wgpu::Limits) -> bool {
        let bytes = 4 * self.tiled_splits as u64 * rows as u64 * outputs as u64;
        self.tiled_splits > 1
            && self.forward_tiled(rows, outputs, limits)
            && self.output_wide(outputs, classes, limits)
            && bytes <= limits.max_storage_buffer_binding_size.min(limits.max_buffer_size)
    }

    /// What `output_wide` needs of a device: its invocations; the partial logits of every
    /// invocation, the slices' sums and the logits; the storage buffers it declares.
    pub fn output_wide_needs() -> Needs {
        let (wg, c, s) = (OUTPUT_WIDE_WG, OUTPUT_WIDE_CLASSES, OUTPUT_WIDE_SLICES);
        Needs { invocations: wg, workgroup_bytes: 4 * (c * wg + c * s + c), storage_buffers: 8 }
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
        while t.update_invocations() > max_invocations && t.update_slices > 1 {
            t.update_slices /= 2;
        }
        while (t.update_t / 4) * (t.update_t / 4) * t.split_slices > max_invocations && t.split_slices > 1 {
            t.split_slices /= 2;
        }
        while t.merged_tn * t.merged_ks > max_invocations && t.merged_ks > 1 {
            t.merged_ks /= 2;
        }
        while t.tiled_invocations() > max_invocations && t.tiled_s > 1 {
            t.tiled_s /= 2;
        }
        t
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

    /// Whether a gathered step whose first hidden layer runs merged (`forward_output`) runs
    /// split on a device with `limits` ([`FusedTiles::split`]): the tiles say so, and the device
    /// allows what the two split kernels need ([`FusedTiles::split_fitted`]).
    pub fn splits(&self, limits: &wgpu::Limits) -> bool {
        self.split && self.split_fitted(limits).is_some()
    }

    /// The tiles the split kernels are built with on a device with `limits`: [`FusedTiles::fitted`],
    /// with `split_slices` halved until the split update fits the device's workgroup memory (8
    /// slices take 44 KiB, which the H200's 48 KiB allow and lavapipe's 32 KiB do not: there it
    /// takes 4); `None` where even one slice, or the other needs, do not fit.
    pub fn split_fitted(&self, limits: &wgpu::Limits) -> Option<FusedTiles> {
        let mut t = self.fitted(limits.max_compute_invocations_per_workgroup);
        let fits = |n: &Needs| {
            n.invocations <= limits.max_compute_invocations_per_workgroup
                && n.workgroup_bytes <= limits.max_compute_workgroup_storage_size
                && n.storage_buffers <= limits.max_storage_buffers_per_shader_stage
        };
        while !fits(&t.split_needs()[1]) && t.split_slices > 1 {
            t.split_slices /= 2;
        }
        t.split_needs().iter().all(fits).then_some(t)
    }

    /// What the split step's two kernels need of a device (a test checks it against naga):
    /// `forward_output` gathering plus the partial sums (one storage buffer more); and
    /// `linear_update` of two layers (with `split_slices` batch slices) plus the images, the
    /// order, the partial sums and the next batch's rows (15 storage buffers), with the next batch's chunk `[NEXT_R][T]` and the moved tile `[T][T]` in
    /// workgroup memory beside its own.
    pub fn split_needs(&self) -> [Needs; 2] {
        let forward = self.merged_needs(true);
        // The split update is the unsplit one in 4 x 4 blocks with `split_slices` slices, plus
        // its last phase.
        let unsplit = FusedTiles { update_slices: self.split_slices, update_block: 4, ..*self }.update_needs();
        let t = self.update_t;
        let update = Needs {
            invocations: unsplit.invocations,
            workgroup_bytes: unsplit.workgroup_bytes + 4 * (SPLIT_NEXT_R * t + t * t),
            storage_buffers: 15,
        };
        [Needs { storage_buffers: forward.storage_buffers + 1, ..forward }, update]
    }

    /// Errors unless every kernel can be built with these sizes (`max_invocations`: the
    /// adapter's limit per workgroup).
    pub fn check(&self, max_invocations: u32) -> Result<(), String> {
        let t = self;
        let pow2 = |v: u32| v.is_power_of_two();
        let fail = |what: String| Err(format!("fused tiles {t:?}: {what}"));
        if t.forward_tn == 0 || t.forward_ks == 0 || t.forward_tr == 0 || t.forward_u == 0 || t.forward_tr > 16 || t.forward_u > 32 {
            return fail("linear_forward needs TN, KS >= 1, 1 <= TR <= 16, 1 <= U <= 32".into());
        }
        let (ut, ur) = (t.update_t, t.update_r);
        if ![4, 8].contains(&t.update_block) || t.update_block > ut / 2 {
            return fail("linear_update needs blocks of 4 or 8, at most half its tile side".into());
        }
        if ![32, 64].contains(&t.coop_m) || ![32, 64].contains(&t.coop_n) || t.coop_loads > 2 {
            return fail("linear_forward_coop takes 32 or 64 rows and columns per workgroup, and loads 0, 1 or 2".into());
        }
        if ![1, 2].contains(&t.coop_update_slices) {
            return fail("linear_update_coop takes 1 or 2 slices of each round".into());
        }
        if !(1..=16).contains(&t.tiled_splits) {
            return fail("linear_forward_tiled splits its k loop 1 to 16 ways".into());
        }
        for (us, ub) in [(t.update_slices, t.update_block), (t.split_slices, 4)] {
            let update_threads = (ut / ub) * (ut / ub) * us;
            if !pow2(us) || us > 8 || ![16, 32, 64].contains(&ut) || ![32, 64, 128].contains(&ur) || !(ur * ut / 4).is_multiple_of(update_threads) {
                return fail(format!(
                    "linear_update needs 1, 2, 4 or 8 slices (split or not), T of 16, 32 or 64, 32, 64 or 128 rows per round, and its \
                     {update_threads} invocations to divide the round's {} quads",
                    ur * ut / 4
                ));
            }
        }
        if t.output_rows == 0 || t.output_rows > t.output_wg {
            return fail("output_layer needs 1 <= rows <= invocations".into());
        }
        if t.merged_tn == 0 || t.merged_ks == 0 || !(1..=8).contains(&t.merged_cb) || !(1..=16).contains(&t.merged_tr) {
            return fail("forward_output needs TN, KS >= 1, 1 <= CB <= 8, 1 <= TR <= 16".into());
        }
        let (m, n, k, s) = (t.tiled_m, t.tiled_n, t.tiled_k, t.tiled_s);
        let threads = t.tiled_invocations();
        let whole = |v: u32| threads > 0 && v.is_multiple_of(threads);
        let shapes = m > 0 && n > 0 && m.is_multiple_of(4) && n.is_multiple_of(4) && [16, 32, 64, 128].contains(&k);
        if !shapes || ![1, 2, 4, 8].contains(&s) || s > k / 4 || !whole(m * k) || !whole(k * n) || threads < m {
            return fail(format!(
                "linear_forward_tiled needs M and N multiples of 4, K of 16, 32, 64 or 128, 1, 2, 4 or 8 slices (at most K / 4), \
                 and its {threads} invocations to divide both tiles ({m} x {k} and {k} x {n}) and to be at least M"
            ));
        }
        for (name, n) in [
            ("linear_forward", t.forward_tn * t.forward_ks),
            ("output_layer", t.output_wg),
            ("linear_update", t.update_invocations()),
        ] {
            if n > max_invocations {
                return fail(format!("{name} needs {n} invocations per workgroup; the adapter allows {max_invocations}"));
            }
        }
        Ok(())
    }
}

// ---- sizes chosen from the device's limits ---------------------------------------------------

/// The kernel sizes that depend on the device. WebGPU guarantees only 256 invocations, 16 KiB
/// of workgroup memory and 8 storage buffers per shader stage, and a browser may offer no more;
/// native adapters offer 1,024, 32-48 KiB and dozens, where the larger choices are faster. The
/// results are the same either way: only how large a layer `output_layer` and the gathering
/// `linear_forward` stage in workgroup memory (784-128-10 is staged with both) and whether
/// `linear_update` takes two layers per dispatch change here; how many invocations the fused
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
    /// Two layers per `linear_update` dispatch (11 storage buffers), or one (6).
    pub linear_update_pairs: bool,
}

impl DeviceFit {
    /// The larger choices, which every native adapter of this project allows (lavapipe, the
    /// H200).
    pub const LARGE: Self =
        Self { output_w_shared: 4096, output_h_shared: 1024, forward_x_shared: 4096, linear_update_pairs: true };
    /// What [`DeviceFit::LARGE`]'s kernels need with [`FusedTiles::DEFAULT`], each the most of
    /// any kernel: 512 invocations per workgroup (`linear_forward`), 25,600 bytes of workgroup
    /// memory (`output_layer`) and 11 storage buffers (`linear_update`). A test measures all
    /// three with naga.
    pub const LARGE_NEEDS: Needs = Needs { invocations: 512, workgroup_bytes: 25_600, storage_buffers: 11 };
    /// The choices within WebGPU's default limits (with [`FusedTiles::fitted`] to 256
    /// invocations).
    pub const WEBGPU_DEFAULTS: Self =
        Self { output_w_shared: 2048, output_h_shared: 512, forward_x_shared: 2048, linear_update_pairs: false };

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
            linear_update_pairs: limits.max_storage_buffers_per_shader_stage >= needs.storage_buffers,
        }
    }
}

/// What a set of kernels needs of a device, per workgroup or per dispatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Needs {
    pub invocations: u32,
    pub workgroup_bytes: u32,
    pub storage_buffers: u32,
}

// ---- the counters tensor ----------------------------------------------------------------------

/// The counters tensor: `[loss low, loss high, rows, correct, bad labels, non-finite, step, 0]`.
/// The loss sum is a 64-bit fixed-point number in units of 2^-20 (see `cpu::loss_to_fixed`).
pub const COUNTERS: usize = 8;
pub(crate) const COUNTER_LOSS_LO: usize = 0;
pub(crate) const COUNTER_LOSS_HI: usize = 1;
pub(crate) const COUNTER_ROWS: usize = 2;
pub(crate) const COUNTER_CORRECT: usize = 3;
pub(crate) const COUNTER_BAD_LABELS: usize = 4;
pub(crate) const COUNTER_NON_FINITE: usize = 5;
pub(crate) const COUNTER_STEP: usize = 6;

// ---- codes -------------------------------------------------------------------------------------

/// `Opt::kind` / `OPT_*` in WGSL.
pub(crate) const OPT_SGD: u32 = 0;
pub(crate) const OPT_ADAM: u32 = 1;

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

/// `activation_forward.wgsl`, `activation_backward.wgsl` and their out-of-place twins
/// `activation_copy_*.wgsl`: `[batch, cols]`, an `ACT_*` code.
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct LinearParams {
    pub inputs: u32,
    pub outputs: u32,
    pub act: u32,
    /// `linear_forward_tiled`: the workgroups its k loop is split over (grid z), each writing
    /// raw partial sums for `output_wide`; 0 or 1: not split, it writes `act(x W + b)`.
    pub k_split: u32,
}

/// `output_layer.wgsl`: `h: [batch, inputs]` -> `[batch, classes]`, a `MODE_*` code, the
/// `ACT_*` code of `h` (`ACT_NONE`: no layer below, no `dh`) and the rows each workgroup takes.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
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
}

/// `forward_output.wgsl`: the output layer's fields as in [`OutputLayerParams`] (h's width,
/// classes, a `MODE_*` code, the `ACT_*` code for dh), then the hidden layer's: x's width and
/// its activation.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct ForwardOutputParams {
    pub inputs: u32,
    pub classes: u32,
    pub mode: u32,
    pub hidden_act: u32,
    pub x_inputs: u32,
    pub act: u32,
    /// The split step: rows per k-tile of the partial sums (the tape's largest batch).
    pub partial_rows: u32,
    pub _pad: u32,
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
}

impl Opt {
    /// Where `lr` sits in `Opt`, and so in `Update` (which starts with one).
    pub const LR_OFFSET: u64 = std::mem::offset_of!(Opt, lr) as u64;

    pub fn new(opt: Optimizer, count: usize, inputs: usize, outputs: usize) -> Self {
        let (kind, lr, beta1, beta2, eps) = match opt {
            Optimizer::Sgd { lr, momentum } => (OPT_SGD, lr, momentum, 0.0, 0.0),
            Optimizer::Adam { lr, beta1, beta2, eps } => (OPT_ADAM, lr, beta1, beta2, eps),
        };
        Self { count: count as u32, inputs: inputs as u32, outputs: outputs as u32, kind, lr, beta1, beta2, eps }
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

/// `Update` (`linear_update.wgsl`): the optimizer, up to two layers, and the split step's part.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct Update {
    pub opt: Opt,
    pub a: LayerShape,
    pub b: LayerShape,
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

/// `(WGSL struct name, size of the Rust twin)` for every uniform struct, for the layout test.
#[cfg(test)]
pub(crate) const UNIFORMS: [(&str, usize); 16] = [
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

    /// Parses and validates `src` with naga, as wgpu would.
    fn compile(name: &str, src: &str) -> naga::Module {
        let module = naga::front::wgsl::parse_str(src).unwrap_or_else(|e| panic!("{name}: {}", e.emit_to_string(src)));
        naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::all())
            .validate(&module)
            .unwrap_or_else(|e| panic!("{name}: {e:?}"));
        module
    }

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
                    assert_eq!(layouter[handle].size as usize, size, "{}: WGSL struct {name} vs its Rust twin", id.name());
                    seen.insert(name.to_string());
                }
            }
        }
        for (name, _) in UNIFORMS {
            assert!(seen.contains(name), "no kernel declares the uniform struct {name}");
        }
    }

    /// lavapipe's limits (the CI machine's adapter): 1,024 invocations, 32 KiB of workgroup
    /// memory, storage buffers without a practical limit.
    fn lavapipe_limits() -> wgpu::Limits {
        wgpu::Limits {
            max_compute_invocations_per_workgroup: 1024,
            max_compute_workgroup_storage_size: 32768,
            max_storage_buffers_per_shader_stage: 1 << 20,
            ..wgpu::Limits::defaults()
        }
    }

    /// What a compiled kernel needs: invocations per workgroup, bytes of workgroup memory, and
    /// storage buffers bound.
    fn needs(module: &naga::Module) -> Needs {
        let mut layouter = naga::proc::Layouter::default();
        layouter.update(module.to_ctx()).unwrap();
        let globals = || module.global_variables.iter().map(|(_, v)| v);
        Needs {
            invocations: module.entry_points.iter().map(|e| e.workgroup_size.iter().product::<u32>()).max().unwrap_or(0),
            workgroup_bytes: globals().filter(|v| v.space == naga::AddressSpace::WorkGroup).map(|v| layouter[v.ty].size).sum(),
            storage_buffers: globals().filter(|v| matches!(v.space, naga::AddressSpace::Storage { .. })).count() as u32,
        }
    }

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
            // The split step's kernels run only where FusedTiles::splits allows them (below).
            // output_wide runs only where FusedTiles::output_wide allows it (below).
            // linear_forward_coop runs only on adapters with cooperative matrices (native ones).
            let conditional = |id: &KernelId| {
                id.name().starts_with("forward_output") || id.is_split() || *id == KernelId::OutputWide || id.needs_cooperative_matrix()
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
        assert_eq!((fit.output_w_shared, fit.forward_x_shared, fit.linear_update_pairs), (4096, 4096, false));
        let webgpu_tiles = FusedTiles::DEFAULT.fitted(256);
        assert_eq!((webgpu_tiles.forward_ks, webgpu_tiles.output_wg, webgpu_tiles.update_slices), (8, 256, 4));
    }

    #[test]
    fn merged_needs_say_what_forward_output_needs_and_lavapipe_runs_it() {
        for (what, tiles) in FusedTiles::sweep() {
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
        for (what, tiles) in FusedTiles::sweep() {
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
        assert!(d.splits(&lavapipe));
        // 8 batch slices (44 KiB) on the H200's 48 KiB, 4 (28 KiB) on lavapipe's 32 KiB.
        let h200 = wgpu::Limits { max_compute_workgroup_storage_size: 49152, ..lavapipe.clone() };
        assert_eq!(d.split_fitted(&h200).map(|t| t.split_slices), Some(8));
        assert_eq!(d.split_fitted(&lavapipe).map(|t| t.split_slices), Some(4));
        assert!(!d.splits(&defaults));
        assert!(!d.splits(&wgpu::Limits { max_storage_buffers_per_shader_stage: 14, ..lavapipe.clone() }));
        assert!(!FusedTiles { split: false, ..d }.splits(&lavapipe));
    }

    #[test]
    fn a_network_with_a_layer_of_512_outputs_takes_the_big_batch_forward_and_output_tiles() {
        let mnist = [(784, 128), (128, 10)];
        let two = [(784, 512), (512, 256), (256, 10)];
        assert_eq!(FusedTiles::for_network(64, &mnist), FusedTiles::DEFAULT);
        assert_eq!(FusedTiles::for_network(64, &[(784, 256), (256, 10)]), FusedTiles::DEFAULT);
        let big = FusedTiles::for_network(64, &two);
        assert_eq!((big.forward_tr, big.output_wg), (4, 512));
        assert_eq!(big, FusedTiles { forward_tr: 4, output_wg: 512, ..FusedTiles::DEFAULT });
        assert_eq!(FusedTiles::for_network(256, &mnist), FusedTiles::for_batch(256));
        assert_eq!(FusedTiles::for_network(17, &two), big);
        // 784-1024-10 at batch 256: the tiled forward, split over k.
        let wide = FusedTiles::for_network(256, &[(784, 1024), (1024, 10)]);
        assert_eq!(wide, FusedTiles { tiled_splits: 2, ..big });
        assert!(wide.splits_k(256, 1024, 10, &lavapipe_limits()));
    }

    #[test]
    fn tiled_needs_say_what_linear_forward_tiled_needs_and_which_layers_take_it() {
        for (what, tiles) in FusedTiles::sweep() {
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
        for (what, tiles) in FusedTiles::sweep() {
            let id = KernelId::LinearForwardCoop;
            let n = needs(&compile(id.name(), &id.source(&tiles, DeviceFit::LARGE)));
            assert_eq!(n, tiles.coop_forward_needs(), "{} with {what}", id.name());
        }
        let id = KernelId::LinearUpdateCoop;
        for s in [1, 2] {
            let tiles = FusedTiles { coop_update_slices: s, ..FusedTiles::DEFAULT };
            let n = needs(&compile(id.name(), &id.source(&tiles, DeviceFit::LARGE)));
            assert_eq!(n, tiles.coop_update_needs(), "{} with {s} slices", id.name());
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
        for (what, tiles) in FusedTiles::sweep() {
            let id = KernelId::LinearUpdate;
            let n = needs(&compile(id.name(), &id.source(&tiles, DeviceFit::LARGE)));
            assert_eq!(n, tiles.update_needs(), "{} with {what}", id.name());
        }
        // 8 x 8 blocks in tiles of 64 with 4 slices would take 64 KiB: more than any device here.
        let big = FusedTiles { update_block: 8, update_t: 64, ..FusedTiles::DEFAULT };
        assert_eq!(big.update_needs().workgroup_bytes, 65536);
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
        let update = Update { opt, a: none, b: none, split: Split::NONE };
        let bytes = bytemuck::bytes_of(&update);
        assert_eq!(f32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()), 0.25);
    }
}
