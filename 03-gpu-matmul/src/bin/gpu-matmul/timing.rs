//! How the runner times: [`Bench`] checks a kernel's result against the f64 CPU reference and
//! only then times it (GPU timestamps after a warm-up, and end to end by the wall clock); it
//! also times the CPU reference and the ceiling probes.

use std::time::Instant;

use common::{GpuContext, GpuTimer, median};
use cpu_matrix::Matrix;
use gpu_matmul::{Kernel, Matmul, MatmulCall, PeakProbe, formula, matmul_cpu};

use crate::operands::Operands;
use crate::tables::Row;

/// Seconds of back-to-back GPU work before timing (GPUs raise their clocks under load).
pub const WARM_UP_S: f64 = 0.25;
/// Seconds of timed passes per kernel, about (and of end-to-end runs): keeps slow kernels at
/// large sizes from taking minutes.
pub const TIMING_BUDGET_S: f64 = 0.5;

/// What every timing shares: the context, the GPU timer, and the repetitions asked for.
pub struct Bench<'a> {
    pub ctx: &'a GpuContext,
    pub timer: GpuTimer,
    pub reps: usize,
    pub warmup: usize,
}

impl Bench<'_> {
    /// Validates `mm` on `a`, `b` against `reference`, then times it. A failed check gives a
    /// row with no timings and the checker's report.
    ///
    /// For kernel 08 (conversion passes, then the product) a second row times the product
    /// alone, on the f16 copies the checked run made.
    pub fn gpu(&self, mm: &Matmul, ops: &Operands) -> Result<Vec<Row>, Box<dyn std::error::Error>> {
        let ctx = self.ctx;
        let (m, k, n) = ops.dims();
        let (call, result) = self.run_checked(mm, ops)?;
        let (used, tile) = call.kernel();
        let mut row = Row {
            kernel: format!("{:02}", mm.kernel().number()),
            name: mm.kernel().name().into(),
            label: format!("{:02} {}", mm.kernel().number(), mm.kernel().name()),
            ran: if used == mm.kernel() { format!("{tile}") } else { format!("as {used} {tile}") },
            precision: Some(used.precision()),
            kernel_s: None,
            e2e_s: None,
            note: String::new(),
        };
        match result {
            Ok(err) => row.note = format!("ok (max abs err {err:.1e})"),
            Err(report) => {
                row.note = "FAILED: not timed".into();
                eprintln!("kernel {} ({}) m={m} k={k} n={n}: {report}", mm.kernel(), formula(ops.t));
                return Ok(vec![row]);
            }
        }
        let kernel_s = self.time_kernel(|pass| call.record(pass))?;
        row.kernel_s = Some(kernel_s);
        let product_only = if call.dispatches() > 1 {
            let s = self.time_kernel(|pass| call.record_product(pass))?;
            Some(Row {
                kernel: format!("{}_product_only", row.kernel),
                name: format!("{} product only", row.name),
                label: format!("{} product only", row.label),
                ran: format!("on the f16 copies ({:.0}% of the time above)", 100.0 * s / kernel_s),
                precision: row.precision,
                kernel_s: Some(s),
                e2e_s: None,
                note: "copies from the checked run".into(),
            })
        } else {
            None
        };

        // End to end: new inputs go up, the product comes back; buffers and pipeline exist.
        // Up to 5 runs, fewer where they take more than about TIMING_BUDGET_S in all.
        let mut e2e = Vec::new();
        let mut result = Matrix::zeros(m, n);
        let started = Instant::now();
        while e2e.len() < self.reps.clamp(1, 5) && (e2e.is_empty() || started.elapsed().as_secs_f64() < TIMING_BUDGET_S) {
            let start = Instant::now();
            ctx.queue.write_buffer(&ops.ga.buffer, 0, bytemuck::cast_slice(&ops.a.data));
            ctx.queue.write_buffer(&ops.gb.buffer, 0, bytemuck::cast_slice(&ops.b.data));
            submit(ctx, &call)?;
            ctx.read_into(&ops.out.buffer, &mut result.data)?;
            e2e.push(start.elapsed().as_secs_f64());
        }
        row.e2e_s = Some(median(&mut e2e));
        Ok([row].into_iter().chain(product_only).collect())
    }

    /// Runs `mm` once on the operands into a poisoned output and checks the result against
    /// the reference with the tolerance of the kernel that ran: the prepared call, and the
    /// largest error or the checker's report.
    pub fn run_checked(&self, mm: &Matmul, ops: &Operands) -> Result<(MatmulCall, Result<f64, String>), Box<dyn std::error::Error>> {
        let ctx = self.ctx;
        let call = mm.prepare(ctx, &ops.ga, &ops.gb, &ops.out, ops.t)?;
        ctx.poison(&ops.out.buffer);
        submit(ctx, &call)?;
        let got = ops.out.download(ctx)?;
        let (rel, abs) = call.kernel().0.tolerance(ops.dims().1);
        let result = ops.reference.check(&got, rel, abs);
        Ok((call, result))
    }

    /// Kernel-only seconds per run of `record`. A GPU lowers its clocks when idle, so first
    /// warm up with back-to-back runs for at least `WARM_UP_S` (and `warmup` passes); then
    /// each of `reps` timed passes holds `batch` back-to-back runs (enough for about a
    /// millisecond) and counts as its timestamp difference / batch. The median is reported.
    /// On a GPU, slow kernels get fewer passes, so that timing one takes about
    /// `TIMING_BUDGET_S`; a kernel whose first timed run alone takes that long (after the
    /// checked run just before it) is reported from that run.
    fn time_kernel(&self, record: impl Fn(&mut wgpu::ComputePass<'_>)) -> Result<f64, common::GpuError> {
        let ctx = self.ctx;
        let once = self.timer.time_pass(ctx, "first", &record)?;
        if !ctx.is_software() && once >= TIMING_BUDGET_S {
            return Ok(once);
        }
        let batch = if ctx.is_software() { 1 } else { (1e-3 / once.max(1e-7)).ceil().clamp(1.0, 64.0) as usize };
        let warm_for = if ctx.is_software() { 0.0 } else { WARM_UP_S };
        let start = Instant::now();
        let mut passes = 0;
        while passes < self.warmup || start.elapsed().as_secs_f64() < warm_for {
            self.timer.time_pass(ctx, "warm-up", |pass| (0..batch).for_each(|_| record(pass)))?;
            passes += 1;
        }
        let reps = if ctx.is_software() { self.reps } else { self.reps.min((TIMING_BUDGET_S / (once * batch as f64)).ceil() as usize).max(1) };
        let mut times = Vec::with_capacity(reps);
        for _ in 0..reps {
            times.push(self.timer.time_pass(ctx, "matmul", |pass| (0..batch).for_each(|_| record(pass)))? / batch as f64);
        }
        Ok(median(&mut times))
    }

    /// The ceiling probes: TFLOP/s of each (median of the timed passes, after warm-up).
    pub fn probe(&self, probe: &PeakProbe) -> Result<f64, common::GpuError> {
        let s = self.time_kernel(|pass| probe.record(pass))?;
        Ok(probe.flop / s / 1e12)
    }

    /// The CPU reference (`0`): stage 02's best CPU matmul, checked against the same f64
    /// reference rows as every kernel.
    pub fn cpu(&self, ops: &Operands, flop: f64) -> Result<Row, Box<dyn std::error::Error>> {
        let (a, b, t, reference) = (&ops.a, &ops.b, ops.t, &ops.reference);
        let k = ops.dims().1;
        let reps = if flop > 2e10 { 1 } else { self.reps.clamp(1, 3) };
        let mut times = Vec::new();
        let mut got = Matrix::zeros(0, 0);
        for _ in 0..reps {
            let start = Instant::now();
            got = matmul_cpu(a, b, t)?;
            times.push(start.elapsed().as_secs_f64());
        }
        let (rel, abs) = Kernel::BEST.tolerance(k);
        let note = match reference.check(&got, rel, abs) {
            Ok(err) => format!("ok (max abs err {err:.1e})"),
            Err(report) => {
                eprintln!("CPU matmul: {report}");
                "FAILED".into()
            }
        };
        let s = median(&mut times);
        Ok(Row {
            kernel: "00".into(),
            name: "cpu".into(),
            label: "00 cpu".into(),
            ran: format!("cpu-matrix best, {} threads", cpu_matrix::num_threads()),
            precision: None,
            kernel_s: Some(s),
            e2e_s: Some(s),
            note,
        })
    }
}

fn submit(ctx: &GpuContext, call: &MatmulCall) -> Result<(), common::GpuError> {
    ctx.submit_pass("matmul", |pass| call.record(pass));
    ctx.wait()
}
