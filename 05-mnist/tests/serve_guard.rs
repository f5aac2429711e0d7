//! What keeps other web pages and greedy clients from driving `mnist serve`: the `Host`
//! allow-list (DNS rebinding), the `Origin` check on state-changing requests, the security
//! headers, the caps on event streams, predictions and connections, the header-read and idle
//! timeouts, and the warning for `--host 0.0.0.0`.
//!
//! The router-level checks run in-process (tower's `oneshot`); the connection-level ones on a
//! real socket, with the server's own accept loop (`serve_until`) and short limits. All on a
//! tiny synthetic data set: nothing here trains.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode, header};
use futures_util::future::join_all;
use gpu_layers::NetworkSpec;
use mnist::data::{CLASSES, Dataset, Mnist, PIXELS};
use mnist::datasets::DatasetKind;
use mnist::model_io::Model;
use mnist::serve::{AllowedHosts, AppState, CSP, Limits, ServeModel, SiteFiles, router, router_with, serve_until};
use serde_json::{Value, json};
use tower::ServiceExt;

fn tiny_data() -> Arc<Mnist> {
    let set = |n: usize| {
        let images = (0..n * PIXELS).map(|i| (i * 37 % 256) as u8).collect();
        Dataset::new(images, (0..n).map(|i| (i % 10) as u8).collect()).unwrap()
    };
    Arc::new(Mnist { train: set(16), test: set(8), kind: DatasetKind::Mnist })
}

fn tiny_model() -> ServeModel {
    let spec = NetworkSpec::new(PIXELS, &[8], CLASSES).unwrap();
    ServeModel::new(Model::new(spec.clone(), spec.init_parameters(1)).unwrap(), "a test model").unwrap()
}

async fn send(app: &Router, req: Request<Body>) -> (StatusCode, HeaderMap, Value) {
    let res = app.clone().oneshot(req).await.unwrap();
    let (status, headers) = (res.status(), res.headers().clone());
    let body = axum::body::to_bytes(res.into_body(), usize::MAX).await.unwrap();
    (status, headers, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

fn get_with(path: &str, headers: &[(&str, &str)]) -> Request<Body> {
    let mut req = Request::get(path);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.body(Body::empty()).unwrap()
}

fn post_with(path: &str, body: Value, headers: &[(&str, &str)]) -> Request<Body> {
    let mut req = Request::post(path).header(header::CONTENT_TYPE, "application/json");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.body(Body::from(body.to_string())).unwrap()
}

fn error_of(v: &Value) -> &str {
    v["error"].as_str().unwrap_or_else(|| panic!("no error message in {v}"))
}

#[tokio::test]
async fn only_requests_addressed_to_this_server_are_answered() {
    let app = router(AppState::new(tiny_data(), None));
    for host in ["127.0.0.1:8080", "localhost:8080", "LOCALHOST", "[::1]:8080", "127.0.0.1"] {
        let (status, _, _) = send(&app, get_with("/api/status", &[("host", host)])).await;
        assert_eq!(status, StatusCode::OK, "Host: {host}");
    }
    // What a DNS-rebinding page sends: its own name, resolved to 127.0.0.1.
    for host in ["evil.example:8080", "evil.example", "127.0.0.1.evil.example:8080", "192.168.1.5:8080", "localhost:x", ""] {
        for req in [get_with("/api/status", &[("host", host)]), post_with("/api/train", json!({}), &[("host", host)])] {
            let (status, _, v) = send(&app, req).await;
            assert_eq!(status, StatusCode::MISDIRECTED_REQUEST, "Host: {host}: {v}");
            let msg = error_of(&v);
            assert!(msg.contains("localhost, 127.0.0.1, [::1]") && msg.contains(&format!("Host: {host}")), "{msg}");
        }
    }
    // The page itself, too: a rebinding page cannot even load it.
    let (status, _, _) = send(&app, get_with("/", &[("host", "evil.example")])).await;
    assert_eq!(status, StatusCode::MISDIRECTED_REQUEST);

    // `--host` adds its own name.
    let app = router_with(AppState::new(tiny_data(), None), AllowedHosts::with_bound("my-box.lan"), Limits::default());
    let (status, _, _) = send(&app, get_with("/api/status", &[("host", "my-box.lan:8080")])).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, _) = send(&app, get_with("/api/status", &[("host", "evil.example:8080")])).await;
    assert_eq!(status, StatusCode::MISDIRECTED_REQUEST);
}

#[tokio::test]
async fn state_changing_requests_from_other_origins_are_refused() {
    let app = router(AppState::new(tiny_data(), Some(tiny_model())));
    let host = ("host", "127.0.0.1:8080");
    let drawing = json!({ "width": 8, "height": 8, "pixels": (0..64).map(|i| if i % 9 == 0 { 255 } else { 0 }).collect::<Vec<_>>() });
    for origin in ["http://evil.example", "http://127.0.0.1:9999", "https://127.0.0.1:8080", "null", "http://localhost:8080"] {
        for (path, body) in [("/api/train", json!({ "epochs": 1 })), ("/api/stop", json!({})), ("/api/predict", drawing.clone())] {
            let (status, _, v) = send(&app, post_with(path, body, &[host, ("origin", origin)])).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{path} from {origin}: {v}");
            assert!(error_of(&v).contains(&format!("from the web page at {origin}")), "{v}");
        }
    }
    // The page's own origin, and no Origin at all (curl), are served.
    let (status, _, v) = send(&app, post_with("/api/predict", drawing.clone(), &[host, ("origin", "http://127.0.0.1:8080")])).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let (status, _, v) = send(&app, post_with("/api/stop", json!({}), &[host])).await;
    assert_eq!(status, StatusCode::CONFLICT, "{v}");
    // Reading is not changing: a GET with a foreign Origin is answered (the browser keeps the
    // answer from the other page unless CORS allows it, which this server never does).
    let (status, headers, _) = send(&app, get_with("/api/status", &[host, ("origin", "http://evil.example")])).await;
    assert_eq!(status, StatusCode::OK);
    assert!(headers.get(header::ACCESS_CONTROL_ALLOW_ORIGIN).is_none());
}

#[tokio::test]
async fn every_answer_carries_the_security_headers() {
    let app = router(AppState::new(tiny_data(), None));
    for req in [get_with("/", &[]), get_with("/app.js", &[]), get_with("/cpu_worker.js", &[]), get_with("/api/status", &[]), get_with("/nope", &[]), get_with("/", &[("host", "evil.example")])] {
        let path = req.uri().to_string();
        let (_, h, _) = send(&app, req).await;
        assert_eq!(h[header::CONTENT_SECURITY_POLICY], CSP, "{path}");
        assert_eq!(h[header::X_FRAME_OPTIONS], "DENY", "{path}");
        assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff", "{path}");
        // Cross-origin isolated, so that the CPU trainer may share memory with its threads.
        assert_eq!(h["cross-origin-opener-policy"], "same-origin", "{path}");
        assert_eq!(h["cross-origin-embedder-policy"], "require-corp", "{path}");
    }
    // The policy fits the page: its scripts and styles are files of this server (no inline
    // <script> or style attribute the policy would block), and it may run WebAssembly.
    let page = mnist::serve::INDEX_HTML;
    assert!(!page.contains("<script>") && !page.contains(" style=") && !page.contains("onclick"), "inline code in the page");
    for part in ["script-src 'self' 'wasm-unsafe-eval'", "connect-src 'self'", "frame-ancestors 'none'", "img-src 'self' data:", "worker-src 'self'"] {
        assert!(CSP.contains(part), "{part}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_streams_and_predictions_are_capped() {
    let limits = Limits { max_event_streams: 2, max_predictions: 1, ..Limits::default() };
    let app = router_with(AppState::new(tiny_data(), Some(tiny_model())), AllowedHosts::default(), limits);
    let open = || async { app.clone().oneshot(get_with("/api/events", &[])).await.unwrap() };
    let (a, b) = (open().await, open().await);
    assert_eq!((a.status(), b.status()), (StatusCode::OK, StatusCode::OK));
    let third = open().await;
    assert_eq!(third.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(third.headers()[header::RETRY_AFTER], "5");
    let v: Value = serde_json::from_slice(&axum::body::to_bytes(third.into_body(), 1 << 20).await.unwrap()).unwrap();
    assert!(error_of(&v).contains("too many open event streams at once (the limit is 2)"), "{v}");
    // A page that goes away frees its place.
    drop(a);
    assert_eq!(open().await.status(), StatusCode::OK);
    drop(b);

    // Sixteen drawings at once, one allowed at a time: the first is computed, the others that
    // arrive while it is are refused with 503 (none fails otherwise).
    let side: usize = 256;
    let pixels: Vec<u8> = (0..side * side).map(|i| if (i % side).abs_diff(side / 2) < 20 { 255 } else { 0 }).collect();
    let drawing = json!({ "width": side, "height": side, "pixels": pixels });
    let answers = join_all((0..16).map(|_| send(&app, post_with("/api/predict", drawing.clone(), &[])))).await;
    let ok = answers.iter().filter(|(s, _, _)| *s == StatusCode::OK).count();
    let busy: Vec<_> = answers.iter().filter(|(s, _, _)| *s == StatusCode::SERVICE_UNAVAILABLE).collect();
    assert_eq!(ok + busy.len(), 16, "{:?}", answers.iter().map(|a| a.0).collect::<Vec<_>>());
    assert!(ok >= 1 && !busy.is_empty(), "{ok} answered, {} refused", busy.len());
    assert!(error_of(&busy[0].2).contains("too many predictions in progress at once (the limit is 1)"));
    // Afterwards, predictions are answered again.
    assert_eq!(send(&app, post_with("/api/predict", drawing, &[])).await.0, StatusCode::OK);
}

/// A server on 127.0.0.1 with `limits`, in its own thread; dropping the guard stops it.
struct Server {
    addr: std::net::SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    fn start(limits: Limits) -> Server {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let shutdown = async move {
                let _ = stopped.await;
            };
            let files = SiteFiles { site: None, data_dir: std::env::temp_dir(), fashion_dir: std::env::temp_dir() };
            serve_until(listener, AppState::new(tiny_data(), None), files, AllowedHosts::default(), limits, shutdown).unwrap();
        });
        Server { addr, stop: Some(stop), thread: Some(thread) }
    }

    fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.stop.take().unwrap().send(());
        let _ = self.thread.take().unwrap().join();
    }
}

/// Reads until the server closes the connection (or the 10 s read timeout): what it sent, and
/// how long it took.
fn read_until_closed(s: &mut TcpStream) -> (String, Duration) {
    let start = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("the server kept the connection open for {:?} ({e}); got {:?}", start.elapsed(), String::from_utf8_lossy(&got)),
        }
    }
    (String::from_utf8_lossy(&got).into_owned(), start.elapsed())
}

#[test]
fn slow_headers_and_idle_connections_are_cut_off() {
    let limits = Limits { header_read_timeout: Duration::from_millis(400), idle_timeout: Duration::from_millis(800), ..Limits::default() };
    let server = Server::start(limits);

    // Slowloris: a request line and half the headers, then silence.
    let mut s = server.connect();
    s.write_all(b"GET /api/status HTTP/1.1\r\nHost: 127.0.0.1\r\n").unwrap();
    let (_, took) = read_until_closed(&mut s);
    assert!(took < Duration::from_secs(3), "{took:?}");

    // A connection that sends nothing at all.
    let (_, took) = read_until_closed(&mut server.connect());
    assert!(took < Duration::from_secs(3), "{took:?}");

    // A kept-alive connection is answered, then closed when no next request comes.
    let mut s = server.connect();
    s.write_all(b"GET /api/status HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let (answer, took) = read_until_closed(&mut s);
    assert!(answer.starts_with("HTTP/1.1 200") && answer.contains("\"training\":false"), "{answer}");
    assert!(took < Duration::from_secs(3), "{took:?}");

    // An event stream whose reader stops: the snapshot arrives, then nothing moves (the next
    // keep-alive is 15 s away) and the idle timeout closes it.
    let mut s = server.connect();
    s.write_all(b"GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let (answer, took) = read_until_closed(&mut s);
    assert!(answer.contains("event: snapshot"), "{answer}");
    assert!(took < Duration::from_secs(3), "{took:?}");
}

/// Opens an event stream and reads until its snapshot has come: a connection busy answering.
fn open_event_stream(server: &Server) -> TcpStream {
    let mut s = server.connect();
    s.write_all(b"GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains("event: snapshot") {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed before the snapshot: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    s
}

#[test]
fn connections_over_the_cap_are_refused_with_a_message_when_all_are_busy() {
    let server = Server::start(Limits { max_connections: 2, ..Limits::default() });
    let mut held: Vec<TcpStream> = (0..2).map(|_| open_event_stream(&server)).collect();
    let mut third = server.connect();
    let _ = third.write_all(b"GET /api/status HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    let (answer, _) = read_until_closed(&mut third);
    assert!(answer.starts_with("HTTP/1.1 503") && answer.contains("too many connections"), "{answer}");
    // The busy ones were not closed to make room.
    for s in &mut held {
        s.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        let mut buf = [0u8; 64];
        assert!(s.read(&mut buf).is_err(), "an event stream was closed (or sent something unexpected)");
    }
    // When one goes, a new one is served.
    drop(held);
    std::thread::sleep(Duration::from_millis(200));
    let mut s = server.connect();
    s.write_all(b"GET /api/status HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").unwrap();
    let (answer, _) = read_until_closed(&mut s);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[test]
fn idle_connections_give_way_to_a_client_that_asks() {
    // Far more connections that send nothing than the cap, with the header timeout far away:
    // a client that asks is still answered, each time, and the oldest idle ones are closed.
    let slow = Duration::from_secs(60);
    let server = Server::start(Limits { max_connections: 8, header_read_timeout: slow, idle_timeout: slow, ..Limits::default() });
    let mut idle: Vec<TcpStream> = (0..40).map(|_| server.connect()).collect();
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..3 {
        let mut s = server.connect();
        s.write_all(b"GET /api/status HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").unwrap();
        let (answer, took) = read_until_closed(&mut s);
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(took < Duration::from_secs(3), "{took:?}");
    }
    let mut closed = 0;
    for s in &mut idle {
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        if matches!(s.read(&mut [0u8; 16]), Ok(0)) {
            closed += 1;
        }
    }
    assert!(closed >= 40 - 8, "only {closed} of the 40 idle connections were closed");
}

#[test]
fn listening_beyond_this_machine_prints_a_warning() {
    // The warning comes right after the port is taken, before the data is loaded (which fails
    // here: an empty folder and a dead mirror).
    let dir = tempfile::tempdir().unwrap();
    let run = |host: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_mnist"))
            .args(["serve", "--host", host, "--port", "0", "--data-dir", dir.path().to_str().unwrap()])
            .env("MNIST_MIRRORS", "http://127.0.0.1:9/")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = run("0.0.0.0");
    assert!(err.contains("WARNING: --host 0.0.0.0 listens on every network interface"), "{err}");
    assert!(err.contains("no login"), "{err}");
    for host in ["127.0.0.1", "localhost"] {
        let err = run(host);
        assert!(!err.contains("WARNING"), "{host}: {err}");
    }
}
