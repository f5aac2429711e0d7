//! This CPU's peak f32 throughput, computed and measured, for the runner's "% of peak".
//!
//! Computed: `cores x SIMD lanes x FMA instructions per cycle x 2 flops (a multiply and an add)
//! x clock`. The lanes come from run-time feature detection; how many vector FMAs a core
//! retires per cycle is not exposed by CPUID, so it comes from the vendor and family (Zen 4
//! splits a 512-bit FMA over its two 256-bit pipes: one 512-bit FMA per cycle; Zen 5 and Xeon
//! Scalable Gold/Platinum have two full 512-bit FMA units). `--flops-per-cycle` and `--ghz`
//! override both guesses.
//!
//! The clock: the OS reports a nominal clock (in a VM often the base clock), but cores boost
//! above it. So the clock in the formula is measured: a loop of independent FMAs with no memory
//! traffic runs at exactly `lanes x FMAs per cycle x 2` flops per cycle, so its GFLOP/s divided
//! by that is the real clock (best of five runs on one core). `--ghz` overrides it.

use std::time::Instant;

use common::cpuinfo;

/// The formula's inputs, with where each came from.
pub struct Peak {
    pub lanes: usize,
    pub fma_per_cycle: f64,
    pub ghz: f64,
    pub clock_source: String,
    pub isa: &'static str,
    pub fma_note: &'static str,
}

impl Peak {
    /// Flops per cycle for one core: `lanes x FMAs per cycle x 2`.
    pub fn flops_per_cycle(&self) -> f64 {
        self.lanes as f64 * self.fma_per_cycle * 2.0
    }

    /// Computed peak of `cores` cores in GFLOP/s.
    pub fn gflops(&self, cores: usize) -> f64 {
        cores as f64 * self.flops_per_cycle() * self.ghz
    }
}

/// The formula's inputs for this machine; `ghz` / `flops_per_cycle` override the guesses.
pub fn detect(ghz: Option<f64>, flops_per_cycle: Option<f64>) -> Peak {
    let (isa, lanes) = isa();
    let vendor = cpuinfo("vendor_id").unwrap_or_default();
    let family: u32 = cpuinfo("cpu family").and_then(|f| f.parse().ok()).unwrap_or(0);
    let (fma_per_cycle, fma_note) = match (isa, vendor.as_str()) {
        ("avx512f", "AuthenticAMD") if family == 0x19 => {
            (1.0, "Zen 4: a 512-bit FMA uses both 256-bit FMA pipes, so 1 per cycle")
        }
        ("avx512f", "AuthenticAMD") => (2.0, "Zen 5: two 512-bit FMA pipes"),
        ("avx512f", _) => (2.0, "Xeon Scalable: two 512-bit FMA units (some models have one)"),
        ("avx2+fma", _) => (2.0, "two 256-bit FMA units"),
        _ => (1.0, "no FMA: one multiply and one add per cycle, counted as one FMA"),
    };
    let fma_per_cycle = flops_per_cycle.map_or(fma_per_cycle, |f| f / (2.0 * lanes as f64));
    let fma_note = if flops_per_cycle.is_some() { "set by --flops-per-cycle" } else { fma_note };
    let (os_ghz, os_source) = clock();
    let flops_per_cycle = lanes as f64 * fma_per_cycle * 2.0;
    let (ghz, clock_source) = match (ghz, measure_fma(1)) {
        (Some(g), _) => (g, "--ghz".to_string()),
        // The clock the core really runs FMAs at (turbo included): measured flops / flops per cycle.
        (None, Some(g)) => (
            g / flops_per_cycle,
            format!("an FMA-only loop: {g:.1} GFLOP/s / {flops_per_cycle} flops per cycle; the OS says {os_ghz:.2} GHz ({os_source})"),
        ),
        (None, None) => (os_ghz, os_source),
    };
    Peak { lanes, fma_per_cycle, ghz, clock_source, isa, fma_note }
}

/// The widest f32 vector ISA detected at run time and its lane count.
fn isa() -> (&'static str, usize) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return ("avx512f", 16);
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
            return ("avx2+fma", 8);
        }
        ("sse2", 4)
    }
    #[cfg(not(target_arch = "x86_64"))]
    ("portable", 4)
}

/// The maximum clock from cpufreq if the OS exposes it, else the "cpu MHz" of /proc/cpuinfo
/// (in a VM that is usually the nominal clock), else 1 GHz with a warning.
fn clock() -> (f64, String) {
    let max = "/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq";
    if let Some(khz) = std::fs::read_to_string(max).ok().and_then(|s| s.trim().parse::<f64>().ok()) {
        return (khz / 1e6, max.to_string());
    }
    if let Some(mhz) = cpuinfo("cpu MHz").and_then(|s| s.parse::<f64>().ok()) {
        return (mhz / 1e3, "\"cpu MHz\" in /proc/cpuinfo".to_string());
    }
    (1.0, "unknown (assumed 1 GHz; pass --ghz)".to_string())
}

/// GFLOP/s of a loop of independent FMAs on `threads` threads, or `None` without a vector FMA.
/// The best of five runs of about 40 ms, so a compile job on the other core does not hide the
/// peak.
pub fn measure_fma(threads: usize) -> Option<f64> {
    let (isa, _) = isa();
    if isa == "sse2" || isa == "portable" {
        return None;
    }
    let iters = 10_000_000usize;
    let best = (0..5)
        .map(|_| {
            let start = Instant::now();
            let flops: f64 = std::thread::scope(|s| {
                let handles: Vec<_> = (0..threads).map(|_| s.spawn(move || fma_loop(isa, iters))).collect();
                handles.into_iter().map(|h| h.join().expect("FMA loop thread panicked")).sum()
            });
            flops / start.elapsed().as_secs_f64() / 1e9
        })
        .fold(0.0, f64::max);
    Some(best)
}

/// Runs the FMA loop and returns the flops it did.
fn fma_loop(isa: &str, iters: usize) -> f64 {
    let iters = std::hint::black_box(iters);
    #[cfg(target_arch = "x86_64")]
    {
        if isa == "avx512f" {
            // SAFETY: avx512f was detected at run time.
            let r = unsafe { fma_avx512(iters) };
            std::hint::black_box(r);
            return (iters * CHAINS * 16 * 2) as f64;
        }
        // SAFETY: avx2 and fma were detected at run time (isa() returned "avx2+fma").
        let r = unsafe { fma_avx2(iters) };
        std::hint::black_box(r);
        (iters * CHAINS * 8 * 2) as f64
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (isa, iters);
        0.0
    }
}

/// Independent accumulators: enough to cover FMA latency (4 cycles) x units (2) with room.
const CHAINS: usize = 12;

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn fma_avx512(iters: usize) -> f32 {
    use std::arch::x86_64::*;
    let mut acc = [_mm512_set1_ps(1.0); CHAINS];
    let (x, y) = (_mm512_set1_ps(0.999_999), _mm512_set1_ps(1e-7));
    for _ in 0..iters {
        for a in acc.iter_mut() {
            *a = _mm512_fmadd_ps(*a, x, y);
        }
    }
    acc.iter().map(|&a| _mm512_reduce_add_ps(a)).sum()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn fma_avx2(iters: usize) -> f32 {
    use std::arch::x86_64::*;
    let mut acc = [_mm256_set1_ps(1.0); CHAINS];
    let (x, y) = (_mm256_set1_ps(0.999_999), _mm256_set1_ps(1e-7));
    for _ in 0..iters {
        for a in acc.iter_mut() {
            *a = _mm256_fmadd_ps(*a, x, y);
        }
    }
    let mut lanes = [0.0f32; 8];
    for a in acc {
        let mut v = [0.0f32; 8];
        // SAFETY: `v` holds 8 floats.
        unsafe { _mm256_storeu_ps(v.as_mut_ptr(), a) };
        lanes.iter_mut().zip(v).for_each(|(l, x)| *l += x);
    }
    lanes.iter().sum()
}
