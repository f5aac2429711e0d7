// Training in the browser, tested in a real headless Chromium (Debian's `chromium`, driven by
// playwright-core). The site (05-mnist/web/build.sh's folder) is served by a tiny static server
// below, with MNIST under data/: no `mnist serve`, no training API. Two copies of that server:
// one sends the COOP and COEP headers (the page is cross-origin isolated, so the CPU path may use
// threads), one does not (one thread, as on a plain static host). It checks:
//   1. with WebGPU on SwiftShader (a software adapter) the page picks the WebAssembly CPU path by
//      itself and says why under "Train where"; on the isolated page that path runs on threads
//      and trains one epoch on E2E_TRAIN images to a test accuracy of at least 85%; WebGPU,
//      chosen by hand, does the same; no request for training reaches a server;
//   2. once the first batch is done (on a software adapter it also compiles the kernels),
//      progress moves at least every PROGRESS_GAP_S seconds, and Stop ends a run within STOP_S
//      seconds (each plus two steps, where a step is slow), on WebGPU and on the CPU paths;
//   3. the CPU kernels (the WebAssembly SIMD tile) match the CPU references in the page, and
//      WebGPU, the one-thread CPU path and the threaded one agree on the first batch's loss;
//   4. a drawn digit gets ten probabilities that add up to 100%, computed in the page;
//   5. with WebGPU turned off and no isolation, the CPU path on one thread with SIMD is picked,
//      the reasons (no WebGPU, no threads) are on the page, and it trains to 85%;
//   and that a reload takes the data set from the browser's cache, that the trained model
//   downloads as safetensors and loads back. The CPU run also checks the form: a bad number is
//   refused with the field's label and range and the field marked; a diverging run (SGD at
//   learning rate 9) gets a warning; the Rust parser's verdict on a layer list shows under the
//   field (an error naming the layer); and, with Fashion-MNIST chosen (its files under
//   data/fashion/), a second run trains a layer list with dropout and names the grid's images
//   and the bars with Fashion-MNIST's classes. Screenshots go to OUT_DIR.
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
const TIMEOUT_MS = 600_000;
// The page promises progress about once a second and Stop "after the current batch": a loaded
// 2-core CI machine gets 3 s, plus two steps where one step takes longer than that (SwiftShader
// on two busy cores: about 2 s a step). A loop that submits 100 steps at a time fails it.
const PROGRESS_GAP_S = 3;
const STOP_S = 3;
const allowed = (base, stepSeconds) => base + 2 * stepSeconds;

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

/// `isolated`: send COOP and COEP, as `mnist serve` does, so that the page may share memory
/// with its workers (the threaded CPU trainer).
function serveStatic(isolated) {
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
    const headers = { "Content-Type": TYPES[extname(file)] || "application/octet-stream", "Cache-Control": "no-cache" };
    if (isolated) {
      headers["Cross-Origin-Opener-Policy"] = "same-origin";
      headers["Cross-Origin-Embedder-Policy"] = "require-corp";
    }
    res.writeHead(200, headers);
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

/// Records when the progress line changes (in the page, so the clock is the page's own).
async function watchProgress(page) {
  await page.evaluate(() => {
    window.__progress = [];
    const el = document.getElementById("progress-text");
    if (window.__progressObserver) window.__progressObserver.disconnect();
    window.__progressObserver = new MutationObserver(() => window.__progress.push([performance.now(), el.textContent]));
    window.__progressObserver.observe(el, { childList: true, characterData: true, subtree: true });
  });
}

/// The time from Start to the first training batch's progress line (on a software adapter the
/// first step also compiles the kernels), and the longest wait, in seconds, between two lines
/// from there to the last batch's (the test-set pass after an epoch reports no batches).
async function progressGaps(page, startedAt) {
  const marks = await page.evaluate(() => window.__progress);
  const isBatch = ([, text]) => / · batch \d+\/\d+/.test(text);
  const first = marks.findIndex(isBatch), last = marks.findLastIndex(isBatch);
  if (first < 0) fail("no progress line during training");
  let gap = 0, after = "";
  for (let i = first + 1; i <= last; i++) {
    if (marks[i][0] - marks[i - 1][0] > gap) [gap, after] = [marks[i][0] - marks[i - 1][0], marks[i - 1][1]];
  }
  return { startup: (marks[first][0] - startedAt) / 1000, gap: gap / 1000, lines: last - first + 1, after };
}

/// Trains one run of the network `layers` in the page and returns the first row of the epoch
/// table; checks that progress kept moving.
async function trainOneEpoch(page, where, layers = "128", minAccuracy = MIN_ACCURACY) {
  const value = await page.locator("#where").inputValue();
  if (value !== where) fail(`the page chose "${value}" to train, expected "${where}"`);
  await page.fill("#layers", layers);
  await page.fill("#epochs", "1");
  await page.fill("#limit_train", TRAIN);
  await page.fill("#limit_test", TEST);
  await watchProgress(page);
  const startedAt = await page.evaluate(() => performance.now());
  const started = Date.now();
  await page.click("#start");
  await page.locator("#progress-text", { hasText: /Finished 1 epoch|failed/ }).waitFor({ timeout: 240_000 });
  const seconds = (Date.now() - started) / 1000;
  const outcome = await page.locator("#progress-text").innerText();
  if (!outcome.startsWith("Finished")) fail(`${where}: ${outcome} ${await page.locator("#message").innerText()}`);
  const cells = await page.locator("#epochs-table tbody tr").first().locator("td").allInnerTexts();
  const testAcc = parseFloat(cells[5]) / 100;
  const adapter = await page.locator("#adapter").innerText();
  const stepSeconds = parseFloat(cells[6]) / Math.ceil(Number(TRAIN) / 64);
  const { startup, gap, lines, after } = await progressGaps(page, startedAt);
  const most = allowed(PROGRESS_GAP_S, stepSeconds);
  log(`${where} on ${adapter}: epoch row [${cells.join(" | ")}] (${seconds.toFixed(1)} s from Start to the end of the test; ` +
    `first batch's progress after ${startup.toFixed(2)} s, then ${lines} lines, at most ${gap.toFixed(2)} s apart ` +
    `(allowed ${most.toFixed(2)} s; ${stepSeconds.toFixed(3)} s a step))`);
  if (!(testAcc >= minAccuracy)) fail(`${where}: test accuracy ${cells[5]}, expected at least ${100 * minAccuracy}%`);
  if (!(gap <= most)) fail(`${where}: the progress line stood still for ${gap.toFixed(2)} s after "${after}"`);
  return { cells, seconds, adapter, stepSeconds };
}

/// Starts a long run, presses Stop once it is under way, and checks that the page is ready for
/// another run soon after (`stepSeconds`: the time of one step there).
async function stopRun(page, where, stepSeconds) {
  await page.fill("#epochs", "50");
  await page.fill("#limit_train", TRAIN);
  // The observer sees every line the page writes: on a fast path (the CPU threads train an
  // epoch of 5,000 images in about 0.2 s) a batch line stands for less than a polling interval.
  await watchProgress(page);
  await page.click("#start");
  await page.waitForFunction(() => window.__progress.some(([, text]) => / · batch \d+\//.test(text)), null,
    { timeout: 120_000, polling: 50 });
  const pressed = Date.now();
  await page.click("#stop");
  await page.locator("#start:not([disabled])").waitFor({ timeout: 120_000 });
  const seconds = (Date.now() - pressed) / 1000;
  const text = await page.locator("#progress-text").innerText();
  log(`${where}: Stop pressed, ready again after ${seconds.toFixed(2)} s: "${text}"`);
  const most = allowed(STOP_S, stepSeconds);
  if (!(seconds <= most)) fail(`${where}: Stop took ${seconds.toFixed(2)} s (at most ${most.toFixed(2)})`);
  await page.fill("#epochs", "1");
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

const isolatedServer = await serveStatic(true);
const plainServer = await serveStatic(false);
const isolatedUrl = `http://127.0.0.1:${isolatedServer.address().port}/`;
const plainUrl = `http://127.0.0.1:${plainServer.address().port}/`;
const open = [];
try {
  log("site", site, "at", isolatedUrl, "(cross-origin isolated) and", plainUrl);

  // 1-4: WebGPU on, the page cross-origin isolated.
  const gpu = await launch(true);
  open.push(gpu);
  await openPage(gpu.page, isolatedUrl);
  const seen = await gpu.page.evaluate(() => ({
    gpu: window.mnistPage.state.gpu, isolated: self.crossOriginIsolated, cores: navigator.hardwareConcurrency,
    threads: window.mnistPage.state.cpuThreads || 0, why: window.mnistPage.state.threadsWhy || "",
  }));
  log("WebGPU adapter:", JSON.stringify(seen.gpu), "| isolated:", seen.isolated, "| cores:", seen.cores, "| CPU threads:", seen.threads);
  if (!seen.isolated) fail("the page served with COOP and COEP is not cross-origin isolated");
  if (!seen.gpu) fail("no WebGPU adapter with --enable-unsafe-webgpu");
  if (/swiftshader/i.test(seen.gpu.name) && !seen.gpu.software) fail("SwiftShader is a software adapter, and the page must say so");
  const threaded = seen.cores >= 2;
  if (threaded && !(seen.threads >= 2)) fail(`${seen.cores} cores and an isolated page, but the CPU path has no threads: ${seen.why}`);
  const chosen = await gpu.page.locator("#where").inputValue();
  const note = await gpu.page.locator("#where-note").innerText();
  log(`"Train where" reads ${chosen}; the note under it: ${note}`);
  if (seen.gpu.software) {
    if (chosen !== "browser-cpu") fail(`a software WebGPU, and the page chose "${chosen}", not the CPU`);
    if (!note.includes(seen.gpu.name) || !/software adapter/.test(note)) fail(`the page does not say why it chose the CPU: "${note}"`);
  } else if (chosen !== "browser-gpu") fail(`a hardware WebGPU, and the page chose "${chosen}"`);
  const dataText = await gpu.page.locator("#data-text").innerText();
  if (!dataText.startsWith("MNIST ready")) fail(`the data set did not load: ${dataText}`);

  // The CPU kernels of this module (the WebAssembly SIMD tile, which runs nowhere else) against
  // the CPU references, in the page; the threaded module has the same kernels.
  const selfCheck = await gpu.page.evaluate(() => {
    try { return window.mnistPage.state.web.cpu_self_check(); } catch (e) { return "FAILED: " + (e.message || e); }
  });
  log("CPU kernels:", selfCheck);
  if (!/^simd128: .* match the references/.test(selfCheck)) fail(`the CPU kernels' check: ${selfCheck}`);

  // 3. The first batch's loss on WebGPU, on the CPU in the page and on the CPU threads (batch
  //    64, seed 42, epoch 1's order).
  await gpu.page.fill("#limit_train", TRAIN);
  const losses = { gpu: await gpu.page.evaluate(() => window.mnistPage.firstBatchLoss("gpu")),
    cpu: await gpu.page.evaluate(() => window.mnistPage.firstBatchLoss("cpu")) };
  if (threaded) losses["cpu-threads"] = await gpu.page.evaluate(() => window.mnistPage.firstBatchLoss("cpu-threads"));
  for (const [name, loss] of Object.entries(losses)) {
    if (name === "cpu") continue;
    const rel = Math.abs(loss - losses.cpu) / Math.abs(losses.cpu);
    log(`first batch loss: ${name} ${loss}, CPU ${losses.cpu}, relative difference ${rel.toExponential(2)} (tolerance ${LOSS_REL_TOL})`);
    if (!(rel <= LOSS_REL_TOL)) fail(`${name} and the CPU disagree on the first batch's loss: ${loss} vs ${losses.cpu}`);
  }

  // 1, 2. One epoch where the page chose (the CPU, on threads here), then on WebGPU.
  let mark = requests.length;
  const firstWhere = seen.gpu.software ? "browser-cpu" : "browser-gpu";
  const firstRun = await trainOneEpoch(gpu.page, firstWhere);
  if (firstWhere === "browser-cpu" && threaded && !/\d+ threads/.test(firstRun.adapter)) {
    fail(`the isolated page trained on "${firstRun.adapter}", not on threads`);
  }
  if (firstWhere === "browser-cpu") await stopRun(gpu.page, "browser-cpu (threads)", firstRun.stepSeconds);
  await gpu.page.selectOption("#where", "browser-gpu");
  const gpuRun = await trainOneEpoch(gpu.page, "browser-gpu");
  if (serverCalls(mark).length) fail(`the page called a server: ${serverCalls(mark).join(", ")}`);
  const warning = await gpu.page.locator("#adapter-warning").innerText();
  if (seen.gpu.software && !/SOFTWARE/.test(warning)) fail(`trained on a software adapter with no warning: "${warning}"`);

  // 4. A drawing, read by the model in the page.
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
  await stopRun(gpu.page, "browser-gpu", gpuRun.stepSeconds);

  // A reload takes the data set from the browser's cache: no request for data/ this time.
  mark = requests.length;
  await openPage(gpu.page, isolatedUrl);
  const refetched = requests.slice(mark).filter((r) => r.includes("/data/"));
  const reloadText = await gpu.page.locator("#data-text").innerText();
  log("after a reload:", reloadText);
  if (refetched.length || !reloadText.includes("4 from this browser's cache")) {
    fail(`a reload fetched the data again: ${refetched.join(", ") || reloadText}`);
  }
  if (gpu.problems.length) fail(gpu.problems.join("\n"));
  await open.pop().close();

  // 5. No WebGPU, no isolation: the page picks the WebAssembly CPU path on one thread by itself.
  const cpu = await launch(false);
  open.push(cpu);
  await openPage(cpu.page, plainUrl);
  const hasGpu = await cpu.page.evaluate(async () => !!(navigator.gpu && (await navigator.gpu.requestAdapter())));
  if (hasGpu) fail("WebGPU is still available with --disable-features=WebGPU");
  const gpuOption = await cpu.page.locator('#where option[value="browser-gpu"]').innerText();
  const plainNote = await cpu.page.locator("#where-note").innerText();
  log("without WebGPU the choice reads:", gpuOption, "| the note:", plainNote);
  if (!/no WebGPU/.test(plainNote)) fail(`the page does not say that there is no WebGPU: "${plainNote}"`);
  if (threaded && !/cross-origin isolated/.test(plainNote)) fail(`the page does not say why it uses one thread: "${plainNote}"`);

  // A bad number: refused before anything runs, with the field's label and range, the field marked.
  await cpu.page.fill("#batch_size", "-3");
  await cpu.page.click("#start");
  const refusal = await cpu.page.locator("#message").innerText();
  log("batch size -3:", refusal);
  if (!refusal.includes("Batch size: “-3” is not allowed; enter a whole number from 1 to 8,192.")) {
    fail(`the refusal does not name the field and its range: "${refusal}"`);
  }
  if (!(await cpu.page.locator("#batch_size.invalid").count())) fail("the refused field is not marked");
  if ((await cpu.page.locator("#progress-bar").getAttribute("style")) !== "width: 0%;") fail("the progress bar is not empty after a refusal");
  await cpu.page.fill("#batch_size", "64");

  // A run that diverges (SGD at learning rate 9) is flagged.
  await cpu.page.selectOption("#optimizer", "sgd");
  await cpu.page.fill("#lr", "9");
  await cpu.page.fill("#epochs", "2");
  await cpu.page.fill("#limit_train", "2000");
  await cpu.page.fill("#limit_test", "500");
  await cpu.page.click("#start");
  await cpu.page.locator("#progress-text", { hasText: /Finished 2 epochs|failed/ }).waitFor({ timeout: 120_000 });
  const diverged = await cpu.page.locator("#run-warning").innerText();
  log("SGD at learning rate 9:", diverged);
  if (!/diverged/.test(diverged)) fail(`no warning for a diverged run: "${diverged}"`);
  await cpu.page.selectOption("#optimizer", "adam");
  await cpu.page.fill("#lr", "0.001");

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

  // The same network as on WebGPU, on one thread with SIMD.
  mark = requests.length;
  const cpuRun = await trainOneEpoch(cpu.page, "browser-cpu");
  if (!/1 thread, simd128/.test(cpuRun.adapter)) fail(`the plain page trained on "${cpuRun.adapter}", not one thread with simd128`);
  if (serverCalls(mark).length) fail(`the page called a server: ${serverCalls(mark).join(", ")}`);
  await stopRun(cpu.page, "browser-cpu (1 thread)", cpuRun.stepSeconds);
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

  log(`epoch seconds (training only, as the table shows): ${firstWhere} ${firstRun.cells[6]}, WebGPU ${gpuRun.cells[6]}, ` +
    `CPU (1 thread) ${cpuRun.cells[6]}`);
  log("requests:", [...new Set(requests.map((r) => r.replace(/\?.*/, "")))].join(", "));
  log("PASS");
} catch (e) {
  console.error("[in-browser] FAIL:", e.message);
  process.exitCode = 1;
} finally {
  for (const b of open) await b.close();
  isolatedServer.close();
  plainServer.close();
  clearTimeout(watchdog);
}
