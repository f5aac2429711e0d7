//! The runner's command line ([`Args`]) and the error type its parts return.

use clap::Parser;

/// Any error of the runner, printed by `main`.
pub(crate) type AnyError = Box<dyn std::error::Error>;

#[derive(Parser, Debug)]
#[command(about = "Train XOR and two spirals on the GPU and the CPU side by side; --bench times the MNIST-shaped step.")]
pub(crate) struct Args {
    /// Training steps for XOR.
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub(crate) xor_steps: u32,
    /// Epochs over the spirals.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub(crate) spiral_epochs: u32,
    /// Points per spiral arm.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(2..=1_000_000))]
    pub(crate) spiral_points: u32,
    /// Also time the MNIST-shaped training step (784-HIDDEN-10, batch BATCH, STEPS per pass).
    #[arg(long)]
    pub(crate) bench: bool,
    /// Only the benchmark (skip XOR and the spirals).
    #[arg(long)]
    pub(crate) bench_only: bool,
    /// Time each fused kernel with other tile sizes, one change at a time, the dispatch floor,
    /// and each dispatch inside a step (skips XOR and the spirals).
    #[arg(long)]
    pub(crate) sweep: bool,
    /// With --sweep: time only the default and the variants whose name contains one of these
    /// comma-separated words (`--variants "k splits,update B"`), and skip the in-step
    /// timestamps and the wide-layer grid.
    #[arg(long, value_delimiter = ',')]
    pub(crate) variants: Vec<String>,
    /// With --sweep: only the wide-layer grid (widths 128-2048, batches 64-1024, each way of
    /// running the hidden layer).
    #[arg(long)]
    pub(crate) grid: bool,
    /// Steps recorded into one pass for --bench (938 = one MNIST epoch at batch 64).
    #[arg(long, default_value_t = 938, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub(crate) steps: u32,
    /// Batch size for --bench.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub(crate) batch: u32,
    /// With --bench: after the network of --hidden, also 784-512-relu-256-relu-10 (two hidden
    /// layers), with and without dropout, at the same batch.
    #[arg(long)]
    pub(crate) deeper: bool,
    /// With --bench: after the network of --hidden, also these layer lists, comma-separated and
    /// each as `mnist --layers` takes it (`784-128-gelu-10,784-128-tanh-dropout0.2-10`): 784
    /// inputs, 10 outputs, softmax cross-entropy, SGD and Adam.
    #[arg(long, value_delimiter = ',')]
    pub(crate) layers: Vec<String>,
    /// Hidden widths for --bench and --sweep, comma-separated (`512,256`: two hidden layers).
    #[arg(long, default_value = "128", value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub(crate) hidden: Vec<u32>,
    /// The precision of the wide layers' products for --bench and --sweep: `f16-inputs` runs a
    /// forward split over k on the tensor cores (`linear_forward_coop`) where the adapter has
    /// cooperative matrices; --bench and --sweep then check a step against the CPU by the
    /// relative size of the whole gradient's error instead of element by element.
    #[arg(long, default_value = "f32", value_parser = ["f32", "f16-inputs"])]
    pub(crate) matmul: String,
    /// Timed repetitions for --bench (medians are reported).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub(crate) reps: u32,
    /// Steps per submission for the "chunked" wall-clock column of --bench: recording the next
    /// chunk overlaps the GPU running the previous one.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub(crate) chunk: u32,
    /// The limits to ask the adapter for: adapter (its own), webgpu (WebGPU's defaults), or some
    /// of the adapter's lowered, as KEY=VALUE pairs (storage-buffers, workgroup-storage,
    /// invocations, storage-binding). The fused kernels are chosen to fit them.
    #[arg(long, value_name = "LIMITS", default_value = "adapter")]
    pub(crate) gpu_limits: common::GpuLimits,
    /// Print what the driver compiled each kernel into (registers, spills, workgroup memory and
    /// whatever else it reports through Vulkan's VK_KHR_pipeline_executable_properties), with
    /// the default tiles, those of big batches and those of each --sweep variant; then stop.
    /// `both` (the default) compiles each with wgpu's buffer robustness and without, `robust`
    /// and `plain` one of them.
    #[arg(long, num_args = 0..=1, default_missing_value = "both", value_name = "both|robust|plain",
          value_parser = common::compiled::Robustness::choice)]
    pub(crate) compiled: Option<common::compiled::Settings>,
}
