// The page's logic, plain JavaScript with no build step and no libraries.
//
// - The form posts a JSON training request to POST /api/train; Stop posts to /api/stop.
// - GET /api/events is a stream of server-sent events: `snapshot` (everything, sent first on
//   every connection, so a reload or a reconnect restores the page), `start`, `progress`,
//   `epoch`, `samples`, `model`, `done` and `error`.
// - The drawing pad sends its raw grey pixels to POST /api/predict; the server preprocesses
//   them like MNIST (see src/serve/) and answers ten probabilities and the 28x28 input it used.
"use strict";

const $ = (id) => document.getElementById(id);
const PIXELS = 28 * 28;

const state = {
  training: false,
  run: null,
  epochsTotal: 0,
  history: [],      // one object per finished epoch of the current (or last) run
  samples: null,    // { pixels: [n * 784], labels: [n], predicted: [n] | null }
  hasModel: false,
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

// ---------------------------------------------------------------- the training form

function readForm() {
  const hiddenText = $("hidden").value.trim();
  const hidden = hiddenText === "" ? [] : hiddenText.split(/[\s,]+/).filter(Boolean).map(Number);
  const req = {
    hidden,
    lr: Number($("lr").value),
    batch_size: Number($("batch_size").value),
    epochs: Number($("epochs").value),
    optimizer: $("optimizer").value,
    momentum: Number($("momentum").value || 0),
    schedule: $("schedule").value,
    device: $("device").value,
    seed: Number($("seed").value || 0),
  };
  const limit = $("limit_train").value.trim();
  if (limit !== "") req.limit_train = Number(limit);
  return req;
}

function fillForm(cfg) {
  if (!cfg) return;
  $("hidden").value = cfg.hidden.join(",");
  $("lr").value = cfg.lr;
  $("batch_size").value = cfg.batch_size;
  $("epochs").value = cfg.epochs;
  $("optimizer").value = cfg.optimizer;
  $("momentum").value = cfg.momentum;
  $("schedule").value = cfg.schedule;
  $("device").value = cfg.device;
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
  if (!on) $("momentum").disabled = $("optimizer").value === "adam";
}

$("train-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  showMessage("");
  $("start").disabled = true;
  try {
    await postJson("/api/train", readForm());
    // The `start` event that follows updates the page.
  } catch (e) {
    showMessage("Could not start training: " + e.message);
    $("start").disabled = state.training;
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

$("stop").addEventListener("click", async () => {
  $("stop").disabled = true;
  try {
    await postJson("/api/stop");
    $("progress-text").textContent += " Stopping after the current batch…";
  } catch (e) {
    showMessage("Could not stop: " + e.message);
  }
});

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

function showModel(model) {
  state.hasModel = !!model;
  $("model").textContent = model ? model.description : "none yet: train one, or start the server with --model";
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
  const x = (i) => left + (n <= 1 ? 0.5 : i / (n - 1)) * (W - left - right) * (n <= 1 ? 1 : 1);
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
  for (let i = 0; i < s.labels.length; i++) {
    const cell = document.createElement("div");
    cell.className = "sample";
    const c = document.createElement("canvas");
    c.width = 28; c.height = 28;
    paintDigit(c, s.pixels, i * PIXELS);
    const caption = document.createElement("div");
    if (s.predicted) {
      const ok = s.predicted[i] === s.labels[i];
      right += ok ? 1 : 0;
      caption.innerHTML = `<span class="${ok ? "right" : "wrong"}">${s.predicted[i]}</span> (true ${s.labels[i]})`;
    } else {
      caption.textContent = `true ${s.labels[i]}`;
    }
    cell.append(c, caption);
    grid.appendChild(cell);
  }
  $("samples-text").textContent = s.predicted
    ? `predicted by the current model (green: right, red: wrong): ${right} of ${s.labels.length} right`
    : "no model yet: predictions appear after the first epoch";
}

async function loadSamples() {
  try {
    const res = await fetch("/api/samples");
    const data = await res.json();
    if (!res.ok) throw new Error(data.error || res.statusText);
    state.samples = data;
    renderSamples();
  } catch (e) {
    $("samples-text").textContent = "could not load the test digits: " + e.message;
  }
}

// ---------------------------------------------------------------- the event stream

function applySnapshot(s) {
  state.run = s.run;
  state.epochsTotal = s.config ? s.config.epochs : 0;
  state.history = s.history || [];
  fillForm(s.config);
  setTraining(s.training);
  showAdapter(s.adapter);
  showModel(s.model);
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
  if (state.samples && s.samples_predicted !== undefined) {
    state.samples.predicted = s.samples_predicted;
    renderSamples();
  }
}

function formatLr(lr) { return Number(lr.toPrecision(3)).toString(); }

function progressText(p) {
  const ips = p.images_per_sec ? ` · ${Math.round(p.images_per_sec).toLocaleString("en-US")} images/s` : "";
  return `Epoch ${p.epoch}/${state.epochsTotal} · lr ${formatLr(p.lr)} · batch ${p.batch}/${p.batches} · ` +
    `loss ${p.loss.toFixed(4)}${ips}`;
}

function connect() {
  const es = new EventSource("/api/events");
  const on = (name, fn) => es.addEventListener(name, (ev) => fn(JSON.parse(ev.data)));
  es.onopen = () => { $("connection").textContent = "live"; $("connection").className = "pill pill-on"; };
  es.onerror = () => { $("connection").textContent = "reconnecting…"; $("connection").className = "pill pill-off"; };
  on("snapshot", applySnapshot);
  on("start", (e) => {
    showMessage("");
    state.run = e.run;
    state.epochsTotal = e.config.epochs;
    state.history = [];
    fillForm(e.config);
    setTraining(true);
    showAdapter(e.adapter);
    drawCharts();
    renderEpochTable();
    setProgress(1, 0, 1, `Started: ${e.train_images.toLocaleString("en-US")} training images, ` +
      `${e.batches_per_epoch} batches per epoch, on ${e.adapter.name}.`);
  });
  on("progress", (p) => setProgress(p.epoch, p.batch, p.batches, progressText(p)));
  on("epoch", (e) => {
    state.history.push(e);
    setProgress(e.epoch, 1, 1, `Epoch ${e.epoch}/${state.epochsTotal}: test accuracy ${pct(e.test_acc)}, ` +
      `test loss ${e.test_loss.toFixed(4)}, ${e.seconds.toFixed(2)} s.`);
    drawCharts();
    renderEpochTable();
  });
  on("samples", (e) => {
    if (state.samples) { state.samples.predicted = e.predicted; renderSamples(); }
  });
  on("model", (m) => { showModel(m); predictNow(); });
  on("done", (e) => {
    setTraining(false);
    $("progress-text").textContent = e.message;
  });
  on("error", (e) => {
    setTraining(false);
    $("progress-text").textContent = "Training failed.";
    showMessage(e.message);
  });
}

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
  $("draw-text").textContent = "Draw a digit, white on black, with a mouse or a finger.";
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
  if (!state.hasModel) {
    $("draw-text").textContent = "No model yet: start training (the first epoch makes one) or load one with --model.";
    return;
  }
  if (inFlight) { again = true; return; }
  inFlight = true;
  again = false;
  const img = pctx.getImageData(0, 0, pad.width, pad.height).data;
  const pixels = new Array(pad.width * pad.height);
  for (let i = 0; i < pixels.length; i++) pixels[i] = img[4 * i]; // grey: the red channel
  try {
    const r = await postJson("/api/predict", { width: pad.width, height: pad.height, pixels });
    renderProbs(r.probabilities);
    paintDigit($("seen"), r.input, 0);
    $("draw-text").textContent = `The network reads a ${r.digit} (${pct(r.probabilities[r.digit])}).`;
  } catch (e) {
    $("draw-text").textContent = "Could not classify: " + e.message;
  } finally {
    inFlight = false;
    if (again) predictNow();
  }
}

function renderProbs(probs) {
  const list = $("probs");
  if (!list.children.length) {
    for (let d = 0; d < 10; d++) {
      const li = document.createElement("li");
      li.innerHTML = `<span class="digit">${d}</span><span class="bar"><div></div></span><span class="pct"></span>`;
      list.appendChild(li);
    }
  }
  const best = probs ? probs.indexOf(Math.max(...probs)) : -1;
  [...list.children].forEach((li, d) => {
    const p = probs ? probs[d] : 0;
    li.querySelector(".bar div").style.width = (100 * p).toFixed(1) + "%";
    li.querySelector(".pct").textContent = probs ? (100 * p).toFixed(1) + "%" : "";
    li.classList.toggle("best", d === best);
  });
  list.dataset.ready = probs ? "true" : "false";
}

// ---------------------------------------------------------------- start

clearPad();
drawCharts();
loadSamples().then(connect);
