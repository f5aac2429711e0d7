//! The GPU side: the buffer manager (`buffers.rs`), the compiled kernels (`kernels.rs`), the
//! tensor store and its tapes (`store.rs`), which dispatches a tape becomes (`plan.rs`), the
//! prepared dispatch (`dispatch.rs`) and how each op is prepared as one (`prepare*.rs`), and the
//! trainer (`trainer.rs`).

pub(crate) mod buffers;
pub(crate) mod dispatch;
pub(crate) mod kernels;
pub(crate) mod plan;
mod prepare;
mod prepare_basic;
mod prepare_fused;
mod prepare_linear;
pub(crate) mod store;
pub(crate) mod trainer;
