//! `--tune`: every candidate tile of each kernel, checked on small awkward shapes first, then
//! timed at every size and product, one table per kernel, size and product.

use std::time::Instant;

use gpu_matmul::{Checks, Kernel, Matmul, TRANSPOSES, Transpose, formula};

use crate::cublas::Cublas;
use crate::operands::Operands;
use crate::tables::{Yardsticks, gflops, print_table};
use crate::timing::Bench;

/// Shapes every tuning candidate is checked on first, in all three transpose modes, against the
/// whole f64 product: sizes that divide no tile, row strides multiples of 4 (so vec4 kernels
/// run themselves, not their scalar stand-in), several workgroups and k-steps.
const TUNE_CHECK_SHAPES: [(usize, usize, usize); 2] = [(260, 100, 196), (36, 516, 68)];

/// Every candidate tile of every kernel at every size and product: one table per kernel, size
/// and product, so one run on a new GPU shows which tiles to make the defaults. Before it is
/// timed, each candidate is checked on `TUNE_CHECK_SHAPES` in all three transpose modes, and on
/// the timed product itself (sampled rows at large sizes).
pub fn tune(
    bench: &Bench,
    kernels: &[Kernel],
    sizes: &[(usize, usize, usize)],
    transposes: &[Transpose],
    checks: Option<Checks>,
    yard: &Yardsticks,
    cublas: Option<&Cublas>,
) -> Result<(), Box<dyn std::error::Error>> {
    let ctx = bench.ctx;
    let small: Vec<Operands> = TUNE_CHECK_SHAPES
        .iter()
        .flat_map(|&shape| TRANSPOSES.map(move |t| (shape, t)))
        .map(|(shape, t)| Operands::new(ctx, shape, t, 99))
        .collect::<Result<_, _>>()?;
    // Candidates that compile and pass the small checks, per kernel.
    let mut candidates: Vec<(Kernel, Vec<Matmul>)> = Vec::new();
    for &kernel in kernels {
        let mut ok = Vec::new();
        for tile in kernel.tune_tiles() {
            let mm = match Matmul::with_options(ctx, kernel, vec![tile], checks) {
                Ok(mm) => mm,
                Err(e) => {
                    println!("tune: {kernel} {tile}: skipped: {e}");
                    continue;
                }
            };
            let mut failed = Vec::new();
            for ops in &small {
                if let (_, Err(report)) = bench.run_checked(&mm, ops)? {
                    let (m, k, n) = ops.dims();
                    failed.push(format!("{} m={m} k={k} n={n}: {report}", formula(ops.t)));
                }
            }
            if failed.is_empty() {
                ok.push(mm);
            } else {
                println!("tune: {kernel} {tile}: FAILED the small checks, not timed:\n    {}", failed.join("\n    "));
            }
        }
        candidates.push((kernel, ok));
    }
    for &(m, k, n) in sizes {
        for &t in transposes {
            let flop = 2.0 * (m * k * n) as f64;
            let ops = Operands::new(ctx, (m, k, n), t, 42)?;
            let yard = yard.with_cublas(cublas, (m, k, n), t);
            println!("\ntune: {} with m = {m}, k = {k}, n = {n}; check: {}", formula(t), ops.reference.describe());
            for (kernel, mms) in &candidates {
                let started = Instant::now();
                let mut rows = Vec::new();
                for mm in mms {
                    rows.extend(bench.gpu(mm, &ops)?);
                }
                print_table(flop, &rows, &yard);
                if let Some(best) = rows
                    .iter()
                    .filter(|r| r.kernel_s.is_some() && !r.label.ends_with("product only"))
                    .min_by(|x, y| x.kernel_s.unwrap_or(f64::INFINITY).total_cmp(&y.kernel_s.unwrap_or(f64::INFINITY)))
                {
                    println!(
                        "  best tile for {kernel} at this size: {} ({} GFLOP/s; {:.1} s for this table)",
                        best.ran,
                        gflops(flop, best.kernel_s),
                        started.elapsed().as_secs_f64()
                    );
                }
            }
        }
    }
    Ok(())
}
