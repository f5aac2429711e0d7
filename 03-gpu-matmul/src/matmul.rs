//! [`Matmul`]: one kernel's compiled pipelines over its tile ladder, and [`Matmul::prepare`],
//! which checks the shapes, picks a tile and turns a product into a [`MatmulCall`] of
//! prepared dispatches; [`matmul`], one product submitted and waited for.

use std::sync::OnceLock;

use common::{GpuContext, GpuError};

use crate::call::{Dims, MatmulCall};
use crate::checks::Checks;
use crate::coop::coop_support;
use crate::dispatch::Dispatch;
use crate::error::MatmulError;
use crate::kernel::{F16_PAD_K, F16_PAD_MN, Kernel, MIN_WORKGROUPS};
use crate::matrix::GpuMatrix;
use crate::tile::Tile;
use crate::transpose::{Transpose, formula, product_dims, transpose_index};

/// The pipelines of one kernel, tile and transpose: the product, and for kernel 08 the two
/// passes that make the f16 copies of a and b (entry points `to_f16_a`, `to_f16_b`).
struct Pipelines {
    product: wgpu::ComputePipeline,
    to_f16: Option<[wgpu::ComputePipeline; 2]>,
}

/// One kernel with one tile shape, its pipelines compiled on first use (per transpose).
struct Variant {
    kernel: Kernel,
    tile: Tile,
    checks: Checks,
    pipelines: [OnceLock<Pipelines>; 3],
}

impl Variant {
    fn new(kernel: Kernel, tile: Tile, checks: Option<Checks>) -> Self {
        Self { kernel, tile, checks: checks.unwrap_or(kernel.default_checks()), pipelines: Default::default() }
    }

    fn pipelines(&self, ctx: &GpuContext, t: Transpose) -> Result<&Pipelines, MatmulError> {
        let slot = &self.pipelines[transpose_index(t)];
        if let Some(p) = slot.get() {
            return Ok(p);
        }
        let wgsl = self.kernel.wgsl(self.tile, t, &ctx.limits)?;
        let label = format!("matmul {} {} ({})", self.kernel, self.tile, formula(t));
        let product = build_pipeline(ctx, &label, &wgsl, "main", self.checks)?;
        let to_f16 = if self.kernel.converts_to_f16() {
            Some([
                build_pipeline(ctx, &format!("{label}: a to f16"), &wgsl, "to_f16_a", self.checks)?,
                build_pipeline(ctx, &format!("{label}: b to f16"), &wgsl, "to_f16_b", self.checks)?,
            ])
        } else {
            None
        };
        Ok(slot.get_or_init(|| Pipelines { product, to_f16 }))
    }

    fn groups(&self, m: usize, n: usize) -> (u32, u32) {
        ((n as u32).div_ceil(self.tile.bn).max(1), (m as u32).div_ceil(self.tile.bm).max(1))
    }
}

/// Compiled pipelines for one kernel (compile once per program; the pipeline for each
/// transpose and tile is compiled the first time a call needs it).
///
/// A `Matmul` holds the kernel's tile ladder (largest tile first) and, for the vec4 kernels,
/// the same tiles of [`Kernel::Blocked2d`] for operands whose row strides are not multiples
/// of 4. [`Matmul::prepare`] picks per shape; [`MatmulCall::kernel`] tells which it picked.
pub struct Matmul {
    kernel: Kernel,
    ladder: Vec<Variant>,
    /// Same tiles, scalar loads: used when a vec4 kernel's operands are not 16-byte aligned.
    scalar: Vec<Variant>,
}

impl Matmul {
    /// The kernel with its tile ladder ([`Kernel::tile_ladder`], the tiles that fit this
    /// device): big tiles for big products, smaller ones where big tiles would leave the GPU
    /// idle. Errors if the adapter lacks what the kernel needs.
    pub fn new(ctx: &GpuContext, kernel: Kernel) -> Result<Self, MatmulError> {
        // Only the tiles this device has room for: a browser may grant WebGPU's 16 KiB of
        // workgroup memory, where kernel 05's 128 x 64 x 16 tile needs 24. When none fits, the
        // first tile's error says why.
        let ladder = kernel.tile_ladder();
        let fits: Vec<Tile> = ladder.iter().copied().filter(|&t| kernel.constants(t, Transpose::None, &ctx.limits).is_ok()).collect();
        Self::with_tiles(ctx, kernel, if fits.is_empty() { ladder } else { fits })
    }

    /// The kernel with one explicit tile shape (the tuner and the tests use this).
    pub fn with_tile(ctx: &GpuContext, kernel: Kernel, tile: Tile) -> Result<Self, MatmulError> {
        Self::with_tiles(ctx, kernel, vec![tile])
    }

    /// The kernel with a tile ladder, largest first. The first tile's `A * B` pipeline is
    /// compiled now, so a bad tile or shader fails here rather than at the first call.
    pub fn with_tiles(ctx: &GpuContext, kernel: Kernel, tiles: Vec<Tile>) -> Result<Self, MatmulError> {
        Self::with_options(ctx, kernel, tiles, None)
    }

    /// Like [`Matmul::with_tiles`], with the runtime checks chosen instead of the kernel's
    /// default ([`Kernel::default_checks`]); the runner uses this to measure what checks cost.
    /// Unchecked kernels must guard every access: all of this crate's kernels do.
    pub fn with_options(ctx: &GpuContext, kernel: Kernel, tiles: Vec<Tile>, checks: Option<Checks>) -> Result<Self, MatmulError> {
        if kernel.needs_cooperative_matrix() {
            coop_support(ctx).map_err(|why| MatmulError::Unsupported { kernel, why })?;
        }
        if tiles.is_empty() {
            return Err(MatmulError::Unsupported { kernel, why: "no tile shape given".into() });
        }
        // Check every tile now, so that a bad one is reported by the constructor.
        for &tile in &tiles {
            kernel.constants(tile, Transpose::None, &ctx.limits)?;
        }
        let scalar = if !kernel.needs_vec4_rows() {
            Vec::new()
        } else if kernel.needs_cooperative_matrix() {
            kernel.scalar_ladder().into_iter().map(|t| Variant::new(Kernel::Blocked2d, t, checks)).collect()
        } else {
            // Kernel 03 has no warp level: the same block sizes without it.
            tiles.iter().map(|t| Variant::new(Kernel::Blocked2d, Tile::new(t.bm, t.bn, t.bk, t.tm, t.tn), checks)).collect()
        };
        let mm = Self { kernel, ladder: tiles.into_iter().map(|t| Variant::new(kernel, t, checks)).collect(), scalar };
        mm.ladder[0].pipelines(ctx, Transpose::None)?;
        Ok(mm)
    }

    /// The kernel asked for.
    pub fn kernel(&self) -> Kernel {
        self.kernel
    }

    /// The largest (first) tile of the ladder.
    pub fn tile(&self) -> Tile {
        self.ladder[0].tile
    }

    /// Shape-checks and builds the bind group + a shape uniform: `out = op(a) * op(b)`.
    ///
    /// - `Transpose::None`: `a [m, k]`, `b [k, n]`, `out [m, n]`
    /// - `Transpose::A`: `a [k, m]`, `b [k, n]`, `out [m, n]`
    /// - `Transpose::B`: `a [m, k]`, `b [n, k]`, `out [m, n]`
    ///
    /// `out` must not be `a` or `b`.
    pub fn prepare(
        &self,
        ctx: &GpuContext,
        a: &GpuMatrix,
        b: &GpuMatrix,
        out: &GpuMatrix,
        t: Transpose,
    ) -> Result<MatmulCall, MatmulError> {
        let shapes = || format!("a {}x{}, b {}x{}, out {}x{}", a.rows, a.cols, b.rows, b.cols, out.rows, out.cols);
        let op = format!("matmul {}", formula(t));
        let (m, k, n) = product_dims(t, a.shape(), b.shape()).ok_or_else(|| MatmulError::Shape {
            op: op.clone(),
            shapes: shapes(),
            why: match t {
                Transpose::None => "a.cols must equal b.rows".into(),
                Transpose::A => "a.rows must equal b.rows (a is stored [k, m])".into(),
                Transpose::B => "a.cols must equal b.cols (b is stored [n, k])".into(),
            },
        })?;
        if out.shape() != (m, n) {
            return Err(MatmulError::Shape { op, shapes: shapes(), why: format!("out must be {m}x{n}") });
        }
        for (name, g) in [("a", a), ("b", b), ("out", out)] {
            let need = (g.rows * g.cols * 4) as u64;
            if g.buffer.size() < need {
                return Err(MatmulError::Shape {
                    op,
                    shapes: shapes(),
                    why: format!("{name}'s buffer holds {} bytes, its shape needs {need}", g.buffer.size()),
                });
            }
        }
        if out.buffer == a.buffer || out.buffer == b.buffer {
            return Err(MatmulError::Shape { op, shapes: shapes(), why: "out must be a different buffer from a and b".into() });
        }
        for v in [m, k, n, a.cols, b.cols, out.cols, a.rows * a.cols, b.rows * b.cols, out.rows * out.cols] {
            if v > u32::MAX as usize / 4 {
                return Err(MatmulError::Shape { op, shapes: shapes(), why: "a matrix exceeds 2^30 elements".into() });
            }
        }

        // vec4 kernels need every row to start on a 16-byte boundary, and whole vec4s in
        // every buffer; others get the scalar kernel with the same tile.
        let aligned = [a, b, out].iter().all(|g| g.cols % 4 == 0 && g.buffer.size() % 16 == 0);
        let family = if self.scalar.is_empty() || aligned { &self.ladder } else { &self.scalar };
        let variant = family
            .iter()
            .find(|v| {
                let (x, y) = v.groups(m, n);
                x * y >= MIN_WORKGROUPS
            })
            .unwrap_or_else(|| family.last().expect("a Matmul has at least one tile"));

        let pipelines = variant.pipelines(ctx, t)?;
        // The grid covers the capacity shape; workgroups past a smaller logical shape (after
        // `set_dims`) exit at once. So a recording stays valid whatever set_dims does later.
        let max = ctx.limits.max_compute_workgroups_per_dimension;
        let groups = variant.groups(m, n);
        if groups.0 > max || groups.1 > max {
            return Err(MatmulError::Shape {
                op,
                shapes: shapes(),
                why: format!("needs {} x {} workgroups; this device allows {max} per dimension", groups.0, groups.1),
            });
        }
        let mut dims = Dims { m: m as u32, k: k as u32, n: n as u32, lda: a.cols as u32, ldb: b.cols as u32, ldc: out.cols as u32, ld16: [0; 2] };
        let mut dispatches = Vec::new();
        let (bind_group, uniform) = match &pipelines.to_f16 {
            None => {
                let uniform = ctx.uniform_buffer("matmul dims", &dims);
                (ctx.bind_group("matmul", &pipelines.product, 0, &[&a.buffer, &b.buffer, &out.buffer, &uniform])?, uniform)
            }
            Some([to_a, to_b]) => {
                // Kernel 08: zero-padded f16 copies of op(A) as [k][m] and op(B) as [k][n],
                // made by two passes before the product (see F16_PAD_MN).
                let pad = |v: usize, to: u32| (v as u64).next_multiple_of(to as u64).max(to as u64);
                let rows = pad(k, F16_PAD_K);
                let copy = |cols: u64| -> Result<wgpu::Buffer, MatmulError> {
                    if rows * cols > u32::MAX as u64 / 2 {
                        return Err(MatmulError::Shape { op: op.clone(), shapes: shapes(), why: "a padded f16 copy exceeds 2^31 halves".into() });
                    }
                    Ok(ctx.storage_buffer_empty(&format!("f16 copy {rows}x{cols}"), rows * cols * 2)?)
                };
                let (cols_a, cols_b) = (pad(m, F16_PAD_MN), pad(n, F16_PAD_MN));
                let (a16, b16) = (copy(cols_a)?, copy(cols_b)?);
                dims.ld16 = [(cols_a / 4) as u32, (cols_b / 4) as u32];
                let uniform = ctx.uniform_buffer("matmul dims", &dims);
                // One workgroup per 64 x 64 of a copy (both sides are multiples of 64).
                for (pipeline, src, copy, cols, [u, s, c]) in
                    [(to_a, &a.buffer, &a16, cols_a, F16_COPY_BINDINGS[0]), (to_b, &b.buffer, &b16, cols_b, F16_COPY_BINDINGS[1])]
                {
                    let bind_group = bind_at(ctx, "matmul f16 copy", pipeline, &[(u, &uniform), (s, src), (c, copy)])?;
                    let groups = ((cols / 64) as u32, (rows / 64) as u32, 1);
                    if groups.0 > max || groups.1 > max {
                        return Err(MatmulError::Shape { op, shapes: shapes(), why: format!("its f16 copies need more than {max} workgroups per dimension") });
                    }
                    dispatches.push(Dispatch { pipeline: pipeline.clone(), bind_group, groups });
                }
                let bind_group = ctx.bind_group("matmul", &pipelines.product, 0, &[&a16, &b16, &out.buffer, &uniform])?;
                (bind_group, uniform)
            }
        };
        dispatches.push(Dispatch { pipeline: pipelines.product.clone(), bind_group, groups: (groups.0, groups.1, 1) });
        Ok(MatmulCall::new(dispatches, uniform, (m, k, n), dims, (variant.kernel, variant.tile)))
    }
}

/// The bindings of kernel 08's conversion passes `to_f16_a` and `to_f16_b`: the shape
/// uniform, the f32 operand, the f16 copy. (The product binds 0-3 like every other kernel.)
/// A unit test checks them against what each entry point of the shader uses.
pub(crate) const F16_COPY_BINDINGS: [[u32; 3]; 2] = [[3, 4, 5], [3, 6, 7]];

/// A bind group for `pipeline`'s group 0 with `buffers` at the given binding numbers (for
/// shaders whose entry points use different bindings of one module).
fn bind_at(ctx: &GpuContext, label: &str, pipeline: &wgpu::ComputePipeline, buffers: &[(u32, &wgpu::Buffer)]) -> Result<wgpu::BindGroup, GpuError> {
    let entries: Vec<wgpu::BindGroupEntry> =
        buffers.iter().map(|&(binding, b)| wgpu::BindGroupEntry { binding, resource: b.as_entire_binding() }).collect();
    ctx.scoped(|| {
        ctx.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(label),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &entries,
        })
    })
}

/// Builds a compute pipeline with the given runtime checks, without zero-initialising
/// workgroup memory (every kernel writes its shared tiles before reading them).
fn build_pipeline(ctx: &GpuContext, label: &str, wgsl: &str, entry: &str, checks: Checks) -> Result<wgpu::ComputePipeline, GpuError> {
    // SAFETY: every kernel in this crate guards each storage access with an explicit test
    // against the shape uniform, indexes its workgroup and private arrays with in-range
    // functions of constants and the invocation id, and writes its shared tiles before reading
    // them; the tests run awkward shapes through every kernel and transpose to keep it so.
    unsafe { ctx.compute_pipeline_trusted(label, wgsl, entry, checks.runtime_checks()) }
}

/// Convenience: one matmul `out = op(a) * op(b)`, submitted and waited for (native targets).
#[cfg(not(target_arch = "wasm32"))]
pub fn matmul(
    ctx: &GpuContext,
    mm: &Matmul,
    a: &GpuMatrix,
    b: &GpuMatrix,
    out: &GpuMatrix,
    t: Transpose,
) -> Result<(), MatmulError> {
    let call = mm.prepare(ctx, a, b, out, t)?;
    ctx.scoped(|| ctx.submit_pass("matmul", |pass| call.record(pass)))?;
    ctx.wait()?;
    Ok(())
}

