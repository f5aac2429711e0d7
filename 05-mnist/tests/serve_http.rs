//! `mnist serve` at the HTTP level: every endpoint, good and bad requests, the event stream of
//! real (small) training runs on the CPU and the software GPU, stop, one-run-at-a-time, and
//! shutdown. The router runs in-process through tower's `oneshot`: no port, no browser (the
//! browser test is `serve_e2e.rs`).

mod serve_support;
mod support;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use mnist::data::PIXELS;
use mnist::datasets::DatasetKind;
use mnist::serve::{AppState, router};
use serde_json::{Value, json};
use serve_support::{Events, app, data, drawn_test_digit, get, named, post, post_raw, refused, send};

#[tokio::test]
async fn the_page_and_its_files_are_served() {
    let (_, app) = app();
    for (path, ctype, needle) in [
        ("/", "text/html; charset=utf-8", "<canvas id=\"pad\""),
        ("/app.js", "text/javascript; charset=utf-8", "new EventSource(\"api/events\")"),
        ("/style.css", "text/css; charset=utf-8", "#pad"),
    ] {
        let (status, got, body) = send(&app, Request::get(path).body(Body::empty()).unwrap()).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert_eq!(got.as_deref(), Some(ctype), "{path}");
        assert!(String::from_utf8(body).unwrap().contains(needle), "{path}");
    }
    refused(get(&app, "/nope").await, StatusCode::NOT_FOUND, "the page is at /");
    // A GET where only POST is allowed.
    let (status, _, _) = send(&app, Request::get("/api/train").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn status_and_samples_before_any_training() {
    let (_, app) = app();
    let (status, s) = get(&app, "/api/status").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(s["training"], false);
    assert_eq!(s["run"], Value::Null);
    assert_eq!(s["model"], Value::Null);
    assert_eq!(s["train_images"], 60_000);
    assert_eq!(s["test_images"], 10_000);

    let (status, s) = get(&app, "/api/samples").await;
    assert_eq!(status, StatusCode::OK);
    let labels: Vec<u8> = serde_json::from_value(s["labels"].clone()).unwrap();
    let pixels: Vec<u8> = serde_json::from_value(s["pixels"].clone()).unwrap();
    assert_eq!(labels, data().test.labels[..24].to_vec());
    assert_eq!(pixels, data().test.images[..24 * PIXELS].to_vec());
    assert_eq!(s["predicted"], Value::Null);
}

#[tokio::test]
async fn bad_training_requests_are_refused_with_a_message() {
    let (state, app) = app();
    let j = "application/json";
    refused(post_raw(&app, "/api/train", j, "{\"lr\": 0.1,").await, StatusCode::BAD_REQUEST, "JSON");
    refused(post_raw(&app, "/api/train", j, "[1, 2]").await, StatusCode::UNPROCESSABLE_ENTITY, "");
    refused(post_raw(&app, "/api/train", "text/plain", "{}").await, StatusCode::UNSUPPORTED_MEDIA_TYPE, "Content-Type");
    let bad = [
        (json!({ "lr": 0 }), "lr:"),
        (json!({ "lr": -1.5 }), "lr:"),
        (json!({ "lr": "fast" }), "lr"),
        (json!({ "learning_rate": 0.1 }), "unknown field `learning_rate`"),
        (json!({ "epochs": 0 }), "epochs:"),
        (json!({ "epochs": 1000 }), "epochs:"),
        (json!({ "epochs": 2.5 }), "epochs"),
        (json!({ "batch_size": 0 }), "batch_size:"),
        (json!({ "batch_size": -64 }), "batch_size"),
        (json!({ "hidden": [128, 0] }), "hidden:"),
        (json!({ "hidden": "128" }), "hidden"),
        (json!({ "hidden": [10000] }), "hidden:"),
        (json!({ "optimizer": "rmsprop" }), "unknown variant `rmsprop`"),
        (json!({ "device": "tpu" }), "unknown variant `tpu`"),
        (json!({ "schedule": "linear" }), "unknown variant `linear`"),
        (json!({ "momentum": 1.0 }), "momentum:"),
        (json!({ "limit_train": 0 }), "limit_train: 0 images requested; use at least 1"),
        (json!({ "limit_test": 0 }), "limit_test: 0 images requested; use at least 1"),
        (json!({ "limit_train": 70000 }), "limit_train:"),
        // The layer list, parsed and checked by the command line's code; shape errors name the layer.
        (json!({ "layers": "784-128-relu-dropout1.5-10" }), "layers: bad network description: layer 3 (Dropout(1.5))"),
        (json!({ "layers": "784-128-relx-10" }), "`relx` is not a layer"),
        (json!({ "layers": "784-64-relu-12" }), "10 classes"),
        (json!({ "layers": "100-10" }), "784 pixels"),
        (json!({ "layers": "784-8-8-8-8-8-10" }), "at most 4"),
        (json!({ "layers": "784-5000-relu-10" }), "1 to 4096 units"),
        (json!({ "layers": 784 }), "layers"),
        (json!({ "loss": "hinge" }), "unknown variant `hinge`"),
        (json!({ "dataset": "cifar" }), "unknown variant `cifar`, expected `mnist` or `fashion`"),
        (json!({ "dataset": "fashion", "lr": 0 }), "lr:"),
    ];
    for (body, needle) in bad {
        refused(post(&app, "/api/train", body).await, StatusCode::UNPROCESSABLE_ENTITY, needle);
    }
    assert!(!state.is_training(), "no refused request may start a run");
    refused(post(&app, "/api/stop", json!({})).await, StatusCode::CONFLICT, "no training run is in progress");
    refused(post_raw(&app, "/api/stop", "text/plain", "{}").await, StatusCode::UNSUPPORTED_MEDIA_TYPE, "Content-Type");
    refused(post(&app, "/api/stop", json!({ "now": true })).await, StatusCode::UNPROCESSABLE_ENTITY, "unknown field `now`");
}

#[tokio::test]
async fn bad_drawings_are_refused_with_a_message() {
    let (_, app) = app();
    // Without a model first: a clear 409.
    refused(post(&app, "/api/predict", drawn_test_digit(0, 4)).await, StatusCode::CONFLICT, "no model yet");
    let j = "application/json";
    refused(post_raw(&app, "/api/predict", j, "{\"width\": 8").await, StatusCode::BAD_REQUEST, "JSON");
    let bad = [
        (json!({ "width": 8, "height": 8, "pixels": vec![0; 63] }), "expected width * height = 64"),
        (json!({ "width": 8, "height": 8, "pixels": vec![300; 64] }), "pixels"),
        (json!({ "width": 8, "height": 8, "pixels": vec![-1; 64] }), "pixels"),
        (json!({ "width": 8, "height": 8, "pixels": vec![0.5; 64] }), "pixels"),
        (json!({ "width": 4, "height": 4, "pixels": vec![0; 16] }), "width:"),
        (json!({ "width": 8, "height": 2000, "pixels": [] }), "height:"),
        (json!({ "width": 8, "height": 8 }), "missing field `pixels`"),
        (json!({ "width": 8, "height": 8, "pixels": vec![0; 64], "colour": 1 }), "unknown field `colour`"),
    ];
    for (body, needle) in bad {
        refused(post(&app, "/api/predict", body).await, StatusCode::UNPROCESSABLE_ENTITY, needle);
    }
    // A body over the limit (5 MiB) is refused before it is parsed.
    let huge = format!("{{\"width\": 8, \"height\": 8, \"pixels\": [{}0]}}", "0,".repeat(3 << 20));
    refused(post_raw(&app, "/api/predict", j, huge).await, StatusCode::PAYLOAD_TOO_LARGE, "limit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_cpu_run_streams_its_epochs_and_makes_a_model_that_reads_digits() {
    let (state, app) = app();
    let mut events = Events::open(&app).await;
    let (name, snapshot) = events.next().await.unwrap();
    assert_eq!(name, "snapshot");
    assert_eq!(snapshot["training"], false);

    let req = json!({ "hidden": [64], "loss": "cross-entropy", "dataset": "mnist", "lr": 0.1, "batch_size": 32,
                      "epochs": 2, "optimizer": "sgd", "momentum": 0.0, "schedule": "constant", "device": "cpu",
                      "limit_train": 3000, "seed": 7 });
    let (status, started) = post(&app, "/api/train", req.clone()).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{started}");
    let run = started["run"].as_u64().unwrap();
    // One run at a time.
    refused(post(&app, "/api/train", req.clone()).await, StatusCode::CONFLICT, "already in progress");

    let seen = events.until("done").await;
    assert!(named(&seen, "error").is_empty(), "{seen:?}");
    let start = named(&seen, "start")[0];
    assert_eq!(start["run"], run);
    assert_eq!(start["train_images"], 3000);
    assert_eq!(start["batches_per_epoch"], 94);
    assert!(start["adapter"]["name"].as_str().unwrap().starts_with("CPU"));
    assert_eq!(start["adapter"]["software"], false);
    let progress = named(&seen, "progress");
    assert!(!progress.is_empty());
    assert!(progress.iter().all(|p| p["batch"].as_u64().unwrap() <= 94 && p["loss"].as_f64().unwrap().is_finite()));
    let epochs = named(&seen, "epoch");
    assert_eq!(epochs.len(), 2);
    for (i, e) in epochs.iter().enumerate() {
        assert_eq!(e["epoch"], i + 1);
        assert_eq!(e["epochs"], 2);
        assert_eq!(e["lr"], 0.1, "a constant schedule");
        assert!(e["seconds"].as_f64().unwrap() > 0.0);
    }
    // 3,000 images, two epochs: about 90% on the whole test set.
    let acc = epochs[1]["test_acc"].as_f64().unwrap();
    assert!(acc > 0.85, "test accuracy {acc}");
    assert!(epochs[1]["train_loss"].as_f64().unwrap() < epochs[0]["train_loss"].as_f64().unwrap());
    assert_eq!(named(&seen, "model").len(), 2, "a model after each epoch");
    assert_eq!(named(&seen, "samples").len(), 2, "grid predictions after each epoch");
    let done = named(&seen, "done")[0];
    assert_eq!(done["stopped"], false);
    assert_eq!(done["epochs_done"], 2);

    let (_, s) = get(&app, "/api/status").await;
    assert_eq!(s["training"], false);
    assert_eq!(s["history"].as_array().unwrap().len(), 2);
    assert!(s["model"]["description"].as_str().unwrap().starts_with("784-64-relu-10, run"));
    assert_eq!(s["dataset"], "mnist");
    assert_eq!(s["class_names"].as_array().unwrap().len(), 10);
    assert_eq!(s["config"], req);

    // The grid, predicted by the model: most of the 24 digits right.
    let (_, samples) = get(&app, "/api/samples").await;
    let predicted: Vec<u8> = serde_json::from_value(samples["predicted"].clone()).unwrap();
    let right = predicted.iter().zip(&data().test.labels).filter(|(p, l)| p == l).count();
    assert!(right >= 19, "{right} of 24 right: {predicted:?}");

    // A test digit, drawn 4x larger: preprocessed back to 28x28 and read correctly.
    let (status, p) = post(&app, "/api/predict", drawn_test_digit(0, 4)).await;
    assert_eq!(status, StatusCode::OK, "{p}");
    let probs: Vec<f32> = serde_json::from_value(p["probabilities"].clone()).unwrap();
    assert_eq!(probs.len(), 10);
    assert!(probs.iter().all(|p| (0.0..=1.0).contains(p)));
    assert!((probs.iter().sum::<f32>() - 1.0).abs() < 1e-4);
    assert_eq!(p["digit"], data().test.labels[0]);
    assert_eq!(p["input"].as_array().unwrap().len(), PIXELS);

    // An empty drawing is refused, with a model too.
    let blank = json!({ "width": 50, "height": 50, "pixels": vec![0; 2500] });
    refused(post(&app, "/api/predict", blank).await, StatusCode::UNPROCESSABLE_ENTITY, "blank");

    // The slot is free again.
    let (status, again) = post(&app, "/api/train", json!({ "device": "cpu", "limit_train": 64, "epochs": 1 })).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{again}");
    events.until("done").await;
    state.shutdown();
    state.wait_for_run();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_takes_effect_after_the_current_batch_and_keeps_the_model() {
    let (state, app) = app();
    let mut events = Events::open(&app).await;
    events.until("snapshot").await;
    let (status, _) = post(&app, "/api/train", json!({ "device": "cpu", "epochs": 100, "batch_size": 16 })).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    // Wait until it is really training, then stop.
    events.until("progress").await;
    let (status, v) = post(&app, "/api/stop", json!({})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{v}");
    let seen = events.until("done").await;
    let done = named(&seen, "done")[0];
    assert_eq!(done["stopped"], true);
    assert_eq!(done["epochs_done"], 0);
    assert!(done["message"].as_str().unwrap().starts_with("Stopped after 0 of 100 epochs"));
    // What it learned so far is the model now.
    let model = named(&seen, "model");
    assert!(model[0]["description"].as_str().unwrap().contains("stopped during epoch 1"), "{seen:?}");
    let (status, p) = post(&app, "/api/predict", drawn_test_digit(1, 4)).await;
    assert_eq!(status, StatusCode::OK, "{p}");
    refused(post(&app, "/api/stop", json!({})).await, StatusCode::CONFLICT, "no training run");
    state.wait_for_run();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gpu_device_trains_on_the_adapter_and_flags_a_software_one() {
    let (state, app) = app();
    let mut events = Events::open(&app).await;
    events.until("snapshot").await;
    let req = json!({ "device": "gpu", "limit_train": 512, "batch_size": 64, "epochs": 2 });
    let (status, _) = post(&app, "/api/train", req).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let seen = events.until("done").await;
    let start = named(&seen, "start")[0];
    let adapter = &start["adapter"];
    assert!(!adapter["name"].as_str().unwrap().starts_with("CPU"), "{adapter}");
    if adapter["software"] == true {
        assert!(adapter["warning"].as_str().unwrap().contains("SOFTWARE adapter"), "{adapter}");
    }
    let epochs = named(&seen, "epoch");
    // 512 images, two epochs of Adam: measured on lavapipe 62.84% after the first, 71.63% after
    // the second (the same seed draws the same run; another adapter's rounding moves it by a
    // few hundredths of a percent). A model that does not learn sits near 10%.
    assert!(epochs[1]["test_acc"].as_f64().unwrap() > 0.69, "{}", epochs[1]);
    // The default cosine schedule (Adam, 0.001): the full rate, then half of it.
    let lr: Vec<f64> = epochs.iter().map(|e| e["lr"].as_f64().unwrap()).collect();
    assert!((lr[0] - 0.001).abs() < 1e-9 && (lr[1] - 0.0005).abs() < 1e-9, "{lr:?}");
    state.wait_for_run();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_the_event_streams_and_stops_the_run() {
    let (state, app) = app();
    let mut events = Events::open(&app).await;
    events.until("snapshot").await;
    let (status, _) = post(&app, "/api/train", json!({ "device": "cpu", "epochs": 100 })).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    events.until("progress").await;
    state.shutdown();
    // The stream ends (after whatever was already queued), so graceful shutdown can finish.
    while events.next().await.is_some() {}
    state.wait_for_run();
    assert!(!state.is_training());
    assert_eq!(state.snapshot().last_outcome.as_deref().map(|s| s.starts_with("Stopped")), Some(true));
    refused(post(&app, "/api/train", json!({})).await, StatusCode::SERVICE_UNAVAILABLE, "shutting down");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layer_list_with_dropout_and_mse_trains_on_fashion_mnist_loaded_when_asked_for() {
    let fashion = support::fashion_dir();
    let state = AppState::with_data_dirs(data(), None, vec![(DatasetKind::Fashion, fashion.clone())]);
    let app = router(state.clone());
    let mut events = Events::open(&app).await;
    let (_, snapshot) = events.next().await.unwrap();
    assert_eq!(snapshot["dataset"], "mnist", "the data set the server started with");

    let req = json!({ "layers": "784-64-relu-dropout0.1-10", "loss": "mse", "dataset": "fashion", "device": "cpu",
                      "epochs": 1, "limit_test": 2000 });
    let (status, started) = post(&app, "/api/train", req.clone()).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{started}");
    let seen = events.until("done").await;
    assert!(named(&seen, "error").is_empty(), "{seen:?}");
    let start = named(&seen, "start")[0];
    assert_eq!(start["config"]["layers"], "784-64-relu-dropout0.1-10");
    assert_eq!((start["train_images"].as_u64(), start["test_images"].as_u64()), (Some(60_000), Some(2000)));
    // Chance is 10%. MSE learns slowly (one epoch: 70.75% with `mnist train` and these flags).
    let acc = named(&seen, "epoch")[0]["test_acc"].as_f64().unwrap();
    assert!(acc > 0.6, "test accuracy {acc}");

    // The status names the model's layers, loss and data set, and the grid is of clothes now.
    let (_, s) = get(&app, "/api/status").await;
    let model = &s["model"];
    assert_eq!(model["layers"], "784-64-relu-dropout0.1-10", "{model}");
    assert_eq!(model["loss"], "mse");
    assert_eq!(model["dataset"], "fashion");
    assert_eq!(model["class_names"][9], "Ankle boot");
    assert!(model["description"].as_str().unwrap().starts_with("784-64-relu-dropout0.1-10 mse, run 1"), "{model}");
    assert_eq!((s["dataset"].as_str(), s["class_names"][0].as_str()), (Some("fashion"), Some("T-shirt/top")));
    assert_eq!(s["config"]["loss"], "mse");
    let clothes = mnist::data::load(&fashion, DatasetKind::Fashion).unwrap();
    let (_, samples) = get(&app, "/api/samples").await;
    assert_eq!(samples["dataset"], "fashion");
    let labels: Vec<u8> = serde_json::from_value(samples["labels"].clone()).unwrap();
    assert_eq!(labels, clothes.test.labels[..24].to_vec());
    assert_eq!(samples["predicted"].as_array().map(Vec::len), Some(24));

    // Back to MNIST: the grid follows the run, and the model of the new run reads digits.
    let (status, v) = post(&app, "/api/train", json!({ "hidden": [], "device": "cpu", "epochs": 1, "limit_train": 500 })).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{v}");
    events.until("done").await;
    let (_, s) = get(&app, "/api/status").await;
    assert_eq!((s["dataset"].as_str(), s["model"]["layers"].as_str(), s["model"]["loss"].as_str()), (Some("mnist"), Some("784-10"), Some("cross-entropy")));
    state.shutdown();
    state.wait_for_run();
}

#[tokio::test]
async fn a_data_set_whose_files_are_missing_is_refused_with_where_to_put_them() {
    let empty = tempfile::tempdir().unwrap();
    let state = AppState::with_data_dirs(data(), None, vec![(DatasetKind::Fashion, empty.path().to_path_buf())]);
    let app = router(state.clone());
    let (status, v) = post(&app, "/api/train", json!({ "dataset": "fashion", "device": "cpu", "epochs": 1 })).await;
    let msg = v["error"].as_str().unwrap_or_else(|| panic!("no error in {v}"));
    assert_eq!(status, StatusCode::CONFLICT, "{msg}");
    for needle in ["dataset: Fashion-MNIST is not on this server", "FASHION_MNIST_DIR", &empty.path().display().to_string()] {
        assert!(msg.contains(needle), "{needle:?} not in {msg:?}");
    }
    assert!(!state.is_training());
    // A bad request for it is refused for what is wrong with it, before any loading.
    refused(post(&app, "/api/train", json!({ "dataset": "fashion", "epochs": 0 })).await, StatusCode::UNPROCESSABLE_ENTITY, "epochs:");
}
