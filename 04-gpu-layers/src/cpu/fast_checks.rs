//! The fast CPU path checked against the CPU references: each fused op on random inputs (never
//! zeros) at awkward shapes, for every activation, optimizer and mode, with tolerances written
//! so that NaN fails and output buffers poisoned with NaN. The native tests below run it on the
//! machine's tile (AVX-512, AVX2 or portable); the browser's module exposes it
//! (`Session::cpu_self_check`), so the in-browser test runs it on the WebAssembly SIMD tile,
//! which exists only there.

use common::check_close;
use rand::{Rng, SeedableRng};

use crate::cpu::fast::{instruction_set, linear_backward_input, linear_forward, linear_update, output_layer};
use crate::cpu::reference as cpu;
use crate::tape::Mode;
use crate::{Activation, Optimizer};

fn random(n: usize, lo: f32, seed: u64) -> Vec<f32> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..n).map(|_| rng.random_range(lo..1.0)).collect()
}

/// Sums of `k` terms of size ~1 in another order than the CPU references: f32 rounding, about
/// k * 2^-24 at worst; a missing or doubled term (~1e-2) fails.
fn tol(k: usize) -> (f64, f64) {
    (1e-4, 2e-6 * k.max(1) as f64)
}

/// (rows, inputs, outputs): one of everything, odd sizes on both sides of each tile's width,
/// 129 x 257, and stage 05's first layer.
const SHAPES: [(usize, usize, usize); 8] =
    [(1, 1, 1), (17, 63, 65), (64, 784, 128), (3, 129, 257), (65, 17, 10), (63, 1, 33), (8, 32, 32), (129, 40, 7)];

/// `check_close`, with the op and shape in the error.
fn close(what: &str, got: &[f32], want: &[f32], (rel, abs): (f64, f64)) -> Result<(), String> {
    check_close(got, want, rel, abs).map(|_| ()).map_err(|e| format!("{} {what}: {e}", instruction_set()))
}

/// `linear_forward` (bias and activation fused) against the reference.
pub fn forward() -> Result<(), String> {
    for (s, &(rows, inputs, outputs)) in SHAPES.iter().enumerate() {
        for act in [None, Some(Activation::Relu), Some(Activation::Tanh), Some(Activation::Sigmoid)] {
            let x = random(rows * inputs, -1.0, s as u64);
            let params = random((inputs + 1) * outputs, -1.0, 100 + s as u64);
            let want = cpu::linear_forward(&x, rows, inputs, &params, outputs, act).map_err(|e| e.to_string())?;
            let mut y = vec![f32::NAN; rows * outputs + 3];
            linear_forward(&x, rows, inputs, &params, outputs, act, &mut y);
            let what = format!("forward {rows}x{inputs}x{outputs} {act:?}");
            close(&what, &y[..rows * outputs], &want, tol(inputs))?;
            if !y[rows * outputs..].iter().all(|v| v.is_nan()) {
                return Err(format!("{what}: wrote past the live rows"));
            }
        }
    }
    Ok(())
}

/// `linear_backward_input` (the activation's derivative fused) against the reference.
pub fn backward_input() -> Result<(), String> {
    for (s, &(rows, inputs, outputs)) in SHAPES.iter().enumerate() {
        for act in [Activation::Relu, Activation::Tanh, Activation::Sigmoid] {
            let dy = random(rows * outputs, -1.0, s as u64);
            let params = random((inputs + 1) * outputs, -1.0, 200 + s as u64);
            let h = random(rows * inputs, 0.0, 300 + s as u64);
            let want = cpu::linear_backward_input(&dy, rows, outputs, &params, inputs, &h, act).map_err(|e| e.to_string())?;
            let mut dx = vec![f32::NAN; rows * inputs];
            linear_backward_input(&dy, rows, outputs, &params, inputs, &h, act, &mut dx);
            close(&format!("backward {rows}x{inputs}x{outputs} {act:?}"), &dx, &want, tol(outputs))?;
        }
    }
    Ok(())
}

/// `linear_update` (gradient and optimizer step fused) against the references, SGD and Adam.
pub fn update() -> Result<(), String> {
    for (s, &(rows, inputs, outputs)) in SHAPES.iter().enumerate() {
        for opt in [Optimizer::sgd(0.1, 0.9), Optimizer::adam(0.01)] {
            let count = (inputs + 1) * outputs;
            let k = opt.state_per_parameter();
            let x = random(rows * inputs, -1.0, s as u64);
            let dy = random(rows * outputs, -1.0, 400 + s as u64);
            let p0 = random(count, -1.0, 500 + s as u64);
            let st0 = random(k * count, 0.0, 600 + s as u64);
            let g_want = cpu::linear_grads(&x, rows, inputs, &dy, outputs).map_err(|e| e.to_string())?;
            let (mut p_want, mut st_want) = (p0.clone(), st0.clone());
            cpu::update(&mut p_want, &g_want, &mut st_want, opt, 3);
            let (mut p, mut g, mut st) = (p0.clone(), vec![f32::NAN; count], st0.clone());
            linear_update(&x, rows, inputs, &dy, outputs, &mut p, &mut g, &mut st, opt, 3);
            let what = format!("update {rows}x{inputs}x{outputs} {opt:?}");
            close(&format!("{what} gradient"), &g, &g_want, tol(rows))?;
            // Adam divides by sqrt(v): a gradient a rounding apart moves the parameter by a
            // little more than it, relative to lr.
            close(&format!("{what} parameters"), &p, &p_want, tol(rows))?;
            close(&format!("{what} optimizer state"), &st, &st_want, tol(rows))?;
        }
    }
    Ok(())
}

/// `output_layer` (softmax, cross-entropy, counts and the gradient into the layer below)
/// against the reference, in every mode.
pub fn output() -> Result<(), String> {
    for (s, &(rows, inputs, classes)) in SHAPES.iter().enumerate() {
        for mode in [Mode::Train, Mode::Eval, Mode::Predict] {
            let h = random(rows * inputs, 0.0, s as u64);
            let params = random((inputs + 1) * classes, -1.0, 700 + s as u64);
            let labels: Vec<u32> = (0..rows).map(|r| ((r * 7 + s) % classes) as u32).collect();
            let inv = 1.0 / rows as f32;
            let (mut out_want, mut dh_want) = (vec![0.0; rows * classes], vec![0.0; rows * inputs]);
            let want = cpu::output_layer(
                &h,
                rows,
                inputs,
                &params,
                classes,
                &labels,
                mode,
                inv,
                &mut out_want,
                Some((&mut dh_want, Activation::Relu)),
            )
            .map_err(|e| e.to_string())?;
            let (mut out, mut dh) = (vec![f32::NAN; rows * classes], vec![0.0; rows * inputs]);
            let got = output_layer(&h, rows, inputs, &params, classes, &labels, mode, inv, &mut out, Some((&mut dh, Activation::Relu)));
            let what = format!("output layer {rows}x{inputs}x{classes} {mode:?}");
            close(&format!("{what} outputs"), &out, &out_want, tol(inputs))?;
            close(&format!("{what} gradient"), &dh, &dh_want, tol(inputs))?;
            if (got.rows, got.correct, got.bad_labels) != (want.rows, want.correct, want.bad_labels) {
                return Err(format!("{what}: counts {:?} vs {:?}", (got.rows, got.correct), (want.rows, want.correct)));
            }
            let (gl, wl) = (got.loss_fixed as f64 / cpu::LOSS_UNITS_PER_ONE, want.loss_fixed as f64 / cpu::LOSS_UNITS_PER_ONE);
            // Written so that a NaN loss fails too.
            let within = (gl - wl).abs() <= 1e-4 * wl.abs() + 1e-4 * rows as f64;
            if !within {
                return Err(format!("{what}: loss {gl} vs {wl}"));
            }
        }
    }
    Ok(())
}

/// Every check above; Ok names the tile that passed them ("simd128: forward, backward, update and
/// output layer match the references at 8 shapes").
pub fn all() -> Result<String, String> {
    forward()?;
    backward_input()?;
    update()?;
    output()?;
    Ok(format!(
        "{}: forward, backward, update and output layer match the references at {} shapes",
        instruction_set(),
        SHAPES.len()
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn forward_matches_the_reference() {
        super::forward().unwrap();
    }

    #[test]
    fn backward_input_matches_the_reference() {
        super::backward_input().unwrap();
    }

    #[test]
    fn update_matches_the_references_for_sgd_and_adam() {
        super::update().unwrap();
    }

    #[test]
    fn output_layer_matches_the_reference_in_every_mode() {
        super::output().unwrap();
    }
}
