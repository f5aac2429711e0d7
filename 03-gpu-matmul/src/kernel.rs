//! The kernel catalogue: the numbered GPU kernels, which WGSL file each one is, their
//! precision and tolerance, default runtime checks, tile ladders and the tuner's candidate
//! tiles. How a tile becomes WGSL is in `wgsl.rs`.

use std::fmt;

use common::GpuContext;

use crate::checks::Checks;
use crate::coop::coop_support;
use crate::tile::Tile;

/// The GPU kernels, numbered like their shader files and the runner's command line
/// (`cargo run --release -p gpu-matmul -- 3`). Number 0 on the command line is the CPU
/// reference.
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

/// How far the f16 copies kernel 08 makes (`op(A)` as `[k][m]`, `op(B)` as `[k][n]`) are padded with
/// zeros: m and n to multiples of `F16_PAD_MN`, k to multiples of `F16_PAD_K`, so that every tile the
/// product loads lies inside them (every `bm`, `bn` of its tiles divides `F16_PAD_MN` and every
/// `bk` divides `F16_PAD_K`). Written into the shader by [`Kernel::wgsl`].
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
    /// [`coop_support`] says so; [`Kernel::fastest`] picks it or [`Kernel::BEST`].
    pub const BEST_F16_INPUTS: Kernel = Kernel::CoopF16;

    /// The fastest kernel this adapter runs at `precision`: [`Kernel::BEST_F16_INPUTS`] for
    /// [`Precision::F16Inputs`] where the adapter has the cooperative matrices it needs, else
    /// [`Kernel::BEST`]. `Matmul::new(ctx, Kernel::fastest(ctx, p))` is what later stages call.
    pub fn fastest(ctx: &GpuContext, precision: Precision) -> Kernel {
        match precision {
            Precision::F16Inputs if coop_support(ctx).is_ok() => Kernel::BEST_F16_INPUTS,
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

    /// The kernel with this number, if there is one (0, the CPU reference, is not a `Kernel`).
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

    // ANCHOR: default_checks
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
    // ANCHOR_END: default_checks

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
            // Chosen from `--tune` on the H200 (book/src/worklog/03.md): the best tile at n = 4096 first,
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
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:02}_{}", self.number(), self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
                for t in crate::transpose::TRANSPOSES {
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
}
