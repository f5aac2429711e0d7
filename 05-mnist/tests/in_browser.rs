//! Training in the browser: builds the static site as it is published (`book/build.sh`: the
//! page and the trainer compiled to WebAssembly at its root, the book in `book/`), then runs
//! `e2e/in_browser.mjs`, which serves it from two local static servers (no `mnist serve`), one
//! cross-origin isolated (COOP and COEP) and one not, and drives Debian's headless Chromium: a
//! software WebGPU (SwiftShader) makes the page pick the WebAssembly CPU path and say why; one
//! epoch on the CPU threads, one on WebGPU and one on a single thread with SIMD, each at least
//! 85% on the test set, with progress moving and Stop ending a run within seconds; WebGPU, the
//! CPU and the CPU threads agreeing on the first batch's loss; a drawn digit read in the page;
//! the data set cached across a reload; the form's refusals (a bad number named by its label
//! and range, a layer list's check under the field), a diverged run flagged, a run with dropout,
//! a Fashion-MNIST run from `data/fashion/` with its class names shown. The model the page
//! downloads is then read by `mnist eval`. Needs MNIST ($MNIST_DIR) and Fashion-MNIST
//! ($FASHION_MNIST_DIR).
//!
//! Needs mdbook, the wasm32 target, wasm-bindgen-cli at the pinned version, Node.js, `npm ci` in
//! `05-mnist/e2e`, and Chromium (/usr/bin/chromium or $CHROMIUM); `.ci/run` installs them all.
//! A missing piece FAILS the test with the command that fixes it: it never skips.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

fn stage_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Panics with `fix` when `ok` is false.
fn need(ok: bool, what: &str, fix: &str) {
    assert!(ok, "the browser test needs {what}: {fix} (or run `bash .ci/run`, which installs it)");
}

fn runs(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn the_page_trains_on_webgpu_and_on_the_cpu_in_headless_chromium() {
    need(runs("node", &["--version"]).is_some(), "Node.js", "apt-get install nodejs npm");
    need(
        runs("mdbook", &["--version"]).is_some(),
        "mdbook (book/build.sh builds the book beside the trainer)",
        "cargo install mdbook --version 0.5.4 --locked --no-default-features --features search",
    );
    need(
        stage_dir().join("e2e/node_modules/playwright-core/package.json").is_file(),
        "playwright-core",
        "cd 05-mnist/e2e && npm ci",
    );
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_string());
    need(Path::new(&chromium).is_file(), "Chromium", "apt-get install chromium");
    need(
        runs("rustup", &["target", "list", "--installed"]).is_some_and(|t| t.lines().any(|l| l == "wasm32-unknown-unknown")),
        "the wasm32 target",
        "rustup target add wasm32-unknown-unknown",
    );
    let lock = std::fs::read_to_string(stage_dir().join("../Cargo.lock")).expect("Cargo.lock");
    let pinned = lock
        .split("[[package]]")
        .find(|p| p.contains("name = \"wasm-bindgen\"\n"))
        .and_then(|p| p.lines().find_map(|l| l.strip_prefix("version = ")))
        .map(|v| v.trim_matches('"').to_string())
        .expect("wasm-bindgen in Cargo.lock");
    need(
        runs("wasm-bindgen", &["--version"]).is_some_and(|v| v.split_whitespace().nth(1) == Some(pinned.as_str())),
        &format!("wasm-bindgen {pinned} (the version of the crate in Cargo.lock)"),
        &format!("cargo install wasm-bindgen-cli --version ={pinned} --no-default-features --force"),
    );

    // The site, built (or brought up to date: cargo and wasm-bindgen redo only what changed)
    // into a folder of this test's own.
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let site = tmp.join("in-browser-site");
    // The whole static site, as it is published: the trainer at its root, the book in book/.
    let build = Command::new("bash")
        .arg(stage_dir().join("../book/build.sh"))
        .arg(&site)
        .env_remove("MNIST_DIR")
        .env_remove("FASHION_MNIST_DIR")
        .output()
        .expect("running bash");
    let build_log = format!("{}{}", String::from_utf8_lossy(&build.stdout), String::from_utf8_lossy(&build.stderr));
    assert!(build.status.success(), "book/build.sh failed:\n{build_log}");
    let book = std::fs::read_to_string(site.join("book/05-mnist-web.html")).expect("the book's page on the browser trainer");
    assert!(book.contains("../index.html"), "the book's browser chapter should link the trainer beside it");
    println!("{}", build_log.lines().last().unwrap_or_default());

    let out_dir = tmp.join("in-browser");
    std::fs::create_dir_all(&out_dir).unwrap();
    let model = out_dir.join("in-browser-model.safetensors");
    let _ = std::fs::remove_file(&model);
    let mnist_dir = support::mnist_dir();
    let out = Command::new("node")
        .arg("in_browser.mjs")
        .arg(&site)
        .arg(&mnist_dir)
        .arg(support::fashion_dir())
        .arg(&out_dir)
        .current_dir(stage_dir().join("e2e"))
        .env("CHROMIUM", &chromium)
        .output()
        .expect("running node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(out.status.success(), "the browser test failed ({}):\n{stdout}\n{stderr}", out.status);
    assert!(stdout.lines().any(|l| l.starts_with("[in-browser]") && l.ends_with(" PASS")), "no PASS line:\n{stdout}");
    for shot in ["in-browser-webgpu.png", "in-browser-cpu.png", "in-browser-fashion.png"] {
        let png = std::fs::read(out_dir.join(shot)).expect("a screenshot");
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000, "{shot} is not a real screenshot");
    }

    // The model the page downloaded is one `mnist eval` reads, and it is as good as the page said.
    let eval = Command::new(env!("CARGO_BIN_EXE_mnist"))
        .args(["eval", "--model"])
        .arg(&model)
        .arg("--data-dir")
        .arg(&mnist_dir)
        .output()
        .expect("running mnist eval");
    let text = format!("{}{}", String::from_utf8_lossy(&eval.stdout), String::from_utf8_lossy(&eval.stderr));
    assert!(eval.status.success(), "mnist eval could not read the page's model:\n{text}");
    let accuracy = text
        .lines()
        .find_map(|l| l.split("accuracy").nth(1))
        .and_then(|rest| rest.trim_start_matches([' ', ':']).split('%').next()?.trim().parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no accuracy in mnist eval's output:\n{text}"));
    println!("mnist eval of the page's model: {accuracy}%");
    assert!(accuracy >= 85.0, "mnist eval: {accuracy}% for the page's model:\n{text}");
}
