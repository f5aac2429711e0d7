// TensorFlow.js training the page's default network, for the table in WEB.md (see tfjs.html).
// The data: MNIST's four IDX files from ../data/, gunzipped by the browser, pixels scaled to
// [0, 1] as the page's trainer scales them. Each epoch: model.fit over all 60,000 training
// images (shuffled), timed from the epoch's start to its end, then the test accuracy.

/* global tf */
const q = new URLSearchParams(location.search);
const BACKENDS = (q.get("backends") || "webgpu,webgl,wasm").split(",");
const EPOCHS = Number(q.get("epochs") || 3);
const BATCH = 64;

const out = document.getElementById("log");
out.textContent = "";
function log(obj) {
  const line = "peer " + JSON.stringify(obj);
  console.log(line);
  out.textContent += line + "\n";
}

/// An IDX file's payload (after its header of `headerBytes`), gunzipped.
async function idx(name, headerBytes) {
  const res = await fetch(`../data/${name}.gz`);
  if (!res.ok) throw new Error(`../data/${name}.gz: ${res.status}`);
  const raw = await new Response(res.body.pipeThrough(new DecompressionStream("gzip"))).arrayBuffer();
  return new Uint8Array(raw, headerBytes);
}

async function dataset(images, labels) {
  const px = await idx(images, 16), lb = await idx(labels, 8);
  const n = lb.length;
  const x = tf.tidy(() => tf.tensor2d(px, [n, 784], "int32").toFloat().div(255));
  const y = tf.tidy(() => tf.oneHot(tf.tensor1d(lb, "int32"), 10).toFloat());
  return { x, y, n };
}

function model() {
  const m = tf.sequential();
  m.add(tf.layers.dense({ inputShape: [784], units: 128, activation: "relu" }));
  m.add(tf.layers.dense({ units: 10, activation: "softmax" }));
  m.compile({ optimizer: tf.train.adam(0.001), loss: "categoricalCrossentropy", metrics: ["accuracy"] });
  return m;
}

async function run(backend) {
  if (backend === "wasm") tf.wasm.setWasmPaths(new URL("vendor/", location.href).href);
  if (!(await tf.setBackend(backend))) throw new Error(`backend ${backend} did not start`);
  await tf.ready();
  const adapter = backend === "webgpu" && navigator.gpu
    ? await navigator.gpu.requestAdapter().then((a) => a && (a.info ? `${a.info.vendor} ${a.info.architecture} ${a.info.description}`.trim() : "webgpu"))
    : backend;
  const train = await dataset("train-images-idx3-ubyte", "train-labels-idx1-ubyte");
  const test = await dataset("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte");
  const m = model();
  let start = 0;
  await m.fit(train.x, train.y, {
    batchSize: BATCH, epochs: EPOCHS, shuffle: true, verbose: 0,
    callbacks: {
      onEpochBegin: async () => { start = performance.now(); },
      onEpochEnd: async (epoch, logs) => {
        const seconds = (performance.now() - start) / 1000;
        const [, acc] = m.evaluate(test.x, test.y, { batchSize: 1000 });
        const testAcc = (await acc.data())[0];
        log({ peer: "tfjs 4.22.0", backend, adapter, threads: backend === "wasm" ? tf.wasm.getThreadsCount?.() ?? null : null,
          epoch: epoch + 1, seconds, images_per_sec: train.n / seconds, test_acc: testAcc, train_loss: logs.loss });
      },
    },
  });
  tf.dispose([train.x, train.y, test.x, test.y]);
  m.dispose();
}

for (const backend of BACKENDS) {
  try { await run(backend); } catch (e) { log({ peer: "tfjs 4.22.0", backend, error: (e && e.message) || String(e) }); }
}
log({ done: true });
