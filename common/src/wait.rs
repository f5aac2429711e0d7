//! Waiting for the GPU, the same way natively and in a browser.
//!
//! wgpu reports that work is done through *callbacks*: `Buffer::map_async(.., callback)` and
//! `Queue::on_submitted_work_done(callback)`. Who calls them differs by target:
//!
//! - natively (Vulkan, Metal, DX12), only `Device::poll`: nothing happens until the program
//!   polls, and `PollType::wait_indefinitely()` blocks the thread until the GPU is idle;
//! - in a browser (WebGPU), the browser's event loop, *after* the current JavaScript task
//!   returns. Blocking there would wait forever: the callback can only run once we stop
//!   waiting. `Device::poll` does nothing.
//!
//! So every wait is written once, as an `async fn`: register a callback that fills a
//! [`Completion`], [`drive`] the device (natively: poll until idle, so the
//! callback has run by the time we look; in a browser: nothing), then `.await` the completion.
//! In a browser the `.await` returns control to the event loop, which runs the callback and
//! resumes us. Natively the future is already complete and [`block_on`] (pollster) returns
//! at once: the blocking methods (`read`, `wait`, a trainer's `take_metrics`) are one line on
//! top of their async versions, and native speed is unchanged.
//!
//! Everything here works on a `wgpu::Device` and `Queue`; `GpuContext`'s waits (`context.rs`)
//! call these and then report the errors the device kept.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use crate::error::GpuError;
use crate::lock::lock;

/// Runs a future to completion on the current thread (native targets only). The GPU code of
/// this project resolves its futures by polling the device, so this returns as soon as the
/// GPU is done; it never needs an async runtime.
#[cfg(not(target_arch = "wasm32"))]
pub fn block_on<F: Future>(future: F) -> F::Output {
    pollster::block_on(future)
}

/// The state shared by a callback and the future waiting for it.
struct Slot<T> {
    value: Option<T>,
    waker: Option<Waker>,
    /// The callback was dropped without being called (wgpu dropped it: device lost).
    abandoned: bool,
}

/// The sending half: moved into a wgpu callback (it is `Send + 'static`, as wgpu requires).
pub(crate) struct Notify<T>(Arc<Mutex<Slot<T>>>);

/// The receiving half: a future that completes with the value the callback sent.
pub(crate) struct Completion<T>(Arc<Mutex<Slot<T>>>);

/// A callback/future pair (a one-shot channel): `notify.send(v)` completes `completion`.
pub(crate) fn completion<T>() -> (Notify<T>, Completion<T>) {
    let slot = Arc::new(Mutex::new(Slot { value: None, waker: None, abandoned: false }));
    (Notify(slot.clone()), Completion(slot))
}

impl<T> Notify<T> {
    pub(crate) fn send(self, value: T) {
        let waker = {
            let mut slot = lock(&self.0);
            slot.value = Some(value);
            slot.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl<T> Drop for Notify<T> {
    fn drop(&mut self) {
        let waker = {
            let mut slot = lock(&self.0);
            if slot.value.is_some() {
                return;
            }
            slot.abandoned = true;
            slot.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl<T> Future for Completion<T> {
    /// `Err` when the callback was dropped without being called.
    type Output = Result<T, GpuError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut slot = lock(&self.0);
        if let Some(v) = slot.value.take() {
            return Poll::Ready(Ok(v));
        }
        if slot.abandoned {
            return Poll::Ready(Err(GpuError::Device("wgpu dropped a callback without calling it (device lost?)".into())));
        }
        slot.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// A point in a queue: the work submitted up to it ([`GpuContext::mark`]).
///
/// [`GpuContext::mark`]: crate::GpuContext::mark
pub struct QueueMark {
    /// Natively: the submission to poll for. In a browser the callback alone tells.
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    index: wgpu::SubmissionIndex,
    done: Completion<()>,
}

impl QueueMark {
    /// Marks the work submitted to `queue` so far (`index` is the last submission).
    pub(crate) fn new(queue: &wgpu::Queue, index: wgpu::SubmissionIndex) -> Self {
        let (notify, done) = completion();
        queue.on_submitted_work_done(move || notify.send(()));
        Self { index, done }
    }

    /// Completes when the work up to this mark has finished on `device`'s GPU, whatever was
    /// submitted after it. Natively: polls for just that submission.
    pub(crate) async fn reached(self, device: &wgpu::Device) -> Result<(), GpuError> {
        #[cfg(not(target_arch = "wasm32"))]
        device
            .poll(wgpu::PollType::Wait { submission_index: Some(self.index), timeout: None })
            .map_err(|e| GpuError::Device(e.to_string()))?;
        #[cfg(target_arch = "wasm32")]
        let _ = device;
        self.done.await
    }
}

/// Makes the callbacks of submitted work run. Natively: polls `device` until it is idle
/// (blocking). In a browser: nothing; the event loop runs them once we `.await`.
pub(crate) fn drive(device: &wgpu::Device) -> Result<(), GpuError> {
    #[cfg(not(target_arch = "wasm32"))]
    {
        device.poll(wgpu::PollType::wait_indefinitely()).map(|_| ()).map_err(|e| GpuError::Device(e.to_string()))
    }
    #[cfg(target_arch = "wasm32")]
    {
        let _ = device;
        Ok(())
    }
}

/// Completes when all work submitted to `queue` so far has finished on the GPU.
pub(crate) async fn work_done(device: &wgpu::Device, queue: &wgpu::Queue) -> Result<(), GpuError> {
    let (notify, done) = completion();
    queue.on_submitted_work_done(move || notify.send(()));
    drive(device)?;
    done.await
}

/// Maps `slice` of a `MAP_READ` buffer of `device` and completes when it is mapped.
pub(crate) async fn map_read(device: &wgpu::Device, slice: wgpu::BufferSlice<'_>) -> Result<(), GpuError> {
    let (notify, mapped) = completion();
    slice.map_async(wgpu::MapMode::Read, move |r| notify.send(r));
    drive(device)?;
    mapped.await?.map_err(|e| GpuError::Device(format!("mapping the staging buffer failed: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sent_value_completes_the_future() {
        let (notify, done) = completion();
        notify.send(7);
        assert_eq!(block_on(done).unwrap(), 7);
    }

    #[test]
    fn a_dropped_callback_is_an_error_not_a_hang() {
        let (notify, done) = completion::<u32>();
        drop(notify);
        assert!(block_on(done).is_err());
    }

    #[test]
    fn a_value_sent_from_another_thread_wakes_the_waiter() {
        let (notify, done) = completion();
        let t = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            notify.send("mapped");
        });
        assert_eq!(block_on(done).unwrap(), "mapped");
        t.join().unwrap();
    }
}
