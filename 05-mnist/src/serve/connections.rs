//! The accept loop: TCP connections in, HTTP/1.1 (hyper) on each, the router behind it.
//!
//! `axum::serve` would do this in one line, but it has no timeouts and no cap on connections,
//! so one client could open thousands of connections and send nothing (each holds a socket and
//! a task forever), or send its headers one byte a minute. Here:
//! - at most [`Limits::max_connections`] connections are served at once, and at most
//!   [`Limits::max_connections_per_client`] from one address (`slots.rs`); a new one that finds
//!   them full takes the slot of the connection idle the longest, so idle connections never
//!   keep a client out; only when every slot is busy answering is it told `503` and closed;
//! - a request's headers must arrive within [`Limits::header_read_timeout`] (hyper's own timer,
//!   which also closes a kept-alive connection that sends no next request);
//! - a connection on which no byte moves either way for [`Limits::idle_timeout`] is closed
//!   ([`Idle`]), which also ends a response that a client stopped reading;
//! - each request carries the address it arrived on ([`LocalAddr`]) for the `Host` check.
//!
//! Shutdown: stop accepting, ask every connection to finish its current answer, and wait for
//! them (event streams end by themselves when the server shuts down), at most [`GRACE`].

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::{Instant, Sleep};
use tower::ServiceExt;

use super::guard::{Limits, LocalAddr};
use super::slots::{Slots, Tracked};

/// How long shutdown waits for connections to finish their answers.
pub const GRACE: Duration = Duration::from_secs(5);

/// The answer to a connection over the cap (then the connection is closed).
const TOO_MANY: &str = r#"{"error":"too many connections to this server at once, all of them busy; close some of its pages or tabs and try again"}"#;

/// Serves `app` on `listener` until `shutdown` resolves, then shuts down as described above.
pub async fn serve_connections(listener: TcpListener, app: Router, limits: Limits, shutdown: impl Future<Output = ()>) {
    let slots = Slots::new(limits.max_connections, limits.max_connections_per_client);
    let (closing, closing_rx) = watch::channel(false);
    let mut tasks = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        while tasks.try_join_next().is_some() {}
        let (stream, peer) = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(s) => s,
                // Out of file descriptors (EMFILE), or a connection reset before accept: wait
                // a moment instead of spinning, and go on.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Some(slot) = slots.admit(peer.ip()) else {
            tasks.spawn(refuse(stream));
            continue;
        };
        let local = stream.local_addr().ok().map(LocalAddr);
        let app = app.clone();
        let mut closing = closing_rx.clone();
        let activity = slot.activity.clone();
        tasks.spawn(async move {
            let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                // Busy from here until the answer's last byte is sent (see `slots.rs`).
                let busy = activity.begin();
                let mut req = req.map(Body::new);
                if let Some(local) = local {
                    req.extensions_mut().insert(local);
                }
                let answer = app.clone().oneshot(req);
                async move { answer.await.map(|res| res.map(|body| Tracked::new(body, busy))) }
            });
            let io = TokioIo::new(Idle::new(stream, limits.idle_timeout));
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_read_timeout)
                .serve_connection(io, service);
            tokio::pin!(conn);
            let finished = tokio::select! {
                _ = conn.as_mut() => true,
                // Idle, and its slot went to a newer connection: close it now.
                _ = slot.evicted() => true,
                _ = closing.wait_for(|&c| c) => false,
            };
            drop(slot);
            if !finished {
                conn.as_mut().graceful_shutdown();
                let _ = conn.await;
            }
        });
    }
    drop(listener);
    let _ = closing.send(true);
    let _ = tokio::time::timeout(GRACE, async { while tasks.join_next().await.is_some() {} }).await;
    tasks.abort_all();
}

/// Writes the 503 answer, then reads and drops what the client sent (closing a socket with
/// unread data would reset it, and the client might lose the answer), for at most 2 s.
async fn refuse(stream: TcpStream) {
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        let answer = format!(
            "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 5\r\n\
             connection: close\r\ncontent-length: {}\r\n\r\n{TOO_MANY}",
            TOO_MANY.len()
        );
        let mut rest = answer.as_bytes();
        while !rest.is_empty() {
            if stream.writable().await.is_err() {
                return;
            }
            match stream.try_write(rest) {
                Ok(n) => rest = &rest[n..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return,
            }
        }
        let Ok(std) = stream.into_std() else { return };
        let _ = std.shutdown(std::net::Shutdown::Write);
        let Ok(stream) = TcpStream::from_std(std) else { return };
        let mut sink = [0u8; 4096];
        loop {
            if stream.readable().await.is_err() {
                return;
            }
            match stream.try_read(&mut sink) {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return,
            }
        }
    })
    .await;
}

/// A stream that fails with `TimedOut` once no byte has moved either way for `timeout` while
/// a read or a write is waiting.
pub struct Idle<S> {
    inner: S,
    timeout: Duration,
    deadline: Pin<Box<Sleep>>,
}

impl<S> Idle<S> {
    pub fn new(inner: S, timeout: Duration) -> Self {
        Self { inner, timeout, deadline: Box::pin(tokio::time::sleep(timeout)) }
    }

    fn moved(&mut self) {
        self.deadline.as_mut().reset(Instant::now() + self.timeout);
    }

    /// Called when the inner stream is not ready: an error once the deadline has passed.
    fn check(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        ready!(self.deadline.as_mut().poll(cx));
        Poll::Ready(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("no data moved for {} s", self.timeout.as_secs()),
        ))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Idle<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Ready(r) => {
                if buf.filled().len() > before {
                    self.moved();
                }
                Poll::Ready(r)
            }
            Poll::Pending => self.check(cx).map(Err),
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Idle<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write(cx, data) {
            Poll::Ready(r) => {
                if matches!(r, Ok(n) if n > 0) {
                    self.moved();
                }
                Poll::Ready(r)
            }
            Poll::Pending => self.check(cx).map(Err),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.inner).poll_flush(cx) {
            Poll::Ready(r) => Poll::Ready(r),
            Poll::Pending => self.check(cx).map(Err),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
