//! Connection slots: how many connections `mnist serve` holds at once, per client address and
//! in all, and which one gives way when a new client arrives and the slots are full.
//!
//! A connection is *busy* while a request on it is being answered (from the moment its headers
//! have been read until the last byte of the answer has been handed to the socket: an event
//! stream is busy for as long as it is open), and *idle* otherwise: before its first request,
//! between kept-alive requests, or while a client sends its headers slowly. When a new
//! connection finds its address at [`Limits::max_connections_per_client`] or the server at
//! [`Limits::max_connections`], the connection that has been idle the longest (of that address,
//! or of any) is closed to make room: hundreds of connections that send nothing cannot keep a
//! normal client out, however often they reconnect. Only when every slot is busy is the new
//! connection refused (`503`).
//!
//! [`Limits::max_connections_per_client`]: super::guard::Limits::max_connections_per_client
//! [`Limits::max_connections`]: super::guard::Limits::max_connections

use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::{Body, Bytes};
use http_body::{Frame, SizeHint};
use tokio::sync::Notify;

/// The slots of one server.
#[derive(Debug)]
pub struct Slots {
    max_total: usize,
    max_per_client: usize,
    held: Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    next_id: u64,
    entries: Vec<Entry>,
}

#[derive(Debug)]
struct Entry {
    id: u64,
    client: IpAddr,
    activity: Arc<Activity>,
    evict: Arc<Notify>,
}

/// What a connection is doing: requests in flight, and when the last one ended.
#[derive(Debug)]
pub struct Activity {
    in_flight: AtomicUsize,
    idle_since: Mutex<Instant>,
}

impl Activity {
    fn new() -> Self {
        Self { in_flight: AtomicUsize::new(0), idle_since: Mutex::new(Instant::now()) }
    }

    /// Marks a request in flight until the returned guard is dropped.
    pub fn begin(self: &Arc<Self>) -> Busy {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        Busy(self.clone())
    }

    /// `Some(since)` when no request is in flight.
    fn idle_since(&self) -> Option<Instant> {
        let since = *self.idle_since.lock().unwrap_or_else(|p| p.into_inner());
        (self.in_flight.load(Ordering::SeqCst) == 0).then_some(since)
    }
}

/// A request in flight on a connection ([`Activity::begin`]).
#[derive(Debug)]
pub struct Busy(Arc<Activity>);

impl Drop for Busy {
    fn drop(&mut self) {
        *self.0.idle_since.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A held slot: dropping it frees it.
#[derive(Debug)]
pub struct Slot {
    slots: Arc<Slots>,
    id: u64,
    pub activity: Arc<Activity>,
    evict: Arc<Notify>,
}

impl Slot {
    /// Resolves when the slot was given to a newer connection: close this one.
    pub async fn evicted(&self) {
        self.evict.notified().await;
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut held = self.slots.held.lock().unwrap_or_else(|p| p.into_inner());
        held.entries.retain(|e| e.id != self.id);
    }
}

impl Slots {
    pub fn new(max_total: usize, max_per_client: usize) -> Arc<Self> {
        Arc::new(Self { max_total: max_total.max(1), max_per_client: max_per_client.max(1), held: Mutex::default() })
    }

    /// A slot for a new connection from `client`, making room by closing the longest-idle
    /// connection when needed; None when every slot it could take is busy.
    pub fn admit(self: &Arc<Self>, client: IpAddr) -> Option<Slot> {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let own = held.entries.iter().filter(|e| e.client == client).count();
        let full_for_client = own >= self.max_per_client;
        if full_for_client || held.entries.len() >= self.max_total {
            let victim = held
                .entries
                .iter()
                .enumerate()
                .filter(|(_, e)| !full_for_client || e.client == client)
                .filter_map(|(i, e)| e.activity.idle_since().map(|since| (since, i)))
                .min()
                .map(|(_, i)| i)?;
            let victim = held.entries.swap_remove(victim);
            victim.evict.notify_one();
        }
        held.next_id += 1;
        let (id, activity, evict) = (held.next_id, Arc::new(Activity::new()), Arc::new(Notify::new()));
        held.entries.push(Entry { id, client, activity: activity.clone(), evict: evict.clone() });
        Some(Slot { slots: self.clone(), id, activity, evict })
    }

    /// Connections held now.
    #[cfg(test)]
    pub fn held_count(&self) -> usize {
        self.held.lock().unwrap_or_else(|p| p.into_inner()).entries.len()
    }
}

/// A response body that keeps its connection marked busy until the body is done (sent or
/// dropped).
pub struct Tracked {
    inner: Body,
    _busy: Busy,
}

impl Tracked {
    pub fn new(inner: Body, busy: Busy) -> Self {
        Self { inner, _busy: busy }
    }
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn a_full_client_gives_up_its_longest_idle_connection() {
        let slots = Slots::new(100, 2);
        let first = slots.admit(ip(1)).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let second = slots.admit(ip(1)).unwrap();
        let other = slots.admit(ip(2)).unwrap();
        // A third from the same address: the first (idle longest) goes, the other address's stays.
        let third = slots.admit(ip(1)).unwrap();
        assert_eq!(slots.held_count(), 3);
        let evicted = |s: &Slot| futures_util::FutureExt::now_or_never(s.evicted()).is_some();
        assert!(evicted(&first));
        assert!(!evicted(&second) && !evicted(&other) && !evicted(&third));
        drop(first);
        assert_eq!(slots.held_count(), 3, "dropping an evicted slot frees nothing twice");
    }

    #[test]
    fn busy_connections_are_never_evicted() {
        let slots = Slots::new(2, 64);
        let a = slots.admit(ip(1)).unwrap();
        let b = slots.admit(ip(2)).unwrap();
        let (busy_a, busy_b) = (a.activity.begin(), b.activity.begin());
        assert!(slots.admit(ip(3)).is_none(), "every slot is busy");
        // One answer ends: its connection is idle, and gives way.
        drop(busy_b);
        let c = slots.admit(ip(3)).unwrap();
        assert!(futures_util::FutureExt::now_or_never(b.evicted()).is_some());
        assert!(futures_util::FutureExt::now_or_never(a.evicted()).is_none());
        drop((busy_a, c));
    }

    #[test]
    fn dropped_slots_are_freed() {
        let slots = Slots::new(1, 1);
        let a = slots.admit(ip(1)).unwrap();
        let busy = a.activity.begin();
        assert!(slots.admit(ip(1)).is_none());
        drop(busy);
        drop(a);
        assert_eq!(slots.held_count(), 0);
        assert!(slots.admit(ip(1)).is_some());
    }
}
