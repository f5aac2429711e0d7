//! The HTTP endpoints. Handlers stay small: parse and check the request, ask [`AppState`], and
//! answer JSON. Anything slow (training, the GPU) happens on other threads.
//!
//! | method | path           | answer                                                   |
//! |--------|----------------|----------------------------------------------------------|
//! | GET    | `/`            | the page (`/app.js`, `/style.css`, `/cpu_worker.js` beside it) |
//! | GET    | `/measure.html`| the page that times the in-browser trainer (`/measure.js`) |
//! | GET    | `/api/status`  | the `Snapshot` (`crate::events`): run, config, history, model, adapter   |
//! | GET    | `/api/events`  | server-sent events: `snapshot` first, then live events   |
//! | GET    | `/api/samples` | the grid's test digits and the model's predictions       |
//! | POST   | `/api/train`   | starts a run: 202 `{"run": n}`; 409 if one is running, or  |
//! |        |                | if its `dataset`'s files are not on the server             |
//! | POST   | `/api/stop`    | `{}`: stops the run after its current batch; 409 if none  |
//! | POST   | `/api/predict` | a drawing's ten outputs: `probabilities`, or an MSE       |
//! |        |                | model's `outputs` (scores), beside its `loss`; 409 without a model |
//! | GET    | `/pkg/{file}`  | the in-browser trainer (WebAssembly), from the built site |
//! | GET    | `/pkg/threads/{path}` | the same trainer built for threads, and its worker script |
//! | GET    | `/book/{path}` | the book, from the built site's `book/` (`book/build.sh`) |
//! | GET    | `/data/{file}` | MNIST's files from the data folder, for in-browser runs   |
//! | GET    | `/data/fashion/{file}` | Fashion-MNIST's, from its folder (`$FASHION_MNIST_DIR`) |
//!
//! Before any handler, `guard.rs` checks `Host` (421) and, on POSTs, `Origin` (403), bounds
//! the request's time (408), caps event streams and predictions in flight (503), and adds the
//! security headers to every answer (the cross-origin isolation headers among them, which the
//! threaded CPU trainer needs).

use std::convert::Infallible;
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use axum::middleware;
use axum::response::IntoResponse;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::routing::{get, post};
use futures_util::stream::{self, Stream, StreamExt};
use serde_json::json;
use tokio::sync::broadcast::error::RecvError;

use super::api::{PredictRequest, StopRequest};
use crate::train::TrainRequest;
use super::assets;
use super::error::ApiError;
use super::run;
use super::guard::{AllowedHosts, Cap, Guard, Limits, guard, limit};
use super::state::{AppState, Published};
use crate::events::{PredictResponse, SamplesResponse, Snapshot};

/// The largest request body accepted: a 1024x1024 drawing as JSON numbers ("255," is 4 bytes).
pub const BODY_LIMIT: usize = 5 << 20;

/// All routes, with `state` shared by the handlers, answering to the loopback names only, with
/// the default [`Limits`].
pub fn router(state: AppState) -> Router {
    router_with(state, AllowedHosts::default(), Limits::default())
}

/// All routes, answering to `hosts`, with `limits` on event streams, predictions and request
/// time (see `guard.rs`).
pub fn router_with(state: AppState, hosts: AllowedHosts, limits: Limits) -> Router {
    protect(api(state, limits), hosts, limits)
}

/// The routes without the guard (see [`protect`]), with the caps of `limits`.
pub(crate) fn api(state: AppState, limits: Limits) -> Router {
    let streams = Cap::new(limits.max_event_streams, "open event streams", "close some of this server's pages or tabs");
    let predictions = Cap::new(limits.max_predictions, "predictions in progress", "try again in a moment");
    Router::new()
        .route("/", get(assets::index))
        .route("/app.js", get(assets::app_js))
        .route("/style.css", get(assets::style_css))
        .route("/cpu_worker.js", get(assets::cpu_worker_js))
        .route("/measure.html", get(assets::measure_html))
        .route("/measure.js", get(assets::measure_js))
        .route("/api/status", get(status))
        .route("/api/events", get(events).layer(middleware::from_fn_with_state(streams, limit)))
        .route("/api/samples", get(samples))
        .route("/api/train", post(train))
        .route("/api/stop", post(stop))
        .route("/api/predict", post(predict).layer(middleware::from_fn_with_state(predictions, limit)))
        .fallback(not_found)
        .layer(axum::extract::DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(state)
}

/// `app` behind the guard: the `Host` and `Origin` checks, the request timeout and the
/// security headers, on every route of `app` (the server puts the site's files there too).
pub(crate) fn protect(app: Router, hosts: AllowedHosts, limits: Limits) -> Router {
    app.layer(middleware::from_fn_with_state(Arc::new(Guard { hosts, limits }), guard))
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "no such page or endpoint; the page is at /")
}

async fn status(State(state): State<AppState>) -> Json<Snapshot> {
    Json(state.snapshot())
}

async fn samples(State(state): State<AppState>) -> Json<SamplesResponse> {
    Json(state.samples())
}

async fn train(
    State(state): State<AppState>,
    body: Result<Json<TrainRequest>, JsonRejection>,
) -> Result<impl IntoResponse, ApiError> {
    let Json(req) = body?;
    // Everything but the image counts first, so a bad request is refused before a data set
    // is loaded for it.
    req.validate_before_loading().map_err(ApiError::invalid)?;
    let (loader, kind) = (state.clone(), req.dataset);
    let all = tokio::task::spawn_blocking(move || loader.dataset(kind))
        .await
        .map_err(|e| ApiError::internal(format!("loading the data set failed: {e}")))??;
    let run = run::start(&state, req, all)?;
    Ok((StatusCode::ACCEPTED, Json(json!({ "run": run }))))
}

/// The body is `{}`. Asking for JSON, as every POST here does, keeps other web sites from
/// stopping runs: a cross-site JSON request needs a CORS preflight this server never grants.
async fn stop(
    State(state): State<AppState>,
    body: Result<Json<StopRequest>, JsonRejection>,
) -> Result<impl IntoResponse, ApiError> {
    let Json(StopRequest {}) = body?;
    let run = state.stop_run()?;
    Ok((StatusCode::ACCEPTED, Json(json!({ "stopping": run }))))
}

async fn predict(
    State(state): State<AppState>,
    body: Result<Json<PredictRequest>, JsonRejection>,
) -> Result<Json<PredictResponse>, ApiError> {
    let Json(req) = body?;
    req.validate()?;
    let model = state
        .model()
        .ok_or_else(|| ApiError::conflict("no model yet: train one (the first epoch makes one) or start the server with --model PATH"))?;
    // Preprocessing and a forward pass take about a millisecond; off the async threads anyway,
    // so a huge drawing cannot stall other requests.
    tokio::task::spawn_blocking(move || model.predict_drawing(&req))
        .await
        .map_err(|e| ApiError::internal(format!("the prediction failed: {e}")))?
        .map(Json)
}

/// The event stream: the snapshot, then every event, until the page goes away or the server
/// shuts down. A page that falls more than the channel's capacity behind gets a new snapshot.
async fn events(State(state): State<AppState>) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let (snapshot, rx) = state.subscribe();
    let shutdown = state.shutdown_signal();
    let first = Published::new("snapshot", &snapshot);
    let rest = stream::unfold((state, rx, shutdown), |(state, mut rx, mut shutdown)| async move {
        let received = tokio::select! {
            _ = shutdown.wait_for(|&down| down) => return None,
            received = rx.recv() => received,
        };
        match received {
            Ok(event) => Some((event, (state, rx, shutdown))),
            Err(RecvError::Lagged(_)) => {
                let (snapshot, fresh) = state.subscribe();
                Some((Arc::new(Published::new("snapshot", &snapshot)), (state, fresh, shutdown)))
            }
            Err(RecvError::Closed) => None,
        }
    });
    let stream = stream::once(async move { Arc::new(first) })
        .chain(rest)
        .map(|e| Ok(Event::default().event(e.name).data(e.json.as_str())));
    Sse::new(stream).keep_alive(KeepAlive::default())
}
