//! The CPU side: the CPU reference of every kernel (`reference.rs`), the fast CPU path the CPU
//! trainer runs (`fast*.rs`, checked against the references by `fast_checks.rs`), the tensor store (`store.rs`), running an op on it (`run_op.rs`)
//! and the trainer (`trainer.rs`).

pub mod fast;
pub mod fast_checks;
mod fast_strips;
mod fast_tiles;
pub mod reference;
pub(crate) mod run_op;
pub(crate) mod store;
pub(crate) mod trainer;
