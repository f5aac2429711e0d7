//! `cargo bench`: the CPU against the GPU, with and without transfers, over sizes, then the
//! crossover report: where the GPU starts to win, as tables, plots and a summary printed last.
//!
//! One bench executable runs every group, so that `cargo bench` ends with one report:
//! - `double` ([`double`]): doubling an array, stage 01;
//! - `matmul` and `matmul_mnist` ([`matmul`]): square products and the MNIST network's
//!   shapes, stages 02 and 03;
//! - `train_step` ([`train_step`]): one SGD step of the 784-128-10 network, stage 04.
//!
//! `cargo bench -- matmul` runs the groups whose ids match criterion's filter and updates
//! their part of the report; the other groups keep their last results. `cargo test` runs each
//! benchmark once on its smallest size (criterion's test mode), with the check that every
//! benchmark does before it is timed, and writes no report. The sizes depend on the adapter:
//! see `harness::Sweep`.

mod double;
mod matmul;
mod train_step;

use benches::harness::Bench;

fn main() {
    let mut bench = Bench::start();
    double::run(&mut bench);
    matmul::run(&mut bench);
    train_step::run(&mut bench);
    bench.finish();
}
