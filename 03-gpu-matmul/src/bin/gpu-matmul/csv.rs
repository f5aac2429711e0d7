//! `--csv FILE`: the runner's figures as CSV, for the book's generated tables. One header, then
//! one row per measured kernel, product and size of the main tables, per ceiling probe and per
//! cuBLAS figure, written as each table is done (so a run cut short keeps what it measured).
//!
//! Columns `kernel,name,product,n,tflops,ms,percent_of_cublas,adapter`; a field is empty where
//! nothing was measured, and quoted where it holds a comma or a quote.
//! - a kernel: `kernel` is its number in two digits (`00` the CPU reference, `08_product_only`
//!   kernel 08's product alone), `name` its short name, `product` `A*B`, `A^T*B` or `A*B^T`,
//!   `n` the size (`MxKxN` where it is not square), `tflops` and `ms` its kernel time,
//!   `percent_of_cublas` its share of cuBLAS at the same size, product and precision;
//! - a ceiling probe: `kernel` `peak_fma`, `peak_fma_outer` or `peak_coop`, and its TFLOP/s;
//! - a cuBLAS figure: `kernel` `cublas_fp32`, `cublas_tf32` or `cublas_fp16` (FP16 inputs, FP32
//!   accumulation), its product and `n`, its TFLOP/s, and as `adapter` the GPU it was measured on.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use gpu_matmul::{Transpose, formula};

use crate::cublas::Cublas;
use crate::probes::Ceiling;
use crate::tables::{Row, Yardsticks};

/// The header line.
pub const HEADER: &str = "kernel,name,product,n,tflops,ms,percent_of_cublas,adapter";

/// An open `--csv` file, its header written.
pub struct Csv {
    out: BufWriter<File>,
    adapter: String,
}

impl Csv {
    /// Creates (or truncates) `path` and writes the header; `adapter` names the GPU of every
    /// kernel and probe row.
    pub fn create(path: &Path, adapter: &str) -> Result<Self, String> {
        let file = File::create(path).map_err(|e| format!("--csv {}: {e}", path.display()))?;
        let mut csv = Self { out: BufWriter::new(file), adapter: adapter.into() };
        writeln!(csv.out, "{HEADER}").and_then(|()| csv.out.flush()).map_err(|e| format!("--csv {}: {e}", path.display()))?;
        Ok(csv)
    }

    /// The rows of one main table (`flop` per product, shape `(m, k, n)`, product `t`) that
    /// were timed; rows that failed their check have no time and are left out.
    pub fn table(&mut self, rows: &[Row], flop: f64, shape: (usize, usize, usize), t: Transpose, yard: &Yardsticks) -> std::io::Result<()> {
        for r in rows {
            let Some(s) = r.kernel_s else { continue };
            let (cublas, _) = yard.percents(flop, r);
            let adapter = self.adapter.clone();
            self.row([&r.kernel, &r.name, &product(t), &size(shape), &num(Some(flop / s / 1e12)), &num(Some(s * 1e3)), &num(cublas), &adapter])?;
        }
        self.out.flush()
    }

    /// One row per ceiling probe.
    pub fn ceilings(&mut self, ceilings: &[Ceiling]) -> std::io::Result<()> {
        for c in ceilings {
            let adapter = self.adapter.clone();
            self.row([c.id, c.label, "", "", &num(Some(c.tflops)), "", "", &adapter])?;
        }
        self.out.flush()
    }

    /// One row per cuBLAS figure: FP32, TF32 and FP16 inputs at each size and product.
    pub fn cublas(&mut self, cublas: &Cublas) -> std::io::Result<()> {
        const KINDS: [(&str, &str); 3] =
            [("cublas_fp32", "cuBLAS FP32"), ("cublas_tf32", "cuBLAS TF32"), ("cublas_fp16", "cuBLAS FP16 inputs -> FP32")];
        for &(n, t, figures) in &cublas.rows {
            // A file with only `A * B` measured it alone (it stands for all three products).
            let t = product(t.unwrap_or(Transpose::None));
            for ((kernel, name), tflops) in KINDS.into_iter().zip(figures) {
                self.row([kernel, name, &t, &n.to_string(), &num(Some(tflops)), "", "", &cublas.device])?;
            }
        }
        self.out.flush()
    }

    fn row(&mut self, fields: [&str; 8]) -> std::io::Result<()> {
        let quoted: Vec<String> = fields.iter().map(|f| quote(f)).collect();
        writeln!(self.out, "{}", quoted.join(","))
    }
}

/// `A*B`, `A^T*B` or `A*B^T`: the formula without spaces, as `reference/pytorch_matmul.py`
/// writes it.
fn product(t: Transpose) -> String {
    formula(t).replace(' ', "")
}

/// `n` for a square product, `MxKxN` otherwise.
fn size((m, k, n): (usize, usize, usize)) -> String {
    if m == k && k == n { n.to_string() } else { format!("{m}x{k}x{n}") }
}

/// A number to 6 significant digits (trailing zeros dropped), or empty.
fn num(v: Option<f64>) -> String {
    v.map_or(String::new(), |v| {
        let decimals = if v == 0.0 || !v.is_finite() { 0 } else { (5 - v.abs().log10().floor() as i32).max(0) as usize };
        let s = format!("{v:.decimals$}");
        if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s }
    })
}

/// A field as CSV needs it: in double quotes (with quotes doubled) where it holds a comma, a
/// quote or a line break.
fn quote(field: &str) -> String {
    if field.contains([',', '"', '\n', '\r']) { format!("\"{}\"", field.replace('"', "\"\"")) } else { field.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_with_commas_or_quotes_are_quoted() {
        assert_eq!(quote("llvmpipe (LLVM 15.0.7, 256 bits)"), "\"llvmpipe (LLVM 15.0.7, 256 bits)\"");
        assert_eq!(quote("a \"b\""), "\"a \"\"b\"\"\"");
        assert_eq!(quote("A^T*B"), "A^T*B");
        assert_eq!(size((64, 784, 128)), "64x784x128");
        assert_eq!(size((16, 16, 16)), "16");
        assert_eq!(product(Transpose::B), "A*B^T");
        assert_eq!(num(None), "");
        assert_eq!(num(Some(0.060964000000000004)), "0.060964");
        assert_eq!(num(Some(0.00004301730249166382)), "0.0000430173");
        assert_eq!(num(Some(48.6)), "48.6");
        assert_eq!(num(Some(265.0)), "265");
        assert_eq!(num(Some(123456789.0)), "123456789");
    }
}
