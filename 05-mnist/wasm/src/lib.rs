//! Stage 05 in a browser: the library of `05-mnist` (data checks, training on stage 04's
//! trainers, models, prediction), compiled to WebAssembly and called from the page
//! (`05-mnist/web/app.js`) through [wasm-bindgen](https://wasm-bindgen.github.io/wasm-bindgen/).
//!
//! Nothing here re-implements training: [`Session::train`] calls `mnist::train::train_async`,
//! the loop `mnist train` runs natively, on a [`GpuContext`] made by WebGPU (the visitor's GPU)
//! or on the CPU trainer compiled to WebAssembly. What this file adds is the browser's side of
//! things: bytes in and out instead of files, JSON for the page (the schema of `mnist::events`,
//! which `mnist serve` sends too), and a JavaScript callback for the events the command line
//! prints.
//!
//! Build: `bash 05-mnist/web/build.sh` (see `05-mnist/WEB.md`).
#![cfg(target_arch = "wasm32")]

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::GpuContext;
use mnist::data::{self, CLASSES, Mnist, PIXELS};
use mnist::datasets::{DatasetKind, FILE_NAMES};
use mnist::events::{
    AdapterInfo, DoneEvent, EpochEvent, ModelInfo, PredictResponse, ProgressEvent, RunId, SAMPLE_COUNT, SamplesEvent, SamplesResponse,
    StartEvent,
};
use mnist::idx::IdxArray;
use mnist::metrics::EpochMetrics;
use mnist::model_io::{self, Classifier, Model};
use mnist::train::{self, Device, Event, TrainRequest};
use serde::Serialize;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

/// What the page holds: the data set, the model it predicts with, the WebGPU context.
#[wasm_bindgen]
pub struct Session {
    inner: Rc<RefCell<Inner>>,
}

#[derive(Default)]
struct Inner {
    /// The data set the page asks for ([`Session::set_dataset`]), and its checked files, in the
    /// order of [`FILE_NAMES`], until all four are there.
    kind: DatasetKind,
    files: [Option<IdxArray>; 4],
    data: Option<Arc<Mnist>>,
    model: Option<PageModel>,
    /// Made on first use and kept: asking for an adapter and a device takes a while.
    gpu: Option<Arc<GpuContext>>,
    /// Set by [`Session::stop`]; the run in flight stops after its current batch or submission.
    stop: Arc<AtomicBool>,
    training: bool,
}

/// The model the drawing pad and the grid use, with a CPU classifier of its own.
struct PageModel {
    model: Model,
    /// Where it came from: "trained in this browser, epoch 3 (96.1%)", "loaded from m.safetensors".
    origin: String,
    classifier: Classifier,
}

fn js_err(e: impl std::fmt::Display) -> JsError {
    JsError::new(&e.to_string())
}

fn json(value: &impl Serialize) -> String {
    // Plain structs of numbers and strings: serializing them cannot fail.
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_string())
}

/// [`Session::webgpu`]'s answer: the adapter as a run's `start` event shows it, and beside it
/// the limits that matter here.
#[derive(Serialize)]
struct WebGpuJson {
    #[serde(flatten)]
    adapter: AdapterInfo,
    /// The limits the device was created with that matter here, in bytes or invocations.
    max_storage_buffer_binding_size: u64,
    max_compute_workgroup_storage_size: u32,
    max_compute_invocations_per_workgroup: u32,
    max_storage_buffers_per_shader_stage: u32,
}

/// [`check_network`]'s answer.
#[derive(Serialize)]
struct NetworkJson {
    /// `784-256-relu-dropout0.2-10` (and ` mse` for that loss).
    network: String,
    parameters: usize,
}

#[derive(Serialize)]
struct FileJson<'a> {
    name: &'a str,
    dims: &'a [usize],
    /// `MNIST` or `Fashion-MNIST`.
    dataset: &'static str,
    /// True once all four files are checked and the data set is ready.
    complete: bool,
}

/// The page's training form: `mnist serve`'s `POST /api/train` body ([`TrainRequest`], whose
/// `device` a browser run ignores), checked the same way, on the data set the page holds.
fn parse_request(json: &str, data: &Mnist) -> Result<TrainRequest, JsError> {
    let req: TrainRequest = serde_json::from_str(json).map_err(|e| js_err(format!("the training form: {e}")))?;
    req.validate(data.train.len(), data.test.len()).map_err(js_err)?;
    if req.dataset != data.kind {
        return Err(js_err(format!(
            "dataset: the page holds {}, not {}; choose {} as the data set and wait until its files are checked",
            data.kind.title(),
            req.dataset.title(),
            req.dataset.title()
        )));
    }
    config_checked(&req)?;
    Ok(req)
}

/// The training loop's own checks of `req` (a network too large, an optimizer it refuses).
fn config_checked(req: &TrainRequest) -> Result<(), JsError> {
    req.config().validate().map_err(js_err)
}

/// Checks the network of a training form (`{"layers": "784-128-relu-10", "loss": "mse"}`, or
/// `{"hidden": [512, 256]}`: the fields of [`TrainRequest`]; the others are not looked at) with
/// the parser and shape checks of `mnist train --layers`, and answers `{network, parameters}`
/// as JSON, or the error, which names the field and the layer. The page calls it as the visitor
/// types.
#[wasm_bindgen]
pub fn check_network(request: &str) -> Result<String, JsError> {
    let req: TrainRequest = serde_json::from_str(request).map_err(|e| js_err(format!("the training form: {e}")))?;
    let spec = req.check_network().map_err(js_err)?;
    Ok(json(&NetworkJson { network: spec.describe(), parameters: spec.parameter_count() }))
}

/// Lets the browser run its event loop (draw, handle a click on Stop) before training goes on:
/// a zero-delay timer, awaited.
async fn breathe() {
    let promise = js_sys::Promise::new(&mut |resolve, _reject| {
        let global = js_sys::global();
        if let Ok(set_timeout) = js_sys::Reflect::get(&global, &"setTimeout".into()).and_then(|f| f.dyn_into::<js_sys::Function>()) {
            let _ = set_timeout.call2(&global, &resolve, &JsValue::from(0));
        } else {
            let _ = resolve.call0(&JsValue::NULL);
        }
    });
    let _ = JsFuture::from(promise).await;
}

impl Default for Session {
    fn default() -> Self {
        Self::new()
    }
}

#[wasm_bindgen]
impl Session {
    #[wasm_bindgen(constructor)]
    pub fn new() -> Session {
        Session { inner: Rc::new(RefCell::new(Inner::default())) }
    }

    /// Chooses the data set the page trains on: `mnist` or `fashion` (the names of
    /// `--dataset`). Choosing another one drops the files and the data set the page held; the
    /// page then adds the new one's files ([`Session::add_file`]).
    pub fn set_dataset(&self, name: &str) -> Result<(), JsError> {
        let kind = DatasetKind::from_name(name).ok_or_else(|| js_err(format!("dataset `{name}`: use mnist or fashion")))?;
        let mut inner = self.inner.borrow_mut();
        if inner.kind != kind {
            inner.kind = kind;
            inner.files = Default::default();
            inner.data = None;
        }
        Ok(())
    }

    /// Checks one of the four files of the chosen data set ([`Session::set_dataset`]; `name`
    /// as in [`FILE_NAMES`], `.gz` or not; gzipped or not): its SHA-256 must be that set's and
    /// its IDX structure sound. Keeps it; once all four are in, the data set is ready. Returns
    /// `{name, dims, dataset, complete}` as JSON. A file of the other data set is refused with
    /// a message that says so.
    pub fn add_file(&self, name: &str, bytes: &[u8]) -> Result<String, JsError> {
        let base = name.strip_suffix(".gz").unwrap_or(name);
        let slot = FILE_NAMES
            .iter()
            .position(|n| *n == base)
            .ok_or_else(|| js_err(format!("{name} is not one of the four files: {}", FILE_NAMES.join(", "))))?;
        let mut inner = self.inner.borrow_mut();
        let kind = inner.kind;
        let arr = data::check_file(kind, name, bytes).map_err(|e| {
            let other = [DatasetKind::Mnist, DatasetKind::Fashion].into_iter().find(|&k| k != kind && data::check_file(k, name, bytes).is_ok());
            match other {
                Some(k) => js_err(format!(
                    "{name} is {}'s file, and the data set chosen is {}: choose {} as the data set to use it",
                    k.title(),
                    kind.title(),
                    k.title()
                )),
                None => js_err(e),
            }
        })?;
        let dims = arr.dims.clone();
        inner.files[slot] = Some(arr);
        if inner.files.iter().all(Option::is_some) {
            let files = std::mem::take(&mut inner.files).map(|f| f.expect("all four are present"));
            inner.data = Some(Arc::new(data::from_arrays(kind, files).map_err(js_err)?));
        }
        Ok(json(&FileJson { name: base, dims: &dims, dataset: kind.title(), complete: inner.data.is_some() }))
    }

    /// True when the data set is ready.
    pub fn has_data(&self) -> bool {
        self.inner.borrow().data.is_some()
    }

    /// The files still missing, as a JSON list of names (empty once the data set is ready).
    pub fn missing_files(&self) -> String {
        let inner = self.inner.borrow();
        let missing: Vec<&str> = match inner.data {
            Some(_) => Vec::new(),
            None => FILE_NAMES.iter().zip(&inner.files).filter(|(_, f)| f.is_none()).map(|(n, _)| *n).collect(),
        };
        json(&missing)
    }

    /// The WebGPU adapter as JSON `{name, software, warning, ...limits}`, asking the browser
    /// for a device the first time. Rejects when this browser has no WebGPU.
    pub fn webgpu(&self) -> js_sys::Promise {
        let inner = self.inner.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let ctx = gpu_context(&inner).await.map_err(JsValue::from)?;
            let l = &ctx.limits;
            let answer = WebGpuJson {
                adapter: adapter_info(&ctx),
                max_storage_buffer_binding_size: l.max_storage_buffer_binding_size,
                max_compute_workgroup_storage_size: l.max_compute_workgroup_storage_size,
                max_compute_invocations_per_workgroup: l.max_compute_invocations_per_workgroup,
                max_storage_buffers_per_shader_stage: l.max_storage_buffers_per_shader_stage,
            };
            Ok(JsValue::from_str(&json(&answer)))
        })
    }

    /// The first `count` test images for the grid, with the model's predictions if there is a
    /// model of this data set: `{indices, pixels, labels, predicted, dataset, class_names}` as
    /// JSON (the shape of `GET /api/samples`).
    pub fn samples(&self, count: usize) -> Result<String, JsError> {
        let mut inner = self.inner.borrow_mut();
        let inner = &mut *inner;
        let data = inner.data.as_ref().ok_or_else(|| js_err("no data set yet"))?;
        let n = count.min(data.test.len());
        // A model of the other data set would name these images with the wrong classes.
        let predicted = match inner.model.as_mut() {
            Some(m) if m.model.dataset == data.kind => Some(m.classifier.predict(&data.test.images[..n * PIXELS]).map_err(js_err)?),
            _ => None,
        };
        Ok(json(&SamplesResponse::first(data, n, predicted)))
    }

    /// Reads a drawing: `pixels: [height, width]` grey bytes, either polarity, any size. It is
    /// made MNIST-like (`preprocess::to_mnist`) and classified in this page, on the CPU:
    /// `{loss, probabilities | outputs, digit, input}` as JSON (the shape of `POST
    /// /api/predict`'s answer: `probabilities` for a cross-entropy model, `outputs` for MSE).
    pub fn predict_drawing(&self, pixels: &[u8], width: usize, height: usize) -> Result<String, JsError> {
        let mut inner = self.inner.borrow_mut();
        let model = inner.model.as_mut().ok_or_else(|| js_err("no model in the page yet: train or load one"))?;
        let input = mnist::preprocess::to_mnist(pixels, width, height).map_err(js_err)?;
        let values = model.classifier.probabilities(&input).map_err(js_err)?;
        debug_assert_eq!(values.len(), CLASSES);
        Ok(json(&PredictResponse::new(model.model.spec.loss(), values, input)))
    }

    /// Trains a network in this page: `request` is the form as JSON (see `WebRequest`),
    /// `device` is `"gpu"` (WebGPU) or `"cpu"` (this WebAssembly module). `on_event(name,
    /// json)` receives `start`, `progress`, `epoch`, `model`, `samples` and finally `done`, as
    /// `mnist serve` streams them; after every epoch the page's model is the new one. The
    /// promise resolves when the run ends and rejects with the reason when it fails.
    /// `run` is the page's count of its runs (a JavaScript number; the events carry it as their
    /// [`RunId`]).
    pub fn train(&self, request: String, device: String, run: u32, on_event: js_sys::Function) -> js_sys::Promise {
        let inner = self.inner.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            {
                let mut i = inner.borrow_mut();
                if i.training {
                    return Err(js_err("a run is already in flight: stop it first").into());
                }
                i.training = true;
                i.stop.store(false, Ordering::Relaxed);
            }
            let result = train_run(&inner, &request, &device, RunId::from(run), &on_event).await;
            inner.borrow_mut().training = false;
            result.map(|()| JsValue::UNDEFINED).map_err(JsValue::from)
        })
    }

    /// Stops the run in flight after its current batch (CPU) or submission (GPU).
    pub fn stop(&self) {
        self.inner.borrow().stop.store(true, Ordering::Relaxed);
    }

    /// The mean loss of the first training step of `request`'s run on `device` ("gpu" or
    /// "cpu"): same seed, same initial parameters, same first batch as [`Session::train`].
    pub fn first_batch_loss(&self, request: String, device: String) -> js_sys::Promise {
        let inner = self.inner.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let all = session_data(&inner)?;
            let req = parse_request(&request, &all)?;
            let cfg = req.config();
            let data = req.data(&all);
            let (device, _) = device_for(&inner, &device).await?;
            let loss = train::first_batch_loss(&device, &data, &cfg).await.map_err(js_err)?;
            Ok(JsValue::from_f64(loss))
        })
    }

    /// The page's model as JSON (`{description, hidden, layers, loss, dataset, class_names}`),
    /// or `null`.
    pub fn model_info(&self) -> String {
        let inner = self.inner.borrow();
        match &inner.model {
            Some(m) => json(&m.info()),
            None => "null".into(),
        }
    }

    /// The page's model as a safetensors file, the format `mnist eval --model` and
    /// `mnist predict --model` read.
    pub fn model_safetensors(&self) -> Result<Vec<u8>, JsError> {
        let inner = self.inner.borrow();
        let m = inner.model.as_ref().ok_or_else(|| js_err("no model in the page yet: train or load one"))?;
        model_io::model_bytes(&m.model).map_err(js_err)
    }

    /// Makes a model trained elsewhere in this page (the threaded CPU trainer's worker sends
    /// each epoch's model as safetensors) the page's model, described by `origin` (the `model`
    /// event's). Returns it as [`Session::model_info`] does.
    pub fn adopt_model(&self, bytes: &[u8], origin: &str) -> Result<String, JsError> {
        let model = model_io::parse_model(bytes).map_err(js_err)?;
        let page = PageModel::new(model, origin.to_string()).map_err(js_err)?;
        let info = json(&page.info());
        self.inner.borrow_mut().model = Some(page);
        Ok(info)
    }

    /// The vector instructions the CPU trainer runs with in this build: "simd128" (WebAssembly
    /// SIMD) or "portable".
    pub fn cpu_instruction_set(&self) -> String {
        gpu_layers::cpu::fast::instruction_set().to_string()
    }

    /// Checks this build's CPU kernels (the WebAssembly SIMD tile, which runs only in a
    /// browser) against the CPU references on random inputs at awkward shapes: what passed, or
    /// the first disagreement. The in-browser test calls it.
    pub fn cpu_self_check(&self) -> Result<String, JsError> {
        gpu_layers::cpu::fast_checks::all().map_err(js_err)
    }

    /// Loads a safetensors model (as written by `mnist train --save` or by this page), checked
    /// like `mnist eval` checks it. Returns it as [`Session::model_info`] does.
    pub fn load_model(&self, bytes: &[u8], file_name: &str) -> Result<String, JsError> {
        let model = model_io::parse_model(bytes).map_err(|e| js_err(format!("{file_name}: {e}")))?;
        let page = PageModel::new(model, format!("loaded from {file_name}")).map_err(js_err)?;
        let info = json(&page.info());
        self.inner.borrow_mut().model = Some(page);
        Ok(info)
    }
}

impl PageModel {
    fn new(model: Model, origin: String) -> mnist::Result<Self> {
        let classifier = model.classifier()?;
        Ok(Self { model, origin, classifier })
    }

    /// The `model` event's payload.
    fn info(&self) -> ModelInfo {
        ModelInfo::new(&self.model, &self.origin)
    }
}

fn session_data(inner: &Rc<RefCell<Inner>>) -> Result<Arc<Mnist>, JsError> {
    let i = inner.borrow();
    i.data.clone().ok_or_else(|| js_err(format!("no data set yet: the page loads {} first (or pick its files)", i.kind.title())))
}

/// The training device for "gpu" or "cpu", and how the page shows it.
async fn device_for(inner: &Rc<RefCell<Inner>>, device: &str) -> Result<(Device, AdapterInfo), JsError> {
    match device {
        "gpu" => {
            let ctx = gpu_context(inner).await?;
            let adapter = adapter_info(&ctx);
            Ok((Device::Gpu(ctx), adapter))
        }
        "cpu" => Ok((Device::Cpu, AdapterInfo { name: cpu_name(), software: false, warning: None })),
        other => Err(js_err(format!("device `{other}`: use gpu or cpu"))),
    }
}

/// "CPU (WebAssembly in this browser, 4 threads, simd128)": the threads are the rayon pool's (one
/// in the one-thread build, `initThreadPool`'s count in the threaded one).
fn cpu_name() -> String {
    let threads = rayon::current_num_threads();
    let isa = gpu_layers::cpu::fast::instruction_set();
    format!("CPU (WebAssembly in this browser, {threads} thread{}, {isa})", if threads == 1 { "" } else { "s" })
}

fn adapter_info(ctx: &GpuContext) -> AdapterInfo {
    let software = ctx.is_software();
    AdapterInfo {
        name: ctx.adapter_line(),
        software,
        warning: software.then(|| {
            format!(
                "'{}' is a SOFTWARE adapter: WebGPU is running on your CPU, not a GPU. Results are \
                 correct, but its timings are not GPU timings.",
                ctx.info.name
            )
        }),
    }
}

/// One run, reporting to `on_event`; the page's model follows the run epoch by epoch.
async fn train_run(inner: &Rc<RefCell<Inner>>, request: &str, device: &str, run: RunId, on_event: &js_sys::Function) -> Result<(), JsError> {
    let emit = |name: &str, payload: String| {
        // An exception in the page's handler is the page's problem, not the run's.
        let _ = on_event.call2(&JsValue::NULL, &JsValue::from_str(name), &JsValue::from_str(&payload));
    };
    let all = session_data(inner)?;
    let req = parse_request(request, &all)?;
    let cfg = req.config();
    let data = req.data(&all);
    let (device, adapter) = device_for(inner, device).await?;
    emit("start", json(&StartEvent::new(run, req.clone(), adapter, &data)));
    let stop = inner.borrow().stop.clone();
    let mut epoch_lr = cfg.lr();
    let mut last_epoch: Option<EpochMetrics> = None;
    let mut model_error: Option<String> = None;
    let mut on = |event: Event<'_>| match event {
        Event::EpochStart { lr, .. } => epoch_lr = lr,
        Event::Progress(p) => {
            // The loop reports at most every `events::PROGRESS_EVERY`, and the end of each epoch.
            if let Some(progress) = ProgressEvent::new(run, &p, epoch_lr) {
                emit("progress", json(&progress));
            }
        }
        Event::EpochEnd(m) => {
            last_epoch = Some(*m);
            emit("epoch", json(&EpochEvent { run, epochs: cfg.epochs, lr: epoch_lr, metrics: *m }));
        }
        Event::EpochModel(model) => {
            let origin = match &last_epoch {
                Some(m) => format!("trained in this browser, run {run} after epoch {} (test accuracy {:.2}%)", m.epoch, 100.0 * m.test_acc),
                None => format!("trained in this browser, run {run}"),
            };
            match set_model(inner, model.clone(), origin) {
                Ok((info, predicted)) => {
                    emit("model", info);
                    emit("samples", predicted);
                }
                Err(e) => model_error = Some(e),
            }
        }
    };
    let outcome = train::train_async(&device, &data, &cfg, &stop, &mut on, breathe).await.map_err(js_err)?;
    if let Some(e) = model_error {
        return Err(js_err(format!("could not use the trained model: {e}")));
    }
    let epochs_done = outcome.history.len();
    if outcome.stopped {
        // Keep what was learned so far: the pad can still read drawings with it.
        let (info, predicted) = set_model(inner, outcome.model, format!("trained in this browser, run {run}, stopped during epoch {}", epochs_done + 1))
            .map_err(js_err)?;
        emit("model", info);
        emit("samples", predicted);
    }
    let last_test_acc = outcome.history.last().map(|m| m.test_acc);
    emit("done", json(&DoneEvent::new(run, outcome.stopped, epochs_done, cfg.epochs, last_test_acc)));
    Ok(())
}

/// Makes `model` the page's model; returns the `model` and `samples` events' JSON.
fn set_model(inner: &Rc<RefCell<Inner>>, model: Model, origin: String) -> Result<(String, String), String> {
    let mut page = PageModel::new(model, origin).map_err(|e| e.to_string())?;
    let mut i = inner.borrow_mut();
    let predicted = match &i.data {
        Some(d) => {
            let n = SAMPLE_COUNT.min(d.test.len());
            page.classifier.predict(&d.test.images[..n * PIXELS]).map_err(|e| e.to_string())?
        }
        None => Vec::new(),
    };
    let info = json(&page.info());
    i.model = Some(page);
    Ok((info, json(&SamplesEvent { predicted })))
}

/// The session's WebGPU context, made on first use.
async fn gpu_context(inner: &Rc<RefCell<Inner>>) -> Result<Arc<GpuContext>, JsError> {
    if let Some(ctx) = inner.borrow().gpu.clone() {
        return Ok(ctx);
    }
    // `train::Device` shares the context through an `Arc` (natively, with the server's training
    // thread); a browser page has one thread, where wgpu's types are neither Send nor Sync.
    #[allow(clippy::arc_with_non_send_sync)]
    let ctx = Arc::new(GpuContext::new_async().await.map_err(js_err)?);
    inner.borrow_mut().gpu = Some(ctx.clone());
    Ok(ctx)
}

/// `initThreadPool(n)` in JavaScript: starts the CPU trainer's `n` rayon threads, each a Web
/// Worker on this module's shared memory (the `threads` build only; see `web/cpu_worker.js`).
#[cfg(feature = "threads")]
pub use wasm_bindgen_rayon::init_thread_pool;
