//! The ceiling probes: kernels that only compute from registers (`gpu_matmul::PeakProbe`),
//! timed like a kernel, whose TFLOP/s the kernels are measured against.

use gpu_matmul::{PeakProbe, Precision};

use crate::timing::Bench;

/// Workgroups of each ceiling probe: 16 per multiprocessor on the H200 (132).
const PROBE_WORKGROUPS: u32 = 2112;

/// One timed probe.
pub struct Ceiling {
    /// Its shader's name, as the CSV's `kernel` column gives it: `peak_fma`, `peak_fma_outer`,
    /// `peak_coop`.
    pub id: &'static str,
    /// What it measures (`PeakProbe::label`).
    pub label: &'static str,
    /// The kernels whose ceiling it is.
    pub precision: Precision,
    /// Its rate, in TFLOP/s.
    pub tflops: f64,
}

/// Times the ceiling probes and prints them: the two f32 probes, and the cooperative-matrix one
/// where the adapter has what it needs.
pub fn probes(bench: &Bench) -> Result<Vec<Ceiling>, Box<dyn std::error::Error>> {
    let ctx = bench.ctx;
    println!("\nceilings through WGSL on this adapter: kernels that only compute from registers ({PROBE_WORKGROUPS} workgroups):");
    let mut ceilings = Vec::new();
    let mut time = |id, probe: &PeakProbe, precision| -> Result<(), common::GpuError> {
        let tflops = bench.probe(probe)?;
        println!("  {:<40} {:>8.1} TFLOP/s", probe.label, tflops);
        ceilings.push(Ceiling { id, label: probe.label, precision, tflops });
        Ok(())
    };
    // The f32 ceiling is the faster of two forms of the same multiply-adds.
    let (fma, fma_outer) = (PeakProbe::fma(ctx, PROBE_WORKGROUPS)?, PeakProbe::fma_outer(ctx, PROBE_WORKGROUPS)?);
    time("peak_fma", &fma, Precision::F32)?;
    time("peak_fma_outer", &fma_outer, Precision::F32)?;
    match PeakProbe::coop(ctx, PROBE_WORKGROUPS) {
        Ok(probe) => time("peak_coop", &probe, Precision::F16Inputs)?,
        Err(e) => println!("  cooperative-matrix probe skipped: {e}"),
    }
    Ok(ceilings)
}

/// The f32 and the cooperative-matrix ceilings in TFLOP/s: the f32 one is the faster of the two
/// forms of the same multiply-adds.
pub fn peaks(ceilings: &[Ceiling]) -> (Option<f64>, Option<f64>) {
    let best = |p: Precision| ceilings.iter().filter(|c| c.precision == p).map(|c| c.tflops).reduce(f64::max);
    (best(Precision::F32), best(Precision::F16Inputs))
}
