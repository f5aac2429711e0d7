//! Property tests of the JSON API's request parsing, through the HTTP layer (the router, as a
//! browser or a script would reach it): random bytes, random content types, and JSON objects
//! with the API's field names and random values of every JSON type, sent to `/api/train`,
//! `/api/predict` and `/api/stop`.
//!
//! Every answer must come within 10 s and be one of the documented ones: 2xx with the
//! documented body, or a 4xx (or 503 for a cap) whose body is `{"error": "<sentence>"}`; never a
//! 500, never a panic, never a body that is not JSON. Requests that happen to be valid start a
//! training run on a tiny synthetic data set on the CPU; the next Stop ends it.
//!
//! A few hundred cases (a couple of seconds); `PROPTEST_CASES=20000` searches longer.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use gpu_layers::NetworkSpec;
use mnist::data::{CLASSES, Dataset, Mnist, PIXELS};
use mnist::datasets::DatasetKind;
use mnist::model_io::Model;
use mnist::serve::{AppState, ServeModel, router};
use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::{Map, Value, json};
use tower::ServiceExt;

fn config(cases: u32) -> Config {
    let d = Config::default();
    let cases = if std::env::var_os("PROPTEST_CASES").is_some() { d.cases } else { cases };
    Config { cases, failure_persistence: None, ..d }
}

/// One server for all cases: a tiny data set and a small model, so predictions are answered.
fn app() -> &'static (tokio::runtime::Runtime, Router) {
    static APP: std::sync::OnceLock<(tokio::runtime::Runtime, Router)> = std::sync::OnceLock::new();
    APP.get_or_init(|| {
        let set = |n: usize| {
            let images = (0..n * PIXELS).map(|i| (i * 37 % 256) as u8).collect();
            Dataset::new(images, (0..n).map(|i| (i % 10) as u8).collect()).unwrap()
        };
        let spec = NetworkSpec::new(PIXELS, &[8], CLASSES).unwrap();
        let model = ServeModel::new(Model::new(spec.clone(), spec.init_parameters(1)).unwrap(), "test").unwrap();
        let state = AppState::new(Arc::new(Mnist { train: set(32), test: set(8), kind: DatasetKind::Mnist }), Some(model));
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        (runtime, router(state))
    })
}

/// Sends a POST and checks the answer against the API's promises; returns status and body.
fn post(path: &str, ctype: Option<&str>, body: Vec<u8>) -> Result<(StatusCode, Value), TestCaseError> {
    let (runtime, app) = app();
    let mut req = Request::post(path);
    if let Some(c) = ctype {
        req = req.header(header::CONTENT_TYPE, c);
    }
    let req = req.body(Body::from(body)).unwrap();
    let answer = runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(10), async {
            let res = app.clone().oneshot(req).await.unwrap();
            let status = res.status();
            let bytes = axum::body::to_bytes(res.into_body(), 1 << 22).await.unwrap();
            (status, bytes)
        })
        .await
    });
    let Ok((status, bytes)) = answer else {
        return Err(TestCaseError::fail(format!("{path}: no answer within 10 s")));
    };
    let Ok(value) = serde_json::from_slice::<Value>(&bytes) else {
        return Err(TestCaseError::fail(format!("{path}: {status} with a body that is not JSON: {:?}", String::from_utf8_lossy(&bytes))));
    };
    prop_assert!(
        status.is_success() || status.is_client_error() || status == StatusCode::SERVICE_UNAVAILABLE,
        "{path}: {status} {value}"
    );
    if !status.is_success() {
        let msg = value["error"].as_str().unwrap_or("");
        prop_assert!(msg.len() > 10, "{path}: {status} without a sentence: {value}");
    }
    Ok((status, value))
}

/// Stops the run a valid request may have started (409 when there is none).
fn stop() -> Result<(), TestCaseError> {
    let (status, v) = post("/api/stop", Some("application/json"), b"{}".to_vec())?;
    prop_assert!(status == StatusCode::ACCEPTED || status == StatusCode::CONFLICT, "{status} {v}");
    Ok(())
}

/// Any JSON value, nested a little: numbers of every kind (huge, negative, fractional),
/// strings, booleans, null, arrays and objects.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e3f64..1e3).prop_map(Value::from),
        any::<f64>().prop_filter("finite", |v| v.is_finite()).prop_map(Value::from),
        (0u64..300).prop_map(Value::from),
        "[a-z0-9 ,.-]{0,12}".prop_map(Value::from),
        prop_oneof![Just("cpu"), Just("sgd"), Just("adam"), Just("cosine"), Just("constant"), Just("gpu")].prop_map(Value::from),
        prop_oneof![Just("mse"), Just("cross-entropy"), Just("mnist"), Just("784-16-relu-dropout0.5-10"), Just("784-16-relu-dropout1-10")]
            .prop_map(Value::from),
    ];
    leaf.prop_recursive(2, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..3).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

const TRAIN_FIELDS: [&str; 14] = [
    "hidden", "layers", "loss", "dataset", "lr", "batch_size", "epochs", "optimizer", "momentum", "schedule", "device", "limit_train",
    "seed", "extra",
];

/// A training request's object: some of its fields (and sometimes an unknown one) with random
/// values. `device` is always `cpu` (a valid request trains at once, with no GPU to open).
fn train_body() -> impl Strategy<Value = Value> {
    prop::collection::vec((0..TRAIN_FIELDS.len(), any_json()), 0..6).prop_map(|fields| {
        let mut m = Map::new();
        for (f, v) in fields {
            m.insert(TRAIN_FIELDS[f].to_string(), v);
        }
        m.insert("device".to_string(), json!("cpu"));
        Value::Object(m)
    })
}

/// A drawing: sizes around the limits, pixel arrays of random length and content.
fn predict_body() -> impl Strategy<Value = Value> {
    let side = prop_oneof![6 => 8usize..64, 1 => 0usize..8, 1 => Just(1024), 1 => Just(1025), 1 => any::<usize>()];
    let pixels = prop_oneof![
        prop::collection::vec(0u16..=255, 0..4096).prop_map(Value::from),
        prop::collection::vec(any_json(), 0..20).prop_map(Value::from),
    ];
    (side.clone(), side, pixels, any::<bool>()).prop_map(|(w, h, pixels, fit)| {
        // Half the time the pixel count fits the sizes, so the drawing reaches preprocessing.
        let pixels = if fit && w.checked_mul(h).is_some_and(|n| n > 0 && n <= 4096) {
            Value::from((0..w * h).map(|i| ((i * 7919) % 256) as u16).collect::<Vec<_>>())
        } else {
            pixels
        };
        json!({ "width": w, "height": h, "pixels": pixels })
    })
}

fn ctype() -> impl Strategy<Value = Option<&'static str>> {
    prop_oneof![
        4 => Just(Some("application/json")),
        1 => Just(Some("application/json; charset=utf-8")),
        1 => Just(Some("text/plain")),
        1 => Just(Some("application/x-www-form-urlencoded")),
        1 => Just(None),
    ]
}

proptest! {
    #![proptest_config(config(192))]

    #[test]
    fn train_requests(body in train_body(), ctype in ctype()) {
        let (status, v) = post("/api/train", ctype, body.to_string().into_bytes())?;
        if status == StatusCode::ACCEPTED {
            prop_assert!(v["run"].as_u64().is_some(), "{v}");
        }
        stop()?;
    }

    #[test]
    fn predict_requests(body in predict_body(), ctype in ctype()) {
        let (status, v) = post("/api/predict", ctype, body.to_string().into_bytes())?;
        if status == StatusCode::OK {
            // The served model is whichever trained last: `train_requests` runs beside this
            // test on the same server, and an MSE run's model answers with scores.
            let (field, sums_to_one) = match v["loss"].as_str() {
                Some("cross-entropy") => ("probabilities", true),
                Some("mse") => ("outputs", false),
                other => return Err(TestCaseError::fail(format!("predict: unknown loss {other:?} in {v}"))),
            };
            let p: Vec<f32> = serde_json::from_value(v[field].clone())
                .map_err(|e| TestCaseError::fail(format!("predict: `{field}` is not ten numbers ({e}): {v}")))?;
            prop_assert_eq!(p.len(), CLASSES);
            prop_assert!(p.iter().all(|x| x.is_finite()), "{v}");
            if sums_to_one {
                prop_assert!((p.iter().sum::<f32>() - 1.0).abs() < 1e-3, "{v}");
            }
            prop_assert!(v["digit"].as_u64().is_some_and(|d| d < 10));
            prop_assert_eq!(v["input"].as_array().map(Vec::len), Some(PIXELS));
        }
    }

    #[test]
    fn random_bodies(path in prop_oneof![Just("/api/train"), Just("/api/predict"), Just("/api/stop")],
                     bytes in prop::collection::vec(any::<u8>(), 0..256),
                     ctype in ctype()) {
        post(path, ctype, bytes)?;
        stop()?;
    }

    #[test]
    fn stop_requests(body in any_json(), ctype in ctype()) {
        post("/api/stop", ctype, body.to_string().into_bytes())?;
    }
}
