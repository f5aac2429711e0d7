//! The CPU tensor store: [`CpuStore`] holds a list of tensors in CPU memory, over which
//! `run_op.rs` runs tapes op by op. This is the CPU reference the GPU store is checked against.
//!
//! Like the GPU side it allocates every tensor once, at the largest batch, and a smaller batch
//! only uses the first rows.

use crate::cpu::reference::LossStats;
use crate::tape::{Elem, Mode, TensorId, TensorInfo, View};
use crate::wgsl::{
    COUNTER_BAD_LABELS, COUNTER_CORRECT, COUNTER_LOSS_HI, COUNTER_LOSS_LO, COUNTER_NON_FINITE, COUNTER_ROWS, COUNTER_STEP,
};
use crate::LayersError;

/// Tensors in CPU memory, over which tapes run op by op ([`CpuStore::run`], in `run_op.rs`).
pub struct CpuStore {
    pub(crate) max_batch: usize,
    pub(crate) batch: usize,
    /// f32 tensors by id (empty for u32 tensors).
    pub(crate) f32s: Vec<Vec<f32>>,
    /// u32 tensors by id (empty for f32 tensors).
    pub(crate) u32s: Vec<Vec<u32>>,
}

impl CpuStore {
    /// Allocates `tensors` (zeroed) for batches of up to `max_batch` rows.
    pub fn new(tensors: &[TensorInfo], max_batch: usize) -> Result<Self, LayersError> {
        if max_batch == 0 {
            return Err(LayersError::Batch { batch: 0, max_batch });
        }
        let mut f32s = Vec::new();
        let mut u32s = Vec::new();
        for t in tensors {
            let n = t.capacity(max_batch);
            let (f, u) = if t.elem == Elem::F32 { (n, 0) } else { (0, n) };
            f32s.push(vec![0.0; f]);
            u32s.push(vec![0; u]);
        }
        Ok(Self { max_batch, batch: max_batch, f32s, u32s })
    }

    pub fn batch(&self) -> usize {
        self.batch
    }

    /// Sets the live batch (1 to `max_batch`): ops use the first `batch` rows.
    pub fn set_batch(&mut self, batch: usize) -> Result<(), LayersError> {
        if batch == 0 || batch > self.max_batch {
            return Err(LayersError::Batch { batch, max_batch: self.max_batch });
        }
        self.batch = batch;
        Ok(())
    }

    /// The whole (capacity) f32 tensor `t`.
    pub fn f32(&self, t: TensorId) -> &[f32] {
        &self.f32s[t.0]
    }

    pub fn f32_mut(&mut self, t: TensorId) -> &mut [f32] {
        &mut self.f32s[t.0]
    }

    /// The whole (capacity) u32 tensor `t`.
    pub fn u32(&self, t: TensorId) -> &[u32] {
        &self.u32s[t.0]
    }

    pub fn u32_mut(&mut self, t: TensorId) -> &mut [u32] {
        &mut self.u32s[t.0]
    }

    /// The live part of a view: `rows.at(batch) x cols` values.
    pub(crate) fn len(&self, v: View) -> usize {
        v.rows.at(self.batch) * v.cols
    }

    pub(crate) fn get(&self, v: View) -> &[f32] {
        &self.f32s[v.tensor.0][..self.len(v)]
    }

    /// Runs `f` on a tensor taken out of the store (so the others stay readable), then puts it back.
    pub(crate) fn with_mut<T>(&mut self, t: TensorId, f: impl FnOnce(&Self, &mut Vec<f32>) -> T) -> T {
        let mut data = std::mem::take(&mut self.f32s[t.0]);
        let out = f(self, &mut data);
        self.f32s[t.0] = data;
        out
    }

    /// Adds one loss op's statistics to the counters, as the loss kernels do with atomics.
    pub(crate) fn count(&mut self, counters: TensorId, stats: LossStats, mode: Mode) {
        let c = &mut self.u32s[counters.0];
        // 64-bit fixed point in two words, wrapping like the GPU's atomics.
        let sum = ((c[COUNTER_LOSS_HI] as u64) << 32 | c[COUNTER_LOSS_LO] as u64).wrapping_add(stats.loss_fixed);
        c[COUNTER_LOSS_LO] = sum as u32;
        c[COUNTER_LOSS_HI] = (sum >> 32) as u32;
        c[COUNTER_NON_FINITE] += stats.non_finite;
        c[COUNTER_ROWS] += stats.rows;
        c[COUNTER_CORRECT] += stats.correct;
        c[COUNTER_BAD_LABELS] += stats.bad_labels;
        if mode == Mode::Train {
            c[COUNTER_STEP] += 1;
        }
    }
}
