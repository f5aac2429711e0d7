// The page's logic: plain JavaScript, no build step, no libraries.
//
// Where training runs (the "Train where" choice):
// - "this browser (WebGPU)" and "this browser (CPU, WebAssembly)": the Rust trainer of stages
//   04 and 05, compiled to WebAssembly (pkg/mnist_web.js, made by 05-mnist/web/build.sh), runs
//   in this page. It calls back with the same events the server streams (below), so one set of
//   handlers draws both. Nothing is sent anywhere: the data comes from this site's data/ folder
//   or the visitor's disk, and stays in the browser's cache.
// - "the server", offered when `mnist serve` serves the page (GET api/status answers): the form
//   posts a JSON request to POST api/train, Stop posts api/stop, and GET api/events streams
//   server-sent events: `snapshot` (everything, first on every connection), `start`,
//   `progress`, `epoch`, `samples`, `model`, `done` and `error`.
//
// The drawing pad's pixels are read by the model in the page when there is one (trained here
// or loaded from a .safetensors file); otherwise by the server's model (POST api/predict).
//
// The form's choices are `mnist train`'s: the layer list (--layers, or the hidden sizes of
// --hidden), the loss (--loss) and the data set (--dataset), sent as the JSON fields `layers` or
// `hidden`, `loss` and `dataset`. The Rust parser checks the layer list as it is typed (the
// WebAssembly module's check_network); the server checks it again and answers 422 with the same
// words.

const $ = (id) => document.getElementById(id);
const PIXELS = 28 * 28;
const SAMPLE_COUNT = 24;
/// MNIST's four files, as the data folder names them (gzipped: NAME.gz).
const FILES = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"];
/// The browser cache (Cache API) that keeps the checked files between visits.
const CACHE = "mnist-data-v1";
/// Each data set: its name in the form and the API (`--dataset`), its title, and the site's
/// folder with its four files.
const DATASETS = {
  mnist: { title: "MNIST", folder: "data/", source: "https://ossci-datasets.s3.amazonaws.com/mnist/" },
  fashion: { title: "Fashion-MNIST", folder: "data/fashion/", source: "https://github.com/zalandoresearch/fashion-mnist" },
};
const DIGITS = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];

const state = {
  training: false,
  run: null,
  epochsTotal: 0,
  history: [],      // one object per finished epoch of the current (or last) run
  samples: null,    // { pixels: [n * 784], labels: [n], predicted: [n] | null }
  where: "browser-gpu",
  server: false,    // served by `mnist serve`
  web: null,        // the WebAssembly module's Session, once loaded
  wasm: null,       // the module itself (its free functions: check_network)
  webError: null,   // why the in-browser trainer is not available
  trainerMissing: false, // `mnist serve` without the in-browser trainer
  gpu: null,        // the WebGPU adapter's description, once asked for
  gpuError: null,   // why WebGPU is not available
  hasData: false,   // the page holds the checked data set
  dataset: "mnist", // the data set the page holds (or is loading): "mnist" or "fashion"
  loadingData: false,
  classNames: DIGITS, // what the model's ten outputs mean (from its data set)
  modelDataset: null, // the data set the model was trained on
  modelLoss: null,  // its loss: "mse" models give scores, not probabilities
  model: null,      // "page" (the WebAssembly session has one), "server", or null
  events: null,     // the server's EventSource while "the server" is chosen
  browserRun: 0,
  whereChosen: false, // the visitor picked "Train where" themselves
  cpuWorker: null,  // the threaded CPU trainer (cpu_worker.js), once ready
  cpuThreads: 1,    // its threads (1: the page's own module, on the page's thread)
  cpuIsa: "",       // its vector instructions ("simd128")
  threadsWhy: "",   // why the CPU runs on one thread, when it does on a multi-core machine
  workerDataset: null, // the data set the worker holds
  files: {},        // the checked files' bytes by data set and name, for the worker
  workerRun: false, // the run in flight is the worker's
};

// ---------------------------------------------------------------- small helpers

function showMessage(text) {
  const box = $("message");
  box.textContent = text;
  box.hidden = !text;
}

function pct(x) { return (100 * x).toFixed(2) + "%"; }

async function postJson(url, body) {
  const res = await fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: body === undefined ? "{}" : JSON.stringify(body),
  });
  let data = null;
  try { data = await res.json(); } catch (_) { /* not JSON */ }
  if (!res.ok) {
    const why = data && data.error ? data.error : res.status + " " + res.statusText;
    throw new Error(why);
  }
  return data;
}

const errorText = (e) => (e && e.message) || String(e);

// ---------------------------------------------------------------- the training form

/// The Layers field as the request's fields: the short form (hidden sizes only: "128",
/// "512,256", "none" or nothing for softmax regression) is `hidden`, anything else is the layer
/// list `layers`, parsed by Rust (here through the WebAssembly module, on the server by serve).
function networkFields() {
  const text = $("layers").value.trim();
  if (/^(none|[\d\s,]*)$/i.test(text)) {
    const sizes = text.toLowerCase() === "none" ? [] : text.split(/[\s,]+/).filter(Boolean).map(Number);
    return { hidden: sizes };
  }
  return { layers: text };
}

/// The form's number fields: the label the visitor sees, and what each accepts. The bounds are
/// the input's own `min`/`max` attributes (index.html), which are the Rust side's limits
/// (`TrainRequest::validate`; a test checks that they agree). `above`: the minimum itself is
/// not allowed (a learning rate of 0); `below`: neither is the maximum (momentum 1).
const NUMBER_FIELDS = {
  lr: { label: "Learning rate", above: true },
  batch_size: { label: "Batch size", integer: true },
  epochs: { label: "Epochs", integer: true },
  momentum: { label: "Momentum", below: true },
  limit_train: { label: "Training images", integer: true, optional: true },
  limit_test: { label: "Test images", integer: true, optional: true },
  seed: { label: "Seed", integer: true },
};

/// A field the form cannot send: `field` is its id; the message names it by its label.
class FieldError extends Error {
  constructor(field, message) { super(message); this.field = field; }
}

/// The value of number field `id`, checked against its range; `undefined` for an optional
/// field left empty. Throws a FieldError that names the field and says what it accepts.
function numberField(id) {
  const f = NUMBER_FIELDS[id];
  const el = $(id);
  const text = el.value.trim();
  const lo = Number(el.min), hi = Number(el.max);
  const range = f.integer
    ? `a whole number from ${lo.toLocaleString("en-US")} to ${hi.toLocaleString("en-US")}`
    : `a number ${f.above ? "above" : "from"} ${lo} ${f.below ? "and below" : "up to"} ${hi}`;
  if (text === "") {
    if (f.optional) return undefined;
    throw new FieldError(id, `${f.label}: empty; enter ${range}.`);
  }
  const v = Number(text);
  const bad = !Number.isFinite(v) || (f.integer && !Number.isInteger(v)) || v < lo || v > hi ||
    (f.above && v === lo) || (f.below && v === hi);
  if (bad) throw new FieldError(id, `${f.label}: “${text}” is not allowed; enter ${range}.`);
  return v;
}

/// The form as a training request (the JSON of POST api/train, which the page's trainer reads
/// too). Throws a FieldError for a value out of range.
function readForm() {
  const req = {
    ...networkFields(),
    loss: $("loss").value,
    dataset: $("dataset").value,
    lr: numberField("lr"),
    batch_size: numberField("batch_size"),
    epochs: numberField("epochs"),
    optimizer: $("optimizer").value,
    // Adam has no momentum: the field is disabled and not checked.
    momentum: $("optimizer").value === "adam" ? 0.9 : numberField("momentum"),
    schedule: $("schedule").value,
    device: $("device").value,
    seed: numberField("seed"),
  };
  const limit = numberField("limit_train");
  if (limit !== undefined) req.limit_train = limit;
  return req;
}

/// The labels of the request's fields, for messages from Rust (`lr: 0 is not a learning rate`).
const FIELD_LABELS = {
  layers: "Layers", hidden: "Layers", loss: "Loss", dataset: "Data set", optimizer: "Optimizer",
  schedule: "LR schedule", device: "Server device",
  ...Object.fromEntries(Object.entries(NUMBER_FIELDS).map(([id, f]) => [id, f.label])),
};

/// Marks the field a message is about (`field`, or the request field a Rust message starts
/// with), clears the marks of the others, and returns the message with the field's label in
/// place of its JSON name.
function markField(message, field) {
  const m = /^(\w+): /.exec(message);
  const name = field || (m && FIELD_LABELS[m[1]] ? m[1] : null);
  for (const el of $("train-form").querySelectorAll(".invalid")) {
    el.classList.remove("invalid");
    el.removeAttribute("aria-invalid");
  }
  if (!name) return message;
  const el = $(name === "hidden" ? "layers" : name);
  if (el) {
    el.classList.add("invalid");
    el.setAttribute("aria-invalid", "true");
    el.focus();
  }
  return m && m[1] === name ? FIELD_LABELS[name] + message.slice(m[1].length) : message;
}

/// Shows why a run could not start: the message above the form, the field marked, the
/// progress bar empty again.
function refuse(prefix, e) {
  const text = markField(errorText(e), e && e.field);
  showMessage(prefix + text);
  showNetworkError(errorText(e));
  $("progress-bar").style.width = "0%";
  $("progress-text").textContent = "Idle.";
}

function fillForm(cfg) {
  if (!cfg) return;
  $("layers").value = cfg.layers != null ? cfg.layers : (cfg.hidden.length ? cfg.hidden.join(",") : "none");
  if (cfg.loss) $("loss").value = cfg.loss;
  if (cfg.dataset && $("dataset").value !== cfg.dataset) {
    // A run of the server's on the other data set: the page follows (browser runs need its files).
    $("dataset").value = cfg.dataset;
    if (state.web) loadData();
  }
  checkNetwork();
  $("lr").value = cfg.lr;
  $("batch_size").value = cfg.batch_size;
  $("epochs").value = cfg.epochs;
  $("optimizer").value = cfg.optimizer;
  $("momentum").value = cfg.momentum;
  $("schedule").value = cfg.schedule;
  if (cfg.device) $("device").value = cfg.device;
  $("limit_train").value = cfg.limit_train == null ? "" : cfg.limit_train;
  $("seed").value = cfg.seed;
}

function setTraining(on) {
  state.training = on;
  $("start").disabled = on;
  $("stop").disabled = !on;
  for (const el of $("train-form").elements) {
    if (el.tagName !== "BUTTON") el.disabled = on;
  }
  if (!on) {
    $("momentum").disabled = $("optimizer").value === "adam";
    for (const opt of $("where").options) opt.disabled = !available(opt.value);
  }
  $("load-model").disabled = on;
  $("pick-data").disabled = on;
}

$("train-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  showMessage("");
  markField("");
  let req;
  try {
    req = readForm();
  } catch (e) {
    refuse("Could not start training: ", e);
    return;
  }
  if (state.where === "server") {
    $("start").disabled = true;
    try {
      await postJson("api/train", req);
      // The `start` event that follows updates the page.
    } catch (e) {
      refuse("Could not start training: ", e);
      $("start").disabled = state.training;
    }
  } else {
    trainInBrowser(req);
  }
});

// The usual learning rates differ by optimizer (as in `mnist train`): switch along while the
// field still holds the other optimizer's default.
const DEFAULT_LR = { sgd: "0.05", adam: "0.001" };
$("optimizer").addEventListener("change", () => {
  const other = $("optimizer").value === "adam" ? "sgd" : "adam";
  if ($("lr").value === DEFAULT_LR[other]) $("lr").value = DEFAULT_LR[$("optimizer").value];
  $("momentum").disabled = $("optimizer").value === "adam";
});

/// Shows what the Rust parser says about the Layers field and the loss, as the visitor types:
/// the network and its parameter count, or the error (it names the layer). Without the
/// WebAssembly module (a server-only page) the server's answer to Start says it instead.
function checkNetwork() {
  const out = $("layers-check");
  if (!state.web) { out.textContent = ""; return; }
  try {
    const net = JSON.parse(state.wasm.check_network(JSON.stringify({ ...networkFields(), loss: $("loss").value })));
    out.textContent = `${net.network}: ${net.parameters.toLocaleString("en-US")} parameters`;
    out.classList.remove("bad");
  } catch (e) {
    out.textContent = errorText(e);
    out.classList.add("bad");
  }
}

/// A refusal from the server or the page that is about the network goes under the field too.
function showNetworkError(text) {
  if (!/^(layers|hidden|loss):/.test(text)) return;
  $("layers-check").textContent = text;
  $("layers-check").classList.add("bad");
}

$("layers").addEventListener("input", checkNetwork);
$("loss").addEventListener("change", checkNetwork);

$("dataset").addEventListener("change", () => {
  // A browser run needs the chosen set's files in the page; a server run loads it there.
  if (state.web) loadData();
});

$("stop").addEventListener("click", async () => {
  $("stop").disabled = true;
  if (state.where !== "server") {
    if (state.workerRun) state.cpuWorker.postMessage({ type: "stop" });
    else state.web.stop();
    $("progress-text").textContent += " Stopping after the current batch…";
    return;
  }
  try {
    await postJson("api/stop");
    $("progress-text").textContent += " Stopping after the current batch…";
  } catch (e) {
    showMessage("Could not stop: " + errorText(e));
  }
});

// ---------------------------------------------------------------- where to train

/// Whether a choice of "Train where" can be used now.
function available(where) {
  if (where === "server") return state.server;
  if (!state.web || !state.hasData || state.dataset !== $("dataset").value) return false;
  return where === "browser-cpu" || (where === "browser-gpu" && state.gpu !== null);
}

function setWhere(where) {
  // The grid comes from the page's data set for a browser run and from the server's for a
  // server run (they may be different data sets): a change of source reloads it.
  const moved = (state.where === "server") !== (where === "server");
  state.where = where;
  if (moved && state.samples) loadSamples();
  $("where").value = where;
  document.body.dataset.where = where;
  const pill = $("connection");
  if (where === "server") {
    connect();
  } else {
    if (state.events) { state.events.close(); state.events = null; }
    pill.textContent = "in this browser";
    pill.className = "pill pill-on";
    pill.title = "training runs in this page; nothing is sent to a server";
    showAdapter(where === "browser-gpu" ? state.gpu : cpuAdapter());
  }
}

$("where").addEventListener("change", () => {
  state.whereChosen = true;
  setWhere($("where").value);
  showWhereNote();
});

function cpuAdapter() {
  const threads = state.cpuThreads === 1 ? "1 thread" : `${state.cpuThreads} threads`;
  return { name: `CPU (WebAssembly in this browser, ${threads}${state.cpuIsa ? ", " + state.cpuIsa : ""})`, software: false, warning: null };
}

// ---------------------------------------------------------------- progress and adapter

function setProgress(epoch, batch, batches, text) {
  const total = Math.max(state.epochsTotal, 1);
  const done = batches > 0 ? (epoch - 1 + batch / batches) / total : 0;
  $("progress-bar").style.width = (100 * Math.min(Math.max(done, 0), 1)).toFixed(1) + "%";
  if (text) $("progress-text").textContent = text;
}

function showAdapter(adapter) {
  if (!adapter) return;
  $("adapter").textContent = adapter.name;
  const warn = $("adapter-warning");
  warn.textContent = adapter.warning || "";
  warn.hidden = !adapter.warning;
}

function showModel(model, source) {
  state.model = model ? source : null;
  state.classNames = (model && model.class_names) || DIGITS;
  state.modelDataset = model && model.dataset;
  state.modelLoss = model && model.loss;
  const digits = state.classNames === DIGITS || state.classNames[0] === "0";
  $("draw-title").textContent = digits ? "Draw a digit" : "Draw a piece of clothing";
  if (!inked) $("draw-text").textContent = drawHint();
  labelProbs();
  $("model").textContent = model ? model.description : "none yet: train one or load one";
  $("download-model").disabled = state.model !== "page";
}

// ---------------------------------------------------------------- charts

// A line chart of one value per epoch. `series`: [{ name, color, values }].
function drawChart(canvas, series, opts) {
  const ctx = canvas.getContext("2d");
  const W = canvas.width, H = canvas.height;
  const left = 52, right = 12, top = 26, bottom = 34;
  ctx.clearRect(0, 0, W, H);
  ctx.font = "12px system-ui, sans-serif";

  const n = Math.max(state.epochsTotal, ...series.map((s) => s.values.length), 1);
  const all = series.flatMap((s) => s.values).filter(Number.isFinite);
  let lo = opts.min !== undefined ? opts.min : Math.min(...all, Infinity);
  let hi = opts.max !== undefined ? opts.max : Math.max(...all, -Infinity);
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) { lo = 0; hi = 1; }
  if (opts.fit && all.length) {
    lo = Math.min(...all); hi = Math.max(...all);
    const pad = Math.max((hi - lo) * 0.1, opts.minSpan || 0.01);
    lo = Math.max(opts.floor !== undefined ? opts.floor : -Infinity, lo - pad);
    hi = Math.min(opts.ceil !== undefined ? opts.ceil : Infinity, hi + pad);
  }
  if (hi <= lo) hi = lo + 1;
  const x = (i) => left + (n <= 1 ? 0.5 : i / (n - 1)) * (W - left - right);
  const y = (v) => top + (1 - (v - lo) / (hi - lo)) * (H - top - bottom);

  // Grid and axes.
  ctx.strokeStyle = "#e3e6ec"; ctx.fillStyle = "#687086"; ctx.lineWidth = 1;
  for (let k = 0; k <= 4; k++) {
    const v = lo + (k / 4) * (hi - lo);
    ctx.beginPath(); ctx.moveTo(left, y(v)); ctx.lineTo(W - right, y(v)); ctx.stroke();
    ctx.textAlign = "right"; ctx.textBaseline = "middle";
    ctx.fillText(opts.format(v), left - 6, y(v));
  }
  ctx.textAlign = "center"; ctx.textBaseline = "top";
  const step = Math.ceil(n / 10);
  for (let i = 0; i < n; i += step) ctx.fillText(String(i + 1), x(i), H - bottom + 6);
  ctx.fillText("epoch", (left + W - right) / 2, H - 14);

  // Lines with dots.
  for (const s of series) {
    ctx.strokeStyle = s.color; ctx.fillStyle = s.color; ctx.lineWidth = 2;
    ctx.beginPath();
    s.values.forEach((v, i) => (i === 0 ? ctx.moveTo(x(i), y(v)) : ctx.lineTo(x(i), y(v))));
    ctx.stroke();
    s.values.forEach((v, i) => { ctx.beginPath(); ctx.arc(x(i), y(v), 3, 0, 2 * Math.PI); ctx.fill(); });
  }

  // Legend.
  ctx.textAlign = "left"; ctx.textBaseline = "middle";
  let lx = left;
  for (const s of series) {
    ctx.fillStyle = s.color; ctx.fillRect(lx, 9, 14, 3);
    ctx.fillStyle = "#1d2330";
    const last = s.values.length ? " " + opts.format(s.values[s.values.length - 1]) : "";
    const label = s.name + last;
    ctx.fillText(label, lx + 18, 11);
    lx += 28 + ctx.measureText(label).width;
  }
  canvas.dataset.epochs = String(Math.max(...series.map((s) => s.values.length)));
}

function drawCharts() {
  const h = state.history;
  drawChart($("loss-chart"), [
    { name: "train", color: "#2f6fde", values: h.map((e) => e.train_loss) },
    { name: "test", color: "#e0822b", values: h.map((e) => e.test_loss) },
  ], { fit: true, floor: 0, minSpan: 0.02, format: (v) => v.toFixed(3) });
  drawChart($("acc-chart"), [
    { name: "train", color: "#2f6fde", values: h.map((e) => e.train_acc) },
    { name: "test", color: "#e0822b", values: h.map((e) => e.test_acc) },
  ], { fit: true, floor: 0, ceil: 1, minSpan: 0.005, format: (v) => (100 * v).toFixed(1) + "%" });
}

function renderEpochTable() {
  const body = $("epochs-table").querySelector("tbody");
  body.replaceChildren(...state.history.map((e) => {
    const tr = document.createElement("tr");
    for (const cell of [
      String(e.epoch), formatLr(e.lr), e.train_loss.toFixed(4), pct(e.train_acc), e.test_loss.toFixed(4),
      pct(e.test_acc), e.seconds.toFixed(2), Math.round(e.images_per_sec).toLocaleString("en-US"),
    ]) {
      const td = document.createElement("td");
      td.textContent = cell;
      tr.appendChild(td);
    }
    return tr;
  }));
}

// ---------------------------------------------------------------- grey images

// Paints 28x28 grey bytes (0 = black background) into a 28x28 canvas.
function paintDigit(canvas, pixels, offset) {
  const ctx = canvas.getContext("2d");
  const img = ctx.createImageData(28, 28);
  for (let i = 0; i < PIXELS; i++) {
    const v = pixels[offset + i];
    img.data[4 * i] = v; img.data[4 * i + 1] = v; img.data[4 * i + 2] = v; img.data[4 * i + 3] = 255;
  }
  ctx.putImageData(img, 0, 0);
}

function renderSamples() {
  const s = state.samples;
  const grid = $("samples");
  if (!s) return;
  grid.replaceChildren();
  let right = 0;
  const names = s.class_names || DIGITS;
  const digits = names[0] === "0";
  $("samples-title").textContent = digits ? "Test digits" : `Test images (${DATASETS[s.dataset] ? DATASETS[s.dataset].title : s.dataset})`;
  for (let i = 0; i < s.labels.length; i++) {
    const cell = document.createElement("div");
    cell.className = "sample";
    const c = document.createElement("canvas");
    c.width = 28; c.height = 28;
    paintDigit(c, s.pixels, i * PIXELS);
    const caption = document.createElement("div");
    const name = (label) => names[label] === undefined ? String(label) : names[label];
    if (s.predicted) {
      const ok = s.predicted[i] === s.labels[i];
      right += ok ? 1 : 0;
      const guess = document.createElement("span");
      guess.className = (ok ? "right" : "wrong") + (digits ? "" : " name");
      guess.textContent = name(s.predicted[i]);
      const truth = document.createElement("span");
      truth.className = digits ? "" : "name";
      truth.textContent = ok && !digits ? "" : ` (true ${name(s.labels[i])})`;
      caption.append(guess, truth);
    } else {
      caption.textContent = `true ${name(s.labels[i])}`;
    }
    caption.title = `true: ${name(s.labels[i])}` + (s.predicted ? `, predicted: ${name(s.predicted[i])}` : "");
    cell.append(c, caption);
    grid.appendChild(cell);
  }
  const otherSet = state.model && state.modelDataset && s.dataset && state.modelDataset !== s.dataset;
  $("samples-text").textContent = s.predicted
    ? `predicted by the current model (green: right, red: wrong): ${right} of ${s.labels.length} right`
    : otherSet ? `the model is of ${DATASETS[state.modelDataset].title}: train one on these to see its predictions`
    : "no model yet: predictions appear after the first epoch";
}

/// The grid's images: from the page's own data set when it has one and a browser run is chosen
/// (or there is no server), else from the server's.
async function loadSamples() {
  try {
    if (state.web && state.hasData && (state.where !== "server" || !state.server)) {
      state.samples = JSON.parse(state.web.samples(SAMPLE_COUNT));
    } else if (state.server) {
      const res = await fetch("api/samples");
      const data = await res.json();
      if (!res.ok) throw new Error(data.error || res.statusText);
      state.samples = data;
    } else {
      return;
    }
    renderSamples();
  } catch (e) {
    $("samples-text").textContent = "could not load the test digits: " + errorText(e);
  }
}

// ---------------------------------------------------------------- events (server or page)

function formatLr(lr) { return Number(lr.toPrecision(3)).toString(); }

function progressText(p) {
  const ips = p.images_per_sec ? ` · ${Math.round(p.images_per_sec).toLocaleString("en-US")} images/s` : "";
  return `Epoch ${p.epoch}/${state.epochsTotal} · lr ${formatLr(p.lr)} · batch ${p.batch}/${p.batches} · ` +
    `loss ${p.loss.toFixed(4)}${ips}`;
}

/// One handler per event, for the server's stream and the in-browser runs alike. `source` is
/// "server" or "page": where the model of a `model` event lives.
function handlers(source) {
  return {
    snapshot: applySnapshot,
    start(e) {
      showMessage("");
      // The server shows the run's data set in its grid from now on.
      if (source === "server" && state.samples && e.config.dataset && state.samples.dataset !== e.config.dataset) loadSamples();
      state.run = e.run;
      state.epochsTotal = e.config.epochs;
      state.history = [];
      fillForm(e.config);
      setTraining(true);
      showAdapter(e.adapter);
      drawCharts();
      renderEpochTable();
      showRunWarning("");
      setProgress(1, 0, 1, `Started: ${e.train_images.toLocaleString("en-US")} training images, ` +
        `${e.batches_per_epoch} batches per epoch, on ${e.adapter.name}.`);
    },
    progress(p) { setProgress(p.epoch, p.batch, p.batches, progressText(p)); },
    epoch(e) {
      state.history.push(e);
      setProgress(e.epoch, 1, 1, `Epoch ${e.epoch}/${state.epochsTotal}: test accuracy ${pct(e.test_acc)}, ` +
        `test loss ${e.test_loss.toFixed(4)}, ${e.seconds.toFixed(2)} s.`);
      drawCharts();
      renderEpochTable();
      showRunWarning(divergence(state.history, e.lr));
    },
    samples(e) {
      if (state.samples) { state.samples.predicted = e.predicted; renderSamples(); }
    },
    model(m) { showModel(m, source); predictNow(); },
    done(e) {
      setTraining(false);
      $("progress-text").textContent = e.message;
    },
    error(e) {
      setTraining(false);
      // A run refused before its first step leaves nothing to show: the bar goes back to empty.
      if (!state.history.length) $("progress-bar").style.width = "0%";
      $("progress-text").textContent = "Training failed.";
      showMessage(markField(e.message));
      showNetworkError(e.message);
    },
  };
}

/// Why the run looks diverged after its latest epoch ("" when it does not): accuracy near
/// chance (one class in ten is 10%), or a training loss that rose from one epoch to the next.
function divergence(history, lr) {
  const e = history[history.length - 1];
  if (!e) return "";
  const prev = history[history.length - 2];
  const reasons = [];
  if (!(e.train_acc > 0.2)) reasons.push(`training accuracy ${pct(e.train_acc)} is near chance (10% for ten classes)`);
  if (prev && !(e.train_loss <= 1.1 * prev.train_loss)) {
    reasons.push(`the training loss rose from ${prev.train_loss.toFixed(4)} to ${e.train_loss.toFixed(4)}`);
  }
  if (!reasons.length) return "";
  return `This run looks diverged: ${reasons.join(", and ")}. A learning rate too large for the network is the usual ` +
    `cause: stop it and try about a tenth of it (${formatLr(lr / 10)}).`;
}

function showRunWarning(text) {
  const box = $("run-warning");
  box.textContent = text;
  box.hidden = !text;
}

function applySnapshot(s) {
  state.run = s.run;
  state.epochsTotal = s.config ? s.config.epochs : 0;
  state.history = s.history || [];
  fillForm(s.config);
  setTraining(s.training);
  showAdapter(s.adapter);
  if (s.model || state.model !== "page") showModel(s.model, "server");
  if (s.progress) {
    const p = s.progress;
    setProgress(p.epoch, p.batch, p.batches, progressText(p));
  } else if (!s.training) {
    $("progress-bar").style.width = state.history.length && state.epochsTotal
      ? (100 * state.history.length / state.epochsTotal) + "%" : "0%";
    $("progress-text").textContent = s.last_outcome || "Idle.";
  }
  if (s.last_error) showMessage(s.last_error);
  drawCharts();
  renderEpochTable();
  if (state.samples && s.dataset && state.samples.dataset !== s.dataset && state.where === "server") loadSamples();
  if (state.samples && s.samples_predicted !== undefined && state.model === "server") {
    state.samples.predicted = s.samples_predicted;
    renderSamples();
  }
}

/// The server's event stream (only while "the server" is chosen).
function connect() {
  if (state.events) return;
  const es = new EventSource("api/events");
  state.events = es;
  const h = handlers("server");
  for (const name of Object.keys(h)) es.addEventListener(name, (ev) => h[name](JSON.parse(ev.data)));
  const pill = $("connection");
  pill.title = "the live event stream from the server";
  es.onopen = () => { pill.textContent = "live"; pill.className = "pill pill-on"; };
  es.onerror = () => { pill.textContent = "reconnecting…"; pill.className = "pill pill-off"; };
}

// ---------------------------------------------------------------- training in this browser

async function trainInBrowser(req) {
  delete req.device;
  const limitTest = numberField("limit_test");
  if (limitTest !== undefined) req.limit_test = limitTest;
  const device = state.where === "browser-gpu" ? "gpu" : "cpu";
  state.browserRun += 1;
  const h = handlers("page");
  setTraining(true);
  $("progress-text").textContent = "Preparing…";
  try {
    if (device === "cpu" && state.cpuWorker) await trainInWorker(JSON.stringify(req), state.browserRun, h);
    else await state.web.train(JSON.stringify(req), device, state.browserRun, (name, json) => h[name](JSON.parse(json)));
  } catch (e) {
    h.error({ run: state.browserRun, message: errorText(e) });
  }
}

// ---------------------------------------------------------------- the CPU trainer's threads

/// Starts the threaded CPU trainer (cpu_worker.js) with one thread per core, where the page may
/// share memory with workers (cross-origin isolated); otherwise says why the CPU gets one thread.
async function startCpuWorker() {
  const cores = navigator.hardwareConcurrency || 1;
  state.cpuIsa = state.web.cpu_instruction_set();
  if (cores < 2) return;
  if (!self.crossOriginIsolated) {
    state.threadsWhy = `It uses 1 of this machine's ${cores} cores: more need a cross-origin isolated page ` +
      "(served with the COOP and COEP headers, as `mnist serve` serves it; WEB.md says how to set them up on another host).";
    return;
  }
  try {
    const worker = new Worker("cpu_worker.js", { type: "module" });
    const ready = await new Promise((resolve, reject) => {
      worker.onmessage = ({ data }) => (data.type === "ready" ? resolve(data) : reject(new Error(data.error || data.type)));
      worker.onerror = (e) => reject(new Error(e.message || "the worker did not start"));
      setTimeout(() => reject(new Error("no answer in 30 s")), 30_000);
      worker.postMessage({ type: "init", threads: cores });
    });
    state.cpuWorker = worker;
    state.cpuThreads = ready.threads;
    state.cpuIsa = ready.isa;
  } catch (e) {
    state.threadsWhy = `It runs on one thread: the threaded trainer did not start (${errorText(e)}).`;
  }
}

/// Sends the worker the page's data set if it holds another one (or none yet).
function sendWorkerData() {
  if (state.workerDataset === state.dataset) return;
  const files = state.files[state.dataset] || {};
  for (const name of FILES) {
    if (!files[name]) throw new Error(`the threaded trainer has no copy of ${name}: reload the page`);
    state.cpuWorker.postMessage({ type: "file", dataset: state.dataset, name, bytes: files[name] });
  }
  state.workerDataset = state.dataset;
}

/// Asks the worker one thing and waits for the answer of `type` (or its error).
function askWorker(msg, type, onEvent) {
  return new Promise((resolve, reject) => {
    state.cpuWorker.onmessage = ({ data }) => {
      if (data.type === "event") onEvent(data);
      else if (data.type === type && type !== "end") resolve(data);
      else if (data.type === "end") (data.error ? reject(new Error(data.error)) : resolve(data));
    };
    state.cpuWorker.postMessage(msg);
  });
}

/// A CPU run on the worker's threads: its events drive the page as the page's own runs do, and
/// each epoch's model becomes the page's model (for the drawing pad) too.
async function trainInWorker(request, run, h) {
  sendWorkerData();
  state.workerRun = true;
  try {
    await askWorker({ type: "train", request, run }, "end", (data) => {
      const payload = JSON.parse(data.json);
      if (data.name === "model" && data.model) state.web.adopt_model(data.model, payload.origin);
      h[data.name](payload);
    });
  } finally {
    state.workerRun = false;
  }
}

// ---------------------------------------------------------------- the data set

// MNIST's files keep the keys they always had; Fashion-MNIST's go under fashion/.
const cacheKey = (dataset, name) => new Request(new URL(`mnist-cache/${dataset === "mnist" ? "" : dataset + "/"}${name}`, location.href));

async function openCache() {
  try { return self.caches ? await caches.open(CACHE) : null; } catch (_) { return null; }
}

/// FOLDER/NAME.gz (or FOLDER/NAME) from the site (data/ for MNIST, data/fashion/), or null when
/// the site has neither.
async function fetchFile(dataset, name) {
  const folder = DATASETS[dataset].folder;
  for (const path of [`${folder}${name}.gz`, `${folder}${name}`]) {
    const res = await fetch(path).catch(() => null);
    if (res && res.ok) return new Uint8Array(await res.arrayBuffer());
  }
  return null;
}

function dataText(text) { $("data-text").textContent = text; }

/// Keeps a checked file's bytes for the threaded CPU trainer's worker, which holds a copy of the
/// data set of its own (the page's module and the worker's do not share memory).
function keepFile(dataset, name, bytes) {
  if (!state.cpuWorker) return;
  (state.files[dataset] ||= {})[name] = bytes;
  if (state.workerDataset === dataset) state.workerDataset = null; // sent again before the next run
}

/// Gets the four files of the chosen data set (browser cache first, then the site), checks
/// each in WebAssembly, and caches what passed. Files that are missing leave the page asking
/// the visitor to pick them. A change of data set while it loads starts it over.
async function loadData() {
  if (state.loadingData) return; // the run below notices a change of data set and starts over
  const dataset = $("dataset").value;
  state.web.set_dataset(dataset);
  state.dataset = dataset;
  state.hasData = state.web.has_data();
  if (state.hasData) { dataReady([], {}); return; }
  state.loadingData = true;
  document.body.dataset.data = "loading";
  refreshWhere();
  const from = { cache: 0, site: 0 };
  const missing = [];
  try {
    const cache = await openCache();
    for (const name of FILES) {
      if ($("dataset").value !== dataset) break;
      let bytes = null;
      const hit = cache && (await cache.match(cacheKey(dataset, name)));
      if (hit) {
        bytes = new Uint8Array(await hit.arrayBuffer());
        try { state.web.add_file(name, bytes); keepFile(dataset, name, bytes); from.cache += 1; continue; } catch (_) {
          await cache.delete(cacheKey(dataset, name)); // a damaged copy: fetch it again
        }
      }
      dataText(`Fetching ${DATASETS[dataset].folder}${name}…`);
      bytes = await fetchFile(dataset, name);
      if (!bytes) { missing.push(name); continue; }
      try {
        state.web.add_file(name, bytes);
        keepFile(dataset, name, bytes);
        from.site += 1;
        if (cache) await cache.put(cacheKey(dataset, name), new Response(bytes));
      } catch (e) {
        missing.push(name);
        showMessage(errorText(e));
      }
    }
  } finally {
    state.loadingData = false;
  }
  if ($("dataset").value !== dataset) { loadData(); return; }
  dataReady(missing, from);
}

function dataReady(missing, from) {
  state.hasData = state.web.has_data();
  document.body.dataset.data = state.hasData ? "ready" : "missing";
  const set = DATASETS[state.dataset];
  if (state.hasData) {
    const where = [from.cache && `${from.cache} from this browser's cache`, from.site && `${from.site} from this site`,
      from.picked && `${from.picked} picked from disk`].filter(Boolean).join(", ");
    dataText(`${set.title} ready: 60,000 training and 10,000 test images, every file checked (SHA-256, IDX)${where ? "; " + where : ""}.`);
  } else {
    dataText(`${set.title}: missing ${missing.join(", ")}. This site has no ${set.folder} folder with them: pick the ` +
      `files from your disk (from ${set.source}, or the folder \`mnist train --dataset ${state.dataset}\` downloads them to).`);
  }
  refreshWhere();
  loadSamples();
  // The threaded trainer checks its own copy now, not when Start is pressed.
  if (state.hasData && state.cpuWorker) {
    try { sendWorkerData(); } catch (e) { console.warn(errorText(e)); }
  }
}

$("pick-data").addEventListener("change", async (ev) => {
  showMessage("");
  const cache = await openCache();
  const problems = [];
  let picked = 0;
  for (const file of ev.target.files) {
    const name = file.name.replace(/\.gz$/, "");
    try {
      const bytes = new Uint8Array(await file.arrayBuffer());
      state.web.add_file(file.name, bytes);
      keepFile(state.dataset, name, bytes);
      picked += 1;
      if (cache) await cache.put(cacheKey(state.dataset, name), new Response(bytes));
    } catch (e) {
      problems.push(errorText(e));
    }
  }
  if (problems.length) showMessage(problems.join("\n"));
  ev.target.value = "";
  dataReady(JSON.parse(state.web.missing_files()), { picked });
});

$("forget-data").addEventListener("click", async () => {
  const cache = await openCache();
  if (cache) for (const name of FILES) await cache.delete(cacheKey(state.dataset, name));
  dataText((state.hasData ? "This page still holds the data set; " : "") +
    "the browser's copy is deleted: the next visit fetches the files again.");
});

// ---------------------------------------------------------------- models in the page

$("download-model").addEventListener("click", () => {
  try {
    const bytes = state.web.model_safetensors();
    const url = URL.createObjectURL(new Blob([bytes], { type: "application/octet-stream" }));
    const a = document.createElement("a");
    a.href = url;
    a.download = "mnist-model.safetensors";
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  } catch (e) {
    showMessage("Could not save the model: " + errorText(e));
  }
});

$("load-model").addEventListener("change", async (ev) => {
  const file = ev.target.files[0];
  ev.target.value = "";
  if (!file) return;
  showMessage("");
  try {
    const info = JSON.parse(state.web.load_model(new Uint8Array(await file.arrayBuffer()), file.name));
    showModel(info, "page");
    if (state.samples && state.hasData) loadSamples();
    predictNow();
  } catch (e) {
    showMessage("Could not load the model: " + errorText(e));
  }
});

// ---------------------------------------------------------------- the drawing pad

const pad = $("pad");
// Read back after every stroke: tell the browser to keep the pixels on the CPU side.
const pctx = pad.getContext("2d", { willReadFrequently: true });
let drawing = false;
let inked = false;
let last = null;
let inFlight = false;
let again = false;

function clearPad() {
  pctx.fillStyle = "#000";
  pctx.fillRect(0, 0, pad.width, pad.height);
  inked = false;
  renderProbs(null);
  paintDigit($("seen"), new Array(PIXELS).fill(0), 0);
  $("draw-text").textContent = drawHint();
}

function drawHint() {
  const what = state.classNames[0] === "0" ? "a digit" : "a piece of clothing";
  return `Draw ${what}, white on black, with a mouse or a finger.`;
}

function padPoint(ev) {
  const r = pad.getBoundingClientRect();
  return { x: (ev.clientX - r.left) * (pad.width / r.width), y: (ev.clientY - r.top) * (pad.height / r.height) };
}

function strokeTo(p) {
  pctx.strokeStyle = "#fff";
  pctx.fillStyle = "#fff";
  pctx.lineWidth = 20;
  pctx.lineCap = "round";
  pctx.lineJoin = "round";
  if (last) {
    pctx.beginPath(); pctx.moveTo(last.x, last.y); pctx.lineTo(p.x, p.y); pctx.stroke();
  } else {
    pctx.beginPath(); pctx.arc(p.x, p.y, 10, 0, 2 * Math.PI); pctx.fill();
  }
  last = p;
  inked = true;
}

pad.addEventListener("pointerdown", (ev) => {
  ev.preventDefault();
  pad.setPointerCapture(ev.pointerId);
  drawing = true;
  last = null;
  strokeTo(padPoint(ev));
});
pad.addEventListener("pointermove", (ev) => {
  if (!drawing) return;
  ev.preventDefault();
  strokeTo(padPoint(ev));
  predictSoon();
});
const endStroke = () => { if (drawing) { drawing = false; last = null; predictNow(); } };
pad.addEventListener("pointerup", endStroke);
pad.addEventListener("pointercancel", endStroke);
$("clear").addEventListener("click", clearPad);

// While drawing, at most one request is in flight; the latest drawing is sent when it returns.
function predictSoon() {
  if (inFlight) { again = true; return; }
  predictNow();
}

async function predictNow() {
  if (!inked) return;
  if (!state.model) {
    $("draw-text").textContent = "No model yet: start training (the first epoch makes one) or load one.";
    return;
  }
  if (inFlight) { again = true; return; }
  inFlight = true;
  again = false;
  const img = pctx.getImageData(0, 0, pad.width, pad.height).data;
  const pixels = new Uint8Array(pad.width * pad.height);
  for (let i = 0; i < pixels.length; i++) pixels[i] = img[4 * i]; // grey: the red channel
  try {
    // The page's own model reads the drawing here; only a server model needs the pixels sent.
    const r = state.model === "page"
      ? JSON.parse(state.web.predict_drawing(pixels, pad.width, pad.height))
      : await postJson("api/predict", { width: pad.width, height: pad.height, pixels: Array.from(pixels) });
    // The answer names its outputs after the model's loss: a cross-entropy model's are
    // `probabilities`, an MSE model's are raw `outputs` (scores).
    const scores = r.loss === "mse";
    const outputs = scores ? r.outputs : r.probabilities;
    renderProbs(outputs, scores);
    paintDigit($("seen"), r.input, 0);
    const where = state.model === "page" ? "in this page" : "on the server";
    const name = state.classNames[r.digit] === undefined ? String(r.digit) : state.classNames[r.digit];
    $("draw-text").textContent = `The network reads ${/^[0-9]$/.test(name) ? "a " + name : "“" + name + "”"} ` +
      `(${scores ? "score " + outputs[r.digit].toFixed(3) : pct(outputs[r.digit])}, ${where}).`;
  } catch (e) {
    $("draw-text").textContent = "Could not classify: " + errorText(e);
  } finally {
    inFlight = false;
    if (again) predictNow();
  }
}

/// The ten bars' labels: the class names of the model's data set (digits, or T-shirt/top ...
/// Ankle boot). Returns the list.
function labelProbs() {
  const list = $("probs");
  if (!list.children.length) {
    for (let d = 0; d < 10; d++) {
      const li = document.createElement("li");
      li.innerHTML = `<span class="digit"></span><span class="bar"><div></div></span><span class="pct"></span>`;
      list.appendChild(li);
    }
  }
  [...list.children].forEach((li, d) => { li.querySelector(".digit").textContent = state.classNames[d]; });
  list.classList.toggle("names", state.classNames[0] !== "0");
  return list;
}

/// The ten outputs as bars. A cross-entropy model's are probabilities (softmax); an MSE model's
/// are its raw outputs, trained towards the one-hot label: scores, not probabilities, which can
/// fall below 0 or pass 1. They are shown as numbers and the bars are clipped to [0, 1].
/// `scores`: whether they are an MSE model's (by default, whether the current model's loss is MSE).
function renderProbs(probs, scores = state.modelLoss === "mse") {
  const list = labelProbs();
  const best = probs ? probs.indexOf(Math.max(...probs)) : -1;
  list.setAttribute("aria-label", scores ? "the model's score for each class (MSE: not probabilities)" : "probability of each class");
  [...list.children].forEach((li, d) => {
    const p = probs ? probs[d] : 0;
    li.querySelector(".bar div").style.width = (100 * Math.min(Math.max(p, 0), 1)).toFixed(1) + "%";
    li.querySelector(".pct").textContent = !probs ? "" : scores ? p.toFixed(3) : (100 * p).toFixed(1) + "%";
    li.classList.toggle("best", d === best);
  });
  list.dataset.ready = probs ? "true" : "false";
}

// ---------------------------------------------------------------- start

/// Offers the choices that work now, with the reason beside those that do not, and picks the
/// best one when the current one is not available: WebGPU, then the CPU, then the server.
function refreshWhere() {
  const select = $("where");
  if (state.server && ![...select.options].some((o) => o.value === "server")) {
    select.add(new Option("the server (mnist serve)", "server"));
  }
  const noData = (!state.hasData || state.dataset !== $("dataset").value) &&
    `no ${DATASETS[$("dataset").value].title} data yet`;
  const why = {
    "browser-gpu": state.webError || (state.gpuError && "no WebGPU here (see below)") || noData,
    "browser-cpu": state.webError || noData,
  };
  const label = { "browser-gpu": "this browser (WebGPU)", "browser-cpu": "this browser (CPU, WebAssembly)" };
  for (const opt of select.options) {
    opt.disabled = !available(opt.value);
    if (label[opt.value]) opt.textContent = label[opt.value] + (opt.disabled && why[opt.value] ? ` — ${why[opt.value]}` : "");
  }
  // While a run goes on, or another data set loads, the choice stays as it is.
  if (state.training || state.loadingData) return;
  // A software WebGPU (SwiftShader, lavapipe, WARP: the browser's own CPU rasterizer) is slower
  // than the WebAssembly CPU trainer, so a real GPU comes first and a software one after the CPU.
  const softGpu = state.gpu !== null && state.gpu.software;
  const order = softGpu ? ["browser-cpu", "browser-gpu", "server"] : ["browser-gpu", "browser-cpu", "server"];
  const best = order.find(available);
  // The first choice the page makes follows that order; later, the visitor's choice stays.
  if ((!state.whereChosen || !available(state.where)) && best) setWhere(best);
  else setWhere(state.where);
  showWhereNote();
}

/// One sentence under "Train where" when the page did not pick WebGPU: why, and what to do.
function showWhereNote() {
  const note = $("where-note");
  let text = "";
  if (state.where === "browser-cpu" && state.gpuError) text = state.gpuError;
  else if (state.where === "browser-cpu" && state.gpu && state.gpu.software) {
    text = `This browser's WebGPU is “${state.gpu.name}”, a software adapter that runs on the CPU and is slower than ` +
      "this CPU path, so training runs here; choose WebGPU above to try it anyway.";
  }
  if (state.where === "browser-cpu" && state.threadsWhy) text += (text ? " " : "") + state.threadsWhy;
  note.textContent = text;
  note.hidden = !text;
}

/// Served by `mnist serve`? Its pages carry an `x-served-by` header; any static host answers
/// this HEAD request of the page itself, so nothing 404s on a site without the server.
async function probeServer() {
  try {
    const res = await fetch(location.pathname, { method: "HEAD", cache: "no-store" });
    state.server = res.headers.get("x-served-by") === "mnist serve";
    // `mnist serve` says whether it has the in-browser trainer (pkg/): without it, asking for
    // pkg/mnist_web.js would only log a 404.
    state.trainerMissing = res.headers.get("x-in-browser-trainer") === "not built";
  } catch (_) {
    state.server = false;
  }
}

/// The in-browser trainer (05-mnist/web/build.sh puts it in pkg/).
async function loadWasm() {
  try {
    const mod = await import("./pkg/mnist_web.js");
    await mod.default();
    state.web = new mod.Session();
    state.wasm = mod;
  } catch (e) {
    state.webError = "not built into this site";
    showMessage("The in-browser trainer is missing from this site (" + errorText(e) + "). " +
      "Build the site with `bash 05-mnist/web/build.sh` and serve target/site.");
  }
}

/// WebGPU: the adapter the browser gives, or why there is none (the CPU path is the fallback).
async function probeWebGpu() {
  if (!state.web) return;
  if (!navigator.gpu) {
    state.gpuError = window.isSecureContext
      ? "This browser has no WebGPU, so training runs on the CPU (WebAssembly). Recent Chrome, Edge and Safari " +
        "have it; on Linux, Chrome needs it switched on (chrome://flags/#enable-unsafe-webgpu)."
      : "WebGPU needs a secure page (https, or http on localhost), and this one is not, so training runs on the " +
        "CPU (WebAssembly). Open the page over https or on localhost to train on the GPU.";
    return;
  }
  try {
    state.gpu = JSON.parse(await state.web.webgpu());
  } catch (e) {
    // The Rust side's message says what is missing and what to do.
    state.gpuError = "WebGPU: " + errorText(e);
  }
}

async function start() {
  clearPad();
  drawCharts();
  document.body.dataset.where = state.where;
  await probeServer();
  if (state.trainerMissing) state.webError = "not built into this server (bash 05-mnist/web/build.sh)";
  else await loadWasm();
  if (state.web) await startCpuWorker();
  await probeWebGpu();
  refreshWhere();
  if (state.web) {
    const model = JSON.parse(state.web.model_info());
    if (model) showModel(model, "page");
    checkNetwork();
    await loadData();
  } else {
    dataText("No in-browser trainer on this site: training runs on the server.");
    refreshWhere();
    loadSamples();
  }
  // For tests and the curious (the browser console): the session, and the loss of the first
  // batch of the form's run on "gpu" or "cpu" (same seed, same data order).
  window.mnistPage = {
    state,
    // device: "gpu", "cpu" (the page's own module, one thread) or "cpu-threads" (the worker).
    firstBatchLoss: async (device) => {
      const req = readForm();
      delete req.device;
      if (device !== "cpu-threads") return state.web.first_batch_loss(JSON.stringify(req), device);
      if (!state.cpuWorker) throw new Error("no threaded CPU trainer in this page");
      sendWorkerData();
      return (await askWorker({ type: "first-batch", request: JSON.stringify(req) }, "loss")).value;
    },
  };
  document.body.dataset.ready = "true";
}

start();
