//! `mnist serve --model PATH`: a saved model classifies the grid and drawings from the start;
//! a missing or broken model file, a bad port or a port in use stop the binary with a message
//! and a non-zero exit code, before anything is served.

mod serve_support;
mod support;

use std::process::Command;
use std::sync::atomic::AtomicBool;

use axum::http::StatusCode;
use gpu_layers::{Loss, NetworkSpec};
use mnist::data::{CLASSES, Mnist, PIXELS};
use mnist::model_io::{Model, Outputs, argmax, save_model};
use mnist::events::PredictResponse;
use mnist::serve::{AppState, ServeModel, router};
use mnist::train::{Device, TrainConfig, train};
use serve_support::{data, drawn_test_digit, get, post};

/// A model trained for one epoch on 2,000 images, saved as safetensors in `dir`.
fn saved_model(dir: &std::path::Path) -> std::path::PathBuf {
    let subset = Mnist { train: data().train.take(2_000), test: data().test.take(500), kind: data().kind };
    let cfg = TrainConfig { epochs: 1, ..TrainConfig::default() };
    let out = train(&Device::Cpu, &subset, &cfg, &AtomicBool::new(false), &mut |_| {}).unwrap();
    let path = dir.join("model.safetensors");
    save_model(&path, &out.model).unwrap();
    path
}

#[tokio::test]
async fn a_loaded_model_predicts_from_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = saved_model(dir.path());
    let model = ServeModel::load(&path).unwrap();
    let app = router(AppState::new(data(), Some(model)));

    let (_, s) = get(&app, "/api/status").await;
    let description = s["model"]["description"].as_str().unwrap();
    assert!(description.starts_with("784-128-relu-10, loaded from "), "{description}");
    assert!(description.ends_with("model.safetensors"), "{description}");
    assert_eq!(s["training"], false);

    let (_, samples) = get(&app, "/api/samples").await;
    let predicted: Vec<u8> = serde_json::from_value(samples["predicted"].clone()).unwrap();
    let right = predicted.iter().zip(&data().test.labels).filter(|(p, l)| p == l).count();
    assert!(right >= 18, "{right} of 24 right: {predicted:?}");

    // Test digit 1 (a 2), drawn 3x larger.
    let (status, p) = post(&app, "/api/predict", drawn_test_digit(1, 3)).await;
    assert_eq!(status, StatusCode::OK, "{p}");
    assert_eq!(p["digit"], data().test.labels[1]);
}

#[tokio::test]
async fn predictions_are_named_after_the_models_loss() {
    for loss in [Loss::CrossEntropy, Loss::Mse] {
        let spec = NetworkSpec::new(PIXELS, &[16], CLASSES).unwrap().with_loss(loss);
        let model = ServeModel::new(Model::new(spec.clone(), spec.init_parameters(3)).unwrap(), "a test model").unwrap();
        let app = router(AppState::new(data(), Some(model)));
        let (status, p) = post(&app, "/api/predict", drawn_test_digit(1, 3)).await;
        assert_eq!(status, StatusCode::OK, "{p}");
        // The answer names the loss, as /api/status (and the `model` event) name the model's.
        let (_, s) = get(&app, "/api/status").await;
        assert_eq!(p["loss"], s["model"]["loss"], "{loss:?}");
        let (name, other) = match loss {
            Loss::CrossEntropy => ("probabilities", "outputs"),
            Loss::Mse => ("outputs", "probabilities"),
        };
        assert_eq!(p["loss"], loss.name());
        assert!(p.get(other).is_none(), "{loss:?}: no {other:?} in {p}");
        let values: Vec<f32> = serde_json::from_value(p[name].clone()).unwrap_or_else(|e| panic!("{loss:?}: {name:?}: {e} in {p}"));
        assert_eq!(values.len(), CLASSES);
        assert_eq!(p["digit"], argmax(&values), "{loss:?}");
        // Softmax outputs add up to 1; an MSE model's raw outputs need not (nor this one's).
        let sum: f32 = values.iter().sum();
        assert_eq!((sum - 1.0).abs() < 1e-4, loss == Loss::CrossEntropy, "{loss:?}: the outputs add up to {sum}");
        // A Rust client reads the same answer back.
        let r: PredictResponse = serde_json::from_value(p.clone()).unwrap();
        assert_eq!(r.outputs, Outputs::new(loss, values), "{loss:?}");
    }
}

/// Runs the binary and returns (exit code, stderr).
fn mnist(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mnist"))
        .args(args)
        .env("MNIST_DIR", support::mnist_dir())
        .output()
        .unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn bad_models_and_ports_are_refused_before_serving() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.safetensors");
    let (code, err) = mnist(&["serve", "--port", "0", "--model", missing.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("missing.safetensors"), "{err}");

    let broken = dir.path().join("broken.safetensors");
    std::fs::write(&broken, b"this is not a model").unwrap();
    let (code, err) = mnist(&["serve", "--port", "0", "--model", broken.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("bad model file"), "{err}");

    // clap refuses a port out of range (exit code 2, the flag named).
    let (code, err) = mnist(&["serve", "--port", "70000"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--port"), "{err}");

    // A port that is taken: a clear error naming it, exit code 1.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let (code, err) = mnist(&["serve", "--port", &port]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(&format!("--port {port}")) && err.to_lowercase().contains("in use"), "{err}");
}
