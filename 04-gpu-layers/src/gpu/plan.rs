//! Which dispatches a tape of ops becomes, decided without a device: updates of several layers
//! split where the device binds too few buffers, a `LinearForward` and the `OutputLayer` on it merged
//! (`forward_output`) or split over k (`linear_forward_tiled (k split)` + `output_wide (sums)`)
//! where the tiles and the device allow, and the name each dispatch goes by ([`plan`]).

use crate::routing::DeviceFit;
use crate::gpu::kernels::KernelId;
use crate::tape::{Mode, Op};
use crate::tiles::FusedTiles;

/// The names the k split pair's two dispatches go by.
pub(crate) const KERNEL_FORWARD_SPLIT: &str = "linear_forward_tiled (k split)";
pub(crate) const KERNEL_FORWARD_SPLIT_COOP: &str = "linear_forward_coop (k split)";
pub(crate) const KERNEL_OUTPUT_SUMS: &str = "output_wide (sums)";

/// `op`, or, where a `LinearUpdate` has more layers than the device binds at once (`layers`:
/// [`DeviceFit::linear_update_layers`]), its layers in updates of at most `layers` each. No
/// layer's update reads another's parameters, so several dispatches compute what one would.
pub(crate) fn layers_per_update(op: &Op, layers: u32) -> Vec<Op> {
    let Op::LinearUpdate { counters, opt, .. } = *op else {
        return vec![op.clone()];
    };
    let all = op.updated_layers();
    if all.len() <= layers as usize {
        return vec![op.clone()];
    }
    all.chunks(layers.max(1) as usize)
        .map(|l| Op::LinearUpdate { first: l[0], second: l.get(1).copied(), third: l.get(2).copied(), counters, opt })
        .collect()
}

/// Whether the `LinearUpdate` `op` runs `linear_update_coop` (the gradients on the tensor cores,
/// f16 inputs): where the kernels' products take f16 inputs on this adapter (`coop`) and one of
/// its layers takes it ([`FusedTiles::coop_updates`] at `max_batch` rows).
pub(crate) fn coop_update(coop: bool, tiles: &FusedTiles, limits: &wgpu::Limits, max_batch: usize, op: &Op) -> bool {
    coop && op.updated_layers().iter().any(|l| tiles.coop_updates(max_batch, l.dy.cols, limits))
}

/// One dispatch of a planned tape: op `i` alone, or ops `i` and `i + 1` merged, or one of the
/// pair a `LinearForward` `i` split over k and the `OutputLayer` `i + 1` that adds up its partial
/// sums ([`FusedTiles::runs_k_split`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Planned {
    One(usize),
    Merged(usize),
    SplitForward(usize),
    SumsOutput(usize),
}

impl Planned {
    /// The kernel it runs (the first op gathers when `gather`) with `tiles` on a device of
    /// `limits`, in a tape sized for `max_batch` rows.
    pub(crate) fn name(self, ops: &[Op], gather: bool, tiles: &FusedTiles, limits: &wgpu::Limits, max_batch: usize) -> &'static str {
        match self {
            Planned::Merged(0) if gather => "forward_output (gathering)",
            Planned::Merged(_) => "forward_output",
            Planned::SplitForward(_) => KERNEL_FORWARD_SPLIT,
            Planned::SumsOutput(_) => KERNEL_OUTPUT_SUMS,
            Planned::One(i) => match ops[i] {
                Op::LinearForward { x, y, .. } => {
                    forward_kernel_id(tiles, limits, x.rows.at(max_batch), y.cols, gather && i == 0).name()
                }
                Op::OutputLayer { h, out, .. } if tiles.output_wide(h.cols, out.cols, limits) => KernelId::OutputWide.name(),
                ref op => op.kernel_name(),
            },
        }
    }
}

/// The dispatches a GPU tape of `ops` sized for `max_batch` rows makes with `tiles` on a
/// device of `limits` (the first op gathering its batch when `gather`), by kernel name, without
/// a device: what [`crate::GpuStore::add_tape`] and [`crate::GpuStore::add_gathered_tape`] will prepare.
pub fn plan(ops: &[Op], tiles: &FusedTiles, gather: bool, limits: &wgpu::Limits, max_batch: usize) -> Vec<&'static str> {
    let (ops, planned) = plan_ops(ops, tiles, gather, limits, max_batch);
    planned.into_iter().map(|p| p.name(&ops, gather, tiles, limits, max_batch)).collect()
}

/// `ops` with updates of several layers split where the device binds too few buffers, and the
/// dispatches they become.
pub(crate) fn plan_ops(ops: &[Op], tiles: &FusedTiles, gather: bool, limits: &wgpu::Limits, max_batch: usize) -> (Vec<Op>, Vec<Planned>) {
    let layers = DeviceFit::for_limits(limits).linear_update_layers;
    let ops: Vec<Op> = ops.iter().flat_map(|op| layers_per_update(op, layers)).collect();
    let mut planned = Vec::with_capacity(ops.len());
    let mut i = 0;
    while i < ops.len() {
        if let Some(next) = ops.get(i + 1)
            && merges(&ops[i], next, tiles, gather && i == 0, limits)
        {
            planned.push(Planned::Merged(i));
            i += 2;
        } else if let Some(next) = ops.get(i + 1)
            && !(gather && i == 0)
            && runs_k_split_pair(&ops[i], next, tiles, limits, max_batch)
        {
            planned.extend([Planned::SplitForward(i), Planned::SumsOutput(i + 1)]);
            i += 2;
        } else {
            planned.push(Planned::One(i));
            i += 1;
        }
    }
    (ops, planned)
}

/// Whether `forward` (reading a ready input) and `output` run as a `linear_forward_tiled` split
/// over k and an `output_wide` that adds up its partial sums: a `LinearForward` and the
/// training `OutputLayer` that reads exactly its output (with the same activation and dropout
/// for dh), on
/// shapes and a device the tiles allow ([`FusedTiles::runs_k_split`]). Evaluation and prediction
/// keep the unsplit forward: their tapes, often sized for far larger batches, then need no
/// buffer of partial sums.
fn runs_k_split_pair(forward: &Op, output: &Op, tiles: &FusedTiles, limits: &wgpu::Limits, max_batch: usize) -> bool {
    let (Op::LinearForward { x, y, act, drop: fd, .. }, Op::OutputLayer { h, out, dh, drop, mode: Mode::Train, .. }) = (forward, output)
    else {
        return false;
    };
    let same_act = dh.is_none_or(|(_, a)| Some(a) == *act) && fd == drop;
    h.tensor == y.tensor && h.cols == y.cols && same_act && tiles.runs_k_split(x.rows.at(max_batch), y.cols, out.cols, limits)
}

/// Whether `forward` and `output` run merged as one `forward_output` dispatch: a
/// `LinearForward` and the `OutputLayer` that reads exactly its output (with the same
/// activation and dropout for dh), on shapes and a device the tiles allow ([`FusedTiles::merges`]).
fn merges(forward: &Op, output: &Op, tiles: &FusedTiles, gather: bool, limits: &wgpu::Limits) -> bool {
    let (Op::LinearForward { y, act, drop: fd, .. }, Op::OutputLayer { h, out, dh, drop, .. }) = (forward, output) else {
        return false;
    };
    let same_act = dh.is_none_or(|(_, a)| Some(a) == *act) && fd == drop;
    h.tensor == y.tensor && h.cols == y.cols && same_act && tiles.merges(y.cols, out.cols, gather, limits)
}

/// The kernel a `LinearForward` of `rows` (the tape's largest batch) x `cols` outputs runs:
/// gathering its input (`gather`), `linear_forward`'s gathering form; else
/// `linear_forward_tiled` where [`FusedTiles::forward_tiled`] says so, else `linear_forward`.
pub(crate) fn forward_kernel_id(tiles: &FusedTiles, limits: &wgpu::Limits, rows: usize, cols: usize, gather: bool) -> KernelId {
    if gather {
        KernelId::LinearForwardGather
    } else if tiles.forward_tiled(rows, cols, limits) {
        KernelId::LinearForwardTiled
    } else {
        KernelId::LinearForward
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Optimizer;
    use crate::tape::{Dim, LayerUpdate, TensorId, View};

    /// Layer `n`'s part of an update (tensors 5n..5n+4).
    fn layer(n: usize) -> LayerUpdate {
        let view = |t: usize| View { tensor: TensorId(t), rows: Dim::Batch, cols: 3 };
        LayerUpdate { x: view(5 * n), dy: view(5 * n + 1), params: TensorId(5 * n + 2), grads: TensorId(5 * n + 3), state: TensorId(5 * n + 4) }
    }

    fn layers_of(op: &Op) -> Vec<TensorId> {
        op.updated_layers().iter().map(|l| l.params).collect()
    }

    #[test]
    fn an_update_of_three_layers_splits_to_what_the_device_binds() {
        let counters = TensorId(99);
        let opt = Optimizer::sgd(0.1, 0.0);
        let op = Op::LinearUpdate { first: layer(0), second: Some(layer(1)), third: Some(layer(2)), counters, opt };
        let split = |n: u32| layers_per_update(&op, n).iter().map(layers_of).collect::<Vec<_>>();
        let p = |n: usize| TensorId(5 * n + 2);
        assert_eq!(split(3), [vec![p(0), p(1), p(2)]]);
        assert_eq!(split(2), [vec![p(0), p(1)], vec![p(2)]]);
        assert_eq!(split(1), [vec![p(0)], vec![p(1)], vec![p(2)]]);
        // Other ops pass through.
        let bias = Op::BiasAdd { y: layer(0).x, bias: counters, offset: 0 };
        assert_eq!(layers_per_update(&bias, 1), [bias]);
    }
}
