//! The fast CPU path's strips: one thread's share of a product with its epilogue (the bias and
//! activation of a forward, `act'(h)` of a backward, the optimizer step of an update), run with
//! the register tiles of this CPU's instruction set (`fast_tiles.rs`).

use std::cell::RefCell;

use crate::Activation;
use crate::cpu::fast_tiles::{Isa, Portable, TILE, Tiles, isa};
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
use crate::cpu::fast_tiles::wasm;
#[cfg(target_arch = "x86_64")]
use crate::cpu::fast_tiles::x86;
use crate::cpu::reference::{activate_grad, activate_value};
use crate::Optimizer;

/// `fn $name(args)` runs `$generic::<Tiles of this CPU>(args)`: the x86-64 versions are
/// `#[target_feature]` functions into which the `#[inline(always)]` strip is inlined, so its
/// epilogue loops (bias, activation, the optimizer) are vectorized for that set too.
macro_rules! for_each_isa {
    ($(#[$meta:meta])* $vis:vis fn $name:ident = $generic:ident($($arg:ident: $ty:ty),* $(,)?)) => {
        $(#[$meta])*
        $vis fn $name($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx512f,avx2,fma")]
            #[allow(clippy::too_many_arguments)]
            unsafe fn avx512($($arg: $ty),*) {
                // SAFETY: only called after `isa()` detected AVX-512F.
                unsafe { $generic::<x86::Avx512>($($arg),*) }
            }
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2,fma")]
            #[allow(clippy::too_many_arguments)]
            unsafe fn avx2($($arg: $ty),*) {
                // SAFETY: only called after `isa()` detected AVX2 and FMA.
                unsafe { $generic::<x86::Avx2>($($arg),*) }
            }
            match isa() {
                // SAFETY: `isa()` detected AVX-512F (with AVX2 and FMA) on this CPU.
                #[cfg(target_arch = "x86_64")]
                Isa::Avx512 => unsafe { avx512($($arg),*) },
                // SAFETY: `isa()` detected AVX2 and FMA on this CPU.
                #[cfg(target_arch = "x86_64")]
                Isa::Avx2 => unsafe { avx2($($arg),*) },
                // SAFETY: the module was compiled with simd128, so every engine that loads it runs it.
                #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
                Isa::Simd128 => unsafe { $generic::<wasm::Simd128>($($arg),*) },
                // SAFETY: plain Rust, no instruction-set requirement.
                Isa::Portable => unsafe { $generic::<Portable>($($arg),*) },
            }
        }
    };
}

thread_local! {
    /// Each thread's zero-padded copies of edge panels (the last, narrower-than-`NR` columns of
    /// `B`; the last, shorter-than-`MR` rows of `Aᵀ`), the output layer's logits and a
    /// transposed copy of a narrow `W`: grown once, reused by every step.
    pub(super) static PANEL: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    pub(super) static A_EDGE: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    pub(super) static LOGITS: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    pub(super) static TRANSPOSED: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Takes this thread's buffer out of `slot` (put it back with [`put`]), so that the kernels run
/// in the caller's function and not in a closure, which would not get its target features.
pub(super) fn take(slot: &'static std::thread::LocalKey<RefCell<Vec<f32>>>) -> Vec<f32> {
    slot.with_borrow_mut(std::mem::take)
}

pub(super) fn put(slot: &'static std::thread::LocalKey<RefCell<Vec<f32>>>, v: Vec<f32>) {
    slot.with_borrow_mut(|s| *s = v);
}

// ---- strips: one thread's share of a product, with its epilogue ----------------------------

/// What an `A B` strip does with each result on the way out.
#[derive(Clone, Copy)]
pub(super) enum Post<'a> {
    /// `y = act(acc + bias[j])`: the forward of a layer.
    Forward { bias: &'a [f32], act: Option<Activation> },
    /// `y = acc * act'(h[i, j])`, `h` shaped like `y`: the backward into the layer below.
    TimesGrad { h: &'a [f32], act: Activation },
}

/// `y = post(a b)` for `rows` rows: a `[rows, k]`, b `[k, n]` (both row-major) -> y `[rows, n]`.
///
/// # Safety
/// The CPU must support `T`'s instruction set.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn ab_strip<T: Tiles>(a: &[f32], rows: usize, k: usize, b: &[f32], n: usize, post: Post<'_>, y: &mut [f32]) {
    let (mr_max, nr_max) = (T::MR, T::NR);
    let mut panel = take(&PANEL);
    let mut tile = [0.0f32; TILE];
    let mut init = [0.0f32; TILE];
    let mut a_rows: [&[f32]; 8] = [&[]; 8];
    for j0 in (0..n).step_by(nr_max) {
        let nr = nr_max.min(n - j0);
        let (bp, ldb) = if nr == nr_max { (&b[j0..], n) } else { edge_panel(b, n, k, j0, nr, nr_max, &mut panel) };
        if let Post::Forward { bias, .. } = post {
            init[..nr].copy_from_slice(&bias[j0..j0 + nr]);
        }
        for i0 in (0..rows).step_by(mr_max) {
            let mr = mr_max.min(rows - i0);
            // Rows past the batch repeat its last row: read, never stored.
            for (i, row) in a_rows.iter_mut().enumerate().take(mr_max) {
                let r = i0 + i.min(mr - 1);
                *row = &a[r * k..(r + 1) * k];
            }
            // SAFETY: `T`'s instruction set is available (this function's contract).
            unsafe { T::ab(&a_rows[..mr_max], bp, ldb, k, &init[..nr_max], &mut tile) };
            for i in 0..mr {
                let at = (i0 + i) * n + j0;
                let (out, acc) = (&mut y[at..at + nr], &tile[i * nr_max..i * nr_max + nr]);
                match post {
                    Post::Forward { act: None, .. } => out.copy_from_slice(acc),
                    Post::Forward { act: Some(act), .. } => {
                        out.iter_mut().zip(acc).for_each(|(o, &v)| *o = activate_value(v, Some(act)));
                    }
                    Post::TimesGrad { h, act } => {
                        let h = &h[at..at + nr];
                        out.iter_mut().zip(acc).zip(h).for_each(|((o, &g), &hv)| *o = g * activate_grad(hv, Some(act)));
                    }
                }
            }
        }
    }
    put(&PANEL, panel);
}

/// Columns `j0..j0 + nr` of `b` (`[k, ld]` row-major), copied into `panel` as `[k, nr_max]`
/// with zeros after column `nr`: the last, narrower panel of a product. Returns it and its stride.
fn edge_panel<'a>(b: &[f32], ld: usize, k: usize, j0: usize, nr: usize, nr_max: usize, panel: &'a mut Vec<f32>) -> (&'a [f32], usize) {
    panel.resize(k * nr_max, 0.0);
    for (dst, src) in panel.chunks_exact_mut(nr_max).zip(b.chunks_exact(ld)) {
        dst[..nr].copy_from_slice(&src[j0..j0 + nr]);
        dst[nr..].fill(0.0);
    }
    (&panel[..], nr_max)
}

/// `out[r, i] = (Σ_j a[r, j] * w[i, j]) * act'(h[r, i])` for `rows` rows: a `[rows, k]`,
/// w `[n, k]` (both row-major, so `a wᵀ`), h `[rows, n]` -> out `[rows, n]`.
///
/// # Safety
/// The CPU must support `T`'s instruction set.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn backward_strip<T: Tiles>(a: &[f32], rows: usize, k: usize, w: &[f32], n: usize, h: &[f32], act: Activation, out: &mut [f32]) {
    let mut ar: [&[f32]; 4] = [&[]; 4];
    let mut br: [&[f32]; 4] = [&[]; 4];
    for r0 in (0..rows).step_by(4) {
        for (t, row) in ar.iter_mut().enumerate() {
            let r = (r0 + t).min(rows - 1);
            *row = &a[r * k..(r + 1) * k];
        }
        for i0 in (0..n).step_by(4) {
            for (t, row) in br.iter_mut().enumerate() {
                let i = (i0 + t).min(n - 1);
                *row = &w[i * k..(i + 1) * k];
            }
            // SAFETY: `T`'s instruction set is available (this function's contract).
            let acc = unsafe { T::abt(&ar, &br, k) };
            for (t, row) in acc.iter().enumerate().take(rows - r0) {
                let r = r0 + t;
                for (u, &g) in row.iter().enumerate().take(n - i0) {
                    let i = i0 + u;
                    out[r * n + i] = g * activate_grad(h[r * n + i], Some(act));
                }
            }
        }
    }
}

/// The optimizer's per-parameter rule, with the per-step constants worked out once. SGD is
/// `cpu::sgd` expression for expression. Adam is `cpu::adam` rearranged the way PyTorch writes
/// it, `p -= (lr / c1) m / (sqrt(v) / sqrt(c2) + eps)` with `c = 1 - beta^t`: the same number up
/// to rounding, with one division and one square root per parameter instead of three divisions
/// and a square root (divisions are the slowest vector instructions; this halved the update).
#[derive(Debug, Clone, Copy)]
pub(super) enum Rule {
    Sgd { lr: f32, momentum: f32 },
    /// `step = lr / (1 - beta1^t)`, `s2 = 1 / sqrt(1 - beta2^t)`.
    Adam { beta1: f32, beta2: f32, eps: f32, step: f32, s2: f32 },
}

impl Rule {
    pub(super) fn new(opt: Optimizer, step: u32) -> Self {
        match opt {
            Optimizer::Sgd { lr, momentum } => Rule::Sgd { lr, momentum },
            Optimizer::Adam { lr, beta1, beta2, eps } => {
                let tf = step.max(1) as f32;
                let (c1, c2) = (1.0 - beta1.powf(tf), 1.0 - beta2.powf(tf));
                Rule::Adam { beta1, beta2, eps, step: lr / c1, s2: 1.0 / c2.sqrt() }
            }
        }
    }

    /// Moves `p` (with state `s0`, and `s1` for Adam) by gradients `g`, element by element.
    #[inline(always)]
    pub(super) fn apply(self, p: &mut [f32], g: &[f32], s0: &mut [f32], s1: &mut [f32]) {
        match self {
            Rule::Sgd { lr, momentum } => {
                for ((p, &g), v) in p.iter_mut().zip(g).zip(s0.iter_mut()) {
                    *v = momentum * *v + g;
                    *p -= lr * *v;
                }
            }
            Rule::Adam { beta1, beta2, eps, step, s2 } => {
                for (((p, &g), m), v) in p.iter_mut().zip(g).zip(s0.iter_mut()).zip(s1.iter_mut()) {
                    *m = beta1 * *m + (1.0 - beta1) * g;
                    *v = beta2 * *v + (1.0 - beta2) * g * g;
                    *p -= step * *m / (v.sqrt() * s2 + eps);
                }
            }
        }
    }
}

/// Rows `i_start..` of one layer's `[(in + 1), out]` parameters (only rows of `W` here; the
/// bias row is done apart), with their gradient and state rows. `s1` is empty for SGD.
pub(super) struct ParamRows<'a> {
    pub i_start: usize,
    pub params: &'a mut [f32],
    pub grads: &'a mut [f32],
    pub s0: &'a mut [f32],
    pub s1: &'a mut [f32],
}

/// `grads[i, j] = Σ_r x[r, i] * dy[r, j]` for the rows of `W` in `dst`, then the optimizer step
/// on them, tile by tile while the tile is in cache.
///
/// # Safety
/// The CPU must support `T`'s instruction set.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn update_strip<T: Tiles>(x: &[f32], rows: usize, inputs: usize, dy: &[f32], outputs: usize, rule: Rule, dst: ParamRows<'_>) {
    let ParamRows { i_start, params, grads, s0, s1 } = dst;
    let (mr_max, nr_max) = (T::MR, T::NR);
    let m = params.len() / outputs;
    let adam = !s1.is_empty();
    let mut panel = take(&PANEL);
    let mut a_edge = take(&A_EDGE);
    let mut tile = [0.0f32; TILE];
    // The last, narrower column panel of dy, copied once (every row tile reads it).
    let full = outputs / nr_max * nr_max;
    if full < outputs {
        edge_panel(dy, outputs, rows, full, outputs - full, nr_max, &mut panel);
    }
    // Row tiles outside, column panels inside: a tile's columns of x (rows x MR floats) stay in
    // L1 for all of its panels, and its parameter rows are updated front to back.
    for i0 in (0..m).step_by(mr_max) {
        let mr = mr_max.min(m - i0);
        let first = i_start + i0;
        // The last rows of W (fewer than MR) read a zero-padded copy of their columns of x.
        let (a, lda) = if first + mr_max <= inputs {
            (&x[first..], inputs)
        } else {
            edge_panel(x, inputs, rows, first, mr, mr_max, &mut a_edge)
        };
        for j0 in (0..outputs).step_by(nr_max) {
            let nr = nr_max.min(outputs - j0);
            let (b, ldb) = if nr == nr_max { (&dy[j0..], outputs) } else { (&panel[..], nr_max) };
            // SAFETY: `T`'s instruction set is available (this function's contract).
            unsafe { T::atb(a, lda, b, ldb, rows, &mut tile) };
            for i in 0..mr {
                let at = (i0 + i) * outputs + j0;
                let range = at..at + nr;
                let g = &tile[i * nr_max..i * nr_max + nr];
                grads[range.clone()].copy_from_slice(g);
                let s1 = if adam { &mut s1[range.clone()] } else { &mut [][..] };
                rule.apply(&mut params[range.clone()], g, &mut s0[range], s1);
            }
        }
    }
    put(&PANEL, panel);
    put(&A_EDGE, a_edge);
}

for_each_isa! {
    /// [`ab_strip`] for this CPU, on the calling thread.
    pub(super) fn ab_any = ab_strip(a: &[f32], rows: usize, k: usize, b: &[f32], n: usize, post: Post<'_>, y: &mut [f32])
}

for_each_isa! {
    /// [`backward_strip`] for this CPU, on the calling thread.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn backward_any = backward_strip(a: &[f32], rows: usize, k: usize, w: &[f32], n: usize, h: &[f32], act: Activation, out: &mut [f32])
}

for_each_isa! {
    /// [`update_strip`] for this CPU, on the calling thread.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn update_any = update_strip(
        x: &[f32], rows: usize, inputs: usize, dy: &[f32], outputs: usize, rule: Rule, dst: ParamRows<'_>,
    )
}

// ---- the fused ops ------------------------------------------------------------------------
