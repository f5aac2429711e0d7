//! The numbered kernels: which WGSL file each one is, its tile shape, and how a tile shape
//! becomes WGSL.
//!
//! Every shader in `shaders/NN_name.wgsl` is plain, valid WGSL with default values in `const`
//! lines (`const BM: u32 = 64u;`). Before compiling, [`specialize`] rewrites those lines with
//! the tile shape and the transpose flags asked for, so one file gives every configuration the
//! tuner tries, and naga sees true constants (loops over `TM` unroll, arrays get fixed sizes).

use std::fmt;

use common::GpuContext;

use crate::{Checks, MatmulError, Transpose};

/// The GPU kernels, numbered like their shader files and the runner's command line
/// (`cargo run --release -p gpu-matmul -- 3`). Number 0 on the command line is the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kernel {
    /// `01_naive.wgsl`: one invocation per output element, straight from memory.
    Naive = 1,
    /// `02_tiled.wgsl`: square tiles of A and B staged in workgroup memory.
    Tiled = 2,
    /// `03_blocked2d.wgsl`: each invocation computes a TM x TN block in registers.
    Blocked2d = 3,
    /// `04_vec4.wgsl`: vec4 loads and stores, A staged transposed, strided ownership.
    Vec4 = 4,
    /// `05_double_buffered.wgsl`: kernel 04 with double-buffered tiles.
    DoubleBuffered = 5,
    /// `06_coop_matrix.wgsl`: tensor cores (cooperative matrices), f16 inputs, f32 accumulation.
    /// Only where the adapter has them ([`common::GpuContext::has_cooperative_matrix`]).
    CoopMatrix = 6,
    /// `07_warp_tiled.wgsl`: kernel 05 with warp tiles, 16-deep k-steps and a swizzled order.
    WarpTiled = 7,
    /// `08_coop_f16.wgsl`: tensor cores fed from f16 copies of the operands (made by two
    /// conversion passes in the same call), 128-bit staging, up to 64 x 64 of C per subgroup.
    CoopF16 = 8,
}

/// What a product may round its inputs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Precision {
    /// f32 inputs, f32 arithmetic: every adapter, results within `Kernel::tolerance` of f64.
    F32,
    /// Inputs rounded to f16 (relative error 2^-11 each), products summed in f32: tensor
    /// cores, where the adapter has cooperative matrices.
    F16Inputs,
}

/// How far the f16 copies kernel 08 makes (op(A) as [k][m], op(B) as [k][n]) are padded with
/// zeros: m and n to multiples of `F16_PAD_MN`, k to multiples of `F16_PAD_K`, so that every tile the
/// product loads lies inside them (every `bm`, `bn` of its tiles divides `F16_PAD_MN` and every
/// `bk` divides `F16_PAD_K`). Written into the shader by [`Kernel::constants`].
pub const F16_PAD_MN: u32 = 256;
/// See [`F16_PAD_MN`].
pub const F16_PAD_K: u32 = 64;

/// A `Matmul` made with [`crate::Matmul::new`] picks the first tile of a kernel's ladder that
/// still gives at least this many workgroups (about two per multiprocessor on the H200's 132),
/// so that smaller products keep the GPU busy; with none, the smallest tile.
pub const MIN_WORKGROUPS: u32 = 256;

impl Kernel {
    /// Every GPU kernel, in order.
    pub const ALL: [Kernel; 8] = [
        Kernel::Naive,
        Kernel::Tiled,
        Kernel::Blocked2d,
        Kernel::Vec4,
        Kernel::DoubleBuffered,
        Kernel::CoopMatrix,
        Kernel::WarpTiled,
        Kernel::CoopF16,
    ];

    /// The fastest f32 kernel: runs on every adapter, handles every shape and transpose, and
    /// rounds nothing to f16. On the H200 kernel 07 ties with kernel 05 on large products (within
    /// 2%, either way) and loses on MNIST's small ones (results/h200-run.txt), so this stays
    /// kernel 05. Kernels 06 and 08 are faster where they exist, at f16 input precision
    /// ([`Kernel::BEST_F16_INPUTS`]).
    pub const BEST: Kernel = Kernel::DoubleBuffered;

    /// The fastest kernel that rounds its inputs to f16 (tensor cores). It runs only where
    /// [`crate::coop_support`] says so; [`Kernel::fastest`] picks it or [`Kernel::BEST`].
    pub const BEST_F16_INPUTS: Kernel = Kernel::CoopF16;

    /// The fastest kernel this adapter runs at `precision`: [`Kernel::BEST_F16_INPUTS`] for
    /// [`Precision::F16Inputs`] where the adapter has the cooperative matrices it needs, else
    /// [`Kernel::BEST`]. `Matmul::new(ctx, Kernel::fastest(ctx, p))` is what later stages call.
    pub fn fastest(ctx: &GpuContext, precision: Precision) -> Kernel {
        match precision {
            Precision::F16Inputs if crate::coop_support(ctx).is_ok() => Kernel::BEST_F16_INPUTS,
            _ => Kernel::BEST,
        }
    }

    /// The precision of this kernel's results.
    pub fn precision(self) -> Precision {
        if self.needs_cooperative_matrix() { Precision::F16Inputs } else { Precision::F32 }
    }

    /// The number in the file name, the enum and the command line.
    pub fn number(self) -> u32 {
        self as u32
    }

    /// The kernel with this number, if there is one (0 is the CPU, not a `Kernel`).
    pub fn from_number(n: u32) -> Option<Kernel> {
        Self::ALL.into_iter().find(|k| k.number() == n)
    }

    /// Short name, as in the file name.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Naive => "naive",
            Kernel::Tiled => "tiled",
            Kernel::Blocked2d => "blocked2d",
            Kernel::Vec4 => "vec4",
            Kernel::DoubleBuffered => "double_buffered",
            Kernel::CoopMatrix => "coop_matrix",
            Kernel::WarpTiled => "warp_tiled",
            Kernel::CoopF16 => "coop_f16",
        }
    }

    /// The shader file, relative to `03-gpu-matmul/shaders/`.
    pub fn file(self) -> String {
        format!("{:02}_{}.wgsl", self.number(), self.name())
    }

    /// The WGSL source as written in the file (defaults not yet specialized).
    pub fn source(self) -> &'static str {
        match self {
            Kernel::Naive => include_str!("../shaders/01_naive.wgsl"),
            Kernel::Tiled => include_str!("../shaders/02_tiled.wgsl"),
            Kernel::Blocked2d => include_str!("../shaders/03_blocked2d.wgsl"),
            Kernel::Vec4 => include_str!("../shaders/04_vec4.wgsl"),
            Kernel::DoubleBuffered => include_str!("../shaders/05_double_buffered.wgsl"),
            Kernel::CoopMatrix => include_str!("../shaders/06_coop_matrix.wgsl"),
            Kernel::WarpTiled => include_str!("../shaders/07_warp_tiled.wgsl"),
            Kernel::CoopF16 => include_str!("../shaders/08_coop_f16.wgsl"),
        }
    }

    /// Whether this kernel needs cooperative matrices (tensor cores).
    pub fn needs_cooperative_matrix(self) -> bool {
        matches!(self, Kernel::CoopMatrix | Kernel::CoopF16)
    }

    /// Whether a call runs passes that convert the operands to f16 copies before the product
    /// (kernel 08: entry points `to_f16_a` and `to_f16_b` of the same shader).
    pub fn converts_to_f16(self) -> bool {
        self == Kernel::CoopF16
    }

    /// Whether this kernel reads and writes `vec4<f32>`, so that every row stride must be a
    /// multiple of 4 floats. On other operands `Matmul` runs [`Kernel::Blocked2d`] with the
    /// same tile instead (and says so in [`crate::MatmulCall::kernel`]).
    pub fn needs_vec4_rows(self) -> bool {
        matches!(self, Kernel::Vec4 | Kernel::DoubleBuffered | Kernel::WarpTiled | Kernel::CoopMatrix)
    }

    /// The runtime checks the pipeline is compiled with by default. Kernels 03 on guard every
    /// global access themselves and index their arrays with constants, so they drop naga's
    /// checks (`create_shader_module_trusted`): on the H200 the checks made kernels 03-05 13 to
    /// 36 times slower (the README's checks table). 01 and 02 keep wgpu's default.
    pub fn default_checks(self) -> Checks {
        match self {
            Kernel::Naive | Kernel::Tiled => Checks::All,
            _ => Checks::None,
        }
    }

    /// The tolerance a result of this kernel must meet against the f64 CPU reference, for an
    /// inner dimension `k`: `|gpu - ref| <= abs + rel * |ref|` per element, NaN failing.
    ///
    /// f32 kernels: each of the `k` fused multiply-adds rounds with relative error 2^-24, and
    /// for inputs in [-1, 1] the partial sums stay below `k`; `abs = 2e-6 * k` leaves a wide
    /// margin over the error random rounding gives (about sqrt(k) * 2^-24 * |sum|) while a
    /// single wrong or missing term (of size ~0.1 or more) still fails.
    ///
    /// Kernels 06 and 08 round their inputs to f16 (relative error up to 2^-11 each), so each product
    /// is off by up to ~1e-3 of its size, at random: for inputs in [-1, 1] the sum's error has
    /// a standard deviation of about 1e-4 * sqrt(k); `abs = 2e-3 * sqrt(k)` is 20 of those,
    /// still far below the error of one missing 16-wide fragment (about 1).
    pub fn tolerance(self, k: usize) -> (f64, f64) {
        let k = k.max(1) as f64;
        match self {
            Kernel::CoopMatrix | Kernel::CoopF16 => (1e-3, 2e-3 * k.sqrt()),
            _ => (1e-4, 2e-6 * k),
        }
    }

    /// The tile shape used by [`crate::Matmul::new`] for large products.
    pub fn default_tile(self) -> Tile {
        self.tile_ladder()[0]
    }

    /// The tiles [`crate::Matmul::new`] chooses from, largest first: the first that gives at
    /// least [`MIN_WORKGROUPS`] workgroups for the shape at hand, else the last.
    pub fn tile_ladder(self) -> Vec<Tile> {
        let t = Tile::new;
        match self {
            Kernel::Naive => vec![t(16, 16, 1, 1, 1)],
            Kernel::Tiled => vec![t(16, 16, 16, 1, 1)],
            // Chosen from `--tune` on the H200 (see the README): the best tile at n = 4096 first,
            // then the best where that one leaves too few workgroups.
            Kernel::Blocked2d => vec![t(128, 128, 8, 8, 8), t(64, 64, 8, 4, 4), t(32, 32, 8, 2, 2), t(16, 16, 8, 1, 1)],
            Kernel::Vec4 => vec![t(128, 64, 16, 8, 4), t(64, 64, 16, 4, 4), t(32, 32, 8, 4, 4)],
            Kernel::DoubleBuffered => {
                vec![t(128, 128, 8, 16, 8), t(128, 64, 16, 8, 4), t(64, 64, 16, 4, 4), t(32, 32, 8, 4, 4)]
            }
            // tm x tn here is one subgroup's block of 16 x 16 fragments.
            Kernel::CoopMatrix => vec![t(128, 256, 16, 64, 64), t(128, 128, 32, 64, 32), t(64, 64, 32, 32, 32)],
            // Chosen from `--tune` on the H200 (results/h200-sweep-1.txt, h200-tune-07.txt).
            Kernel::WarpTiled => vec![
                t(128, 128, 8, 16, 8).warp(64, 64).group(8),
                t(64, 64, 16, 4, 8).warp(32, 32).group(8),
                t(32, 32, 16, 4, 8).warp(32, 32),
            ],
            // tm x tn is the fragment; wm x wn one subgroup's block of fragments.
            // The best tile of `--tune` on the H200 (results/h200-tune-08-s1-direct.txt): one
            // buffer, 32-deep k-steps.
            Kernel::CoopF16 => vec![
                t(128, 128, 32, 16, 16).warp(64, 64).group(8).stages(1),
                t(64, 64, 32, 16, 16).warp(32, 32).group(8).stages(2),
            ],
        }
    }

    /// The tiles of [`Kernel::Blocked2d`] that stand in for a vec4 kernel when the operands'
    /// row strides are not multiples of 4 (the same tiles where they fit kernel 03).
    pub fn scalar_ladder(self) -> Vec<Tile> {
        match self {
            Kernel::Vec4 | Kernel::DoubleBuffered => self.tile_ladder(),
            _ => Kernel::Blocked2d.tile_ladder(),
        }
    }

    /// Tile shapes the runner's `--tune` mode tries: the ladder, then other candidates
    /// (each once).
    pub fn tune_tiles(self) -> Vec<Tile> {
        let t = Tile::new;
        let extra = match self {
            Kernel::Naive => vec![t(8, 8, 1, 1, 1), t(8, 32, 1, 1, 1), t(4, 64, 1, 1, 1)],
            Kernel::Tiled => vec![t(8, 8, 8, 1, 1), t(32, 32, 32, 1, 1)],
            Kernel::Blocked2d => vec![t(64, 64, 16, 4, 4), t(128, 64, 8, 8, 4), t(128, 128, 8, 16, 8)],
            Kernel::Vec4 | Kernel::DoubleBuffered => vec![
                t(128, 128, 16, 8, 8),
                t(128, 64, 16, 8, 4),
                t(64, 128, 16, 4, 8),
                t(64, 64, 16, 4, 4),
                t(64, 64, 8, 8, 8),
                t(128, 256, 8, 8, 16),
                t(256, 128, 8, 16, 8),
                t(128, 128, 8, 8, 4),
                t(128, 64, 8, 8, 8),
                t(64, 128, 8, 8, 8),
                t(128, 128, 4, 8, 8),
                t(128, 128, 8, 8, 8),
            ],
            Kernel::CoopMatrix => vec![
                t(128, 128, 32, 64, 64),
                t(128, 128, 16, 64, 32),
                t(256, 128, 16, 64, 64),
                t(128, 64, 32, 64, 32),
                t(64, 128, 32, 32, 64),
            ],
            // Warp tiles of 32 invocations as 8 x 4 or 4 x 8; k-steps of 8, 16 and 32; 128 or
            // 256 invocations; swizzle groups of 1 (none), 8 and 16.
            Kernel::WarpTiled => vec![
                t(128, 128, 16, 8, 8).warp(64, 32).group(8),
                t(128, 128, 16, 16, 8).warp(64, 64).group(8),
                t(128, 128, 8, 8, 8).warp(64, 32).group(8),
                t(128, 128, 8, 8, 8).warp(32, 64).group(8),
                t(128, 128, 8, 8, 16).warp(64, 64).group(8),
                t(128, 128, 4, 16, 8).warp(64, 64).group(8),
                t(128, 64, 8, 16, 8).warp(64, 64).group(8),
                t(64, 128, 8, 8, 16).warp(64, 64).group(8),
                t(256, 128, 8, 16, 8).warp(64, 64).group(8),
                t(128, 128, 8, 16, 8).warp(64, 64),
                t(128, 128, 8, 16, 8).warp(64, 64).group(16),
            ],
            // Subgroup blocks of 64 x 64 and 64 x 32; k-steps of 16, 32 and 64; one buffer (two
            // barriers per step) or two (one barrier), or none (direct: fragments loaded from
            // the copies, no barriers); 4 or 8 subgroups; swizzle groups of 1 (none), 8 and 16;
            // fragments loaded one sub-step ahead from workgroup memory (`pf`) or not.
            Kernel::CoopF16 => vec![
                t(128, 128, 64, 16, 16).warp(64, 64).group(8).stages(1),
                t(128, 128, 16, 16, 16).warp(64, 64).group(8).stages(2),
                t(128, 128, 32, 16, 16).warp(64, 64).stages(1),
                t(128, 128, 32, 16, 16).warp(64, 64).group(16).stages(1),
                t(128, 64, 32, 16, 16).warp(64, 64).group(8).stages(1),
                t(64, 128, 32, 16, 16).warp(64, 64).group(8).stages(1),
                t(128, 128, 32, 16, 16).warp(64, 32).group(8).stages(1),
                t(128, 128, 32, 16, 16).warp(32, 64).group(8).stages(1),
                t(128, 128, 32, 16, 16).warp(64, 64).group(8).stages(2),
                t(128, 256, 32, 16, 16).warp(64, 64).group(8).stages(1),
                t(256, 128, 32, 16, 16).warp(64, 64).group(8).stages(1),
                t(128, 256, 16, 16, 16).warp(64, 64).group(8).stages(2),
                t(256, 128, 16, 16, 16).warp(64, 64).group(8).stages(2),
                t(128, 256, 32, 16, 16).warp(64, 32).group(8).stages(1),
                t(128, 128, 64, 16, 16).warp(64, 32).group(8).stages(1),
                t(128, 128, 16, 16, 16).warp(64, 64).stages(2),
                t(128, 128, 16, 16, 16).warp(64, 64).group(16).stages(2),
                t(128, 128, 16, 16, 16).warp(64, 64).group(8).direct(),
                t(128, 128, 32, 16, 16).warp(64, 64).group(8).direct(),
                t(128, 256, 32, 16, 16).warp(64, 64).group(8).direct(),
                t(64, 128, 32, 16, 16).warp(32, 64).group(8).direct(),
                // Fragment prefetch (`pf`): the next 16-deep sub-step's fragments are loaded from
                // workgroup memory before this one's multiply-adds. On the H200: 184 TFLOP/s
                // against 240-245 for the ladder's tile at n = 4096, +2 % for the 64-deep one
                // (results/h200-tune-08-pf.txt).
                t(128, 128, 32, 16, 16).warp(64, 64).group(8).stages(1).prefetch(),
                t(128, 128, 64, 16, 16).warp(64, 64).group(8).stages(1).prefetch(),
                t(128, 128, 32, 16, 16).warp(64, 64).group(8).stages(2).prefetch(),
                t(128, 128, 16, 16, 16).warp(64, 64).group(8).stages(2).prefetch(),
                // Early fetch (`ef`): with one buffer, the next step's global loads are issued
                // right after this step's tile is stored, before the barrier, instead of after it.
                // On the H200: 227-232 TFLOP/s against 240-245 for the ladder's tile at n = 4096
                // (results/h200-tune-08-ef.txt).
                t(128, 128, 32, 16, 16).warp(64, 64).group(8).stages(1).early(),
                t(128, 128, 32, 16, 16).warp(64, 64).stages(1).early(),
                t(128, 128, 64, 16, 16).warp(64, 64).group(8).stages(1).early(),
                t(128, 128, 64, 16, 16).warp(64, 64).group(8).stages(1).prefetch().early(),
                // 16-deep steps with one buffer, whose tiles in flight take half the registers of
                // 32-deep ones. On the H200: 149 TFLOP/s against 281 for the product
                // (results/h200-tune-08-il.txt).
                t(128, 128, 16, 16, 16).warp(64, 64).stages(1),
                // Each step's tiles copied at its start (`sc`): no registers held for tiles in
                // flight (the ladder's tile takes 228 registers per invocation on the H200, so two
                // workgroups of 128 fit a multiprocessor; at most 168 would let three in).
                t(128, 128, 32, 16, 16).warp(64, 64).group(8).stages(1).sync(),
                t(128, 128, 32, 16, 16).warp(64, 64).stages(1).sync(),
                t(128, 128, 64, 16, 16).warp(64, 64).group(8).stages(1).sync(),
                t(128, 128, 16, 16, 16).warp(64, 64).group(8).stages(1).sync(),
                t(64, 128, 32, 16, 16).warp(64, 64).group(8).stages(1).sync(),
                t(128, 256, 32, 16, 16).warp(64, 64).group(8).stages(1).sync(),
                // One vec4<f16> per invocation and load, neighbours in neighbouring lanes (`ln`),
                // instead of two side by side (two 8-byte loads whose lanes lie 16 bytes apart).
                t(128, 128, 32, 16, 16).warp(64, 64).group(8).stages(1).lanes(),
                t(128, 128, 32, 16, 16).warp(64, 64).stages(1).lanes(),
                t(128, 128, 64, 16, 16).warp(64, 64).group(8).stages(1).lanes(),
                t(128, 128, 16, 16, 16).warp(64, 64).group(8).stages(2).lanes(),
                t(128, 128, 32, 16, 16).warp(64, 64).group(8).stages(2).lanes(),
                t(128, 256, 32, 16, 16).warp(64, 64).group(8).stages(1).lanes(),
            ],
        };
        let mut tiles = self.tile_ladder();
        for tile in extra {
            if !tiles.contains(&tile) {
                tiles.push(tile);
            }
        }
        tiles
    }

    /// The WGSL of this kernel for one tile and transpose, as its pipelines compile it: the
    /// shader file with its constants rewritten (`specialize`).
    pub fn wgsl(self, tile: Tile, t: Transpose, limits: &wgpu::Limits) -> Result<String, MatmulError> {
        let consts = self.constants(tile, t, limits)?;
        specialize(self.source(), &consts).map_err(|why| MatmulError::Config { kernel: self, tile, why })
    }

    /// Invocations per workgroup: one per `tm x tn` block, except kernel 06, where a
    /// `tm x tn` block belongs to a subgroup of 32, and kernels 07 and 08, where a subgroup of
    /// 32 computes each `wm x wn` block.
    pub fn threads(self, tile: Tile) -> u32 {
        match self {
            Kernel::CoopMatrix => tile.threads() * 32,
            Kernel::WarpTiled | Kernel::CoopF16 => tile.warps() * 32,
            _ => tile.threads(),
        }
    }

    /// The `const` values written into the shader for `tile` and `t`, after checking that the
    /// tile shape is one this kernel can run on this device.
    pub(crate) fn constants(self, tile: Tile, t: Transpose, limits: &wgpu::Limits) -> Result<Vec<(&'static str, String)>, MatmulError> {
        let bad = |why: String| Err(MatmulError::Config { kernel: self, tile, why });
        let threads = self.threads(tile);
        if threads == 0 || threads > limits.max_compute_invocations_per_workgroup {
            return bad(format!(
                "{threads} invocations per workgroup (bm/tm * bn/tn, with tm | bm and tn | bn); this device allows 1 to {}",
                limits.max_compute_invocations_per_workgroup
            ));
        }
        let warp_level = matches!(self, Kernel::WarpTiled | Kernel::CoopF16);
        if !warp_level && (tile.wm != 0 || tile.wn != 0 || tile.gm != 1) {
            return bad("only kernels 07 and 08 have warp tiles (wm, wn) and a swizzle (gm)".into());
        }
        if (self == Kernel::CoopF16) != (tile.stages != 0 || tile.direct) || tile.stages > 2 || (tile.direct && tile.stages != 0) {
            return bad("kernel 08 keeps 1 or 2 buffers of its tiles (stages) or none (direct, stages 0); the others have \
                        no such choice (stages 0, not direct)"
                .into());
        }
        if tile.prefetch && (self != Kernel::CoopF16 || tile.stages == 0) {
            return bad("only kernel 08's staged tiles (stages 1 or 2) prefetch fragments from workgroup memory (pf); \
                        direct tiles always load one step ahead"
                .into());
        }
        if tile.early && (self != Kernel::CoopF16 || tile.stages != 1) {
            return bad("only kernel 08's one-buffer tiles (stages 1) fetch early (ef): with two buffers no barrier \
                        separates the store of a tile from the next fetch"
                .into());
        }
        if tile.sync && (self != Kernel::CoopF16 || tile.stages != 1 || tile.early) {
            return bad("only kernel 08's one-buffer tiles (stages 1, not ef) copy each step's tiles at its start (sc)".into());
        }
        if tile.lanes && (self != Kernel::CoopF16 || tile.stages == 0) {
            return bad("only kernel 08's staged tiles (stages 1 or 2) choose how their loads are spread over lanes (ln)".into());
        }
        if warp_level && (tile.warps() == 0 || tile.gm == 0) {
            return bad("the warp tile wm x wn must divide the workgroup tile bm x bn, and gm must be positive".into());
        }
        let u = |v: u32| format!("{v}u");
        let mut consts = vec![("TRANS_A", (t == Transpose::A).to_string()), ("TRANS_B", (t == Transpose::B).to_string())];
        // Bytes of workgroup memory the tiles take.
        let shared = match self {
            Kernel::Naive => {
                if tile.tm != 1 || tile.tn != 1 {
                    return bad("the naive kernel computes one output per invocation: tm == tn == 1".into());
                }
                consts.push(("WG_X", u(tile.bn)));
                consts.push(("WG_Y", u(tile.bm)));
                0
            }
            Kernel::Tiled => {
                if tile.bm != tile.bn || tile.bm != tile.bk || tile.tm != 1 || tile.tn != 1 {
                    return bad("the tiled kernel uses square tiles, one output per invocation: bm == bn == bk, tm == tn == 1".into());
                }
                consts.push(("TILE", u(tile.bm)));
                2 * tile.bm * tile.bk * 4
            }
            Kernel::Blocked2d | Kernel::Vec4 | Kernel::DoubleBuffered => {
                if tile.bk == 0 {
                    return bad("bk must be positive".into());
                }
                if self.needs_vec4_rows() && (!tile.tm.is_multiple_of(4) || !tile.tn.is_multiple_of(4) || !tile.bk.is_multiple_of(4)) {
                    return bad("vec4 kernels move groups of 4: tm, tn and bk must be multiples of 4".into());
                }
                for (name, v) in [("BM", tile.bm), ("BN", tile.bn), ("BK", tile.bk), ("TM", tile.tm), ("TN", tile.tn)] {
                    consts.push((name, u(v)));
                }
                let halves = if self == Kernel::DoubleBuffered { 2 } else { 1 };
                halves * (tile.bm + tile.bn) * tile.bk * 4
            }
            Kernel::CoopMatrix => {
                let frags = |v: u32| v.is_multiple_of(16) && (16..=64).contains(&v);
                if !frags(tile.tm) || !frags(tile.tn) || tile.bk == 0 || !tile.bk.is_multiple_of(16) {
                    return bad("a subgroup computes tm x tn of C in 16 x 16 fragments, 1 to 4 each way \
                                (tm, tn in 16, 32, 48, 64), in 16-deep steps (bk a multiple of 16)"
                        .into());
                }
                for (name, v) in [("BM", tile.bm), ("BN", tile.bn), ("BK", tile.bk), ("FM", tile.tm / 16), ("FN", tile.tn / 16)] {
                    consts.push((name, u(v)));
                }
                // Two buffers of f16 tiles with 8 halves of padding per row, plus one f32
                // 16 x 16 scratch per subgroup.
                let (a_rows, a_cols) = if t == Transpose::A { (tile.bk, tile.bm) } else { (tile.bm, tile.bk) };
                let (b_rows, b_cols) = if t == Transpose::B { (tile.bn, tile.bk) } else { (tile.bk, tile.bn) };
                2 * (a_rows * (a_cols + 8) * 2 + b_rows * (b_cols + 8) * 2) + (threads / 32) * 1024
            }
            Kernel::WarpTiled => {
                if !tile.tm.is_multiple_of(4) || !tile.tn.is_multiple_of(4) || !tile.bk.is_multiple_of(4) || tile.tm == 0 || tile.tn == 0 {
                    return bad("vec4 kernels move groups of 4: tm, tn and bk must be positive multiples of 4".into());
                }
                if !tile.wm.is_multiple_of(tile.tm) || !tile.wn.is_multiple_of(tile.tn) || (tile.wm / tile.tm) * (tile.wn / tile.tn) != 32 {
                    return bad("a warp of 32 invocations covers wm x wn with tm x tn each: (wm / tm) * (wn / tn) must be 32".into());
                }
                for (name, v) in
                    [("BM", tile.bm), ("BN", tile.bn), ("BK", tile.bk), ("WM", tile.wm), ("WN", tile.wn), ("TM", tile.tm), ("TN", tile.tn), ("GM", tile.gm)]
                {
                    consts.push((name, u(v)));
                }
                2 * (tile.bm + tile.bn) * tile.bk * 4
            }
            Kernel::CoopF16 => {
                let frags = |v: u32| v.is_multiple_of(16) && (16..=64).contains(&v);
                if (tile.tm, tile.tn) != (16, 16) || !frags(tile.wm) || !frags(tile.wn) {
                    return bad("fragments are 16 x 16 (tm = tn = 16), and a subgroup computes wm x wn of C, 1 to 4 fragments \
                                each way (wm, wn in 16, 32, 48, 64)"
                        .into());
                }
                if !F16_PAD_MN.is_multiple_of(tile.bm) || !F16_PAD_MN.is_multiple_of(tile.bn) || ![16, 32, 64].contains(&tile.bk) {
                    return bad(format!(
                        "the f16 copies are padded to whole tiles: bm and bn must divide {F16_PAD_MN}, bk must be 16, 32 or 64"
                    ));
                }
                for (name, v) in [
                    ("BM", tile.bm),
                    ("BN", tile.bn),
                    ("BK", tile.bk),
                    ("WM", tile.wm),
                    ("WN", tile.wn),
                    ("GM", tile.gm),
                    ("STAGES", tile.stages),
                ] {
                    consts.push((name, u(v)));
                }
                consts.push(("FRAG_PREFETCH", tile.prefetch.to_string()));
                consts.push(("EARLY_FETCH", tile.early.to_string()));
                consts.push(("SYNC_COPY", tile.sync.to_string()));
                consts.push(("LANE_LOADS", tile.lanes.to_string()));
                consts.push(("PAD_MN", u(F16_PAD_MN)));
                consts.push(("PAD_K", u(F16_PAD_K)));
                // `stages` buffers of the f16 tiles A [bk][bm] and B [bk][bn] (the copies'
                // layout, whatever the transpose) with 8 halves of padding per row (none for
                // direct tiles, which the shader knows by STAGES = 0), plus one f32 16 x 16
                // scratch per subgroup (as kernel 06). The conversion passes use 64 x 65 floats.
                let product = tile.stages * tile.bk * (tile.bm + 8 + tile.bn + 8) * 2 + (threads / 32) * 1024;
                product.max(64 * 65 * 4)
            }
        };
        if shared > limits.max_compute_workgroup_storage_size {
            return bad(format!(
                "its tiles need {shared} bytes of workgroup memory; this device has {}",
                limits.max_compute_workgroup_storage_size
            ));
        }
        Ok(consts)
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:02}_{}", self.number(), self.name())
    }
}

/// A tile shape, in the standard names: a workgroup computes a `bm x bn` block of C, stepping
/// through the inner dimension `bk` at a time, and each invocation computes `tm x tn` outputs.
///
/// Kernels 07 and 08 add a level between the two: each subgroup of 32 invocations (a "warp")
/// computes a `wm x wn` block of the workgroup's, and workgroups are launched `gm` row bands
/// at a time (the swizzle that keeps shared tiles in the L2 cache). Kernel 08 also keeps
/// `stages` buffers of its tiles in workgroup memory (1 or 2), or none: `direct`, where each
/// subgroup loads its fragments straight from the f16 copies (`stages = 0`); with tiles in
/// workgroup memory it may load each sub-step's fragments one sub-step ahead (`prefetch`), and
/// with one buffer it may issue the next step's global loads before the barrier (`early`), or
/// load each step's tiles at the start of that step instead of one step ahead (`sync`).
/// Elsewhere `wm = wn = 0`, `gm = 1`, `stages = 0`, and the three flags are false. In
/// kernel 06 `tm x tn` is one subgroup's block; in kernel 08 it is the 16 x 16 fragment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tile {
    pub bm: u32,
    pub bn: u32,
    pub bk: u32,
    pub tm: u32,
    pub tn: u32,
    pub wm: u32,
    pub wn: u32,
    pub gm: u32,
    pub stages: u32,
    /// Kernel 08 without workgroup memory (with `stages = 0`): each subgroup `coopLoad`s its
    /// fragments straight from the f16 copies in the storage buffers, one 16-deep step ahead,
    /// with no barriers in the k-loop; `bk` is then only the depth of one loop iteration.
    pub direct: bool,
    /// Kernel 08 with `stages` 1 or 2: within each k-step, the fragments of the next 16-deep
    /// sub-step are loaded from workgroup memory into a second set before this sub-step's
    /// multiply-adds are issued, so the loads overlap the math (WGSL `FRAG_PREFETCH`).
    pub prefetch: bool,
    /// Kernel 08 with `stages = 1`: the next k-step's global loads are issued right after this
    /// step's tile is stored in workgroup memory, before the barrier that lets the subgroups read
    /// it, instead of after that barrier (WGSL `EARLY_FETCH`).
    pub early: bool,
    /// Kernel 08 with `stages = 1`: each k-step loads its own tiles from global memory and
    /// stores them straight into workgroup memory, instead of loading the next step's during
    /// this step's multiply-adds (WGSL `SYNC_COPY`). No registers stay reserved for tiles in
    /// flight, so more workgroups may fit on a multiprocessor to hide the loads' latency.
    pub sync: bool,
    /// Kernel 08 with `stages` 1 or 2: each global load and each store into the tiles moves one
    /// `vec4<f16>` per invocation, neighbours in neighbouring lanes, instead of two side by side
    /// (which the driver splits into two 8-byte loads whose lanes lie 16 bytes apart; WGSL
    /// `LANE_LOADS`).
    pub lanes: bool,
}

impl Tile {
    /// `bm x bn x bk` with `tm x tn` per invocation, no warp level, no swizzle.
    pub const fn new(bm: u32, bn: u32, bk: u32, tm: u32, tn: u32) -> Self {
        Self { bm, bn, bk, tm, tn, wm: 0, wn: 0, gm: 1, stages: 0, direct: false, prefetch: false, early: false, sync: false, lanes: false }
    }

    /// The same tile with `stages` buffers of the shared tiles (kernel 08).
    pub const fn stages(self, stages: u32) -> Self {
        Self { stages, direct: false, ..self }
    }

    /// The same tile with no shared tiles: fragments loaded straight from the f16 copies
    /// (kernel 08).
    pub const fn direct(self) -> Self {
        Self { stages: 0, direct: true, prefetch: false, early: false, sync: false, lanes: false, ..self }
    }

    /// The same tile loading each 16-deep sub-step's fragments from workgroup memory one
    /// sub-step ahead (kernel 08 with `stages` 1 or 2).
    pub const fn prefetch(self) -> Self {
        Self { prefetch: true, ..self }
    }

    /// The same tile issuing the next step's global loads before the barrier (kernel 08 with
    /// one buffer).
    pub const fn early(self) -> Self {
        Self { early: true, ..self }
    }

    /// The same tile loading each step's tiles at the start of that step (kernel 08 with one
    /// buffer).
    pub const fn sync(self) -> Self {
        Self { sync: true, ..self }
    }

    /// The same tile moving one `vec4<f16>` per invocation and load, neighbours in neighbouring
    /// lanes (kernel 08 with `stages` 1 or 2).
    pub const fn lanes(self) -> Self {
        Self { lanes: true, ..self }
    }

    /// The same tile with a `wm x wn` block per subgroup of 32 invocations.
    pub const fn warp(self, wm: u32, wn: u32) -> Self {
        Self { wm, wn, ..self }
    }

    /// The same tile with workgroups launched `gm` row bands at a time.
    pub const fn group(self, gm: u32) -> Self {
        Self { gm, ..self }
    }

    /// Invocations per workgroup: one per `tm x tn` block of the `bm x bn` tile (0 if they
    /// do not divide).
    pub fn threads(&self) -> u32 {
        if self.tm == 0 || self.tn == 0 || !self.bm.is_multiple_of(self.tm) || !self.bn.is_multiple_of(self.tn) {
            return 0;
        }
        (self.bm / self.tm) * (self.bn / self.tn)
    }

    /// Subgroup (warp) blocks of `wm x wn` per workgroup tile (0 if none, or if they do not
    /// divide).
    pub fn warps(&self) -> u32 {
        if self.wm == 0 || self.wn == 0 || !self.bm.is_multiple_of(self.wm) || !self.bn.is_multiple_of(self.wn) {
            return 0;
        }
        (self.bm / self.wm) * (self.bn / self.wn)
    }
}

/// `bm x bn x bk / tm x tn`, then ` w wm x wn`, ` g gm`, ` s stages`, ` direct`, ` pf`, ` ef`, ` sc` and ` ln`
/// where set: `128x128x16/8x8 w64x32 g8`, `128x128x16/16x16 w64x64 g8 s2`,
/// `128x128x32/16x16 w64x64 g8 direct`, `128x128x32/16x16 w64x64 g8 s1 pf`.
impl fmt::Display for Tile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}x{}/{}x{}", self.bm, self.bn, self.bk, self.tm, self.tn)?;
        if self.wm != 0 || self.wn != 0 {
            write!(f, " w{}x{}", self.wm, self.wn)?;
        }
        if self.gm != 1 {
            write!(f, " g{}", self.gm)?;
        }
        if self.stages != 0 {
            write!(f, " s{}", self.stages)?;
        }
        if self.direct {
            write!(f, " direct")?;
        }
        if self.prefetch {
            write!(f, " pf")?;
        }
        if self.early {
            write!(f, " ef")?;
        }
        if self.sync {
            write!(f, " sc")?;
        }
        if self.lanes {
            write!(f, " ln")?;
        }
        Ok(())
    }
}

/// Rewrites each `const NAME: T = value;` line of `src` to hold the given value instead.
/// Every name must appear exactly once as such a line: a typo is an error, not a silent default.
pub fn specialize(src: &str, consts: &[(&str, String)]) -> Result<String, String> {
    let mut lines: Vec<String> = src.lines().map(str::to_string).collect();
    for (name, value) in consts {
        let prefix = format!("const {name}:");
        let found: Vec<usize> = lines.iter().enumerate().filter(|(_, l)| l.trim_start().starts_with(&prefix)).map(|(i, _)| i).collect();
        let [i] = found[..] else {
            return Err(format!("expected one `const {name}: ...;` line in the shader, found {}", found.len()));
        };
        let line = &lines[i];
        let eq = line.find('=').ok_or_else(|| format!("`const {name}` has no `=`"))?;
        lines[i] = format!("{} {value};", &line[..=eq]);
    }
    Ok(lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specialize_rewrites_and_rejects_unknown_names() {
        let src = "const BM: u32 = 64u;\nconst TRANS_A: bool = false;\nfn f() {}";
        let out = specialize(src, &[("BM", "128u".into()), ("TRANS_A", "true".into())]).unwrap();
        assert!(out.contains("const BM: u32 = 128u;"), "{out}");
        assert!(out.contains("const TRANS_A: bool = true;"), "{out}");
        assert!(specialize(src, &[("BN", "1u".into())]).is_err());
    }

    #[test]
    fn numbers_round_trip_and_files_match() {
        for k in Kernel::ALL {
            assert_eq!(Kernel::from_number(k.number()), Some(k));
            assert!(k.source().starts_with(&format!("// {}:", k.file())), "{} must open with its name", k.file());
            assert!(k.tune_tiles().contains(&k.default_tile()));
            // Every listed tile passes the kernel's own checks on a device like lavapipe (32 KiB of
            // workgroup memory, 1024 invocations), so the tests can run all of them; tensor-core
            // tiles on one like the H200 (48 KiB).
            for tile in k.tune_tiles() {
                for t in crate::TRANSPOSES {
                    let limits = wgpu::Limits {
                        max_compute_workgroup_storage_size: if k.needs_cooperative_matrix() { 48 << 10 } else { 32 << 10 },
                        max_compute_invocations_per_workgroup: 1024,
                        ..wgpu::Limits::default()
                    };
                    k.constants(tile, t, &limits).unwrap_or_else(|e| panic!("{e}"));
                }
            }
        }
        assert_eq!(Kernel::from_number(0), None);
    }

    /// Each entry point uses exactly the bindings `Matmul::prepare` gives it: 0-3 for every
    /// product, `F16_COPY_BINDINGS` for kernel 08's conversion passes. (wgpu rejects a bind
    /// group whose entries differ from what the entry point uses, but only on a device that
    /// can compile the shader: for kernel 08, one with cooperative matrices.)
    #[test]
    fn entry_points_use_the_bindings_prepare_binds() {
        let limits = wgpu::Limits { max_compute_workgroup_storage_size: 48 << 10, ..wgpu::Limits::default() };
        let caps = naga::valid::Capabilities::all();
        for k in Kernel::ALL {
            for t in crate::TRANSPOSES {
                let src = specialize(k.source(), &k.constants(k.default_tile(), t, &limits).unwrap()).unwrap();
                let module = naga::front::wgsl::parse_str(&src).unwrap();
                let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps).validate(&module).unwrap();
                let mut expected = vec![("main", vec![0, 1, 2, 3])];
                if k.converts_to_f16() {
                    expected.push(("to_f16_a", crate::F16_COPY_BINDINGS[0].to_vec()));
                    expected.push(("to_f16_b", crate::F16_COPY_BINDINGS[1].to_vec()));
                }
                assert_eq!(module.entry_points.len(), expected.len(), "kernel {k}: entry points");
                for (i, ep) in module.entry_points.iter().enumerate() {
                    let used = info.get_entry_point(i);
                    let mut bindings: Vec<u32> = module
                        .global_variables
                        .iter()
                        .filter(|(h, _)| !used[*h].is_empty())
                        .filter_map(|(_, v)| v.binding.as_ref().map(|b| b.binding))
                        .collect();
                    bindings.sort_unstable();
                    let want = &expected.iter().find(|(name, _)| *name == ep.name).unwrap_or_else(|| panic!("kernel {k}: entry point {}", ep.name)).1;
                    let mut want = want.clone();
                    want.sort_unstable();
                    assert_eq!(bindings, want, "kernel {k} {t:?}: bindings of entry point {}", ep.name);
                }
            }
        }
    }

    /// Every kernel, every tune tile, every transpose: parsed and validated by naga (with the
    /// capabilities the H200 offers, cooperative matrices included, which lavapipe lacks) and
    /// written to SPIR-V both with wgpu's default checks and without them. This catches WGSL
    /// errors and naga back-end panics without a GPU.
    #[test]
    fn every_shader_validates_through_naga_to_spirv() {
        use naga::back::spv;
        use naga::proc::{BoundsCheckPolicies, BoundsCheckPolicy};
        use naga::valid::{Capabilities, ValidationFlags, Validator};
        let limits = wgpu::Limits {
            max_compute_workgroup_storage_size: 48 << 10,
            max_compute_invocations_per_workgroup: 1024,
            ..wgpu::Limits::default()
        };
        let caps = Capabilities::SHADER_FLOAT16 | Capabilities::SUBGROUP | Capabilities::COOPERATIVE_MATRIX;
        let checked = spv::Options {
            lang_version: (1, 6),
            bounds_check_policies: BoundsCheckPolicies {
                index: BoundsCheckPolicy::Restrict,
                buffer: BoundsCheckPolicy::Restrict,
                image_load: BoundsCheckPolicy::Restrict,
                binding_array: BoundsCheckPolicy::Unchecked,
            },
            ..spv::Options::default()
        };
        let unchecked = spv::Options {
            lang_version: (1, 6),
            bounds_check_policies: BoundsCheckPolicies::default(),
            force_loop_bounding: false,
            emit_int_div_checks: false,
            ..spv::Options::default()
        };
        let validate = |what: &str, src: &str| {
            let module = naga::front::wgsl::parse_str(src).unwrap_or_else(|e| panic!("{what}: {}", e.emit_to_string(src)));
            let info = Validator::new(ValidationFlags::all(), caps)
                .validate(&module)
                .unwrap_or_else(|e| panic!("{what}: {}", e.emit_to_string(src)));
            for options in [&checked, &unchecked] {
                let words = spv::write_vec(&module, &info, options, None).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert!(words.len() > 100, "{what}: suspiciously short SPIR-V");
            }
        };
        for k in Kernel::ALL {
            for tile in k.tune_tiles() {
                for t in crate::TRANSPOSES {
                    let what = format!("kernel {k} tile {tile} {t:?}");
                    let consts = k.constants(tile, t, &limits).unwrap_or_else(|e| panic!("{what}: {e}"));
                    validate(&what, &specialize(k.source(), &consts).unwrap());
                }
            }
        }
        validate("peak_fma.wgsl", include_str!("../shaders/peak_fma.wgsl"));
        validate("peak_fma_outer.wgsl", include_str!("../shaders/peak_fma_outer.wgsl"));
        validate("peak_coop.wgsl", include_str!("../shaders/peak_coop.wgsl"));
    }
}
