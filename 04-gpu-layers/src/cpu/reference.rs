//! The CPU reference of every GPU kernel in `shaders/`: the same math, in plain Rust on slices, with
//! the same names and shapes. These are the reference the GPU is tested against, and the ops
//! the CPU trainer runs.
//!
//! All tensors are row-major slices; a shape `[rows, cols]` means `rows * cols` values. The fused
//! kernels' references (`linear_forward`, `output_layer`, `linear_backward_input`, `linear_update`)
//! are written as compositions of the primitive references, which is the claim the fused kernels
//! make: "I compute exactly this, in one dispatch".

use cpu_matrix::Matrix;

use crate::tape::{FusedDropout, Mode, Transpose};
use crate::{Activation, LayersError, Optimizer};

/// `act(z)`; `None` is the identity. Matches `activate` in `shaders/common.wgsl`, NaN
/// passing through every activation.
#[inline]
pub fn activate_value(z: f32, act: Option<Activation>) -> f32 {
    match act {
        None => z,
        Some(Activation::Relu) => {
            if z < 0.0 {
                0.0
            } else {
                z
            }
        }
        Some(Activation::Tanh) => guarded_tanh(z),
        Some(Activation::Sigmoid) => 1.0 / (1.0 + (-z).exp()),
        Some(Activation::Gelu) => 0.5 * z * (1.0 + guarded_tanh(GELU_K0 * (z + GELU_K1 * z * z * z))),
    }
}

/// `tanh(15)` rounds to 1.0 in f32; answering +-1 past 15 keeps GPU drivers that compute tanh as
/// `(e^2z - 1) / (e^2z + 1)` away from `inf / inf`. The kernels do the same.
fn guarded_tanh(z: f32) -> f32 {
    if z.abs() > 15.0 { z.signum() } else { z.tanh() }
}

/// GELU's constants (tanh form): `sqrt(2 / pi)` and the cubic coefficient.
const GELU_K0: f32 = 0.797_884_6;
const GELU_K1: f32 = 0.044_715;

/// `act'` written with the activation's output `y`: `relu' = [y > 0]`, `tanh' = 1 - y^2`,
/// `sigmoid' = y (1 - y)`. GELU has no such form (the networks never ask; this returns NaN so a
/// mistake shows): use [`activate_grad_from_input`].
#[inline]
pub fn activate_grad(y: f32, act: Option<Activation>) -> f32 {
    match act {
        None => 1.0,
        Some(Activation::Relu) => {
            if y > 0.0 {
                1.0
            } else {
                0.0
            }
        }
        Some(Activation::Tanh) => 1.0 - y * y,
        Some(Activation::Sigmoid) => y * (1.0 - y),
        Some(Activation::Gelu) => f32::NAN,
    }
}

/// `act'(z)` written with the activation's input `z` (`activate_grad_from_input` in
/// `shaders/common.wgsl`).
pub fn activate_grad_from_input(z: f32, act: Activation) -> f32 {
    match act {
        Activation::Relu => {
            if z > 0.0 {
                1.0
            } else {
                0.0
            }
        }
        Activation::Tanh => {
            let t = guarded_tanh(z);
            1.0 - t * t
        }
        Activation::Sigmoid => {
            let s = 1.0 / (1.0 + (-z).exp());
            s * (1.0 - s)
        }
        Activation::Gelu => {
            // d/dz 0.5 z (1 + tanh u) = 0.5 (1 + tanh u) + 0.5 z (1 - tanh^2 u) u'(z); past
            // |u| = 15 the second term is 0 (and z^2 could overflow), so it is skipped there.
            let u = GELU_K0 * (z + GELU_K1 * z * z * z);
            let t = guarded_tanh(u);
            let tail = if u.abs() <= 15.0 { 0.5 * z * (1.0 - t * t) * GELU_K0 * (1.0 + 3.0 * GELU_K1 * z * z) } else { 0.0 };
            0.5 * (1.0 + t) + tail
        }
    }
}

/// `bias_add.wgsl`: `y[r, c] += bias[c]`; y: `[rows, cols]`, bias: `[cols]`.
pub fn bias_add(y: &mut [f32], cols: usize, bias: &[f32]) {
    for row in y.chunks_exact_mut(cols) {
        for (v, b) in row.iter_mut().zip(bias) {
            *v += b;
        }
    }
}

/// `activation_forward.wgsl`: `y = act(y)` in place.
pub fn activation_forward(y: &mut [f32], act: Activation) {
    y.iter_mut().for_each(|v| *v = activate_value(*v, Some(act)));
}

/// `activation_backward.wgsl`: `dy *= act'(y)` in place; dy, y: `[rows, cols]`.
pub fn activation_backward(dy: &mut [f32], y: &[f32], act: Activation) {
    for (d, &v) in dy.iter_mut().zip(y) {
        *d *= activate_grad(v, Some(act));
    }
}

/// `column_sum.wgsl`: `out[c] = sum_r x[r, c]`; x: `[rows, cols]`, out: `[cols]`.
pub fn column_sum(x: &[f32], cols: usize, out: &mut [f32]) {
    out.iter_mut().for_each(|v| *v = 0.0);
    for row in x.chunks_exact(cols) {
        for (o, v) in out.iter_mut().zip(row) {
            *o += v;
        }
    }
}

/// What the loss kernels add to the counters, per call.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LossStats {
    /// Sum of the per-row losses in fixed point ([`loss_to_fixed`]), exactly as the GPU adds them.
    pub loss_fixed: u64,
    pub rows: u32,
    pub correct: u32,
    pub bad_labels: u32,
    /// Rows whose loss was NaN, infinite or above 1e12 (left out of the sum).
    pub non_finite: u32,
}

pub use crate::wgsl::LOSS_UNITS_PER_ONE;

/// One row's loss as the GPU's `add_loss` (softmax_row.wgsl) adds it: `None` for NaN or
/// `> 1e12`, else the loss (at least 0) in units of 2^-20, split and rounded like the kernel.
pub fn loss_to_fixed(loss: f32) -> Option<u64> {
    if loss.is_nan() || loss > 1e12 {
        return None;
    }
    let v = loss.max(0.0);
    let hi = (v * (1.0 / 4096.0)).floor();
    let lo = ((v - hi * 4096.0) * 1048576.0) as u32;
    Some(((hi as u64) << 32) + lo as u64)
}

/// `softmax_ce.wgsl` / `softmax_row.wgsl`: numerically stable softmax cross-entropy.
///
/// logits: `[rows, classes]`, labels: `[rows]` -> out: `[rows, classes]`, which receives
/// `dL/dlogits = (softmax - onehot) * inv_rows` in [`Mode::Train`] (the mean loss's gradient,
/// `inv_rows = 1 / batch`), else the probabilities. A label `>= classes` gives a zero gradient
/// row and is counted in `bad_labels` (the callers validate labels before they get here).
///
/// Each `exp(z - m)` is computed once and kept in `out` between the sum and the division (the
/// kernel computes it twice: the same expression, so the same bits). The fast CPU trainer
/// (`fast::output_layer`) calls this function too, so its losses and counts are this
/// reference's by construction.
pub fn softmax_cross_entropy(
    logits: &[f32],
    classes: usize,
    labels: &[u32],
    mode: Mode,
    inv_rows: f32,
    out: &mut [f32],
) -> LossStats {
    let mut stats = LossStats::default();
    for (r, (z, o)) in logits.chunks_exact(classes).zip(out.chunks_exact_mut(classes)).enumerate() {
        // First maximum, like the kernel's tie-break.
        let mut arg = 0;
        for (c, &v) in z.iter().enumerate() {
            if v > z[arg] {
                arg = c;
            }
        }
        let m = z[arg];
        o.iter_mut().zip(z).for_each(|(e, &v)| *e = (v - m).exp());
        let total: f32 = o.iter().sum();
        let label = if mode == Mode::Predict { 0 } else { labels[r] as usize };
        let label_ok = label < classes;
        for (c, oc) in o.iter_mut().enumerate() {
            let prob = *oc / total;
            *oc = match mode {
                Mode::Train if !label_ok => 0.0,
                Mode::Train => (prob - if c == label { 1.0 } else { 0.0 }) * inv_rows,
                Mode::Eval | Mode::Predict => prob,
            };
        }
        if mode != Mode::Predict {
            stats.rows += 1;
            if label_ok {
                match loss_to_fixed(total.ln() + m - z[label]) {
                    Some(fixed) => stats.loss_fixed += fixed,
                    None => stats.non_finite += 1,
                }
                stats.correct += (arg == label) as u32;
            } else {
                stats.bad_labels += 1;
            }
        }
    }
    stats
}

/// `sgd.wgsl`: `v = momentum * v + g; p -= lr * v`, elementwise.
pub fn sgd(params: &mut [f32], grads: &[f32], velocity: &mut [f32], lr: f32, momentum: f32) {
    for ((p, &g), v) in params.iter_mut().zip(grads).zip(velocity.iter_mut()) {
        *v = momentum * *v + g;
        *p -= lr * *v;
    }
}

/// `adam.wgsl`: one Adam step at step number `t` (1 for the first), elementwise.
/// moments: `[2 * len]`, first moments then second moments.
#[allow(clippy::too_many_arguments)]
pub fn adam(params: &mut [f32], grads: &[f32], moments: &mut [f32], t: u32, lr: f32, beta1: f32, beta2: f32, eps: f32) {
    let len = params.len();
    let (m, v) = moments.split_at_mut(len);
    let tf = t.max(1) as f32;
    let c1 = 1.0 - beta1.powf(tf);
    let c2 = 1.0 - beta2.powf(tf);
    for i in 0..len {
        let g = grads[i];
        m[i] = beta1 * m[i] + (1.0 - beta1) * g;
        v[i] = beta2 * v[i] + (1.0 - beta2) * g * g;
        params[i] -= lr * (m[i] / c1) / ((v[i] / c2).sqrt() + eps);
    }
}

/// The optimizer step with state `[k * len]` (k from [`Optimizer::state_per_parameter`]).
pub fn update(params: &mut [f32], grads: &[f32], state: &mut [f32], opt: Optimizer, step: u32) {
    match opt {
        Optimizer::Sgd { lr, momentum } => sgd(params, grads, state, lr, momentum),
        Optimizer::Adam { lr, beta1, beta2, eps } => adam(params, grads, state, step, lr, beta1, beta2, eps),
    }
}

/// `out = op(a) * op(b)` with stage 02's best CPU kernel, `op` chosen by `t`. a, b: row-major
/// with the given shapes.
pub fn matmul(
    a: &[f32],
    a_shape: (usize, usize),
    b: &[f32],
    b_shape: (usize, usize),
    t: Transpose,
) -> Result<Vec<f32>, LayersError> {
    let a = Matrix::new(a_shape.0, a_shape.1, a.to_vec())?;
    let b = Matrix::new(b_shape.0, b_shape.1, b.to_vec())?;
    Ok(cpu_matrix::matmul_t(cpu_matrix::CpuKernel::BEST, t, &a, &b)?.data)
}

/// `linear_forward.wgsl`: `y = act(x W + b)`; x: `[rows, inputs]`, params: `[(inputs + 1), outputs]`
/// (W, then b as the last row) -> y: `[rows, outputs]`. Matmul, bias add, activation.
pub fn linear_forward(
    x: &[f32],
    rows: usize,
    inputs: usize,
    params: &[f32],
    outputs: usize,
    act: Option<Activation>,
) -> Result<Vec<f32>, LayersError> {
    let (w, b) = params.split_at(inputs * outputs);
    let mut y = matmul(x, (rows, inputs), w, (inputs, outputs), Transpose::None)?;
    bias_add(&mut y, outputs, b);
    if let Some(act) = act {
        activation_forward(&mut y, act);
    }
    Ok(y)
}

/// `linear_backward_input.wgsl`: `dx = (dy W^T) * act'(h)`; dy: `[rows, outputs]`,
/// h: `[rows, inputs]` -> dx: `[rows, inputs]`. Matmul A*B^T, then the activation backward.
pub fn linear_backward_input(
    dy: &[f32],
    rows: usize,
    outputs: usize,
    params: &[f32],
    inputs: usize,
    h: &[f32],
    act: Activation,
) -> Result<Vec<f32>, LayersError> {
    let w = &params[..inputs * outputs];
    let mut dx = matmul(dy, (rows, outputs), w, (inputs, outputs), Transpose::B)?;
    activation_backward(&mut dx, h, act);
    Ok(dx)
}

/// The gradient half of `linear_update.wgsl`: `[x | 1]^T dy`; x: `[rows, inputs]`,
/// dy: `[rows, outputs]` -> `[(inputs + 1), outputs]` (dW = x^T dy, then db = column sums).
pub fn linear_grads(x: &[f32], rows: usize, inputs: usize, dy: &[f32], outputs: usize) -> Result<Vec<f32>, LayersError> {
    let mut g = matmul(x, (rows, inputs), dy, (rows, outputs), Transpose::A)?;
    let mut db = vec![0.0; outputs];
    column_sum(dy, outputs, &mut db);
    g.extend_from_slice(&db);
    Ok(g)
}

/// `output_layer.wgsl`: logits `= h W + b`, softmax cross-entropy into `out`, and in training
/// `dh = (dL/dz W^T) * act'(h)` when `dh_act` is given. h: `[rows, inputs]`, params:
/// `[(inputs + 1), classes]`, labels: `[rows]` -> out: `[rows, classes]`, dh: `[rows, inputs]`.
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
) -> Result<LossStats, LayersError> {
    let logits = linear_forward(h, rows, inputs, params, classes, None)?;
    let stats = softmax_cross_entropy(&logits, classes, labels, mode, inv_rows, out);
    if let (Mode::Train, Some((dh, act))) = (mode, dh) {
        let g = linear_backward_input(out, rows, classes, params, inputs, h, act)?;
        dh.copy_from_slice(&g);
    }
    Ok(stats)
}

/// `activation_copy_forward.wgsl`: `y = act(x)` into a separate tensor (the out-of-place form,
/// so the backward pass can read `x`); x, y: `[rows, cols]`.
pub fn activation_copy_forward(x: &[f32], y: &mut [f32], act: Activation) {
    for (o, &v) in y.iter_mut().zip(x) {
        *o = activate_value(v, Some(act));
    }
}

/// `activation_copy_backward` (`activation_backward.wgsl` with `GRAD_OF_INPUT = 1`):
/// `dy *= act'(x)` in place, with the activation's input x; dy, x: `[rows, cols]`.
pub fn activation_copy_backward(dy: &mut [f32], x: &[f32], act: Activation) {
    for (d, &v) in dy.iter_mut().zip(x) {
        *d *= activate_grad_from_input(v, act);
    }
}

/// One round of the PCG hash (Jarzynski and Olano, "Hash Functions for GPU Rendering", 2020):
/// a permutation of u32 with good avalanche, in wrapping u32 arithmetic that WGSL has too.
pub fn pcg_hash(v: u32) -> u32 {
    let state = v.wrapping_mul(747_796_405).wrapping_add(2_891_336_453);
    let word = ((state >> ((state >> 28) + 4)) ^ state).wrapping_mul(277_803_737);
    (word >> 22) ^ word
}

/// The dropout generator, counter-based: a hash of (layer seed, training step, element index)
/// instead of a state that advances, so the GPU's thousands of invocations and the CPU's loop
/// draw the SAME number for the same element with no coordination. `dropout_forward.wgsl` has
/// the same function.
pub fn dropout_hash(seed: u32, step: u32, index: u32) -> u32 {
    pcg_hash(index.wrapping_add(pcg_hash(step.wrapping_add(pcg_hash(seed)))))
}

/// Dropout's integer threshold (defined beside the ops, `tape::dropout_threshold`): a unit is
/// dropped when its hash is below `p * 2^32`.
pub use crate::tape::dropout_threshold;

/// `dropout_forward.wgsl`: inverted dropout of the live rows. For element `i` of x `[rows,
/// cols]` (row-major index): `mask[i] = scale` when `dropout_hash(seed, step, i) >= threshold`
/// (kept, `scale = 1 / (1 - p)`), else 0; `y[i] = x[i] * mask[i]`. `step` is the training step
/// count (the counters' step slot), so every step draws a new mask.
pub fn dropout_forward(x: &[f32], y: &mut [f32], mask: &mut [f32], seed: u32, step: u32, threshold: u32, scale: f32) {
    for (i, ((o, m), &v)) in y.iter_mut().zip(mask.iter_mut()).zip(x).enumerate() {
        *m = if dropout_hash(seed, step, i as u32) >= threshold { scale } else { 0.0 };
        *o = v * *m;
    }
}

/// `dropout_backward.wgsl`: `dy *= mask` in place, the mask the forward pass drew.
pub fn dropout_backward(dy: &mut [f32], mask: &[f32]) {
    for (d, &m) in dy.iter_mut().zip(mask) {
        *d *= m;
    }
}

/// A fused dropout's mask of element `i` (`mask_value` in `common.wgsl`): `1 / (1 - p)` when
/// `dropout_hash(seed, step, i) >= threshold`, else 0, the same numbers as
/// [`dropout_forward`]'s mask.
pub fn fused_mask(drop: &FusedDropout, step: u32, i: usize) -> f32 {
    if dropout_hash(drop.seed, step, i as u32) >= drop.threshold() { drop.scale() } else { 0.0 }
}

/// The forward half of a fused dropout: `y[i] *= mask(i)` over a layer's output `[rows, cols]`
/// (row-major index `i`), after its activation.
pub fn fused_dropout_forward(y: &mut [f32], drop: &FusedDropout, step: u32) {
    for (i, v) in y.iter_mut().enumerate() {
        *v *= fused_mask(drop, step, i);
    }
}

/// The activation's outputs of a layer whose output went through a fused dropout: `stored[i] *
/// (1 - p)` (a dropped unit's 0 stays 0; it is masked again anyway).
pub fn fused_dropout_kept(stored: &[f32], drop: &FusedDropout) -> Vec<f32> {
    stored.iter().map(|&v| v * drop.keep()).collect()
}

/// The backward half: `dx[i] *= mask(i)`, the mask the forward drew, drawn again.
pub fn fused_dropout_backward(dx: &mut [f32], drop: &FusedDropout, step: u32) {
    fused_dropout_forward(dx, drop, step);
}

/// `linear_backward_input.wgsl` when h went through a fused dropout: `dx = (dy W^T) *
/// act'(stored * (1 - p)) * mask`; `stored` is h as the forward wrote it, masked.
#[allow(clippy::too_many_arguments)]
pub fn linear_backward_input_dropout(
    dy: &[f32],
    rows: usize,
    outputs: usize,
    params: &[f32],
    inputs: usize,
    stored: &[f32],
    act: Activation,
    drop: &FusedDropout,
    step: u32,
) -> Result<Vec<f32>, LayersError> {
    let mut dx = linear_backward_input(dy, rows, outputs, params, inputs, &fused_dropout_kept(stored, drop), act)?;
    fused_dropout_backward(&mut dx, drop, step);
    Ok(dx)
}

/// `mse.wgsl`: mean squared error against one-hot labels. y: `[rows, classes]`, labels:
/// `[rows]` -> out: `[rows, classes]`, which receives `dL/dy = 2 (y - onehot) * inv_rows /
/// classes` in [`Mode::Train`] (the gradient of the mean over rows and classes), else y itself.
/// Each row adds `sum_c (y_c - onehot_c)^2 / classes` to the loss (in fixed point, like the
/// kernel), and counts as correct when its first largest output is the label.
pub fn mse(y: &[f32], classes: usize, labels: &[u32], mode: Mode, inv_rows: f32, out: &mut [f32]) -> LossStats {
    let mut stats = LossStats::default();
    let inv_classes = 1.0 / classes as f32;
    for (r, (z, o)) in y.chunks_exact(classes).zip(out.chunks_exact_mut(classes)).enumerate() {
        let label = if mode == Mode::Predict { 0 } else { labels[r] as usize };
        let label_ok = label < classes;
        let mut arg = 0;
        let mut sum = 0.0f32;
        for (c, (oc, &v)) in o.iter_mut().zip(z).enumerate() {
            if v > z[arg] {
                arg = c;
            }
            let diff = v - if c == label { 1.0 } else { 0.0 };
            sum += diff * diff;
            *oc = match mode {
                Mode::Train if !label_ok => 0.0,
                Mode::Train => 2.0 * diff * inv_rows * inv_classes,
                Mode::Eval | Mode::Predict => v,
            };
        }
        if mode != Mode::Predict {
            stats.rows += 1;
            if label_ok {
                match loss_to_fixed(sum * inv_classes) {
                    Some(fixed) => stats.loss_fixed += fixed,
                    None => stats.non_finite += 1,
                }
                stats.correct += (arg == label) as u32;
            } else {
                stats.bad_labels += 1;
            }
        }
    }
    stats
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_ce_by_hand() {
        // Two classes, logits (0, ln 3): p = (1/4, 3/4); label 1: loss = -ln(3/4).
        let logits = [0.0, 3f32.ln()];
        let mut out = [0.0; 2];
        let s = softmax_cross_entropy(&logits, 2, &[1], Mode::Train, 1.0, &mut out);
        let loss = s.loss_fixed as f64 / LOSS_UNITS_PER_ONE;
        assert!((loss - (4.0f64 / 3.0).ln()).abs() < 1e-6, "{s:?}");
        assert!((out[0] - 0.25).abs() < 1e-6 && (out[1] + 0.25).abs() < 1e-6, "{out:?}");
        assert_eq!((s.rows, s.correct, s.bad_labels), (1, 1, 0));
    }

    #[test]
    fn softmax_ce_huge_logits_stay_finite() {
        let logits = [1e4, -1e4, 0.0, -1e4, 1e4, 0.0];
        let mut out = [0.0; 6];
        let s = softmax_cross_entropy(&logits, 3, &[1, 1], Mode::Train, 0.5, &mut out);
        let loss = s.loss_fixed as f64 / LOSS_UNITS_PER_ONE;
        assert!(s.non_finite == 0 && (loss - 2e4).abs() < 1.0, "{s:?}");
        assert!(out.iter().all(|v| v.is_finite()), "{out:?}");
    }

    #[test]
    fn fixed_point_loss_by_hand() {
        assert_eq!(loss_to_fixed(1.0), Some(1 << 20));
        assert_eq!(loss_to_fixed(-1e-7), Some(0));
        assert_eq!(loss_to_fixed(4096.5), Some((1 << 32) + (1 << 19)));
        assert_eq!(loss_to_fixed(f32::NAN), None);
        assert_eq!(loss_to_fixed(f32::INFINITY), None);
        assert_eq!(loss_to_fixed(2e12), None);
    }

    #[test]
    fn column_sum_and_bias_add() {
        let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let mut out = [9.0; 3];
        column_sum(&x, 3, &mut out);
        assert_eq!(out, [5.0, 7.0, 9.0]);
        let mut y = x;
        bias_add(&mut y, 3, &[1.0, 0.0, -1.0]);
        assert_eq!(y, [2.0, 2.0, 2.0, 5.0, 5.0, 5.0]);
    }

    #[test]
    fn sgd_momentum_by_hand() {
        let (mut p, mut v) = ([1.0f32], [0.5f32]);
        sgd(&mut p, &[2.0], &mut v, 0.1, 0.9);
        assert!((v[0] - 2.45).abs() < 1e-6 && (p[0] - 0.755).abs() < 1e-6, "{p:?} {v:?}");
    }

    #[test]
    fn adam_first_step_moves_by_lr() {
        // At t = 1 the bias-corrected m / sqrt(v) is sign(g): every parameter moves by ~lr.
        let mut p = [1.0f32, -2.0];
        let mut st = [0.0f32; 4];
        adam(&mut p, &[0.3, -7.0], &mut st, 1, 0.01, 0.9, 0.999, 1e-8);
        assert!((p[0] - 0.99).abs() < 1e-5 && (p[1] + 1.99).abs() < 1e-5, "{p:?}");
    }

    #[test]
    fn new_activations_by_hand() {
        assert!((activate_value(0.0, Some(Activation::Sigmoid)) - 0.5).abs() < 1e-7);
        assert_eq!(activate_value(-200.0, Some(Activation::Sigmoid)), 0.0);
        assert!((activate_value(1.0, Some(Activation::Gelu)) - 0.841_192).abs() < 1e-5);
        assert_eq!(activate_value(-30.0, Some(Activation::Gelu)), 0.0);
        assert!((activate_grad_from_input(0.0, Activation::Gelu) - 0.5).abs() < 1e-7);
        assert_eq!(activate_grad_from_input(1e30, Activation::Gelu), 1.0);
        assert!(activate_grad(0.3, Some(Activation::Gelu)).is_nan(), "GELU's derivative needs the input");
        for act in [Activation::Relu, Activation::Tanh, Activation::Sigmoid] {
            let z = 0.7f32;
            let y = activate_value(z, Some(act));
            assert!((activate_grad(y, Some(act)) - activate_grad_from_input(z, act)).abs() < 1e-6, "{act:?}");
        }
    }

    #[test]
    fn dropout_keeps_about_one_minus_p_and_scales() {
        let x = vec![1.0f32; 10_000];
        let (mut y, mut mask) = (vec![0.0; x.len()], vec![0.0; x.len()]);
        let p = 0.3;
        dropout_forward(&x, &mut y, &mut mask, 7, 0, dropout_threshold(p), 1.0 / (1.0 - p));
        let kept = mask.iter().filter(|&&m| m > 0.0).count();
        assert!((6_800..7_200).contains(&kept), "{kept} of 10000 kept at p = 0.3");
        assert!((y.iter().sum::<f32>() / 10_000.0 - 1.0).abs() < 0.03, "inverted dropout keeps the mean");
        let mut again = vec![0.0; x.len()];
        dropout_forward(&x, &mut y, &mut again, 7, 1, dropout_threshold(p), 1.0 / (1.0 - p));
        assert_ne!(mask, again, "each step draws a new mask");
        assert_eq!(dropout_threshold(0.0), 0);
        assert_eq!(dropout_threshold(0.5), 1 << 31);
    }

    #[test]
    fn mse_by_hand() {
        // One row, outputs (0.5, 0.25), label 0: loss = ((0.5 - 1)^2 + 0.25^2) / 2 = 0.15625.
        let mut out = [0.0; 2];
        let s = mse(&[0.5, 0.25], 2, &[0], Mode::Train, 1.0, &mut out);
        assert_eq!(s.loss_fixed, loss_to_fixed(0.15625).unwrap());
        assert_eq!(out, [-0.5, 0.25]);
        assert_eq!((s.rows, s.correct), (1, 1));
    }
}
