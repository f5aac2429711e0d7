// Training in the browser, tested in a real headless Chromium (Debian's `chromium`, driven by
// playwright-core). The site (05-mnist/web/build.sh's folder) is served by a tiny static server
// below, with MNIST under data/: no `mnist serve`, no training API. It checks:
//   1. WebGPU (SwiftShader on a machine without a GPU) trains one epoch on E2E_TRAIN images and
//      shows a test accuracy of at least 85%; no request for training reaches a server;
//   2. the same with WebGPU turned off, on the WebAssembly CPU path (the fallback the page
//      picks by itself);
//   3. a drawn digit gets ten probabilities that add up to 100%, computed in the page;
//   4. WebGPU and the CPU agree on the loss of the first batch (same seed, same order);
//   and that a reload takes the data set from the browser's cache, that the trained model
//   downloads as safetensors and loads back. The CPU run also checks the form's choices: the
//   Rust parser's verdict on a layer list shows under the field (an error naming the layer),
//   and, with Fashion-MNIST chosen (its files under data/fashion/), a second run trains a layer
//   list with dropout and names the grid's images and the bars with Fashion-MNIST's classes.
//   Screenshots go to OUT_DIR.
//
// Usage: node in_browser.mjs SITE_DIR MNIST_DIR FASHION_MNIST_DIR OUT_DIR
// Environment: CHROMIUM (default /usr/bin/chromium); E2E_TRAIN (training images, 5000),
// E2E_TEST (test images, 2000: SwiftShader evaluates about as fast as it trains, so the whole
// test set would double the WebGPU run). `cargo test -p mnist --test in_browser` builds the
// site and runs this.

import { createServer } from "node:http";
import { createReadStream, existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { extname, join, normalize } from "node:path";
import { chromium } from "playwright-core";

const [site, mnistDir, fashionDir, outDir] = process.argv.slice(2);
if (!site || !mnistDir || !fashionDir || !outDir) {
  console.error("usage: node in_browser.mjs SITE_DIR MNIST_DIR FASHION_MNIST_DIR OUT_DIR");
  process.exit(2);
}
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const TRAIN = process.env.E2E_TRAIN || "5000";
const TEST = process.env.E2E_TEST || "2000";
const MIN_ACCURACY = 0.85;
// Fashion-MNIST is harder: one epoch on 5,000 images gets about 75-80%; chance is 10%.
const MIN_FASHION_ACCURACY = 0.65;
const FASHION_CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"];
// The first batch's mean loss on WebGPU and on the CPU: the same f32 math in a different order
// (a parallel reduction on the GPU, sequential sums on the CPU), so a relative difference of a
// few parts per million is expected; 1e-4 leaves room and still catches any real disagreement.
const LOSS_REL_TOL = 1e-4;
const TIMEOUT_MS = 480_000;

const t0 = Date.now();
const log = (...a) => console.log(`[in-browser] ${((Date.now() - t0) / 1000).toFixed(1).padStart(5)} s`, ...a);
function fail(msg) {
  throw new Error(msg);
}
const watchdog = setTimeout(() => {
  console.error(`[in-browser] FAIL: no result after ${TIMEOUT_MS / 1000} s`);
  process.exit(1);
}, TIMEOUT_MS);

// ------------------------------------------------------------------ a static server

const TYPES = {
  ".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
  ".wasm": "application/wasm", ".gz": "application/gzip", ".png": "image/png",
};
/// Every request, so the test can say what the page asked for.
const requests = [];

function serveStatic() {
  const server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url, "http://x").pathname);
    requests.push(`${req.method} ${path}`);
    let file = null;
    if (path.startsWith("/data/fashion/")) {
      file = join(fashionDir, normalize(path.slice("/data/fashion/".length)).replace(/^(\.\.[/\\])+/, ""));
    } else if (path.startsWith("/data/")) {
      file = join(mnistDir, normalize(path.slice("/data/".length)).replace(/^(\.\.[/\\])+/, ""));
    } else {
      file = join(site, normalize(path === "/" ? "/index.html" : path).replace(/^(\.\.[/\\])+/, ""));
    }
    if (!file || !existsSync(file) || !statSync(file).isFile()) {
      res.writeHead(404, { "Content-Type": "text/plain" });
      res.end("not found");
      return;
    }
    res.writeHead(200, { "Content-Type": TYPES[extname(file)] || "application/octet-stream", "Cache-Control": "no-cache" });
    createReadStream(file).pipe(res);
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

// ------------------------------------------------------------------ the browser

async function launch(webgpu) {
  const userDataDir = mkdtempSync(join(tmpdir(), "mnist-in-browser-"));
  const args = [
    "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
  ];
  // With the flag, Chromium offers WebGPU even without a GPU (SwiftShader, its software Vulkan).
  // Without it, on Linux, there is no adapter: the page must fall back to the CPU by itself.
  if (webgpu) args.push("--enable-unsafe-webgpu");
  else args.push("--disable-features=WebGPU,Vulkan");
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM, headless: true, args, viewport: { width: 1280, height: 900 }, deviceScaleFactor: 1,
    acceptDownloads: true,
  });
  const page = context.pages()[0] || (await context.newPage());
  const problems = [];
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  page.on("console", (m) => {
    if (m.type() === "error") problems.push("console error: " + m.text());
    if (process.env.E2E_VERBOSE) console.log("  console:", m.text());
  });
  return { context, page, problems, userDataDir, close: async () => {
    await context.close().catch(() => {});
    rmSync(userDataDir, { recursive: true, force: true });
  } };
}

async function openPage(page, url) {
  await page.goto(url);
  await page.waitForSelector('body[data-ready="true"]', { timeout: 120_000 });
}

/// Trains one run of the network `layers` in the page and returns the first row of the epoch
/// table.
async function trainOneEpoch(page, where, layers = "128", minAccuracy = MIN_ACCURACY) {
  const value = await page.locator("#where").inputValue();
  if (value !== where) fail(`the page chose "${value}" to train, expected "${where}"`);
  await page.fill("#layers", layers);
  await page.fill("#epochs", "1");
  await page.fill("#limit_train", TRAIN);
  await page.fill("#limit_test", TEST);
  const started = Date.now();
  await page.click("#start");
  await page.locator("#progress-text", { hasText: /Finished 1 epoch|failed/ }).waitFor({ timeout: 240_000 });
  const seconds = (Date.now() - started) / 1000;
  const outcome = await page.locator("#progress-text").innerText();
  if (!outcome.startsWith("Finished")) fail(`${where}: ${outcome} ${await page.locator("#message").innerText()}`);
  const cells = await page.locator("#epochs-table tbody tr").first().locator("td").allInnerTexts();
  const testAcc = parseFloat(cells[5]) / 100;
  log(`${where}: epoch row [${cells.join(" | ")}] (${seconds.toFixed(1)} s from Start to the end of the test)`);
  if (!(testAcc >= minAccuracy)) fail(`${where}: test accuracy ${cells[5]}, expected at least ${100 * minAccuracy}%`);
  return { cells, seconds };
}

const SEVEN = [[[70, 60], [210, 60], [150, 150], [115, 240]]];

async function drawAndRead(page) {
  // The mouse draws at page coordinates inside the window: the pad must be in view.
  await page.locator("#pad").scrollIntoViewIfNeeded();
  const box = await page.locator("#pad").boundingBox();
  const at = (x, y) => [box.x + (x / 280) * box.width, box.y + (y / 280) * box.height];
  for (const points of SEVEN) {
    await page.mouse.move(...at(...points[0]));
    await page.mouse.down();
    for (const p of points.slice(1)) await page.mouse.move(...at(...p), { steps: 8 });
    await page.mouse.up();
  }
  await page.waitForSelector('#probs[data-ready="true"]', { timeout: 30_000 });
  const probs = (await page.locator("#probs .pct").allInnerTexts()).map((t) => parseFloat(t));
  if (probs.length !== 10 || probs.some((p) => !Number.isFinite(p) || p < 0 || p > 100)) {
    fail(`expected ten probabilities, got ${JSON.stringify(probs)}`);
  }
  const total = probs.reduce((a, b) => a + b, 0);
  if (Math.abs(total - 100) > 1.5) fail(`the probabilities add up to ${total}%, not 100%`);
  const text = await page.locator("#draw-text").innerText();
  if (!text.includes("in this page")) fail(`the drawing was not read in the page: "${text}"`);
  log("drawn 7:", probs.join(" "), "->", text);
}

/// Requests that would mean training or predicting happened on a server.
function serverCalls(since) {
  return requests.slice(since).filter((r) => /\/api\/(train|stop|predict|events)/.test(r));
}

// ------------------------------------------------------------------ the test

const server = await serveStatic();
const url = `http://127.0.0.1:${server.address().port}/`;
const open = [];
try {
  log("site", site, "at", url);

  // 1, 3, 4: WebGPU.
  const gpu = await launch(true);
  open.push(gpu);
  await openPage(gpu.page, url);
  const adapter = await gpu.page.locator("#adapter").innerText();
  const warning = await gpu.page.locator("#adapter-warning").innerText();
  log("WebGPU adapter:", adapter, "| warning:", warning.replace(/\s+/g, " "));
  if (!/swiftshader/i.test(adapter) && !warning) log("(a hardware adapter: no software warning expected)");
  if (/swiftshader/i.test(adapter) && !/SOFTWARE/.test(warning)) fail("SwiftShader is a software adapter, and the page must say so");
  const dataText = await gpu.page.locator("#data-text").innerText();
  if (!dataText.startsWith("MNIST ready")) fail(`the data set did not load: ${dataText}`);

  // 4. The first batch's loss, WebGPU against the CPU (batch 64, seed 42, epoch 1's order).
  await gpu.page.fill("#limit_train", TRAIN);
  const lossGpu = await gpu.page.evaluate(() => window.mnistPage.firstBatchLoss("gpu"));
  const lossCpu = await gpu.page.evaluate(() => window.mnistPage.firstBatchLoss("cpu"));
  const rel = Math.abs(lossGpu - lossCpu) / Math.abs(lossCpu);
  log(`first batch loss: WebGPU ${lossGpu}, CPU ${lossCpu}, relative difference ${rel.toExponential(2)} (tolerance ${LOSS_REL_TOL})`);
  if (!(rel <= LOSS_REL_TOL)) fail(`WebGPU and the CPU disagree on the first batch's loss: ${lossGpu} vs ${lossCpu}`);

  // 1. One epoch on WebGPU.
  let mark = requests.length;
  const gpuRun = await trainOneEpoch(gpu.page, "browser-gpu");
  if (serverCalls(mark).length) fail(`the page called a server: ${serverCalls(mark).join(", ")}`);

  // 3. A drawing, read by the model in the page.
  mark = requests.length;
  await drawAndRead(gpu.page);
  if (serverCalls(mark).length) fail(`the drawing went to a server: ${serverCalls(mark).join(", ")}`);
  await gpu.page.screenshot({ path: join(outDir, "in-browser-webgpu.png"), fullPage: true });
  log("screenshot:", join(outDir, "in-browser-webgpu.png"));

  // The model downloads as safetensors (the Rust test reads it with `mnist eval`) and loads back.
  const [download] = await Promise.all([gpu.page.waitForEvent("download"), gpu.page.click("#download-model")]);
  const modelPath = join(outDir, "in-browser-model.safetensors");
  await download.saveAs(modelPath);
  log("model downloaded:", modelPath, statSync(modelPath).size, "bytes");
  await gpu.page.setInputFiles("#load-model", modelPath);
  await gpu.page.locator("#model", { hasText: "loaded from in-browser-model.safetensors" }).waitFor({ timeout: 10_000 });

  // A reload takes the data set from the browser's cache: no request for data/ this time.
  mark = requests.length;
  await openPage(gpu.page, url);
  const refetched = requests.slice(mark).filter((r) => r.includes("/data/"));
  const reloadText = await gpu.page.locator("#data-text").innerText();
  log("after a reload:", reloadText);
  if (refetched.length || !reloadText.includes("4 from this browser's cache")) {
    fail(`a reload fetched the data again: ${refetched.join(", ") || reloadText}`);
  }
  if (gpu.problems.length) fail(gpu.problems.join("\n"));
  await open.pop().close();

  // 2. No WebGPU: the page falls back to the WebAssembly CPU path by itself.
  const cpu = await launch(false);
  open.push(cpu);
  await openPage(cpu.page, url);
  const hasGpu = await cpu.page.evaluate(async () => !!(navigator.gpu && (await navigator.gpu.requestAdapter())));
  if (hasGpu) fail("WebGPU is still available with --disable-features=WebGPU");
  const gpuOption = await cpu.page.locator('#where option[value="browser-gpu"]').innerText();
  log("without WebGPU the choice reads:", gpuOption);

  // The Rust parser's verdict under the Layers field, as it is typed: an error names the layer.
  await cpu.page.fill("#layers", "784-128-relu-dropout1.5-10");
  const badCheck = await cpu.page.locator("#layers-check").innerText();
  log("layers 784-128-relu-dropout1.5-10:", badCheck);
  if (!badCheck.includes("layer 3 (Dropout(1.5))") || !(await cpu.page.locator("#layers-check.bad").count())) {
    fail(`no error naming the dropout layer under the field: "${badCheck}"`);
  }
  const layers = "784-256-relu-dropout0.1-10";
  await cpu.page.fill("#layers", layers);
  const goodCheck = await cpu.page.locator("#layers-check").innerText();
  if (goodCheck !== `${layers}: 203,530 parameters`) fail(`the field's check reads "${goodCheck}"`);

  // The same network as on WebGPU, so that the two epoch times compare.
  mark = requests.length;
  const cpuRun = await trainOneEpoch(cpu.page, "browser-cpu");
  if (serverCalls(mark).length) fail(`the page called a server: ${serverCalls(mark).join(", ")}`);
  await cpu.page.screenshot({ path: join(outDir, "in-browser-cpu.png"), fullPage: true });

  // Fashion-MNIST, with the layer list above: its files come from data/fashion/, and its class
  // names show.
  await cpu.page.selectOption("#dataset", "fashion");
  await cpu.page.locator("#data-text", { hasText: /Fashion-MNIST ready|missing/ }).waitFor({ timeout: 120_000 });
  const fashionText = await cpu.page.locator("#data-text").innerText();
  log("after choosing Fashion-MNIST:", fashionText);
  if (!fashionText.startsWith("Fashion-MNIST ready")) fail(`Fashion-MNIST did not load: ${fashionText}`);
  const fashionRun = await trainOneEpoch(cpu.page, "browser-cpu", layers, MIN_FASHION_ACCURACY);
  const title = await cpu.page.locator("#samples-title").innerText();
  const captions = await cpu.page.locator("#samples .sample div").allInnerTexts();
  const bars = await cpu.page.locator("#probs .digit").allInnerTexts();
  log("Fashion-MNIST grid:", title, "|", captions.slice(0, 4).join(" | "), "| bars:", bars.join(", "));
  if (title !== "Test images (Fashion-MNIST)") fail(`the grid's title reads "${title}"`);
  if (captions.length !== 24 || !captions.every((c) => FASHION_CLASSES.some((n) => c.startsWith(n)))) {
    fail(`the grid does not name Fashion-MNIST's classes: ${JSON.stringify(captions)}`);
  }
  if (JSON.stringify(bars) !== JSON.stringify(FASHION_CLASSES)) fail(`the bars read ${JSON.stringify(bars)}`);
  const fashionModel = await cpu.page.locator("#model").innerText();
  if (!fashionModel.startsWith(`${layers}, trained in this browser`)) fail(`the model is "${fashionModel}", not ${layers}`);
  log(`Fashion-MNIST, ${layers}: epoch row [${fashionRun.cells.join(" | ")}]`);
  await cpu.page.screenshot({ path: join(outDir, "in-browser-fashion.png"), fullPage: true });
  if (cpu.problems.length) fail(cpu.problems.join("\n"));

  log(`epoch seconds (training only, as the table shows): WebGPU ${gpuRun.cells[6]}, CPU (wasm) ${cpuRun.cells[6]}`);
  log("requests:", [...new Set(requests.map((r) => r.replace(/\?.*/, "")))].join(", "));
  log("PASS");
} catch (e) {
  console.error("[in-browser] FAIL:", e.message);
  process.exitCode = 1;
} finally {
  for (const b of open) await b.close();
  server.close();
  clearTimeout(watchdog);
}
