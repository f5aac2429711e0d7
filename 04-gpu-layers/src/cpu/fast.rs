//! The fast CPU path: the CPU trainer's fused ops, written for speed, the same math as the fused
//! CPU references in `reference.rs` (which stay the plain reference, compositions of the primitive
//! ones), in one pass each, with
//! no allocation per step, register-tiled products and threads only where they pay.
//!
//! A training step of 784-128-10 at batch 64 is two products of 6.4 M multiply-adds
//! (`x W₁` and `xᵀ dh`) and a few small ones: about 26 MFLOP, a quarter of a millisecond for one
//! core running AVX-512 at half its peak. The CPU references spend more than that around the arithmetic:
//! they copy both operands into new matrices for stage 02's `matmul`, pack them into panels, and
//! then walk the result again for the bias, again for the activation, again for the column sums
//! and again for the optimizer. Here:
//!
//! - **No packing.** Every operand of a batch-64 step fits in the 1-2 MiB L2 cache of one core
//!   (`W₁` is 400 KB, a batch 200 KB), so the micro-kernel reads `W` and `dy` where they lie, one
//!   row of `NR` floats per step of `k`, and the rows of `x` (or, for `xᵀ dy`, eight consecutive
//!   floats of one row of `x`) broadcast from memory. Stage 02 packs because its operands are
//!   bigger than the caches; at these sizes packing would be a third of the work.
//! - **Fused epilogues.** The forward product starts its accumulators at the bias and applies
//!   the activation on the way out; the weight-gradient product writes the gradient and moves
//!   the parameter and its optimizer state while the tile is still in registers.
//! - **Register tiles.** An `MR x NR` tile of the result stays in vector registers for the whole
//!   `k` loop: 8 x 32 (16 AVX-512 registers) where the CPU has AVX-512, 6 x 16 with AVX2 + FMA,
//!   4 x 8 otherwise. The kernels are plain Rust over fixed-size arrays, compiled three times
//!   with `#[target_feature]` and chosen at run time, so the binary runs on any x86-64 and on
//!   other architectures (the portable version).
//! - **Threads where they pay.** A product is split over the rayon pool (rows of the result, a
//!   whole number of tiles per thread) only above [`PARALLEL_MIN_FLOPS`]; the small products of
//!   the output layer stay on the calling thread, where waking a second core would cost more
//!   than it saves. The pool is the caller's: `mnist train --threads N` builds it.

use rayon::prelude::*;

use crate::cpu::fast_strips::{LOGITS, ParamRows, Post, Rule, TRANSPOSED, ab_any, backward_any, put, take, update_any};
use crate::cpu::fast_tiles::{Isa, isa};
use crate::cpu::reference::{self as cpu, LossStats};
use crate::tape::Mode;
use crate::{Activation, Optimizer};

/// Products below this many flops (`2 m n k`) run on the calling thread. Measured on a 2-core
/// VM: waking the second rayon worker and joining it costs 5-15 µs; the MNIST layer products
/// (12.8 MFLOP, ~80 µs on one core) gain from it, the output layer's (0.16 MFLOP) lose.
pub const PARALLEL_MIN_FLOPS: usize = 4 << 20;

/// The vector instructions the CPU trainer uses on this machine, for reports: "avx512",
/// "avx2+fma", "simd128" (WebAssembly) or "portable".
pub fn instruction_set() -> &'static str {
    match isa() {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => "avx512",
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => "avx2+fma",
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        Isa::Simd128 => "simd128",
        Isa::Portable => "portable",
    }
}

/// Rows of the result per thread: a whole number of `mr`-row tiles, `threads` strips at most,
/// all `m` rows on one thread below [`PARALLEL_MIN_FLOPS`].
fn strip_rows(m: usize, n: usize, k: usize, mr: usize) -> usize {
    let flops = 2usize.saturating_mul(m).saturating_mul(n).saturating_mul(k);
    let threads = rayon::current_num_threads();
    if flops < PARALLEL_MIN_FLOPS || threads <= 1 || m <= mr {
        return m.max(1);
    }
    let tiles = m.div_ceil(mr);
    tiles.div_ceil(threads.min(tiles)) * mr
}

// ---- the fused ops ------------------------------------------------------------------------

/// `y = post(a b)`, a `[rows, k]`, b `[k, n]`, the rows of `y` split over threads when the
/// product is big enough.
fn ab_rows(a: &[f32], rows: usize, k: usize, b: &[f32], n: usize, post: Post<'_>, y: &mut [f32]) {
    let strip = strip_rows(rows, n, k, isa().mr());
    if strip >= rows {
        return ab_any(a, rows, k, b, n, post, y);
    }
    y.par_chunks_mut(strip * n).zip(a.par_chunks(strip * k)).enumerate().for_each(|(t, (y, a))| {
        // Each strip's rows of h, for the backward epilogue.
        let post = match post {
            Post::TimesGrad { h, act } => Post::TimesGrad { h: &h[t * strip * n..], act },
            forward => forward,
        };
        ab_any(a, y.len() / n, k, b, n, post, y)
    });
}

/// Products `dy Wᵀ` with at most this many columns in `dy` (the output layer's classes) go
/// through a transposed copy of `W` and the `A B` tiles: the copy is cheap, and a dot product
/// of ten terms would spend more on its final reduction than on the multiply-adds.
const TRANSPOSE_MAX_OUTPUTS: usize = 32;

/// `linear_forward.wgsl`, fast: `y = act(x W + b)`; x `[rows, inputs]`, params
/// `[(inputs + 1), outputs]` (W, then b) -> y `[rows, outputs]` (its first `rows * outputs`
/// values are written).
pub fn linear_forward(
    x: &[f32],
    rows: usize,
    inputs: usize,
    params: &[f32],
    outputs: usize,
    act: Option<Activation>,
    y: &mut [f32],
) {
    let (w, bias) = params[..(inputs + 1) * outputs].split_at(inputs * outputs);
    let x = &x[..rows * inputs];
    let y = &mut y[..rows * outputs];
    ab_rows(x, rows, inputs, w, outputs, Post::Forward { bias, act }, y);
}

/// `linear_backward_input.wgsl`, fast: `dx = (dy Wᵀ) * act'(h)`; dy `[rows, outputs]`,
/// params `[(inputs + 1), outputs]`, h `[rows, inputs]` -> dx `[rows, inputs]`.
#[allow(clippy::too_many_arguments)]
pub fn linear_backward_input(
    dy: &[f32],
    rows: usize,
    outputs: usize,
    params: &[f32],
    inputs: usize,
    h: &[f32],
    act: Activation,
    dx: &mut [f32],
) {
    let w = &params[..inputs * outputs];
    let dy = &dy[..rows * outputs];
    let h = &h[..rows * inputs];
    let dx = &mut dx[..rows * inputs];
    if outputs <= TRANSPOSE_MAX_OUTPUTS {
        // wt = Wᵀ: [outputs, inputs], so dx = dy wt is an `A B` product.
        let mut wt = take(&TRANSPOSED);
        wt.resize(outputs * inputs, 0.0);
        for (i, w_row) in w.chunks_exact(outputs).enumerate() {
            for (o, &v) in w_row.iter().enumerate() {
                wt[o * inputs + i] = v;
            }
        }
        ab_rows(dy, rows, outputs, &wt, inputs, Post::TimesGrad { h, act }, dx);
        return put(&TRANSPOSED, wt);
    }
    let strip = strip_rows(rows, inputs, outputs, 4);
    if strip >= rows {
        backward_any(dy, rows, outputs, w, inputs, h, act, dx);
    } else {
        dx.par_chunks_mut(strip * inputs)
            .zip(dy.par_chunks(strip * outputs))
            .zip(h.par_chunks(strip * inputs))
            .for_each(|((dx, dy), h)| backward_any(dy, dx.len() / inputs, outputs, w, inputs, h, act, dx));
    }
}

/// `output_layer.wgsl`, fast: logits `= h W + b`, softmax cross-entropy into `out` (the
/// reference's own `cpu::softmax_cross_entropy`, so the same bits and the same statistics), and
/// in training `dh = (dL/dz Wᵀ) * act'(h)`.
/// h `[rows, inputs]`, params `[(inputs + 1), classes]`, labels `[rows]` -> out
/// `[rows, classes]`, dh `[rows, inputs]`.
#[allow(clippy::too_many_arguments)]
pub fn output_layer(
    h: &[f32],
    rows: usize,
    inputs: usize,
    params: &[f32],
    classes: usize,
    labels: &[u32],
    mode: Mode,
    inv_rows: f32,
    out: &mut [f32],
    dh: Option<(&mut [f32], Activation)>,
) -> LossStats {
    let h = &h[..rows * inputs];
    let out = &mut out[..rows * classes];
    let mut logits = take(&LOGITS);
    logits.resize(rows * classes, 0.0);
    linear_forward(h, rows, inputs, params, classes, None, &mut logits);
    let stats = cpu::softmax_cross_entropy(&logits, classes, labels, mode, inv_rows, out);
    put(&LOGITS, logits);
    if let (Mode::Train, Some((dh, act))) = (mode, dh) {
        linear_backward_input(out, rows, classes, params, inputs, h, act, dh);
    }
    stats
}

/// `linear_update.wgsl` for one layer, fast: `grads = [x | 1]ᵀ dy` (`[(inputs + 1), outputs]`)
/// and the optimizer step on `params` and `state` (`[k * (inputs + 1) * outputs]`, k values per
/// parameter as in `cpu::update`); x `[rows, inputs]`, dy `[rows, outputs]`.
#[allow(clippy::too_many_arguments)]
pub fn linear_update(
    x: &[f32],
    rows: usize,
    inputs: usize,
    dy: &[f32],
    outputs: usize,
    params: &mut [f32],
    grads: &mut [f32],
    state: &mut [f32],
    opt: Optimizer,
    step: u32,
) {
    let count = (inputs + 1) * outputs;
    let rule = Rule::new(opt, step);
    let x = &x[..rows * inputs];
    let dy = &dy[..rows * outputs];
    let (params, grads) = (&mut params[..count], &mut grads[..count]);
    let (s0, s1): (&mut [f32], &mut [f32]) = match opt {
        Optimizer::Sgd { .. } => (&mut state[..count], &mut []),
        Optimizer::Adam { .. } => state[..2 * count].split_at_mut(count),
    };
    let wlen = inputs * outputs;
    let (p_w, p_b) = params.split_at_mut(wlen);
    let (g_w, g_b) = grads.split_at_mut(wlen);
    let (s0_w, s0_b) = s0.split_at_mut(wlen);
    let (s1_w, s1_b) = if s1.is_empty() { (&mut [][..], &mut [][..]) } else { s1.split_at_mut(wlen) };

    // The rows of W, in strips of whole tiles, over threads when the product is big enough.
    if inputs > 0 {
        let strip = strip_rows(inputs, outputs, rows, isa().mr()) * outputs;
        let mut s1_chunks = s1_w.chunks_mut(strip);
        let jobs: Vec<ParamRows<'_>> = p_w
            .chunks_mut(strip)
            .zip(g_w.chunks_mut(strip))
            .zip(s0_w.chunks_mut(strip))
            .enumerate()
            .map(|(t, ((params, grads), s0))| {
                let s1 = s1_chunks.next().unwrap_or(&mut []);
                ParamRows { i_start: t * strip / outputs, params, grads, s0, s1 }
            })
            .collect();
        let run = |dst: ParamRows<'_>| update_any(x, rows, inputs, dy, outputs, rule, dst);
        if jobs.len() == 1 {
            jobs.into_iter().for_each(run);
        } else {
            jobs.into_par_iter().for_each(run);
        }
    }

    // The bias row: the column sums of dy, then the same step.
    g_b.fill(0.0);
    for row in dy.chunks_exact(outputs) {
        for (s, &v) in g_b.iter_mut().zip(row) {
            *s += v;
        }
    }
    rule.apply(p_b, g_b, s0_b, s1_b);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_split_only_big_products() {
        assert_eq!(strip_rows(64, 10, 128, 8), 64, "the output layer stays on one thread");
        let strip = strip_rows(784, 128, 64, 8);
        assert!(strip.is_multiple_of(8) && strip <= 784, "{strip}");
    }
}
