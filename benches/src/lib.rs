//! `benches`: criterion benchmarks of the CPU against the GPU, with and without transfers, and
//! the crossover report that reads their results.
//!
//! - `benches/double.rs`, `benches/matmul.rs`, `benches/train_step.rs`: the criterion benches
//!   (`cargo bench`, from the workspace root; `BENCH_FULL=1` for the full sweep).
//! - [`harness`]: what they share: sweep sizes, criterion settings, the adapter note, and the
//!   two GPU timings (kernels only from GPU timestamps; end to end from the wall clock).
//! - [`results`], [`crossover`], [`plot`]: `cargo run --release -p benches --bin crossover`
//!   reads criterion's saved estimates, prints from which size the GPU wins, and draws one SVG
//!   per operation.
//!
//! See `benches/README.md` for how to run them and what they measured.

pub mod crossover;
pub mod harness;
pub mod plot;
pub mod results;
