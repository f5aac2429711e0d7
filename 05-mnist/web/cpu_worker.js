// The CPU trainer on several threads, in a Web Worker: app.js starts this worker for a run on
// "this browser (CPU)" when the page is cross-origin isolated (the COOP and COEP headers; only
// then may workers share memory). It loads the threaded build of the trainer (pkg/threads/,
// made by 05-mnist/web/build.sh with the `threads` feature), whose rayon pool is more workers
// on the same WebAssembly memory (wasm-bindgen-rayon), and runs the same `Session.train` the
// page runs on one thread. A worker may block while the pool works; the page's own thread
// never does, so the page stays responsive however long a step takes.
//
// Messages from the page:     { type: "init", threads }            -> { type: "ready", threads, isa }
//                             { type: "file", dataset, name, bytes } (each of the four files, checked again here)
//                             { type: "train", request, run }      -> { type: "event", name, json, model? } ..., then { type: "end", error? }
//                             { type: "first-batch", request }     -> { type: "loss", value } or { type: "end", error }
//                             { type: "stop" }
// A `model` event carries the model's safetensors bytes too, so the page's own session (which
// reads the drawing pad) gets the model the run made.

import init, { initThreadPool, Session } from "./pkg/threads/mnist_web.js";

let session = null;

const errorText = (e) => (e && e.message) || String(e);

async function handle(msg) {
  switch (msg.type) {
    case "init": {
      await init();
      await initThreadPool(msg.threads);
      session = new Session();
      postMessage({ type: "ready", threads: msg.threads, isa: session.cpu_instruction_set() });
      break;
    }
    case "file":
      session.set_dataset(msg.dataset);
      session.add_file(msg.name, msg.bytes);
      break;
    case "train": {
      const onEvent = (name, json) => {
        const out = { type: "event", name, json };
        if (name === "model") out.model = session.model_safetensors();
        postMessage(out);
      };
      try {
        await session.train(msg.request, "cpu", msg.run, onEvent);
        postMessage({ type: "end" });
      } catch (e) {
        postMessage({ type: "end", error: errorText(e) });
      }
      break;
    }
    case "first-batch":
      try {
        postMessage({ type: "loss", value: await session.first_batch_loss(msg.request, "cpu") });
      } catch (e) {
        postMessage({ type: "end", error: errorText(e) });
      }
      break;
    case "stop":
      if (session) session.stop();
      break;
  }
}

// Messages are handled one at a time in arrival order, except `stop`, which must reach a run in
// flight (the run hands control back to this worker's event loop a few times a second).
let queue = Promise.resolve();
self.onmessage = ({ data }) => {
  if (data.type === "stop") { handle(data); return; }
  queue = queue.then(() => handle(data)).catch((e) => postMessage({ type: "end", error: errorText(e) }));
};
