//! Stage 01 `double`: `y[i] = 2 * x[i]` on the GPU, and why the GPU loses on small arrays.
//!
//! - [`walkthrough::double_walkthrough`]: every wgpu step written out once, in order, without
//!   `common`'s helpers. Read it first.
//! - [`double_cpu`] / [`double_cpu_into`]: the CPU reference (one thread, a plain loop the
//!   compiler vectorises).
//! - [`DoubleGpu`]: the pipeline and buffers made once for up to `capacity` floats, then
//!   [`DoubleGpu::upload`], [`DoubleGpu::run`] (the kernel alone, GPU-timed) and
//!   [`DoubleGpu::download`] separately, or [`DoubleGpu::round_trip`] for all three the way a
//!   program would do them. The runner (`src/main.rs`) and the benchmarks time these.
//! - Two ways to move the data, numbered like the runner's columns ([`Path`]): 1, the simple
//!   first version (`queue.write_buffer` up, one staging buffer copied out by one thread down);
//!   2, the fast one through `common::Transfer` (reused mapped staging buffers, chunks that
//!   overlap, several threads); 3, the same upload with a read-back that is never copied out
//!   ([`DoubleGpu::download_mapped`]).
//! - [`double_gpu`]: one call for code that doubles once (and for the tests).
//!
//! Run: `cargo run --release -p double` prints the CPU-versus-GPU tables;
//! `cargo run --release -p double -- --walkthrough` runs the seven steps on a few numbers;
//! `cargo run --release -p double --bin transfers` measures each transfer idea on its own, and
//! `--bin dispatch_timing` when one dispatch is slow (`src/bin/`).

pub mod walkthrough;

use common::{GpuContext, GpuError, GpuTimer, MappedRead, TimeSource, Transfer, TransferConfig};
use rand::{Rng, SeedableRng};

pub use walkthrough::double_walkthrough;

/// The kernel, `shaders/double.wgsl`: `output[i] = 2 * input[i]` for `i < len`.
pub const SHADER: &str = include_str!("../shaders/double.wgsl");

/// Invocations per workgroup; must equal `WORKGROUP_SIZE` in the shader (a test checks).
pub const WORKGROUP_SIZE: u32 = 256;

/// Bytes one doubling moves through memory per element: one f32 read, one f32 written. GB/s
/// figures are `BYTES_PER_ELEMENT * n / seconds`.
pub const BYTES_PER_ELEMENT: u64 = 8;

/// The CPU reference: `input: [n] -> [n]`, each element times two.
pub fn double_cpu(input: &[f32]) -> Vec<f32> {
    let mut out = vec![0.0; input.len()];
    double_cpu_into(input, &mut out);
    out
}

/// The CPU reference into a buffer you own (what the runner and benches time, so that
/// allocating and first-touching `out` is not counted): `input: [n] -> out: [n]`.
///
/// # Panics
/// If the lengths differ (a programming error, not user input).
// ANCHOR: double_cpu_into
pub fn double_cpu_into(input: &[f32], out: &mut [f32]) {
    assert_eq!(input.len(), out.len(), "double_cpu_into: input and output lengths differ");
    for (o, &x) in out.iter_mut().zip(input) {
        *o = x * 2.0;
    }
}
// ANCHOR_END: double_cpu_into

/// Doubles `input` on the GPU in one call: `input: [n] -> [n]`.
///
/// Builds a [`DoubleGpu`] for exactly `n` floats (compiling the pipeline), poisons its output,
/// uploads, runs and downloads. Fine for doubling once; to double many arrays, make one
/// [`DoubleGpu`] and reuse it. Errors if `n` floats exceed the device's limits.
pub fn double_gpu(ctx: &GpuContext, input: &[f32]) -> Result<Vec<f32>, GpuError> {
    let mut gpu = DoubleGpu::new(ctx, input.len())?;
    gpu.poison_output(ctx);
    let mut out = vec![0.0; input.len()];
    gpu.round_trip(ctx, Path::Simple, input, &mut out)?;
    Ok(out)
}

/// `n` random floats in [-1000, 1000) from `seed`: negative and positive, never all zeros.
/// The runner and the benches double these.
pub fn sample_input(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..n).map(|_| rng.random_range(-1000.0f32..1000.0)).collect()
}

/// How the data travels between the host and the GPU, numbered like the runner's columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Path {
    /// 1: the first version: `queue.write_buffer` up (fresh staging memory on every call), and
    /// one reused `MAP_READ` staging buffer copied out by one thread down
    /// (`GpuContext::read_into`).
    Simple = 1,
    /// 2: `common::Transfer`: reused mapped staging buffers filled and emptied in overlapping
    /// chunks by several threads; the result is copied into your slice.
    Fast = 2,
    /// 3: the upload of 2, and a read-back that hands out the mapped staging memory itself
    /// (`Transfer::download_mapped`): nothing is copied out.
    Mapped = 3,
}

impl Path {
    pub const ALL: [Path; 3] = [Path::Simple, Path::Fast, Path::Mapped];

    /// The runner's column name.
    pub fn name(self) -> &'static str {
        match self {
            Path::Simple => "simple",
            Path::Fast => "fast",
            Path::Mapped => "mapped",
        }
    }
}

/// The doubling kernel with its buffers, made once for up to `capacity` floats and reused.
///
/// The phases are separate so they can be timed separately:
/// - [`upload`](Self::upload): copy `input: [n]` to the GPU and wait until it is there;
/// - [`run`](Self::run): the kernel on the uploaded `n` elements, returning its GPU time;
/// - [`download`](Self::download): copy the `n` results back;
/// - [`round_trip`](Self::round_trip): all three as one program would do them, with one wait;
/// - [`record`](Self::record): the dispatch alone, into a compute pass of your own.
///
/// Each transfer takes a [`Path`]; [`download_mapped`](Self::download_mapped) and
/// [`round_trip_mapped`](Self::round_trip_mapped) are path 3's read-back, which lends the
/// results instead of copying them.
pub struct DoubleGpu {
    pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
    /// `[capacity]` f32, read by the kernel.
    input: wgpu::Buffer,
    /// `[capacity]` f32, written by the kernel (its first `len` elements).
    output: wgpu::Buffer,
    /// One u32: the number of elements the kernel doubles.
    len_buffer: wgpu::Buffer,
    timer: GpuTimer,
    /// The staging buffers of the fast paths (2 and 3), made on first use and kept.
    transfer: Transfer,
    capacity: usize,
    /// Elements uploaded last, and the workgroups that cover them.
    len: usize,
    groups: (u32, u32, u32),
}

impl DoubleGpu {
    /// Compiles the kernel and allocates buffers for up to `capacity` floats. Errors (without
    /// allocating) when `capacity` floats exceed the device's storage binding or buffer size,
    /// or one dispatch.
    pub fn new(ctx: &GpuContext, capacity: usize) -> Result<Self, GpuError> {
        let bytes = capacity as u64 * 4;
        ctx.check_storage_size("the doubling's input/output buffer", bytes)?;
        ctx.workgroups_1d(capacity as u64, WORKGROUP_SIZE)?;
        if u32::try_from(capacity).is_err() {
            return Err(GpuError::Validation(format!(
                "{capacity} elements do not fit the shader's u32 index; double at most {} at a time",
                u32::MAX
            )));
        }
        let pipeline = ctx.compute_pipeline("double", SHADER, "main")?;
        let input = ctx.storage_buffer_empty("double input", bytes)?;
        let output = ctx.storage_buffer_empty("double output", bytes)?;
        let len_buffer = ctx.uniform_buffer("double len", &0u32);
        let bind_group = ctx.bind_group("double", &pipeline, 0, &[&input, &output, &len_buffer])?;
        Ok(Self {
            pipeline,
            bind_group,
            input,
            output,
            len_buffer,
            timer: GpuTimer::new(ctx),
            transfer: Transfer::new(TransferConfig::default()),
            capacity,
            len: 0,
            groups: ctx.workgroups_1d(0, WORKGROUP_SIZE)?,
        })
    }

    /// The most floats one upload may hold.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// How [`run`](Self::run) measures: GPU timestamps, or the wall clock without them.
    pub fn time_source(&self) -> TimeSource {
        self.timer.source()
    }

    /// Fills the whole output buffer with NaN, so an element the kernel fails to write shows
    /// up in a comparison. Tests and the runner's validation do this before a run.
    pub fn poison_output(&self, ctx: &GpuContext) {
        ctx.poison(&self.output);
    }

    /// Copies `input: [n]` (n <= capacity) to the GPU along `path` and waits until it has
    /// arrived. ([`Path::Mapped`] uploads like [`Path::Fast`].)
    pub fn upload(&mut self, ctx: &GpuContext, path: Path, input: &[f32]) -> Result<(), GpuError> {
        self.write_input(ctx, path, input)?;
        // `write_buffer` only takes effect at the next submit: submit nothing, and wait.
        ctx.queue.submit([]);
        ctx.wait()
    }

    /// Runs the kernel on the last upload's `n` elements and returns the kernel's time in
    /// seconds (GPU timestamps around the pass where the adapter has them; see
    /// [`time_source`](Self::time_source)). Waits for the GPU.
    pub fn run(&self, ctx: &GpuContext) -> Result<f64, GpuError> {
        self.timer.time_pass(ctx, "double", |pass| self.record(pass))
    }

    /// Copies the last run's `n` results into `out: [n]` (n = the last upload's length) along
    /// `path` ([`Path::Mapped`] maps, then copies: use [`download_mapped`](Self::download_mapped)
    /// to read in place).
    pub fn download(&mut self, ctx: &GpuContext, path: Path, out: &mut [f32]) -> Result<(), GpuError> {
        if out.len() != self.len {
            return Err(GpuError::Validation(format!(
                "download into {} floats, but the last upload held {}",
                out.len(),
                self.len
            )));
        }
        // ANCHOR: download_paths
        match path {
            Path::Simple => ctx.read_into(&self.output, out),
            Path::Fast => self.transfer.download_into(ctx, &self.output, 0, out),
            Path::Mapped => {
                out.copy_from_slice(&self.transfer.download_mapped::<f32>(ctx, &self.output, 0, self.len)?);
                Ok(())
            }
        }
        // ANCHOR_END: download_paths
    }

    /// The last run's `n` results, read in place from mapped staging memory (path 3): nothing
    /// is copied out. Drop the guard before the next transfer.
    pub fn download_mapped(&mut self, ctx: &GpuContext) -> Result<MappedRead<'_, f32>, GpuError> {
        self.transfer.download_mapped(ctx, &self.output, 0, self.len)
    }

    /// Upload, kernel and download as a program does them: write the input, submit the kernel
    /// without timestamps, copy back, waiting once at the end. `input: [n] -> out: [n]`.
    pub fn round_trip(&mut self, ctx: &GpuContext, path: Path, input: &[f32], out: &mut [f32]) -> Result<(), GpuError> {
        if out.len() != input.len() {
            return Err(GpuError::Validation(format!(
                "round trip of {} floats into an output of {}",
                input.len(),
                out.len()
            )));
        }
        self.write_and_dispatch(ctx, path, input)?;
        // Submits the copy to the staging buffer(s), waits, and copies out.
        self.download(ctx, path, out)
    }

    /// The round trip of path 3: the fast upload, the kernel, and the results lent from mapped
    /// staging memory instead of copied into a slice. `input: [n] -> [n]`.
    pub fn round_trip_mapped(&mut self, ctx: &GpuContext, input: &[f32]) -> Result<MappedRead<'_, f32>, GpuError> {
        self.write_and_dispatch(ctx, Path::Mapped, input)?;
        self.download_mapped(ctx)
    }

    /// Queues the input and the kernel (no timestamps, no wait).
    fn write_and_dispatch(&mut self, ctx: &GpuContext, path: Path, input: &[f32]) -> Result<(), GpuError> {
        self.write_input(ctx, path, input)?;
        ctx.submit_pass("double", |pass| self.record(pass));
        Ok(())
    }

    /// Queues `input` and its length for the next submit; no waiting.
    fn write_input(&mut self, ctx: &GpuContext, path: Path, input: &[f32]) -> Result<(), GpuError> {
        if input.len() > self.capacity {
            return Err(GpuError::Validation(format!(
                "{} floats do not fit a DoubleGpu made for {}; make it with DoubleGpu::new(ctx, {})",
                input.len(),
                self.capacity,
                input.len()
            )));
        }
        let groups = ctx.workgroups_1d(input.len() as u64, WORKGROUP_SIZE)?;
        // ANCHOR: upload_paths
        match path {
            Path::Simple if !input.is_empty() => ctx.queue.write_buffer(&self.input, 0, bytemuck::cast_slice(input)),
            Path::Simple => {}
            Path::Fast | Path::Mapped => self.transfer.upload(ctx, &self.input, 0, input)?,
        }
        // ANCHOR_END: upload_paths
        // Fits: `new` checked that `capacity` fits a u32.
        let len = input.len() as u32;
        ctx.queue.write_buffer(&self.len_buffer, 0, bytemuck::bytes_of(&len));
        self.len = input.len();
        self.groups = groups;
        Ok(())
    }

    /// Records the kernel for the last upload's length into an open compute pass (no submit,
    /// no wait), so callers can put many dispatches into one pass: the benchmarks time
    /// kernels back to back this way instead of paying a submit and a timestamp read-back per
    /// kernel. Record it after `upload`/`round_trip`: the length is the last one written.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        let (x, y, z) = self.groups;
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &self.bind_group, &[]);
        pass.dispatch_workgroups(x, y, z);
    }
}

#[cfg(test)]
mod tests;
