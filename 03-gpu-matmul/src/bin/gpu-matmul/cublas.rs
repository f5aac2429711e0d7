//! The cuBLAS figures the kernels are compared with: the output of
//! `reference/pytorch_matmul.py` (`--cublas FILE`, or the committed H200 measurement), parsed.

use common::GpuContext;
use gpu_matmul::{Transpose, formula};

/// cuBLAS through PyTorch on one GPU: the output of `reference/pytorch_matmul.py`.
pub struct Cublas {
    /// Where the figures were read from, for messages.
    pub source: String,
    /// The GPU they were measured on, as the script names it.
    pub device: String,
    /// `(n, product, FP32, TF32, FP16 inputs -> FP32)` in TFLOP/s; product `None` where the
    /// file has only `A * B` (then it stands for all three).
    pub rows: Vec<(usize, Option<Transpose>, [f64; 3])>,
}

impl Cublas {
    /// Parses the script's output: a `device: NAME, torch VERSION` line, then lines of
    /// `n [product] FP32 TF32 FP16->FP32` (product `A*B`, `A^T*B` or `A*B^T`).
    fn parse(text: &str, source: &str) -> Result<Self, String> {
        let device = text
            .lines()
            .find_map(|l| l.strip_prefix("device: "))
            .and_then(|l| l.split(", torch").next())
            .ok_or_else(|| format!("{source}: no `device: ...` line; is it the output of reference/pytorch_matmul.py?"))?
            .trim()
            .to_string();
        let mut rows = Vec::new();
        for line in text.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            let Some(Ok(n)) = words.first().map(|w| w.parse::<usize>()) else { continue };
            let (product, nums) = match words.len() {
                4 => (None, &words[1..]),
                5 => {
                    let t = match words[1] {
                        "A*B" => Transpose::None,
                        "A^T*B" => Transpose::A,
                        "A*B^T" => Transpose::B,
                        other => return Err(format!("{source}: unknown product {other:?} in {line:?}")),
                    };
                    (Some(t), &words[2..])
                }
                _ => return Err(format!("{source}: cannot read {line:?}")),
            };
            let v: Vec<f64> = nums.iter().map(|w| w.parse::<f64>()).collect::<Result<_, _>>().map_err(|e| format!("{source}: {line:?}: {e}"))?;
            rows.push((n, product, [v[0], v[1], v[2]]));
        }
        if rows.is_empty() {
            return Err(format!("{source}: no measurements"));
        }
        Ok(Self { source: source.into(), device, rows })
    }

    /// `[FP32, TF32, FP16->FP32]` for an `n x n x n` product `t`.
    pub fn get(&self, (m, k, n): (usize, usize, usize), t: Transpose) -> Option<[f64; 3]> {
        if m != k || k != n {
            return None;
        }
        let exact = self.rows.iter().find(|r| r.0 == n && r.1 == Some(t));
        exact.or_else(|| self.rows.iter().find(|r| r.0 == n && r.1.is_none())).map(|r| r.2)
    }
}

/// The cuBLAS figures for this adapter: `--cublas FILE`, or the committed H200 measurement
/// where this adapter is the one it was measured on.
pub fn load_cublas(ctx: &GpuContext, path: Option<&std::path::Path>) -> Result<Option<Cublas>, Box<dyn std::error::Error>> {
    const COMMITTED: &str = include_str!("../../../results/h200-torch-matmul.txt");
    let cublas = match path {
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| format!("--cublas {}: {e}", p.display()))?;
            Cublas::parse(&text, &p.display().to_string())?
        }
        None => Cublas::parse(COMMITTED, "03-gpu-matmul/results/h200-torch-matmul.txt (committed)")?,
    };
    if !ctx.info.name.contains(&cublas.device) {
        if path.is_some() {
            println!("note: {} was measured on {:?}, not on this adapter ({}); comparing anyway", cublas.source, cublas.device, ctx.info.name);
        } else {
            return Ok(None);
        }
    }
    println!("cuBLAS through PyTorch on {}, from {} (TFLOP/s; FP32 / TF32 / FP16 inputs -> FP32):", cublas.device, cublas.source);
    for (n, t, [f32_, tf32, f16]) in &cublas.rows {
        let what = t.map_or("A * B (stands for all three products)".to_string(), |t| formula(t).to_string());
        println!("  n = {n:>5}, {what}: {f32_:.1} / {tf32:.1} / {f16:.1}");
    }
    Ok(Some(cublas))
}
