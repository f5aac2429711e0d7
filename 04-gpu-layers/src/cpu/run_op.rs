//! Running an op on the CPU: [`run_op`] runs each [`Op`] of a tape on a [`CpuStore`] with its CPU
//! reference (`reference.rs`) or, for the fused ops, the fast CPU path (`fast.rs`).

use crate::cpu::store::CpuStore;
use crate::cpu::{fast, reference as cpu};
use crate::tape::Op;
use crate::wgsl::{COUNTER_MASK_STEP, COUNTER_STEP};
use crate::{Activation, LayersError, Loss};

impl CpuStore {
    /// Runs the ops in order.
    pub fn run(&mut self, ops: &[Op]) -> Result<(), LayersError> {
        ops.iter().try_for_each(|op| run_op(self, op))
    }
}

/// Runs one op of a tape on `store`'s tensors, as
/// `gpu/prepare.rs` prepares it on the GPU. Each primitive op calls its CPU reference in
/// `reference.rs` on the live rows (`B`, the current batch) of the tensors it names, and the loss
/// ops add to the counters as the kernels do with atomics. The fused ops run the fast CPU path
/// (`fast.rs`: one pass, no allocation, threads where they pay), whose tests check it against
/// the fused CPU references, the compositions of the primitives.
///
/// | op | CPU reference (`reference.rs`) | reads | writes |
/// |---|---|---|---|
/// | `Matmul` | `matmul` (stage 02's best kernel) | a, b | out |
/// | `BiasAdd` | `bias_add` | y, bias | y |
/// | `Activate` | `activation_forward` | y | y |
/// | `ActivateBackward` | `activation_backward` | dy, y | dy |
/// | `SoftmaxCrossEntropy` | `softmax_cross_entropy` | logits, labels | out, counters |
/// | `ColumnSum` | `column_sum` | x | out |
/// | `Update` | `update` (`sgd` / `adam`) | grads, counters (step) | params, state |
/// | `LinearForward` | `fast::linear_forward` (reference `linear_forward`), then `fused_dropout_forward` with a dropout | x, params, counters (mask step) | y |
/// | `OutputLayer` | `fast::output_layer` (reference `output_layer`); with MSE `fast::linear_forward` and `mse`; dh through a dropout or after MSE as `LinearBackwardInput` | h, params, labels, counters | out, dh, counters |
/// | `LinearBackwardInput` | `fast::linear_backward_input` (reference `linear_backward_input`, `linear_backward_input_dropout`) | dy, params, h, counters (mask step) | dx |
/// | `LinearUpdate` | `fast::linear_update` per layer (references `linear_grads`, then `update`) | x, dy, counters (step) | grads, params, state, counters (mask step) |
/// | `ActivateCopy` | `activation_copy_forward` | x | y |
/// | `ActivateCopyBackward` | `activation_copy_backward` | dy, x | dy |
/// | `Dropout` | `dropout_forward` | x, counters (step) | y, mask |
/// | `DropoutBackward` | `dropout_backward` | dy, mask | dy |
/// | `MeanSquaredError` | `mse` | y, labels | out, counters |
pub(crate) fn run_op(store: &mut CpuStore, op: &Op) -> Result<(), LayersError> {
    let b = store.batch;
    let inv_rows = 1.0 / b as f32;
    match *op {
        Op::Matmul { a, b: bv, out, t } => {
            let r = cpu::matmul(store.get(a), (a.rows.at(b), a.cols), store.get(bv), (bv.rows.at(b), bv.cols), t)?;
            store.f32s[out.tensor.0][..r.len()].copy_from_slice(&r);
        }
        Op::BiasAdd { y, bias, offset } => {
            let n = store.len(y);
            store.with_mut(y.tensor, |t, yv| cpu::bias_add(&mut yv[..n], y.cols, &t.f32s[bias.0][offset..offset + y.cols]));
        }
        Op::Activate { y, act } => {
            let n = store.len(y);
            cpu::activation_forward(&mut store.f32s[y.tensor.0][..n], act);
        }
        Op::ActivateBackward { act: Activation::Gelu, .. } => return Err(LayersError::gelu_in_place()),
        Op::ActivateBackward { dy, y, act } => {
            let n = store.len(dy);
            store.with_mut(dy.tensor, |t, d| cpu::activation_backward(&mut d[..n], t.get(y), act));
        }
        Op::SoftmaxCrossEntropy { logits, labels, out, counters, mode } => {
            let n = store.len(out);
            let labels = store.u32s[labels.0][..b].to_vec();
            let stats = store.with_mut(out.tensor, |t, o| {
                cpu::softmax_cross_entropy(t.get(logits), logits.cols, &labels, mode, inv_rows, &mut o[..n])
            });
            store.count(counters, stats, mode);
        }
        Op::ColumnSum { x, out, offset } => {
            store.with_mut(out, |t, o| cpu::column_sum(t.get(x), x.cols, &mut o[offset..offset + x.cols]));
        }
        Op::Update { params, grads, state, counters, len, opt } => {
            let step = store.u32s[counters.0][COUNTER_STEP];
            let g = store.f32s[grads.0][..len].to_vec();
            let mut st = std::mem::take(&mut store.f32s[state.0]);
            cpu::update(&mut store.f32s[params.0][..len], &g, &mut st, opt, step);
            store.f32s[state.0] = st;
        }
        Op::LinearForward { x, params, y, act, drop } => {
            store.with_mut(y.tensor, |t, yv| fast::linear_forward(t.get(x), b, x.cols, &t.f32s[params.0], y.cols, act, yv));
            if let Some(d) = drop {
                let (n, step) = (store.len(y), store.u32s[d.counters.0][COUNTER_MASK_STEP]);
                cpu::fused_dropout_forward(&mut store.f32s[y.tensor.0][..n], &d, step);
            }
        }
        Op::OutputLayer { h, params, labels, out, dh: Some((dv, act)), drop, loss, counters, mode }
            if drop.is_some() || loss == Loss::Mse =>
        {
            // The output layer without dh, then dh (through h's dropout, if any) from dL/dz.
            let plain = Op::OutputLayer { h, params, labels, out, dh: None, drop: None, loss, counters, mode };
            run_op(store, &plain)?;
            if mode == crate::Mode::Train {
                let dy = Op::LinearBackwardInput { dy: out, params, h, act, dx: dv, drop };
                run_op(store, &dy)?;
            }
        }
        Op::OutputLayer { h, params, labels, out, dh: None, loss: Loss::Mse, counters, mode, .. } => {
            // Outputs `h W + b` (the fast forward), then the loss's reference.
            let (classes, n) = (out.cols, store.len(out));
            let mut y = vec![0.0; n];
            fast::linear_forward(store.get(h), b, h.cols, &store.f32s[params.0], classes, None, &mut y);
            let labels = store.u32s[labels.0][..b].to_vec();
            let stats = store.with_mut(out.tensor, |_, o| cpu::mse(&y, classes, &labels, mode, inv_rows, &mut o[..n]));
            store.count(counters, stats, mode);
        }
        Op::OutputLayer { h, params, labels, out, dh, counters, mode, .. } => {
            let mut o = std::mem::take(&mut store.f32s[out.tensor.0]);
            let mut d = dh.map(|(v, _)| std::mem::take(&mut store.f32s[v.tensor.0]));
            let dh_arg = match (dh, d.as_mut()) {
                (Some((_, act)), Some(d)) => Some((&mut d[..], act)),
                _ => None,
            };
            let stats = fast::output_layer(
                store.get(h),
                b,
                h.cols,
                &store.f32s[params.0],
                out.cols,
                &store.u32s[labels.0][..b],
                mode,
                inv_rows,
                &mut o,
                dh_arg,
            );
            store.f32s[out.tensor.0] = o;
            if let (Some((v, _)), Some(d)) = (dh, d) {
                store.f32s[v.tensor.0] = d;
            }
            store.count(counters, stats, mode);
        }
        Op::LinearBackwardInput { dy, params, h, act, dx, drop: None } => {
            store.with_mut(dx.tensor, |t, d| {
                fast::linear_backward_input(t.get(dy), b, dy.cols, &t.f32s[params.0], dx.cols, t.get(h), act, d)
            });
        }
        Op::LinearBackwardInput { dy, params, h, act, dx, drop: Some(d) } => {
            // The activation's outputs (h as stored times 1 - p), the fast backward, then the mask.
            let kept = cpu::fused_dropout_kept(store.get(h), &d);
            let step = store.u32s[d.counters.0][COUNTER_MASK_STEP];
            let n = store.len(dx);
            store.with_mut(dx.tensor, |t, dxv| {
                fast::linear_backward_input(t.get(dy), b, dy.cols, &t.f32s[params.0], dx.cols, &kept, act, dxv);
                cpu::fused_dropout_backward(&mut dxv[..n], &d, step);
            });
        }
        Op::ActivateCopy { x, y, act } => {
            let n = store.len(y);
            store.with_mut(y.tensor, |t, yv| cpu::activation_copy_forward(t.get(x), &mut yv[..n], act));
        }
        Op::ActivateCopyBackward { dy, x, act } => {
            let n = store.len(dy);
            store.with_mut(dy.tensor, |t, d| cpu::activation_copy_backward(&mut d[..n], t.get(x), act));
        }
        Op::Dropout { x, y, mask, counters, seed, p } => {
            let (n, step) = (store.len(y), store.u32s[counters.0][COUNTER_STEP]);
            let mut m = std::mem::take(&mut store.f32s[mask.tensor.0]);
            let (threshold, scale) = (cpu::dropout_threshold(p), 1.0 / (1.0 - p));
            store.with_mut(y.tensor, |t, yv| cpu::dropout_forward(t.get(x), &mut yv[..n], &mut m[..n], seed, step, threshold, scale));
            store.f32s[mask.tensor.0] = m;
        }
        Op::DropoutBackward { dy, mask } => {
            let n = store.len(dy);
            store.with_mut(dy.tensor, |t, d| cpu::dropout_backward(&mut d[..n], t.get(mask)));
        }
        Op::MeanSquaredError { y, labels, out, counters, mode } => {
            let n = store.len(out);
            let labels = store.u32s[labels.0][..b].to_vec();
            let stats = store.with_mut(out.tensor, |t, o| cpu::mse(t.get(y), y.cols, &labels, mode, inv_rows, &mut o[..n]));
            store.count(counters, stats, mode);
        }
        Op::LinearUpdate { counters, opt, .. } => {
            let step = store.u32s[counters.0][COUNTER_STEP];
            for l in op.updated_layers() {
                let mut p = std::mem::take(&mut store.f32s[l.params.0]);
                let mut g = std::mem::take(&mut store.f32s[l.grads.0]);
                let mut st = std::mem::take(&mut store.f32s[l.state.0]);
                fast::linear_update(store.get(l.x), b, l.x.cols, store.get(l.dy), l.dy.cols, &mut p, &mut g, &mut st, opt, step);
                store.f32s[l.params.0] = p;
                store.f32s[l.grads.0] = g;
                store.f32s[l.state.0] = st;
            }
            // As the kernels do: the next step's fused dropout masks are drawn for this step count.
            store.u32s[counters.0][COUNTER_MASK_STEP] = step;
        }
    }
    Ok(())
}
