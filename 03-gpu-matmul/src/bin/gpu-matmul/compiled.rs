//! `--compiled`: what the driver compiled each kernel's tiles into (registers, spills, workgroup
//! memory), through `common::compiled`.

use common::GpuContext;
use gpu_matmul::{Kernel, Transpose, formula};

/// `--compiled`: what the driver made of each kernel's tiles (`common::compiled`), one line per
/// tile, product and robustness setting, with the statistics as the driver names them.
pub fn compiled(
    ctx: &GpuContext,
    settings: &[common::compiled::Robustness],
    kernels: &[Kernel],
    every_tile: bool,
    transposes: &[Transpose],
    out: Option<&std::path::Path>,
) -> Result<(), Box<dyn std::error::Error>> {
    if ctx.info.backend != common::wgpu::Backend::Vulkan {
        return Err(format!("--compiled reads Vulkan's pipeline statistics; {} is not a Vulkan adapter", ctx.adapter_line()).into());
    }
    let mut sources = Vec::new();
    for &k in kernels {
        for tile in if every_tile { k.tune_tiles() } else { k.tile_ladder() } {
            for &t in transposes {
                sources.push((format!("kernel {k} {tile} | {}", formula(t)), k.wgsl(tile, t, &ctx.limits)?));
            }
        }
    }
    Ok(common::compiled::report(&ctx.info.name, settings, sources, out)?)
}
