//! The web page in a real browser: runs `e2e/run.mjs` (playwright-core driving Debian's headless
//! Chromium) against the `mnist` binary of this build. It trains a short run on the CPU, waits
//! for the chart to show an epoch, draws a 7 on the canvas, checks the ten probabilities, saves
//! a screenshot, and stops the server with Ctrl-C (it must exit 0).
//!
//! Needs Node.js, `npm ci` in `05-mnist/e2e`, and Chromium at /usr/bin/chromium (or $CHROMIUM);
//! `.ci/run` installs all three. A missing piece FAILS the test with the command that fixes it:
//! it never skips silently.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

fn e2e_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e")
}

/// Panics with `fix` when `ok` is false.
fn need(ok: bool, what: &str, fix: &str) {
    assert!(ok, "the browser test needs {what}: {fix} (or run `bash .ci/run`, which installs it)");
}

#[test]
fn the_page_trains_and_reads_a_drawing_in_headless_chromium() {
    let node = Command::new("node").arg("--version").output();
    need(node.as_ref().is_ok_and(|o| o.status.success()), "Node.js", "apt-get install nodejs npm");
    need(
        e2e_dir().join("node_modules/playwright-core/package.json").is_file(),
        "playwright-core",
        "cd 05-mnist/e2e && npm ci",
    );
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_string());
    need(Path::new(&chromium).is_file(), "Chromium", "apt-get install chromium");

    let screenshot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("serve-e2e.png");
    let _ = std::fs::remove_file(&screenshot);
    let out = Command::new("node")
        .arg("run.mjs")
        .arg(env!("CARGO_BIN_EXE_mnist"))
        .arg(&screenshot)
        .current_dir(e2e_dir())
        .env("MNIST_DIR", support::mnist_dir())
        .env("CHROMIUM", &chromium)
        .output()
        .expect("running node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(out.status.success(), "the browser test failed ({}):\n{stdout}\n{stderr}", out.status);
    let passed = stdout.lines().any(|l| l.starts_with("[e2e]") && l.ends_with(" PASS"));
    assert!(passed, "no PASS line:\n{stdout}");
    let png = std::fs::read(&screenshot).expect("the screenshot");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000, "not a real screenshot ({} bytes)", png.len());
}
