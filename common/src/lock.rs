//! `lock`: a mutex's data, even where a thread panicked while holding it. Nothing in this crate
//! panics while holding a lock (the slots of `wait.rs` and `device.rs`, the context's staging
//! buffers), so the data is always whole; recovering it beats poisoning every later call.

use std::sync::{Mutex, MutexGuard};

/// Locks `m`, recovering the data from a poisoned lock.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
