//! The page's static files, compiled into the binary with `include_str!`: the server needs no
//! files beside it and there is no front-end build step. Edit `web/*` and rebuild.

use axum::http::header;
use axum::response::IntoResponse;

pub const INDEX_HTML: &str = include_str!("../../web/index.html");
pub const APP_JS: &str = include_str!("../../web/app.js");
pub const STYLE_CSS: &str = include_str!("../../web/style.css");

/// `no-cache`: the browser revalidates, so a rebuilt server's page is never stale.
fn file(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "no-cache")], body)
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
