//! `benches`: criterion benchmarks of the CPU against the GPU, with and without transfers, and
//! the crossover report that reads their results.
//!
//! - `benches/gpu_vs_cpu/`: the criterion benches, one executable for every group (`cargo
//!   bench` from the workspace root; `BENCH_FULL=1` for the full sweep), ending with the report.
//! - [`harness`]: what they share: sweep sizes, criterion settings, the adapter note, and the
//!   two GPU timings (kernels only from GPU timestamps; end to end from the wall clock).
//! - [`results`], [`crossover`], [`report`], [`plot`]: reading criterion's saved estimates,
//!   from which size the GPU wins, the report folder (tables, `results.json`, one plot per
//!   operation) and the summary `cargo bench` prints last. `cargo run --release -p benches
//!   --bin crossover` redraws it, from criterion's folder or a saved `results.json`.
//!
//! See `benches/README.md` for how to run them and what they measured.

pub mod crossover;
pub mod harness;
pub mod plot;
pub mod report;
pub mod results;
