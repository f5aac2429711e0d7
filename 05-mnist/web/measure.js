// The measuring page (measure.html): trains each run of `?runs=` on MNIST from this site's
// data/ folder and logs `measure {...}` lines: the WebGPU adapter and the limits its device was
// granted (when a run is on the GPU), one per epoch, then `measure {"done": true}`.
// Each line names the device as the trainer reports it (the WebGPU adapter, or the CPU with
// its threads and vector instructions).

import init, { Session } from "./pkg/mnist_web.js";

const q = new URLSearchParams(location.search);
const RUNS = (q.get("runs") || "gpu").split(",");
const EPOCHS = Number(q.get("epochs") || 3);
const LAYERS = q.get("layers") || "784-128-relu-10";
const BATCH = Number(q.get("batch") || 64);
const TRAIN = q.get("train"); // the first N training images only (all when absent)
const THREADS = Number(q.get("threads") || navigator.hardwareConcurrency); // cpu-threads' pool
const FILES = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"];

const out = document.getElementById("log");
out.textContent = "";
function log(obj) {
  const line = "measure " + JSON.stringify(obj);
  console.log(line);
  out.textContent += line + "\n";
}

async function fileBytes(name) {
  const res = await fetch(`data/${name}.gz`);
  if (!res.ok) throw new Error(`data/${name}.gz: ${res.status}`);
  return new Uint8Array(await res.arrayBuffer());
}

/// The threaded trainer (cpu_worker.js) with THREADS threads, holding the data set.
async function startWorker(files) {
  const worker = new Worker("cpu_worker.js", { type: "module" });
  const next = (type) => new Promise((resolve, reject) => {
    worker.onmessage = ({ data }) => (data.type === type ? resolve(data) : data.type === "end" && reject(new Error(data.error)));
  });
  const ready = next("ready");
  worker.postMessage({ type: "init", threads: THREADS });
  await ready;
  for (const [name, bytes] of Object.entries(files)) worker.postMessage({ type: "file", dataset: "mnist", name, bytes });
  return worker;
}

/// One run on the worker: resolves when it ends, calling `onEvent(name, payload)` on the way.
function trainOnWorker(worker, request, run, onEvent) {
  return new Promise((resolve, reject) => {
    worker.onmessage = ({ data }) => {
      if (data.type === "event") onEvent(data.name, JSON.parse(data.json));
      else if (data.type === "end") (data.error ? reject(new Error(data.error)) : resolve());
    };
    worker.postMessage({ type: "train", request, run });
  });
}

async function main() {
  await init();
  const session = new Session();
  session.set_dataset("mnist");
  const files = {};
  for (const name of FILES) {
    files[name] = await fileBytes(name);
    session.add_file(name, files[name]);
  }
  // The limits the page's WebGPU device was granted: they decide which kernels it runs
  // (browser-measure.sh runs `mnist train --gpu-limits` with them).
  if (RUNS.some((r) => r.startsWith("gpu"))) {
    try {
      log({ webgpu: JSON.parse(await session.webgpu()) });
    } catch (e) {
      log({ webgpu: null, error: (e && e.message) || String(e) });
    }
  }
  let worker = null;
  for (const [i, spec] of RUNS.entries()) {
    const [device, steps] = spec.split(":");
    const request = JSON.stringify({ layers: LAYERS, batch_size: BATCH, epochs: EPOCHS, ...(TRAIN ? { limit_train: Number(TRAIN) } : {}), ...(steps ? { steps_per_submit: Number(steps) } : {}) });
    let adapter = null;
    const onEvent = (name, e) => {
      if (name === "start") adapter = e.adapter.name;
      if (name === "epoch") {
        const m = e;
        log({ run: spec, adapter, layers: LAYERS, batch: BATCH, epoch: m.epoch, seconds: m.seconds, record_seconds: m.record_seconds, images_per_sec: m.images_per_sec,
          test_acc: m.test_acc, train_loss: m.train_loss });
      }
    };
    try {
      if (device === "cpu-threads") {
        if (!self.crossOriginIsolated) throw new Error("cpu-threads needs a cross-origin isolated page (COOP and COEP headers)");
        worker ||= await startWorker(files);
        await trainOnWorker(worker, request, i + 1, onEvent);
      } else {
        await session.train(request, device, i + 1, (name, json) => onEvent(name, JSON.parse(json)));
      }
    } catch (e) {
      log({ run: spec, error: (e && e.message) || String(e) });
    }
  }
  log({ done: true });
}

main().catch((e) => log({ error: (e && e.message) || String(e), done: true }));
