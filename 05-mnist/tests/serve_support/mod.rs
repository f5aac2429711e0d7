//! Helpers shared by the `serve_*` tests: the router on the real data set, requests through
//! tower's `oneshot`, refusals, and a reader for the server-sent event stream.

// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use futures_util::StreamExt;
use mnist::data::{Mnist, SIDE};
use mnist::serve::{AppState, router};
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::support;

/// No test here should take long; a hang fails instead of blocking CI.
pub const WAIT: Duration = Duration::from_secs(120);

pub fn data() -> Arc<Mnist> {
    static DATA: OnceLock<Arc<Mnist>> = OnceLock::new();
    DATA.get_or_init(|| Arc::new(support::mnist().clone())).clone()
}

/// Test image `i`, scaled `scale` times (nearest neighbour) as if drawn on a canvas: a
/// `POST /api/predict` body.
pub fn drawn_test_digit(i: usize, scale: usize) -> Value {
    let img = data().test.image(i).to_vec();
    let side = SIDE * scale;
    let pixels: Vec<u8> = (0..side * side).map(|p| img[(p / side / scale) * SIDE + (p % side) / scale]).collect();
    json!({ "width": side, "height": side, "pixels": pixels })
}

pub fn app() -> (AppState, Router) {
    let state = AppState::new(data(), None);
    (state.clone(), router(state))
}

pub async fn send(app: &Router, req: Request<Body>) -> (StatusCode, Option<String>, Vec<u8>) {
    let res = app.clone().oneshot(req).await.unwrap();
    let status = res.status();
    let ctype = res.headers().get(header::CONTENT_TYPE).map(|v| v.to_str().unwrap().to_string());
    let body = axum::body::to_bytes(res.into_body(), usize::MAX).await.unwrap().to_vec();
    (status, ctype, body)
}

pub async fn get(app: &Router, path: &str) -> (StatusCode, Value) {
    let (status, _, body) = send(app, Request::get(path).body(Body::empty()).unwrap()).await;
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

pub async fn post_raw(app: &Router, path: &str, ctype: &str, body: impl Into<Body>) -> (StatusCode, Value) {
    let req = Request::post(path).header(header::CONTENT_TYPE, ctype).body(body.into()).unwrap();
    let (status, _, body) = send(app, req).await;
    let v = serde_json::from_slice(&body).unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(&body)));
    (status, v)
}

pub async fn post(app: &Router, path: &str, body: Value) -> (StatusCode, Value) {
    post_raw(app, path, "application/json", body.to_string()).await
}

/// Asserts a refusal: its status, and that its `error` message contains `needle`.
pub fn refused(got: (StatusCode, Value), status: StatusCode, needle: &str) {
    let (s, v) = got;
    let msg = v["error"].as_str().unwrap_or_else(|| panic!("no error message in {v}"));
    assert_eq!(s, status, "{msg}");
    assert!(msg.contains(needle), "{needle:?} not in {msg:?}");
}

/// A reader of the `text/event-stream` body: yields `(event name, JSON data)`.
pub struct Events {
    body: axum::body::BodyDataStream,
    buffer: String,
}

impl Events {
    pub async fn open(app: &Router) -> Events {
        let res = app.clone().oneshot(Request::get("/api/events").body(Body::empty()).unwrap()).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(res.headers()[header::CONTENT_TYPE], "text/event-stream");
        Events { body: res.into_body().into_data_stream(), buffer: String::new() }
    }

    /// The next event, or `None` when the stream ends. Keep-alive comments are skipped; no
    /// event within [`WAIT`] fails the test.
    pub async fn next(&mut self) -> Option<(String, Value)> {
        tokio::time::timeout(WAIT, self.next_event()).await.expect("no event for two minutes")
    }

    async fn next_event(&mut self) -> Option<(String, Value)> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let (mut name, mut data) = (None, String::new());
                for line in block.lines() {
                    if let Some(n) = line.strip_prefix("event: ") {
                        name = Some(n.to_string());
                    } else if let Some(d) = line.strip_prefix("data: ") {
                        data.push_str(d);
                    }
                }
                if let Some(name) = name {
                    return Some((name, serde_json::from_str(&data).unwrap()));
                }
                continue;
            }
            let chunk = self.body.next().await?;
            self.buffer.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
        }
    }

    /// Events up to and including the first one named `last` (panics if the stream ends first).
    pub async fn until(&mut self, last: &str) -> Vec<(String, Value)> {
        let mut seen = Vec::new();
        loop {
            let e = self.next().await.unwrap_or_else(|| panic!("the stream ended before {last:?}: {seen:?}"));
            let done = e.0 == last;
            seen.push(e);
            if done {
                return seen;
            }
        }
    }
}

pub fn named<'a>(events: &'a [(String, Value)], name: &str) -> Vec<&'a Value> {
    events.iter().filter(|(n, _)| n == name).map(|(_, v)| v).collect()
}
