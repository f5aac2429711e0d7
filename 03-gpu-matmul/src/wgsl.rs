//! How a tile shape becomes WGSL: [`specialize`] and [`Kernel::wgsl`].
//!
//! Every shader in `shaders/NN_name.wgsl` is plain, valid WGSL with default values in `const`
//! lines (`const BM: u32 = 64u;`). Before compiling, [`specialize`] rewrites those lines with
//! the tile shape and the transpose flags asked for, so one file gives every configuration the
//! tuner tries, and naga sees true constants (loops over `TM` unroll, arrays get fixed sizes).
//! [`Kernel::constants`] checks that a tile is one the kernel can run on this device first.

use crate::error::MatmulError;
use crate::kernel::{F16_PAD_K, F16_PAD_MN, Kernel};
use crate::tile::Tile;
use crate::transpose::Transpose;

impl Kernel {
    /// The WGSL of this kernel for one tile and transpose, as its pipelines compile it: the
    /// shader file with its constants rewritten (`specialize`).
    pub fn wgsl(self, tile: Tile, t: Transpose, limits: &wgpu::Limits) -> Result<String, MatmulError> {
        let consts = self.constants(tile, t, limits)?;
        specialize(self.source(), &consts).map_err(|why| MatmulError::Config { kernel: self, tile, why })
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

    /// Each entry point uses exactly the bindings `Matmul::prepare` gives it: 0-3 for every
    /// product, `F16_COPY_BINDINGS` for kernel 08's conversion passes. (wgpu rejects a bind
    /// group whose entries differ from what the entry point uses, but only on a device that
    /// can compile the shader: for kernel 08, one with cooperative matrices.)
    #[test]
    fn entry_points_use_the_bindings_prepare_binds() {
        let limits = wgpu::Limits { max_compute_workgroup_storage_size: 48 << 10, ..wgpu::Limits::default() };
        let caps = naga::valid::Capabilities::all();
        for k in Kernel::ALL {
            for t in crate::transpose::TRANSPOSES {
                let src = specialize(k.source(), &k.constants(k.default_tile(), t, &limits).unwrap()).unwrap();
                let module = naga::front::wgsl::parse_str(&src).unwrap();
                let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps).validate(&module).unwrap();
                let mut expected = vec![("main", vec![0, 1, 2, 3])];
                if k.converts_to_f16() {
                    expected.push(("to_f16_a", crate::matmul::F16_COPY_BINDINGS[0].to_vec()));
                    expected.push(("to_f16_b", crate::matmul::F16_COPY_BINDINGS[1].to_vec()));
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
                for t in crate::transpose::TRANSPOSES {
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
