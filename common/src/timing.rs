//! Timing GPU work: timestamp queries where the adapter has them, wall clock otherwise.
//!
//! A CPU timer around `submit` measures nothing, because `submit` returns before the GPU has
//! started. Timestamp queries are written by the GPU itself at the start and end of a compute
//! pass; we resolve them into a buffer, read them back, and multiply the tick difference by
//! `Queue::get_timestamp_period()` (nanoseconds per tick). Without timestamps we fall back to
//! the wall clock around submit *and wait*, which includes submission overhead.

#[cfg(not(target_arch = "wasm32"))]
use std::time::Instant;

#[cfg(not(target_arch = "wasm32"))]
use crate::{GpuContext, GpuError};

/// Where a measured time came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeSource {
    /// GPU timestamps at the start and end of the compute pass.
    Timestamps,
    /// Wall clock around submit and wait (used when the adapter has no timestamps).
    WallClock,
}

impl std::fmt::Display for TimeSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TimeSource::Timestamps => "GPU timestamps",
            TimeSource::WallClock => "wall clock (no timestamp queries on this adapter)",
        })
    }
}

/// Times compute passes. Make one per program (it owns a query set) and reuse it. (Native
/// targets: it blocks until the pass is done.)
#[cfg(not(target_arch = "wasm32"))]
pub struct GpuTimer {
    queries: Option<(wgpu::QuerySet, wgpu::Buffer)>,
    period_ns: f64,
}

#[cfg(not(target_arch = "wasm32"))]
impl GpuTimer {
    pub fn new(ctx: &GpuContext) -> Self {
        let queries = ctx.has_timestamps().then(|| {
            let set = ctx.device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("pass timestamps"),
                ty: wgpu::QueryType::Timestamp,
                count: 2,
            });
            let resolve = ctx.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("timestamp resolve"),
                size: 16,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            (set, resolve)
        });
        Self { queries, period_ns: ctx.queue.get_timestamp_period() as f64 }
    }

    pub fn source(&self) -> TimeSource {
        if self.queries.is_some() { TimeSource::Timestamps } else { TimeSource::WallClock }
    }

    /// Records one compute pass with `record`, submits it, waits, and returns its duration in
    /// seconds (GPU timestamps, or the wall clock around submit + wait).
    pub fn time_pass(
        &self,
        ctx: &GpuContext,
        label: &str,
        record: impl FnOnce(&mut wgpu::ComputePass<'_>),
    ) -> Result<f64, GpuError> {
        let mut encoder = ctx.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(label) });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some(label),
                timestamp_writes: self.queries.as_ref().map(|(set, _)| wgpu::ComputePassTimestampWrites {
                    query_set: set,
                    beginning_of_pass_write_index: Some(0),
                    end_of_pass_write_index: Some(1),
                }),
            });
            record(&mut pass);
        }
        if let Some((set, resolve)) = &self.queries {
            encoder.resolve_query_set(set, 0..2, resolve, 0);
        }
        let start = Instant::now();
        ctx.queue.submit([encoder.finish()]);
        ctx.wait()?;
        let wall = start.elapsed().as_secs_f64();
        match &self.queries {
            None => Ok(wall),
            Some((_, resolve)) => {
                let ticks: Vec<u64> = ctx.read(resolve, 2)?;
                if ticks[1] > ticks[0] {
                    Ok((ticks[1] - ticks[0]) as f64 * self.period_ns * 1e-9)
                } else {
                    Err(GpuError::Device(format!(
                        "timestamps went backwards ({} then {}): this driver's timestamps are unusable",
                        ticks[0], ticks[1]
                    )))
                }
            }
        }
    }
}

/// Median of a set of timings (seconds). Medians resist the outliers that a busy machine adds.
pub fn median(samples: &mut [f64]) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    samples.sort_by(f64::total_cmp);
    let mid = samples.len() / 2;
    if samples.len() % 2 == 1 { samples[mid] } else { 0.5 * (samples[mid - 1] + samples[mid]) }
}

#[cfg(test)]
mod tests {
    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(super::median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(super::median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(super::median(&mut []).is_nan());
    }
}
