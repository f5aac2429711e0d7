//! The runner's command line: [`Args`], the parsers of `--sizes` and `--checks`, and what the
//! flags resolve to on this adapter (default sizes and repetitions, the kernels asked for).

use clap::Parser;
use gpu_matmul::{Checks, Kernel, TRANSPOSES, Transpose};

#[derive(Parser, Debug)]
#[command(about = "Validate, then time, the stage 03 matmul kernels (0 = the CPU reference)")]
pub struct Args {
    /// Kernels to run, by number (0 = the CPU reference, stage 02's best matmul; 1.. =
    /// shaders/NN_*.wgsl). Default: all.
    pub kernels: Vec<u32>,
    /// Sizes: `n` for n x n x n, or `MxKxN`, comma-separated. Default: 128,256,512 on a
    /// software adapter, 1024,2048,4096 on a GPU.
    #[arg(long, value_delimiter = ',', value_parser = parse_shape)]
    pub sizes: Vec<(usize, usize, usize)>,
    /// Timed repetitions per kernel (median reported), 1 to 10000. Default: 3 on a software
    /// adapter, 20 on a GPU.
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=10_000))]
    pub reps: Option<usize>,
    /// Untimed runs before timing, 0 to 10000.
    #[arg(long, default_value_t = 2, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=10_000))]
    pub warmup: usize,
    /// Also time A^T * B and A * B^T (for the kernels that run; with --tune, tune each).
    #[arg(long)]
    pub transposes: bool,
    /// Try every candidate tile of each kernel (`Kernel::tune_tiles`) and print them all. Each
    /// is first checked on small awkward shapes in all three transpose modes.
    #[arg(long)]
    pub tune: bool,
    /// cuBLAS figures to compare with: the output of `reference/pytorch_matmul.py` on this GPU.
    /// Default: `results/h200-torch-matmul.txt` (committed) where its device is this adapter.
    #[arg(long)]
    pub cublas: Option<std::path::PathBuf>,
    /// Skip the ceiling probes (f32 FMA and cooperative-matrix rates from registers).
    #[arg(long)]
    pub no_probe: bool,
    /// Skip timing the CPU reference (0) even when it is asked for.
    #[arg(long)]
    pub no_cpu: bool,
    /// Skip the table of the small shapes stage 04 runs (MNIST, batch 64).
    #[arg(long)]
    pub no_mnist: bool,
    /// Compile every kernel with these runtime checks instead of its default:
    /// all (wgpu's default), bounds (index clamping only) or none.
    #[arg(long, value_parser = parse_checks)]
    pub checks: Option<Checks>,
    /// Skip the table that times kernels 03-05 with each setting of the runtime checks.
    #[arg(long)]
    pub no_checks_study: bool,
    /// Print what the driver compiled each kernel into (registers, spills, workgroup memory and
    /// whatever else it reports through Vulkan's VK_KHR_pipeline_executable_properties), then
    /// stop: each kernel's ladder of tiles, or with --tune every candidate tile; with
    /// --transposes all three products. `both` (the default) compiles each with wgpu's buffer
    /// robustness and without, `robust` and `plain` one of them.
    #[arg(long, num_args = 0..=1, default_missing_value = "both", value_name = "both|robust|plain",
          value_parser = common::compiled::Robustness::choice)]
    pub compiled: Option<common::compiled::Settings>,
    /// With --compiled: also write each text representation the driver offers (compiled code,
    /// if it gives any) into this folder, one file per kernel, tile, product and robustness.
    #[arg(long, requires = "compiled")]
    pub compiled_out: Option<std::path::PathBuf>,
    /// Also write every figure of the main tables to this CSV file, one row per kernel, product
    /// and size (`kernel,name,product,n,tflops,ms,percent_of_cublas,adapter`), with a row per
    /// ceiling probe and per cuBLAS figure (see `csv.rs`). Not with --tune or --compiled.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["tune", "compiled"])]
    pub csv: Option<std::path::PathBuf>,
}

impl Args {
    /// The sizes asked for, or the defaults: 128, 256, 512 on a software adapter, 1024, 2048,
    /// 4096 on a GPU, as `(m, k, n)`.
    pub fn sizes(&self, software: bool) -> Vec<(usize, usize, usize)> {
        if self.sizes.is_empty() {
            if software { vec![(128, 128, 128), (256, 256, 256), (512, 512, 512)] } else { vec![(1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096)] }
        } else {
            self.sizes.clone()
        }
    }

    /// Timed repetitions: `--reps`, or 3 on a software adapter and 20 on a GPU.
    pub fn reps(&self, software: bool) -> usize {
        self.reps.unwrap_or(if software { 3 } else { 20 }).max(1)
    }

    /// The GPU kernels asked for (all by default), and whether to time the CPU reference (0 is
    /// asked for, or nothing is, and neither `--no-cpu` nor `--tune` is given). Errors on a
    /// number that is no kernel.
    pub fn kernels(&self) -> Result<(Vec<Kernel>, bool), String> {
        let mut numbers = self.kernels.clone();
        if numbers.is_empty() {
            numbers = std::iter::once(0).chain(Kernel::ALL.iter().map(|k| k.number())).collect();
        }
        let mut kernels = Vec::new();
        let mut want_cpu = false;
        for n in numbers {
            match n {
                0 => want_cpu = true,
                n => match Kernel::from_number(n) {
                    Some(k) => kernels.push(k),
                    None => {
                        let valid: Vec<String> = Kernel::ALL.iter().map(|k| format!("{} ({})", k.number(), k.name())).collect();
                        return Err(format!("no kernel {n}: choose 0 (the CPU reference) or {}", valid.join(", ")));
                    }
                },
            }
        }
        Ok((kernels, want_cpu && !self.no_cpu && !self.tune))
    }

    /// The products to run: all three with `--transposes`, else `A * B`.
    pub fn transposes(&self) -> &'static [Transpose] {
        if self.transposes { &TRANSPOSES } else { &[Transpose::None] }
    }
}

fn parse_checks(s: &str) -> Result<Checks, String> {
    match s {
        "all" => Ok(Checks::All),
        "bounds" => Ok(Checks::BoundsOnly),
        "none" => Ok(Checks::None),
        _ => Err(format!("bad --checks {s:?}: choose all, bounds or none")),
    }
}

fn parse_shape(s: &str) -> Result<(usize, usize, usize), String> {
    let parts: Vec<&str> = s.trim().split('x').collect();
    let nums: Result<Vec<usize>, _> = parts.iter().map(|p| p.parse::<usize>()).collect();
    match *nums.map_err(|e| format!("bad size {s:?}: {e}"))?.as_slice() {
        [n] if n > 0 => Ok((n, n, n)),
        [m, k, n] if m > 0 && k > 0 && n > 0 => Ok((m, k, n)),
        _ => Err(format!("bad size {s:?}: give n (square) or MxKxN, all positive")),
    }
}
