// End-to-end test of `mnist serve` in a real headless Chromium (Debian's `chromium` package),
// driven by playwright-core. It:
//   1. starts the server binary on a free port and reads the URL it prints;
//   2. opens the page, starts a short training run on a subset on the CPU;
//   3. waits for the loss chart to show an epoch;
//   4. draws a 7 on the canvas with the mouse (pointer events) and checks that ten
//      probabilities appear and add up to 100%;
//   5. waits for the run to finish and checks that the final model reads the drawn digit (the
//      largest bar and the sentence under the pad) and that the last epoch's test accuracy in
//      the table clears a floor near what this run measures; saves a screenshot, and
//   6. stops the server with Ctrl-C (SIGINT) while the page is still connected, and checks that
//      it exits cleanly.
//
// Usage: node run.mjs PATH/TO/mnist [SCREENSHOT.png]
// Environment: CHROMIUM (default /usr/bin/chromium), MNIST_DIR (passed on to the server);
// E2E_LIMIT_TRAIN, E2E_EPOCHS, E2E_HIDDEN, E2E_DIGIT change the run (for the README screenshot).
// `cargo test -p mnist --test serve_e2e` runs this with the freshly built binary.

import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

const [binary, screenshot = "screenshot.png"] = process.argv.slice(2);
if (!binary) {
  console.error("usage: node run.mjs PATH/TO/mnist [SCREENSHOT.png]");
  process.exit(2);
}
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const TIMEOUT_MS = 240_000;
// The floor for the default run's last test accuracy (3,000 images, 3 epochs, the page's
// defaults): measured 89.83% on this project's 2-core build machine (the same run through
// `mnist train` gives 89.90%); 87% leaves room for another CPU's rounding, not for a model
// that trains worse.
const E2E_FLOOR = 87;

const t0 = Date.now();
const log = (...a) => console.log(`[e2e] ${((Date.now() - t0) / 1000).toFixed(1).padStart(5)} s`, ...a);
function fail(msg) {
  console.error("[e2e] FAIL:", msg);
  process.exitCode = 1;
  throw new Error(msg);
}

// A watchdog: the whole test stays within a few minutes, whatever hangs.
const watchdog = setTimeout(() => {
  console.error(`[e2e] FAIL: no result after ${TIMEOUT_MS / 1000} s`);
  process.exit(1);
}, TIMEOUT_MS);

// ------------------------------------------------------------------ 1. the server

function startServer() {
  const server = spawn(binary, ["serve", "--host", "127.0.0.1", "--port", "0"], {
    stdio: ["ignore", "pipe", "pipe"],
    env: process.env,
  });
  const output = [];
  const url = new Promise((resolve, reject) => {
    let buffered = "";
    server.stdout.on("data", (chunk) => {
      buffered += chunk;
      output.push(String(chunk));
      const m = buffered.match(/listening on (http:\/\/\S+)/);
      if (m) resolve(m[1]);
    });
    server.stderr.on("data", (chunk) => output.push(String(chunk)));
    server.on("exit", (code, signal) =>
      reject(new Error(`the server exited early (code ${code}, signal ${signal}):\n${output.join("")}`)));
    // unref: this timer alone must not keep node running once the test is over.
    setTimeout(() => reject(new Error(`the server printed no URL within 90 s:\n${output.join("")}`)), 90_000).unref();
  });
  const exited = new Promise((resolve) => server.on("exit", (code, signal) => resolve({ code, signal })));
  return { server, url, exited, output };
}

// ------------------------------------------------------------------ the test

const { server, url: urlPromise, exited, output } = startServer();
const userDataDir = mkdtempSync(join(tmpdir(), "mnist-e2e-chromium-"));
let context = null;
try {
  const url = await urlPromise;
  log("server at", url);

  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ],
    viewport: { width: 1280, height: 900 },
    deviceScaleFactor: 1,
  });
  const page = context.pages()[0] || (await context.newPage());
  const problems = [];
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  page.on("console", (m) => { if (m.type() === "error") problems.push("console error: " + m.text()); });

  // 2. The page, connected to the event stream, with the grid of test digits.
  log("browser up");
  await page.goto(url);
  // The page can also train in the browser (when the site is built); this test is about the
  // server, so choose it.
  await page.waitForSelector('body[data-ready="true"]', { timeout: 60_000 });
  await page.selectOption("#where", "server");
  await page.locator("#connection", { hasText: "live" }).waitFor({ timeout: 30_000 });
  await page.locator("#samples .sample").first().waitFor({ timeout: 30_000 });
  const cells = await page.locator("#samples .sample").count();
  if (cells !== 24) fail(`expected 24 test digits in the grid, got ${cells}`);

  // A short run on the CPU (fast here, no GPU needed): 3,000 training images, 3 epochs, the
  // page's defaults otherwise (those of `mnist train`: Adam lr 0.001, cosine schedule, batch 64).
  // E2E_LIMIT_TRAIN (empty: all), E2E_EPOCHS and E2E_HIDDEN change the run (the README screenshot).
  const EPOCHS = process.env.E2E_EPOCHS || "3";
  await page.fill("#layers", process.env.E2E_HIDDEN || "128");
  await page.fill("#epochs", EPOCHS);
  await page.selectOption("#device", "cpu");
  await page.fill("#limit_train", process.env.E2E_LIMIT_TRAIN ?? "3000");
  await page.click("#start");
  log("training started");

  // 3. The chart shows an epoch.
  await page.waitForFunction(() => Number(document.getElementById("loss-chart").dataset.epochs || 0) >= 1,
    null, { timeout: 120_000 });
  const firstRow = await page.locator("#epochs-table tbody tr").first().innerText();
  log("first epoch:", firstRow.replace(/\s+/g, " "));
  const adapter = await page.locator("#adapter").innerText();
  if (!adapter.startsWith("CPU")) fail(`the page should name the CPU as the device, shows ${adapter}`);

  // 4. Draw a digit with the mouse (Chromium turns mouse input into pointer events): a 7, or
  //    E2E_DIGIT's strokes (on the 280x280 pad).
  const SHAPES = {
    7: [[[70, 60], [210, 60], [150, 150], [115, 240]]],
    4: [[[165, 40], [75, 175], [215, 175]], [[170, 95], [165, 250]]],
    2: [[[80, 95], [110, 55], [170, 50], [205, 90], [190, 135], [80, 235], [215, 235]]],
  };
  const shape = SHAPES[process.env.E2E_DIGIT || "7"];
  if (!shape) fail(`E2E_DIGIT must be one of ${Object.keys(SHAPES)}`);
  // The mouse draws at page coordinates inside the window: the pad must be in view.
  await page.locator("#pad").scrollIntoViewIfNeeded();
  const box = await page.locator("#pad").boundingBox();
  const at = (x, y) => [box.x + (x / 280) * box.width, box.y + (y / 280) * box.height];
  const stroke = async (points) => {
    await page.mouse.move(...at(...points[0]));
    await page.mouse.down();
    for (const p of points.slice(1)) await page.mouse.move(...at(...p), { steps: 8 });
    await page.mouse.up();
  };
  for (const points of shape) await stroke(points);
  await page.waitForSelector('#probs[data-ready="true"]', { timeout: 30_000 });
  const readProbs = async () => (await page.locator("#probs .pct").allInnerTexts()).map((t) => parseFloat(t));
  let probs = await readProbs();
  if (probs.length !== 10 || probs.some((p) => !Number.isFinite(p) || p < 0 || p > 100)) {
    fail(`expected ten probabilities, got ${JSON.stringify(probs)}`);
  }
  const total = probs.reduce((a, b) => a + b, 0);
  if (Math.abs(total - 100) > 1.5) fail(`the probabilities add up to ${total}%, not 100%`);
  log("probabilities after epoch 1:", probs.join(" "), "->", await page.locator("#draw-text").innerText());

  // 5. The run finishes; the drawing is read again by the final model; screenshot.
  await page.locator("#progress-text", { hasText: `Finished ${EPOCHS} epoch` }).waitFor({ timeout: 180_000 });
  await page.waitForFunction(() => !document.getElementById("start").disabled, null, { timeout: 10_000 });
  await page.waitForFunction(() => document.getElementById("probs").dataset.ready === "true", null, { timeout: 10_000 });
  await page.waitForTimeout(500);
  probs = await readProbs();
  log("probabilities after training:", probs.join(" "), "->", await page.locator("#draw-text").innerText());
  const rows = await page.locator("#epochs-table tbody tr").count();
  if (rows !== Number(EPOCHS)) fail(`expected ${EPOCHS} epochs in the table, got ${rows}`);
  // The drawn digit is the one the final model reads: the largest of the ten bars (class i is
  // bar i) and the sentence under the pad. A model that learned nothing (ten bars of 10%)
  // fails here.
  const digit = Number(process.env.E2E_DIGIT || "7");
  const read = probs.indexOf(Math.max(...probs));
  if (read !== digit) fail(`drew a ${digit}, the largest bar is ${read}: ${probs.join(" ")}`);
  const sentence = await page.locator("#draw-text").innerText();
  if (!sentence.includes(`reads a ${digit}`)) fail(`drew a ${digit}, the page says: ${sentence}`);
  // The last epoch's test accuracy, as the table shows it (column "test acc"), against
  // E2E_FLOOR; only for the default run (the E2E_* variables change what is trained).
  const lastRow = await page.locator("#epochs-table tbody tr").last().locator("td").allInnerTexts();
  const testAcc = parseFloat(lastRow[5]);
  log("last epoch:", lastRow.join(" | "), "-> test accuracy", testAcc);
  if (!process.env.E2E_LIMIT_TRAIN && !process.env.E2E_EPOCHS && !process.env.E2E_HIDDEN) {
    if (!(testAcc >= E2E_FLOOR)) fail(`test accuracy after ${EPOCHS} epochs on 3,000 images: ${lastRow[5]}, floor ${E2E_FLOOR}%`);
  }
  await page.screenshot({ path: screenshot, fullPage: true });
  log("screenshot:", screenshot, statSync(screenshot).size, "bytes");
  if (problems.length) fail(problems.join("\n"));

  // 6. Ctrl-C with the page still connected: the server must end its event streams and exit 0.
  server.kill("SIGINT");
  const result = await Promise.race([exited, new Promise((r) => setTimeout(() => r(null), 15_000).unref())]);
  if (!result) fail("the server did not exit within 15 s of Ctrl-C");
  if (result.code !== 0) fail(`the server exited with ${JSON.stringify(result)} after Ctrl-C:\n${output.join("")}`);
  log("server stopped cleanly");
  log("PASS");
} catch (e) {
  if (!process.exitCode) {
    console.error("[e2e] FAIL:", e.message);
    process.exitCode = 1;
  }
} finally {
  if (context) await context.close().catch(() => {});
  if (server.exitCode === null && server.signalCode === null) server.kill("SIGKILL");
  rmSync(userDataDir, { recursive: true, force: true });
  clearTimeout(watchdog);
  log("cleaned up");
}
