//! The numbered kernels: which WGSL file each one is, its tile shape, and how a tile shape
//! becomes WGSL.
//!
//! Every shader in `shaders/NN_name.wgsl` is plain, valid WGSL with default values in `const`
//! lines (`const BM: u32 = 64u;`). Before compiling, [`specialize`] rewrites those lines with
//! the tile shape and the transpose flags asked for, so one file gives every configuration the
//! tuner tries, and naga sees true constants (loops over `TM` unroll, arrays get fixed sizes).

use std::fmt;

use crate::{MatmulError, Transpose};

/// The GPU kernels, numbered like their shader files and the runner's command line
/// (`cargo run --release -p gpu-matmul -- 3`). Number 0 on the command line is the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kernel {
    /// `01_naive.wgsl`: one invocation per output element, straight from memory.
    Naive = 1,
}

impl Kernel {
    /// Every GPU kernel, in order.
    pub const ALL: [Kernel; 1] = [Kernel::Naive];

    /// The fastest kernel that runs on every adapter and handles every shape and transpose.
    pub const BEST: Kernel = Kernel::Naive;

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
        }
    }

    /// The shader file, relative to `03-gpu-matmul/shaders/`.
    pub fn file(self) -> &'static str {
        match self {
            Kernel::Naive => "01_naive.wgsl",
        }
    }

    /// The WGSL source as written in the file (defaults not yet specialized).
    pub fn source(self) -> &'static str {
        match self {
            Kernel::Naive => include_str!("../shaders/01_naive.wgsl"),
        }
    }

    /// Whether this kernel needs cooperative matrices (tensor cores).
    pub fn needs_cooperative_matrix(self) -> bool {
        false
    }

    /// The tolerance a result of this kernel must meet against the f64 CPU reference, for an
    /// inner dimension `k`: `|gpu - ref| <= abs + rel * |ref|` per element, NaN failing.
    ///
    /// f32 kernels: each of the `k` fused multiply-adds rounds with relative error 2^-24, and
    /// for inputs in [-1, 1] the partial sums stay below `k`; `abs = 2e-6 * k` leaves a wide
    /// margin over the error random rounding gives (about sqrt(k) * 2^-24 * |sum|) while a
    /// single wrong or missing term (of size ~0.1 or more) still fails.
    pub fn tolerance(self, k: usize) -> (f64, f64) {
        let k = k.max(1) as f64;
        (1e-4, 2e-6 * k)
    }

    /// The tile shape used by [`crate::Matmul::new`].
    pub fn default_tile(self) -> Tile {
        match self {
            Kernel::Naive => Tile { bm: 16, bn: 16, bk: 1, tm: 1, tn: 1 },
        }
    }

    /// Tile shapes the runner's `--tune` mode tries, the default first.
    pub fn tune_tiles(self) -> Vec<Tile> {
        match self {
            Kernel::Naive => vec![
                self.default_tile(),
                Tile { bm: 8, bn: 8, bk: 1, tm: 1, tn: 1 },
                Tile { bm: 32, bn: 8, bk: 1, tm: 1, tn: 1 },
            ],
        }
    }

    /// The `const` values written into the shader for `tile` and `t`, after checking that the
    /// tile shape is one this kernel can run on this device.
    pub(crate) fn constants(self, tile: Tile, t: Transpose, limits: &wgpu::Limits) -> Result<Vec<(&'static str, String)>, MatmulError> {
        let bad = |why: String| Err(MatmulError::Config { kernel: self, tile, why });
        let threads = tile.threads();
        if threads == 0 || threads > limits.max_compute_invocations_per_workgroup {
            return bad(format!(
                "{threads} invocations per workgroup; this device allows 1 to {}",
                limits.max_compute_invocations_per_workgroup
            ));
        }
        let mut consts = vec![("TRANS_A", (t == Transpose::A).to_string()), ("TRANS_B", (t == Transpose::B).to_string())];
        match self {
            Kernel::Naive => {
                // One output per invocation: a bm x bn block on a bn x bm workgroup.
                if tile.tm != 1 || tile.tn != 1 {
                    return bad("the naive kernel computes one output per invocation: tm == tn == 1".into());
                }
                consts.push(("WG_X", format!("{}u", tile.bn)));
                consts.push(("WG_Y", format!("{}u", tile.bm)));
            }
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tile {
    pub bm: u32,
    pub bn: u32,
    pub bk: u32,
    pub tm: u32,
    pub tn: u32,
}

impl Tile {
    /// Invocations per workgroup: one per `tm x tn` block of the `bm x bn` tile.
    pub fn threads(&self) -> u32 {
        if self.tm == 0 || self.tn == 0 || self.bm % self.tm != 0 || self.bn % self.tn != 0 {
            return 0;
        }
        (self.bm / self.tm) * (self.bn / self.tn)
    }
}

impl fmt::Display for Tile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}x{}/{}x{}", self.bm, self.bn, self.bk, self.tm, self.tn)
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
            assert!(k.file().starts_with(&format!("{:02}_{}", k.number(), k.name())), "{}", k.file());
            assert!(k.tune_tiles().contains(&k.default_tile()));
        }
        assert_eq!(Kernel::from_number(0), None);
    }
}
