//! The two extra tables of a full run: the small products stage 04 runs (MNIST, batch 64), and
//! kernels 03-05 compiled with each setting of naga's runtime checks.

use common::GpuTimer;
use gpu_matmul::{Checks, Kernel, Matmul, Transpose, formula};

use crate::operands::Operands;
use crate::tables::{Yardsticks, print_table};
use crate::timing::Bench;

/// Kernels 03-05 compiled with each setting of naga's runtime checks, at their default tile.
pub fn checks_study(bench: &Bench, kernels: &[Kernel], (m, k, n): (usize, usize, usize)) -> Result<(), Box<dyn std::error::Error>> {
    if kernels.is_empty() {
        return Ok(());
    }
    let flop = 2.0 * (m * k * n) as f64;
    let ops = Operands::new(bench.ctx, (m, k, n), Transpose::None, 42)?;
    println!("\nruntime checks: A * B with m = {m}, k = {k}, n = {n}, default tiles, each kernel compiled three ways; check: {}", ops.reference.describe());
    let quick = Bench { ctx: bench.ctx, timer: GpuTimer::new(bench.ctx), reps: bench.reps.min(5), warmup: 1 };
    let mut rows = Vec::new();
    for &kernel in kernels {
        for checks in [Checks::All, Checks::BoundsOnly, Checks::None] {
            let mm = Matmul::with_options(bench.ctx, kernel, vec![kernel.default_tile()], Some(checks))?;
            for mut row in quick.gpu(&mm, &ops)? {
                row.label = format!("{row_label} {checks}", row_label = row.label);
                rows.push(row);
            }
        }
    }
    print_table(flop, &rows, &Yardsticks::default());
    Ok(())
}

/// The products stage 04 runs for an MNIST network 784-128-10 at batch 64: forward, and the
/// two transposed products of backprop. Small, so launch overhead and idle SMs dominate.
pub fn mnist_shapes(bench: &Bench, matmuls: &[Matmul]) -> Result<(), Box<dyn std::error::Error>> {
    let shapes = [
        ("forward  x W1", Transpose::None, (64, 784, 128)),
        ("forward  h W2", Transpose::None, (64, 128, 10)),
        ("dW2 = h^T dY", Transpose::A, (128, 64, 10)),
        ("dH = dY W2^T", Transpose::B, (64, 10, 128)),
        ("dW1 = x^T dH", Transpose::A, (784, 64, 128)),
    ];
    println!("\nthe shapes stage 04 runs (MNIST 784-128-10, batch 64); kernel time only matters here:");
    for (name, t, (m, k, n)) in shapes {
        let flop = 2.0 * (m * k * n) as f64;
        let ops = Operands::new(bench.ctx, (m, k, n), t, 7)?;
        println!("\n{name}: {} with m = {m}, k = {k}, n = {n} ({:.1} MFLOP); check: {}", formula(t), flop / 1e6, ops.reference.describe());
        let mut rows = Vec::new();
        for mm in matmuls {
            rows.extend(bench.gpu(mm, &ops)?);
        }
        print_table(flop, &rows, &Yardsticks::default());
    }
    Ok(())
}
