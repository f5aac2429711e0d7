//! [`Tile`]: a kernel's tile shape (workgroup, warp and invocation blocks, and kernel 08's
//! staging choices), and how it prints in tables (`128x128x16/8x8 w64x32 g8`).

use std::fmt;

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
    /// (which the driver breaks into two 8-byte loads whose lanes lie 16 bytes apart; WGSL
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
