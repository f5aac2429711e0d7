//! `mnist serve` when the GPU is not there: a run on `gpu` fails with an `error` event (and the
//! server stays up, ready for the next run); `auto` falls back to the CPU with a notice.
//!
//! A test binary of its own because it hides every adapter by naming one that does not exist
//! (`WGPU_ADAPTER_NAME`), which would disturb the GPU test in `serve_http.rs`.

mod serve_support;
mod support;

use axum::http::StatusCode;
use serde_json::json;
use serve_support::{Events, app, get, named, post};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_adapter_gpu_fails_cleanly_and_auto_trains_on_the_cpu() {
    // SAFETY: set before any thread of this test binary reads the environment (this is its
    // only test, and the runtime's threads do not read it).
    unsafe { std::env::set_var(common::ADAPTER_ENV, "no-such-adapter-anywhere") };
    let (state, app) = app();
    let mut events = Events::open(&app).await;
    events.until("snapshot").await;

    let (status, _) = post(&app, "/api/train", json!({ "device": "gpu", "limit_train": 256, "epochs": 1 })).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let seen = events.until("error").await;
    let message = named(&seen, "error")[0]["message"].as_str().unwrap().to_string();
    assert!(message.starts_with("device gpu:"), "{message}");
    assert!(message.contains("no-such-adapter-anywhere"), "{message}");
    assert!(message.contains("Choose the CPU"), "{message}");
    let (_, s) = get(&app, "/api/status").await;
    assert_eq!(s["training"], false);
    assert_eq!(s["last_error"], message.as_str());

    // The server is still up and the slot is free: `auto` trains on the CPU and says why.
    let (status, v) = post(&app, "/api/train", json!({ "device": "auto", "limit_train": 256, "epochs": 1 })).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{v}");
    let seen = events.until("done").await;
    let adapter = &named(&seen, "start")[0]["adapter"];
    assert!(adapter["name"].as_str().unwrap().starts_with("CPU"), "{adapter}");
    assert!(adapter["warning"].as_str().unwrap().contains("no GPU adapter"), "{adapter}");
    assert_eq!(named(&seen, "epoch").len(), 1);
    state.wait_for_run();
}
