//! Browser-only helpers (`wasm32-unknown-unknown`): what wgpu's WebGPU backend does not tell.
//!
//! wgpu names a WebGPU adapter by `GPUAdapterInfo.description`, which browsers usually leave
//! empty, and calls it a CPU only when the browser flags it as a fallback adapter. Chromium's
//! software renderer (SwiftShader, used on machines without a usable GPU) is not always flagged.
//! So we ask the browser ourselves: `navigator.gpu.requestAdapter()` again, and read `vendor`,
//! `architecture`, `device` and `description` ("google swiftshader").

use js_sys::{Function, Object, Promise, Reflect};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

/// What the browser says about its WebGPU adapter.
pub(crate) struct WebAdapterInfo {
    /// Vendor, architecture, device and description, those that are not empty.
    pub name: String,
    /// A fallback adapter, or a name that is a known software renderer.
    pub software: bool,
}

fn get(target: &JsValue, key: &str) -> Option<JsValue> {
    Reflect::get(target, &JsValue::from_str(key)).ok().filter(|v| !v.is_undefined() && !v.is_null())
}

/// `navigator.gpu.requestAdapter({powerPreference: "high-performance"}).info`, or None where
/// there is no WebGPU.
pub(crate) async fn adapter_info() -> Option<WebAdapterInfo> {
    let navigator = get(&js_sys::global(), "navigator")?;
    let gpu = get(&navigator, "gpu")?;
    let request: Function = get(&gpu, "requestAdapter")?.dyn_into().ok()?;
    let options = Object::new();
    Reflect::set(&options, &"powerPreference".into(), &"high-performance".into()).ok()?;
    let promise: Promise = request.call1(&gpu, &options).ok()?.dyn_into().ok()?;
    let adapter = JsFuture::from(promise).await.ok().filter(|a| !a.is_null())?;
    let info = get(&adapter, "info")?;
    let mut parts: Vec<String> = Vec::new();
    for key in ["vendor", "architecture", "device", "description"] {
        if let Some(s) = get(&info, key).and_then(|v| v.as_string()).map(|s| s.trim().to_string()) {
            if !s.is_empty() && !parts.contains(&s) {
                parts.push(s);
            }
        }
    }
    let flagged = |target: &JsValue| get(target, "isFallbackAdapter").and_then(|v| v.as_bool()).unwrap_or(false);
    let name = parts.join(" ");
    let software = flagged(&info) || flagged(&adapter) || crate::adapter::is_software_name(&name);
    Some(WebAdapterInfo { name, software })
}
