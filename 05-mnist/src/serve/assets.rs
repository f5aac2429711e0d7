//! The page's static files, compiled into the binary with `include_str!`: the server needs no
//! files beside it and there is no front-end build step. Edit `web/*` and rebuild.

use axum::http::header;
use axum::response::IntoResponse;

pub const INDEX_HTML: &str = include_str!("../../web/index.html");
pub const APP_JS: &str = include_str!("../../web/app.js");
pub const STYLE_CSS: &str = include_str!("../../web/style.css");
pub const CPU_WORKER_JS: &str = include_str!("../../web/cpu_worker.js");
pub const MEASURE_HTML: &str = include_str!("../../web/measure.html");
pub const MEASURE_JS: &str = include_str!("../../web/measure.js");

/// The header that tells the page it is served by `mnist serve` (so it offers training on the
/// server): the page reads it with a HEAD request of itself, which a static host answers too,
/// without the header (asking for an API that is not there would log a 404 in the console).
pub const SERVED_BY: (&str, &str) = ("x-served-by", "mnist serve");

/// `no-cache`: the browser revalidates, so a rebuilt server's page is never stale.
fn file(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "no-cache"), (header::HeaderName::from_static(SERVED_BY.0), SERVED_BY.1)], body)
}

pub async fn index() -> impl IntoResponse {
    file("text/html; charset=utf-8", INDEX_HTML)
}

pub async fn app_js() -> impl IntoResponse {
    file("text/javascript; charset=utf-8", APP_JS)
}

pub async fn style_css() -> impl IntoResponse {
    file("text/css; charset=utf-8", STYLE_CSS)
}

/// The threaded CPU trainer's worker (it loads `pkg/threads/`).
pub async fn cpu_worker_js() -> impl IntoResponse {
    file("text/javascript; charset=utf-8", CPU_WORKER_JS)
}

/// The page that times the in-browser trainer (`measure.html?runs=gpu:100,cpu`; see WEB.md).
pub async fn measure_html() -> impl IntoResponse {
    file("text/html; charset=utf-8", MEASURE_HTML)
}

pub async fn measure_js() -> impl IntoResponse {
    file("text/javascript; charset=utf-8", MEASURE_JS)
}
