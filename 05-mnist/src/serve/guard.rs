//! What the server checks before any handler runs, and the headers it adds to every answer.
//!
//! The server has no login: whoever can send it requests can train and stop. On 127.0.0.1 that
//! is only this machine, but a web page in the user's browser is also "this machine":
//! - DNS rebinding: a page from `evil.example` makes its name resolve to 127.0.0.1, and its
//!   scripts then talk to this server as "same origin". The browser still sends
//!   `Host: evil.example:8080`, so we answer only requests whose `Host` names one of our own
//!   addresses ([`AllowedHosts`]), and refuse the others with 421 Misdirected Request.
//! - Cross-site requests: a page elsewhere can send a POST here without reading the answer. Its
//!   browser marks it with `Origin`; a state-changing request (anything but GET and HEAD) whose
//!   `Origin` is not this server is refused with 403. (They also need a JSON content type,
//!   which a cross-site form cannot send without a CORS preflight, which we never grant.)
//! - Framing and sniffing: every answer carries a Content-Security-Policy that allows only
//!   this server's own scripts, styles, fetches and WebAssembly, `frame-ancestors 'none'` and
//!   `X-Frame-Options: DENY` (no clickjacking in a frame), and `X-Content-Type-Options: nosniff`.
//! - Cross-origin isolation: `Cross-Origin-Opener-Policy: same-origin` and
//!   `Cross-Origin-Embedder-Policy: require-corp` on every answer. The page loads nothing from
//!   elsewhere, so they cost nothing, and they let it share memory with Web Workers: the CPU
//!   trainer's threads (`cpu_worker.js`, `pkg/threads/`) run only on an isolated page.
//! - Slow or greedy clients: a request must be answered within [`Limits::request_timeout`],
//!   and the event streams and predictions in flight are capped ([`limit`]): over the cap,
//!   the answer is 503 with a message, not a server that runs out of threads or memory. The
//!   timeouts on reading headers and on idle connections, and the cap on connections, are in
//!   `connections.rs`.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use tokio::sync::Semaphore;

use super::error::ApiError;

/// The Content-Security-Policy of every answer. The page loads `/app.js` and `/style.css`,
/// an inline SVG icon (`data:`), talks to `/api/*` (fetch and EventSource), draws on canvases,
/// and may instantiate a WebAssembly module of its own (`'wasm-unsafe-eval'` allows
/// `WebAssembly.instantiate`, not JavaScript `eval`). Nothing else: no inline scripts, no other
/// hosts, no plugins, no framing, no forms posting elsewhere.
pub const CSP: &str = "default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self'; \
                       img-src 'self' data:; connect-src 'self'; worker-src 'self'; base-uri 'none'; \
                       form-action 'self'; frame-ancestors 'none'";

/// Limits on what one client can hold. The defaults suit one user with a few tabs open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// A request's headers must arrive within this time after the connection opens (or after
    /// the previous answer on a kept-alive connection): a slowloris client is cut off.
    pub header_read_timeout: Duration,
    /// A connection on which no byte moves either way for this long is closed (the event
    /// stream sends a keep-alive comment every 15 s, so an open page is never idle this long).
    pub idle_timeout: Duration,
    /// A request (its body included) must be answered within this time: 408 otherwise.
    pub request_timeout: Duration,
    /// Open connections in all. A new one beyond it takes the slot of the connection idle the
    /// longest; when every connection is busy, it is answered 503 and closed (`slots.rs`).
    pub max_connections: usize,
    /// Open connections from one client address, with the same rule (a page in a browser uses
    /// about six).
    pub max_connections_per_client: usize,
    /// Open event streams (`GET /api/events`: one per open page).
    pub max_event_streams: usize,
    /// Predictions (`POST /api/predict`) being computed at once.
    pub max_predictions: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(30),
            max_connections: 256,
            max_connections_per_client: 64,
            max_event_streams: 32,
            max_predictions: 8,
        }
    }
}

/// The `Host` names the server answers to: `localhost`, `127.0.0.1`, `[::1]`, the `--host` it
/// was started with, and (see [`LocalAddr`]) the address each connection arrived on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedHosts {
    /// Lower-case, without port; IPv6 addresses in brackets.
    names: Vec<String>,
}

impl Default for AllowedHosts {
    fn default() -> Self {
        Self { names: ["localhost", "127.0.0.1", "[::1]"].map(String::from).to_vec() }
    }
}

impl AllowedHosts {
    /// The loopback names and `bound`, the `--host` value (a wildcard address such as 0.0.0.0
    /// names no host: requests then name the address they were sent to, see [`LocalAddr`]).
    pub fn with_bound(bound: &str) -> Self {
        let mut hosts = Self::default();
        let name = match bound.parse::<IpAddr>() {
            Ok(ip) if ip.is_unspecified() => None,
            Ok(ip) => Some(host_of(ip)),
            Err(_) => Some(bound.trim().to_ascii_lowercase()),
        };
        if let Some(name) = name.filter(|n| !n.is_empty() && !hosts.names.contains(n)) {
            hosts.names.push(name);
        }
        hosts
    }

    fn allows(&self, host: &str, local: Option<IpAddr>) -> bool {
        self.names.iter().any(|n| n == host) || local.is_some_and(|ip| host_of(ip) == host)
    }

    /// `localhost, 127.0.0.1, [::1]` and the others, for messages.
    fn list(&self) -> String {
        self.names.join(", ")
    }
}

/// The local address a connection was accepted on, set as a request extension by the accept
/// loop. With `--host 0.0.0.0`, a request to `http://192.168.1.5:8080/` arrives on 192.168.1.5,
/// so `Host: 192.168.1.5:8080` names this server and is allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalAddr(pub SocketAddr);

/// An address as it appears in a `Host` header: `127.0.0.1`, `[::1]`.
fn host_of(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => format!("[{v6}]"),
        },
    }
}

/// The host part of a `Host` value or an origin's authority, lower-case: `[::1]:8080` ->
/// `[::1]`, `LocalHost:80` -> `localhost`. None when it is not one.
fn host_part(authority: &str) -> Option<String> {
    let a = authority.trim().to_ascii_lowercase();
    let host = if a.starts_with('[') {
        let end = a.find(']')?;
        let (host, rest) = a.split_at(end + 1);
        (rest.is_empty() || rest.strip_prefix(':').is_some_and(is_port)).then_some(host)?.to_string()
    } else {
        match a.split_once(':') {
            Some((host, port)) if is_port(port) => host.to_string(),
            Some(_) => return None,
            None => a,
        }
    };
    (!host.is_empty()).then_some(host)
}

fn is_port(p: &str) -> bool {
    !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit())
}

/// The checks on `Host` and `Origin`, the request timeout, and the security headers. Runs
/// before every handler (see `routes.rs`).
pub(crate) async fn guard(State(guard): State<Arc<Guard>>, req: Request, next: Next) -> Response {
    let mut res = match guard.check(&req) {
        Err(refusal) => refusal.into_response(),
        Ok(()) => match tokio::time::timeout(guard.limits.request_timeout, next.run(req)).await {
            Ok(res) => res,
            Err(_) => ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                format!("the request took longer than {} s (a slow upload?); send it again", guard.limits.request_timeout.as_secs()),
            )
            .into_response(),
        },
    };
    security_headers(res.headers_mut());
    res
}

/// The policy of the book's pages (`/book/`): mdBook's pages set their theme and sidebar with
/// inline scripts and styles, so those are allowed there, and only there; the book has no
/// forms and calls no API.
pub const BOOK_CSP: &str = "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; \
                            img-src 'self' data:; font-src 'self'; connect-src 'self'; base-uri 'none'; \
                            form-action 'none'; frame-ancestors 'none'";

/// The cross-origin isolation headers (see the module's note).
pub const COOP: header::HeaderName = header::HeaderName::from_static("cross-origin-opener-policy");
pub const COEP: header::HeaderName = header::HeaderName::from_static("cross-origin-embedder-policy");

fn security_headers(h: &mut HeaderMap) {
    // A handler may have chosen the policy of its own answer (the book's, [`BOOK_CSP`]).
    if !h.contains_key(header::CONTENT_SECURITY_POLICY) {
        h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    }
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(COOP, HeaderValue::from_static("same-origin"));
    h.insert(COEP, HeaderValue::from_static("require-corp"));
}

/// What [`guard`] knows: the allowed hosts and the limits.
#[derive(Debug)]
pub(crate) struct Guard {
    pub hosts: AllowedHosts,
    pub limits: Limits,
}

impl Guard {
    fn check(&self, req: &Request) -> Result<(), ApiError> {
        let local = req.extensions().get::<LocalAddr>().map(|a| a.0.ip());
        // HTTP/1.1 requests carry `Host`; an absolute URI (a proxy's form) carries it there.
        let host_value = match req.headers().get(header::HOST) {
            Some(v) => Some(v.to_str().map_err(|_| self.misdirected("(not text)"))?.to_string()),
            None => req.uri().authority().map(|a| a.to_string()),
        };
        // No Host at all: not a browser (browsers always send one, and DNS rebinding needs
        // one), so there is nothing to check it against; HTTP/1.0 tools are served.
        if let Some(value) = &host_value {
            let host = host_part(value).ok_or_else(|| self.misdirected(value))?;
            if !self.hosts.allows(&host, local) {
                return Err(self.misdirected(value));
            }
        }
        if ![Method::GET, Method::HEAD].contains(req.method()) {
            if let Some(origin) = req.headers().get(header::ORIGIN) {
                let origin = origin.to_str().unwrap_or("(not text)");
                if !self.same_origin(origin, host_value.as_deref(), local) {
                    return Err(ApiError::new(
                        StatusCode::FORBIDDEN,
                        format!(
                            "a request from the web page at {origin} to change this server's state was refused: \
                             only the server's own page ({}) may train, stop or predict",
                            host_value.map(|h| format!("http://{h}/")).unwrap_or_else(|| "http://127.0.0.1/".into())
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// `Origin: http://HOST[:PORT]` naming the same host and port as `Host` (or, without a
    /// `Host`, an allowed host). `null` (a sandboxed frame, a file) is never the same origin.
    fn same_origin(&self, origin: &str, host_value: Option<&str>, local: Option<IpAddr>) -> bool {
        let Some(authority) = origin.strip_prefix("http://") else { return false };
        match host_value {
            Some(h) => authority.eq_ignore_ascii_case(h.trim()),
            None => host_part(authority).is_some_and(|h| self.hosts.allows(&h, local)),
        }
    }

    fn misdirected(&self, value: &str) -> ApiError {
        ApiError::new(
            StatusCode::MISDIRECTED_REQUEST,
            format!(
                "this server answers only to requests addressed to {} (or the address it was reached on); this \
                 one was addressed to `Host: {value}`. Open the page by one of those addresses, e.g. \
                 http://127.0.0.1:PORT/. (A foreign Host is what a DNS-rebinding web page sends; it is refused.)",
                self.hosts.list()
            ),
        )
    }
}

/// A cap on how many requests of one route are in flight, answering 503 over it. The permit is
/// held until the answer's body is finished, so for the event stream it is held as long as the
/// page stays connected.
#[derive(Debug, Clone)]
pub(crate) struct Cap {
    permits: Arc<Semaphore>,
    max: usize,
    what: &'static str,
    advice: &'static str,
}

impl Cap {
    pub fn new(max: usize, what: &'static str, advice: &'static str) -> Self {
        Self { permits: Arc::new(Semaphore::new(max)), max, what, advice }
    }
}

pub(crate) async fn limit(State(cap): State<Cap>, req: Request, next: Next) -> Response {
    let Ok(permit) = cap.permits.clone().try_acquire_owned() else {
        let mut res = ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("too many {} at once (the limit is {}); {}", cap.what, cap.max, cap.advice),
        )
        .into_response();
        res.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        return res;
    };
    let res = next.run(req).await;
    // The permit travels with the body and is released when the body is dropped: at its end,
    // or when the client goes away.
    res.map(|body| {
        axum::body::Body::from_stream(body.into_data_stream().map(move |chunk| {
            let _held = &permit;
            chunk
        }))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_values_are_split_from_their_ports() {
        assert_eq!(host_part("127.0.0.1:8080").as_deref(), Some("127.0.0.1"));
        assert_eq!(host_part("LocalHost").as_deref(), Some("localhost"));
        assert_eq!(host_part("[::1]:80").as_deref(), Some("[::1]"));
        assert_eq!(host_part("[::1]").as_deref(), Some("[::1]"));
        for bad in ["", ":80", "a:b", "[::1", "[::1]x", "host:123456", "::1"] {
            assert_eq!(host_part(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_bound_host_joins_the_loopback_names() {
        let local = AllowedHosts::default();
        assert!(local.allows("localhost", None) && local.allows("[::1]", None) && local.allows("127.0.0.1", None));
        assert!(!local.allows("evil.example", None) && !local.allows("192.168.1.5", None));
        assert!(AllowedHosts::with_bound("192.168.1.5").allows("192.168.1.5", None));
        assert!(AllowedHosts::with_bound("::1").allows("[::1]", None));
        assert!(AllowedHosts::with_bound("My-Box").allows("my-box", None));
        // A wildcard names no host; the address a connection arrived on does.
        let any = AllowedHosts::with_bound("0.0.0.0");
        assert_eq!(any, AllowedHosts::default());
        assert!(any.allows("192.168.1.5", Some("192.168.1.5".parse().unwrap())));
        assert!(any.allows("10.0.0.2", Some("::ffff:10.0.0.2".parse().unwrap())));
    }
}
