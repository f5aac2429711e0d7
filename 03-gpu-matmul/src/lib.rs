//! Stage 03: matrix multiplication on the GPU, from a naive WGSL kernel to tiled, register-blocked,
//! vectorised and tensor-core kernels, each checked against the CPU.
//!
//! The kernels live in `shaders/NN_name.wgsl`, numbered like [`Kernel`] and the runner's command
//! line (`cargo run --release -p gpu-matmul -- 3`; 0 is the CPU). Later stages use the library:
//!
//! ```no_run
//! use common::GpuContext;
//! use cpu_matrix::Matrix;
//! use gpu_matmul::{GpuMatrix, Kernel, Matmul, Transpose};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ctx = GpuContext::new()?;
//! let mm = Matmul::new(&ctx, Kernel::BEST)?;            // compile once
//! let a = GpuMatrix::upload(&ctx, &Matrix::random_uniform(64, 784, -1.0, 1.0, 1))?;
//! let b = GpuMatrix::upload(&ctx, &Matrix::random_uniform(784, 128, -1.0, 1.0, 2))?;
//! let out = GpuMatrix::zeros(&ctx, 64, 128)?;
//! gpu_matmul::matmul(&ctx, &mm, &a, &b, &out, Transpose::None)?; // out = a * b
//! let c = out.download(&ctx)?;
//! # Ok(()) }
//! ```
//!
//! Shapes are row-major everywhere. A [`GpuMatrix`]'s `rows x cols` is its *capacity*;
//! [`MatmulCall::set_dims`] can shrink the logical shape (a smaller last batch). The logical
//! matrices are then the top-left corners of the capacity matrices, read and written with the
//! capacity widths as row strides, and the rest of `out` is left as it was.

mod cpu;
mod kernels;
pub mod peak;

use std::fmt;
use std::sync::OnceLock;

use common::{GpuContext, GpuError};
use cpu_matrix::Matrix;

pub use cpu::{matmul_cpu, reference_rows};
pub use peak::{PEAK_ITERS, PeakProbe};
pub use kernels::{F16_PAD_K, F16_PAD_MN, Kernel, MIN_WORKGROUPS, Precision, Tile, specialize};

/// A row-major f32 matrix that lives on the GPU. `rows`/`cols` are the CAPACITY shape.
///
/// The buffer holds at least `rows * cols` floats; buffers made here are padded to a multiple
/// of 16 bytes so kernels can read them as `vec4<f32>`.
#[derive(Debug, Clone)]
pub struct GpuMatrix {
    pub buffer: wgpu::Buffer,
    pub rows: usize,
    pub cols: usize,
}

impl GpuMatrix {
    /// Copies `m` to a new GPU buffer, through the context's fast transfer path
    /// ([`GpuContext::upload`]: reused staging buffers, several threads). Later submits see it.
    pub fn upload(ctx: &GpuContext, m: &Matrix) -> Result<Self, GpuError> {
        let matrix = Self::zeros(ctx, m.rows, m.cols)?;
        ctx.upload(&matrix.buffer, 0, &m.data)?;
        Ok(matrix)
    }

    /// A `rows x cols` matrix of zeros on the GPU.
    pub fn zeros(ctx: &GpuContext, rows: usize, cols: usize) -> Result<Self, GpuError> {
        let bytes = Self::padded_bytes(rows, cols);
        let buffer = ctx.storage_buffer_empty(&format!("matrix {rows}x{cols}"), bytes)?;
        Ok(Self { buffer, rows, cols })
    }

    /// Overwrites the whole matrix with `m`, which must have the same shape (fast path, like
    /// [`upload`](Self::upload)). Later submits see it.
    pub fn write(&self, ctx: &GpuContext, m: &Matrix) -> Result<(), MatmulError> {
        if m.shape() != (self.rows, self.cols) {
            return Err(MatmulError::Shape {
                op: "GpuMatrix::write".into(),
                shapes: format!("GPU matrix {}x{}, data {}x{}", self.rows, self.cols, m.rows, m.cols),
                why: "the shapes must be equal".into(),
            });
        }
        ctx.upload(&self.buffer, 0, &m.data)?;
        Ok(())
    }

    /// Copies the matrix back to the CPU (waits for all submitted work; fast path,
    /// [`GpuContext::download`]; native targets).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn download(&self, ctx: &GpuContext) -> Result<Matrix, GpuError> {
        let data = ctx.download(&self.buffer, self.rows * self.cols)?;
        Ok(Matrix { rows: self.rows, cols: self.cols, data })
    }

    /// `(rows, cols)`.
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    fn padded_bytes(rows: usize, cols: usize) -> u64 {
        ((rows * cols * 4) as u64).next_multiple_of(16).max(16)
    }
}

/// Which operand is transposed: `out = op(a) * op(b)`. The same type as stage 02's, so CPU
/// and GPU code share one vocabulary:
/// - `Transpose::None`: `a [m, k] * b [k, n] -> [m, n]`;
/// - `Transpose::A`: `A^T * B`, `a` stored `[k, m]` (weight gradients: `X^T * dY`);
/// - `Transpose::B`: `A * B^T`, `b` stored `[n, k]` (input gradients: `dY * W^T`).
pub use cpu_matrix::Transpose;

/// The three products, in the order tests and tables list them.
pub const TRANSPOSES: [Transpose; 3] = [Transpose::None, Transpose::A, Transpose::B];

/// The product as a formula, for messages and tables: `"A^T * B"`.
pub fn formula(t: Transpose) -> &'static str {
    match t {
        Transpose::None => "A * B",
        Transpose::A => "A^T * B",
        Transpose::B => "A * B^T",
    }
}

/// `(m, k, n)` of `op(a) * op(b)` from the stored shapes `a` and `b`, if the inner
/// dimensions agree.
pub fn product_dims(t: Transpose, a: (usize, usize), b: (usize, usize)) -> Option<(usize, usize, usize)> {
    let (m, k) = if t == Transpose::A { (a.1, a.0) } else { a };
    let (kb, n) = if t == Transpose::B { (b.1, b.0) } else { b };
    (k == kb).then_some((m, k, n))
}

fn transpose_index(t: Transpose) -> usize {
    match t {
        Transpose::None => 0,
        Transpose::A => 1,
        Transpose::B => 2,
    }
}

/// Everything that can go wrong in a GPU matmul. Shape errors name every shape involved.
#[derive(Debug, Clone, PartialEq)]
pub enum MatmulError {
    /// The GPU refused something (limits, validation, device lost).
    Gpu(GpuError),
    /// Operands whose shapes do not fit the product.
    Shape { op: String, shapes: String, why: String },
    /// `set_dims` asked for more than the matrices hold.
    Dims { asked: (usize, usize, usize), capacity: (usize, usize, usize) },
    /// A tile shape this kernel cannot run (the tuner and tests pass tiles explicitly).
    Config { kernel: Kernel, tile: Tile, why: String },
    /// This kernel cannot run here, or not on these operands.
    Unsupported { kernel: Kernel, why: String },
}

impl fmt::Display for MatmulError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MatmulError::Gpu(e) => write!(f, "{e}"),
            MatmulError::Shape { op, shapes, why } => write!(f, "{op}: {shapes}: {why}"),
            MatmulError::Dims { asked, capacity } => write!(
                f,
                "set_dims(m={}, k={}, n={}) exceeds the capacity m={}, k={}, n={} of the prepared matrices; \
                 allocate the matrices for the largest shape you need",
                asked.0, asked.1, asked.2, capacity.0, capacity.1, capacity.2
            ),
            MatmulError::Config { kernel, tile, why } => write!(f, "kernel {kernel} cannot use tile {tile}: {why}"),
            MatmulError::Unsupported { kernel, why } => write!(f, "kernel {kernel} cannot run: {why}"),
        }
    }
}

impl std::error::Error for MatmulError {}

impl From<GpuError> for MatmulError {
    fn from(e: GpuError) -> Self {
        MatmulError::Gpu(e)
    }
}

/// The shape uniform every kernel reads: logical sizes and the row strides (capacity widths).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
struct Dims {
    m: u32,
    k: u32,
    n: u32,
    lda: u32,
    ldb: u32,
    ldc: u32,
    /// Row strides of kernel 08's f16 copies of a and b, in vec4<f16>; 0 elsewhere.
    ld16: [u32; 2],
}

/// The runtime checks naga compiles into a shader module.
///
/// wgpu's default ([`Checks::All`]) makes every shader memory-safe whatever it does: each
/// array index is clamped into range, each loop gets a hidden iteration bound, each integer
/// division is guarded. That costs little in simple kernels and, on the H200, a factor of 13
/// to 36 in the register-blocked kernels 03-05 (the README's checks table). [`Checks::None`] drops them (`create_shader_module_trusted`):
/// only for kernels that guard every access themselves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Checks {
    /// Every check naga has (wgpu's default, `ShaderRuntimeChecks::checked()`).
    All,
    /// Index clamping only: no forced loop bounds, no division guards.
    BoundsOnly,
    /// No runtime checks at all (`ShaderRuntimeChecks::unchecked()`).
    None,
}

impl Checks {
    fn runtime_checks(self) -> wgpu::ShaderRuntimeChecks {
        match self {
            Checks::All => wgpu::ShaderRuntimeChecks::checked(),
            Checks::BoundsOnly => {
                wgpu::ShaderRuntimeChecks { bounds_checks: true, ..wgpu::ShaderRuntimeChecks::unchecked() }
            }
            Checks::None => wgpu::ShaderRuntimeChecks::unchecked(),
        }
    }
}

impl fmt::Display for Checks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Checks::All => "all checks",
            Checks::BoundsOnly => "bounds checks only",
            Checks::None => "no checks",
        })
    }
}

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
    /// The kernel with its tile ladder ([`Kernel::tile_ladder`]): big tiles for big products,
    /// smaller ones where big tiles would leave the GPU idle. Errors if the adapter lacks
    /// what the kernel needs.
    pub fn new(ctx: &GpuContext, kernel: Kernel) -> Result<Self, MatmulError> {
        Self::with_tiles(ctx, kernel, kernel.tile_ladder())
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
        let mut steps = Vec::new();
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
                    steps.push(Step { pipeline: pipeline.clone(), bind_group, groups });
                }
                let bind_group = ctx.bind_group("matmul", &pipelines.product, 0, &[&a16, &b16, &out.buffer, &uniform])?;
                (bind_group, uniform)
            }
        };
        steps.push(Step { pipeline: pipelines.product.clone(), bind_group, groups: (groups.0, groups.1, 1) });
        Ok(MatmulCall { steps, uniform, capacity: (m, k, n), dims, kernel: variant.kernel, tile: variant.tile })
    }
}

/// The bindings of kernel 08's conversion passes `to_f16_a` and `to_f16_b`: the shape
/// uniform, the f32 operand, the f16 copy. (The product binds 0-3 like every other kernel.)
/// A unit test checks them against what each entry point of the shader uses.
const F16_COPY_BINDINGS: [[u32; 3]; 2] = [[3, 4, 5], [3, 6, 7]];

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

/// Why kernels 06 and 08 cannot run on this adapter, if they cannot: they need cooperative
/// matrices with 16x16x16 f16 inputs and f32 accumulators, and subgroups of exactly 32 (their
/// layout of subgroups over the tile assumes 32 invocations each).
pub fn coop_support(ctx: &GpuContext) -> Result<(), String> {
    if !ctx.has_cooperative_matrix() {
        return Err(format!("it needs cooperative matrices (tensor cores) and f16, which {} lacks", ctx.info.name));
    }
    let ok = ctx.cooperative_matrix_properties().iter().any(|p| {
        (p.m_size, p.n_size, p.k_size) == (16, 16, 16)
            && p.ab_type == wgpu::CooperativeScalarType::F16
            && p.cr_type == wgpu::CooperativeScalarType::F32
    });
    if !ok {
        return Err(format!("{} has cooperative matrices, but not 16x16x16 with f16 inputs and f32 results", ctx.info.name));
    }
    let (lo, hi) = (ctx.info.subgroup_min_size, ctx.info.subgroup_max_size);
    if !ctx.features.contains(wgpu::Features::SUBGROUP) || lo != 32 || hi != 32 {
        return Err(format!("it needs subgroups of exactly 32 invocations; {} has {lo} to {hi}", ctx.info.name));
    }
    Ok(())
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

/// One dispatch of a prepared product.
struct Step {
    pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
    groups: (u32, u32, u32),
}

impl Step {
    fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &self.bind_group, &[]);
        pass.dispatch_workgroups(self.groups.0, self.groups.1, self.groups.2);
    }
}

/// One prepared product: pipelines, bind groups and shape uniform (and, for kernel 08, the f16
/// copies of the operands). Record it as often as needed.
pub struct MatmulCall {
    /// The dispatches in order: kernel 08's two conversions, then the product (last).
    steps: Vec<Step>,
    uniform: wgpu::Buffer,
    capacity: (usize, usize, usize),
    dims: Dims,
    kernel: Kernel,
    tile: Tile,
}

impl MatmulCall {
    /// Records the product into an open compute pass (no submit, no read-back): one dispatch,
    /// or for kernel 08 three (a and b to f16 copies, then the product on the copies).
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        self.steps.iter().for_each(|s| s.record(pass));
    }

    /// Records only the product dispatch. For kernel 08 it multiplies the f16 copies as the
    /// last recorded [`MatmulCall::record`] left them (stale if a or b changed since, or the
    /// shape did): this times the product without the conversions, or reuses copies of
    /// operands that do not change. For every other kernel it is `record`.
    pub fn record_product(&self, pass: &mut wgpu::ComputePass<'_>) {
        self.steps.last().expect("a call has a product step").record(pass);
    }

    /// Dispatches [`MatmulCall::record`] records: 1, or 3 for kernel 08.
    pub fn dispatches(&self) -> usize {
        self.steps.len()
    }

    /// Changes the logical `(m, k, n)` used from the next submit on (it writes the shape
    /// uniform through the queue), e.g. for a smaller last batch. Each must be at most the
    /// capacity given by the matrices. The logical matrices are the top-left corners of the
    /// stored ones (same row strides); elements of `out` outside `m x n` are left unchanged.
    /// Recordings made before or after stay valid: the dispatch always covers the capacity.
    pub fn set_dims(&self, ctx: &GpuContext, m: usize, k: usize, n: usize) -> Result<(), MatmulError> {
        let (cm, ck, cn) = self.capacity;
        if m > cm || k > ck || n > cn {
            return Err(MatmulError::Dims { asked: (m, k, n), capacity: self.capacity });
        }
        let dims = Dims { m: m as u32, k: k as u32, n: n as u32, ..self.dims };
        ctx.queue.write_buffer(&self.uniform, 0, bytemuck::bytes_of(&dims));
        Ok(())
    }

    /// `(m, k, n)` as given by the matrices at `prepare`.
    pub fn capacity(&self) -> (usize, usize, usize) {
        self.capacity
    }

    /// The kernel and tile shape this call runs.
    pub fn kernel(&self) -> (Kernel, Tile) {
        (self.kernel, self.tile)
    }
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
