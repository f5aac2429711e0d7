//! The runner's printed tables: one measured [`Row`] per kernel, and the [`Yardsticks`] each
//! row is given as a share of (cuBLAS at the same size, the probes' ceilings).

use gpu_matmul::{Precision, Transpose};

use crate::cublas::Cublas;

/// One measured line of a table.
pub struct Row {
    /// The kernel as the CSV names it: its number in two digits (`00` for the CPU reference,
    /// `08_product_only` for kernel 08's product alone on its f16 copies).
    pub kernel: String,
    /// The kernel's short name (`double_buffered`; `cpu` for the CPU reference).
    pub name: String,
    /// The first column of the printed table: `05 double_buffered`.
    pub label: String,
    /// What ran: the tile, or the kernel that stood in and its tile.
    pub ran: String,
    /// The precision of a GPU kernel (which cuBLAS figure and ceiling it is compared with).
    pub precision: Option<Precision>,
    /// Seconds per product on the GPU (kernels only; for the CPU reference, its time), where
    /// measured.
    pub kernel_s: Option<f64>,
    /// Seconds of upload + product + download, where measured.
    pub e2e_s: Option<f64>,
    /// The check's verdict.
    pub note: String,
}

/// GFLOP/s of `flop` done in `s` seconds, for the table (`-` where not measured).
pub fn gflops(flop: f64, s: Option<f64>) -> String {
    s.map_or("-".into(), |s| format!("{:.1}", flop / s / 1e9))
}

/// What a table's rows are compared with, in TFLOP/s: cuBLAS at this size and product (FP32,
/// FP16 inputs) and the probes' ceilings (f32 FMA, cooperative matrices).
#[derive(Default, Clone, Copy)]
pub struct Yardsticks {
    /// cuBLAS FP32 at this size and product.
    pub cublas_f32: Option<f64>,
    /// cuBLAS with FP16 inputs and FP32 accumulation at this size and product.
    pub cublas_f16: Option<f64>,
    /// The faster f32 FMA probe.
    pub peak_f32: Option<f64>,
    /// The cooperative-matrix probe.
    pub peak_f16: Option<f64>,
}

impl Yardsticks {
    /// Row `r`'s kernel time as a percentage of cuBLAS and of the ceiling at its precision,
    /// where both are known.
    pub fn percents(&self, flop: f64, r: &Row) -> (Option<f64>, Option<f64>) {
        let (cublas, peak) = match r.precision {
            Some(Precision::F32) => (self.cublas_f32, self.peak_f32),
            Some(Precision::F16Inputs) => (self.cublas_f16, self.peak_f16),
            None => (None, None),
        };
        let pct = |of: Option<f64>| match (r.kernel_s, of) {
            (Some(s), Some(t)) => Some(100.0 * flop / s / (t * 1e12)),
            _ => None,
        };
        (pct(cublas), pct(peak))
    }

    /// [`Yardsticks::percents`] as the table prints them: `83%`, or `-`.
    fn share(&self, flop: f64, r: &Row) -> (String, String) {
        let (cublas, peak) = self.percents(flop, r);
        let show = |p: Option<f64>| p.map_or("-".into(), |p| format!("{p:.0}%"));
        (show(cublas), show(peak))
    }
}

/// Prints one table: a line per row, with GFLOP/s, the share of the fastest row, of cuBLAS and
/// of the ceiling, and the check's verdict.
pub fn print_table(flop: f64, rows: &[Row], yard: &Yardsticks) {
    let best = rows.iter().filter_map(|r| r.kernel_s).fold(f64::INFINITY, f64::min);
    let w = rows.iter().map(|r| r.label.len()).max().unwrap_or(0).max(6);
    let wr = rows.iter().map(|r| r.ran.len()).max().unwrap_or(0).max(32);
    println!(
        "  {:<w$} {:<wr$} {:>15} {:>18} {:>10} {:>9} {:>7}  check",
        "kernel", "ran (tile bm x bn x bk / tm x tn)", "kernel GFLOP/s", "end-to-end GFLOP/s", "% of best", "% cuBLAS", "% peak"
    );
    for r in rows {
        let pct = r.kernel_s.map_or("-".into(), |s| format!("{:.0}%", 100.0 * best / s));
        let (cublas, peak) = yard.share(flop, r);
        println!(
            "  {:<w$} {:<wr$} {:>15} {:>18} {:>10} {:>9} {:>7}  {}",
            r.label,
            r.ran,
            gflops(flop, r.kernel_s),
            gflops(flop, r.e2e_s),
            pct,
            cublas,
            peak,
            r.note
        );
    }
}

impl Yardsticks {
    /// These yardsticks with the cuBLAS figures for one size and product, where measured.
    pub fn with_cublas(&self, cublas: Option<&Cublas>, shape: (usize, usize, usize), t: Transpose) -> Self {
        let figures = cublas.and_then(|c| c.get(shape, t));
        Self { cublas_f32: figures.map(|f| f[0]), cublas_f16: figures.map(|f| f[2]), ..*self }
    }
}
