//! The `mnist` binary as a user runs it: bad flags, broken files and missing data are clear
//! errors with a non-zero exit code (and no panic); train -> eval -> predict works end to end.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use image::{GrayImage, Luma, Rgba, RgbaImage};

fn mnist(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mnist"))
        .args(args)
        .env("MNIST_DIR", support::mnist_dir())
        // Never the internet: a download attempt goes to a port where nothing listens.
        .env("MNIST_MIRRORS", dead_mirror())
        .env("COLUMNS", "100")
        .output()
        .expect("running the mnist binary")
}

fn dead_mirror() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    format!("http://127.0.0.1:{port}/")
}

fn text(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Asserts a failed run: exit code `code`, `want` in stderr, no panic.
fn assert_fails(out: &Output, code: i32, want: &str) {
    let (stdout, stderr) = text(out);
    assert_eq!(out.status.code(), Some(code), "stdout: {stdout}\nstderr: {stderr}");
    assert!(stderr.contains(want), "{want:?} not in stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn invalid_values_are_refused_with_the_flag_named() {
    for (args, want) in [
        (&["--batch-size", "0"][..], "--batch-size"),
        (&["--lr", "0"], "must be a finite number > 0"),
        (&["--lr", "-0.1"], "--lr"),
        (&["--lr", "inf"], "--lr"),
        (&["--epochs", "0"], "must be at least 1"),
        (&["--hidden", "0"], "at least 1 unit"),
        (&["--hidden", "128,0"], "at least 1 unit"),
        (&["--hidden", "12x"], "not a layer size"),
        (&["--optimizer", "rmsprop"], "rmsprop"),
        (&["--momentum", "1.5"], "[0, 1)"),
        (&["--device", "tpu"], "tpu"),
        (&["train", "--limit-train", "0"], "--limit-train"),
        (&["eval"], "--model"),
        (&["predict", "--model", "m.safetensors"], "IMAGE"),
    ] {
        assert_fails(&mnist(args), 2, want);
    }
}

#[test]
fn missing_or_broken_data_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    // Empty folder, and the only mirror is dead: the download fails, nothing is left behind.
    let empty = tmp.path().join("empty");
    let out = mnist(&["--device", "cpu", "--data-dir", empty.to_str().unwrap()]);
    assert_fails(&out, 1, "could not download train-images-idx3-ubyte.gz");
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);

    // Fashion-MNIST missing, its mirror dead: the error names its variables.
    let out = Command::new(env!("CARGO_BIN_EXE_mnist"))
        .args(["--device", "cpu", "--dataset", "fashion", "--data-dir", empty.to_str().unwrap()])
        .env("FASHION_MNIST_MIRRORS", dead_mirror())
        .output()
        .unwrap();
    assert_fails(&out, 1, "FASHION_MNIST_MIRRORS");
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
    // A layer list that does not fit the images: refused before the data is read.
    let out = mnist(&["--device", "cpu", "--layers", "784-128-relu-9"]);
    assert_fails(&out, 1, "--layers");

    // A learning rate that makes the loss overflow.
    let out = mnist(&["--device", "cpu", "--optimizer", "sgd", "--lr", "1e6", "--limit-train", "2000", "--epochs", "1"]);
    assert_fails(&out, 1, "Try a smaller learning rate (--lr, now 1000000)");

    // A truncated label file.
    let broken = tmp.path().join("broken");
    std::fs::create_dir(&broken).unwrap();
    for name in mnist::datasets::FILE_NAMES {
        let src = mnist::data::file_path(&support::mnist_dir(), name);
        std::fs::copy(&src, broken.join(src.file_name().unwrap())).unwrap();
    }
    let raw = mnist::idx::read_maybe_gzip(&broken.join("train-labels-idx1-ubyte.gz")).unwrap();
    std::fs::remove_file(broken.join("train-labels-idx1-ubyte.gz")).unwrap();
    std::fs::write(broken.join("train-labels-idx1-ubyte"), &raw[..raw.len() - 10]).unwrap();
    let out = mnist(&["--device", "cpu", "--data-dir", broken.to_str().unwrap()]);
    assert_fails(&out, 1, "truncated");
}

/// Test image `i` drawn black on white at 10x size, off-centre on a larger page.
fn render_on_paper(pixels: &[u8]) -> GrayImage {
    let mut page = GrayImage::from_pixel(420, 330, Luma([255]));
    for y in 0..280 {
        for x in 0..280 {
            let v = pixels[(y / 10) * 28 + x / 10];
            page.put_pixel(x as u32 + 120, y as u32 + 20, Luma([255 - v]));
        }
    }
    page
}

/// The same digit as a canvas drawing: black strokes on a transparent background.
fn render_transparent(pixels: &[u8]) -> RgbaImage {
    let mut img = RgbaImage::from_pixel(200, 200, Rgba([0, 0, 0, 0]));
    for y in 0..168 {
        for x in 0..168 {
            let v = pixels[(y / 6) * 28 + x / 6];
            img.put_pixel(x as u32 + 16, y as u32 + 16, Rgba([0, 0, 0, v]));
        }
    }
    img
}

fn predicted_digit(stdout: &str, path: &Path) -> u8 {
    let prefix = format!("{}: ", path.display());
    let line = stdout.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("no line for {prefix} in {stdout}"));
    line[prefix.len()..prefix.len() + 1].parse().unwrap()
}

#[test]
fn train_eval_predict_end_to_end() {
    let tmp = tempfile::tempdir().unwrap();
    let p = |name: &str| tmp.path().join(name).to_str().unwrap().to_string();
    let (metrics, model, plot) = (p("metrics.jsonl"), p("model.safetensors"), p("curves.png"));
    let out = mnist(&[
        "train", "--device", "cpu", "--limit-train", "20000", "--limit-test", "2000", "--epochs", "2", "--hidden", "64",
        "--optimizer", "sgd", "--lr", "0.02", "--momentum", "0.9",
        "--metrics", &metrics, "--save", &model, "--plot", &plot, "--preview", "4",
    ]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    assert!(stdout.contains("epoch 1/2") && stdout.contains("epoch 2/2"), "{stdout}");
    assert!(stdout.contains("pred ") && stdout.contains("true "), "no preview in {stdout}");
    assert!(stdout.contains('█') || stdout.contains('▀'), "no half blocks in {stdout}");

    // One JSON object per epoch with the documented keys.
    let lines: Vec<serde_json::Value> =
        std::fs::read_to_string(&metrics).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2);
    for key in ["epoch", "train_loss", "train_acc", "test_loss", "test_acc", "seconds", "eval_seconds"] {
        assert!(lines[1].get(key).is_some_and(|v| v.is_number()), "{key} missing in {}", lines[1]);
    }
    let test_acc = lines[1]["test_acc"].as_f64().unwrap();
    eprintln!("test accuracy {test_acc}");
    assert!(test_acc > 0.93, "test accuracy {test_acc}");
    assert!(std::fs::read(&plot).unwrap().starts_with(b"\x89PNG"));

    // eval reproduces the accuracy training reported for the same 2,000 test images.
    let out = mnist(&["eval", "--model", &model, "--limit-test", "2000"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let want = format!("test accuracy {:.2}%", 100.0 * test_acc);
    assert!(stdout.contains(&want), "{want:?} not in {stdout}");
    assert!(stdout.contains("recall") && stdout.lines().count() >= 13, "{stdout}");

    // predict on test digits rendered as a user would photograph or draw them.
    let data = support::mnist();
    let mut paths = Vec::new();
    let mut labels = Vec::new();
    for i in 0..10 {
        let path = tmp.path().join(format!("digit{i}.{}", ["png", "jpg", "png"][i % 3]));
        if i % 3 == 2 {
            render_transparent(data.test.image(i)).save(&path).unwrap();
        } else {
            render_on_paper(data.test.image(i)).save(&path).unwrap();
        }
        paths.push(path);
        labels.push(data.test.labels[i]);
    }
    let mut args = vec!["predict".to_string(), "--model".into(), model.clone()];
    args.extend(paths.iter().map(|p| p.to_str().unwrap().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = mnist(&args);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let right = paths.iter().zip(&labels).filter(|(p, l)| predicted_digit(&stdout, p) == **l).count();
    eprintln!("{right} of 10 rendered digits read correctly");
    // Measured: 9 of 10. The miss is test image 8, an odd 5 that this small model reads as a 6
    // from the original 28x28 too (preprocessing gives back exactly that image).
    assert!(right >= 9, "{right} of 10 rendered digits read correctly:\n{stdout}");
    assert_eq!(stdout.matches("9: 0.").count() + stdout.matches("9: 1.").count(), 10, "ten probabilities per image");

    // A blank page and a file that is not an image: errors, exit code 1, the others still run.
    let blank = tmp.path().join("blank.png");
    GrayImage::from_pixel(50, 50, Luma([255])).save(&blank).unwrap();
    let junk = tmp.path().join("junk.png");
    std::fs::write(&junk, b"not a png").unwrap();
    let out = mnist(&["predict", "--model", &model, blank.to_str().unwrap(), junk.to_str().unwrap(), paths[0].to_str().unwrap()]);
    assert_fails(&out, 1, "blank");
    let (stdout, stderr) = text(&out);
    assert!(stderr.contains("cannot decode") && stdout.contains("digit0.png: 7"), "{stdout}\n{stderr}");

    // A model file that is not one, and one with the wrong shapes.
    std::fs::write(p("junk.safetensors"), b"\x08\x00\x00\x00\x00\x00\x00\x00{}").unwrap();
    assert_fails(&mnist(&["eval", "--model", &p("junk.safetensors")]), 1, "bad model file");
    let bytes = std::fs::read(&model).unwrap();
    let (from, to) = (b"\"layers\":\"784-64-relu-10\"", b"\"layers\":\"784-65-relu-10\"");
    let at = bytes.windows(from.len()).position(|w| w == from).unwrap();
    let mut wrong = bytes.clone();
    wrong[at..at + to.len()].copy_from_slice(to);
    std::fs::write(p("wrong.safetensors"), &wrong).unwrap();
    assert_fails(&mnist(&["predict", "--model", &p("wrong.safetensors"), paths[0].to_str().unwrap()]), 1, "[784, 65]");
    assert_fails(&mnist(&["eval", "--model", &p("missing.safetensors")]), 1, "missing.safetensors");
}

#[test]
fn gpu_and_auto_devices_say_what_they_use() {
    // --device gpu trains on the software adapter here, with the loud banner.
    let out = mnist(&["--device", "gpu", "--limit-train", "1000", "--limit-test", "500", "--epochs", "1", "--preview", "0"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("adapter:"), "{stderr}");
    assert!(stdout.contains("epoch 1/1"), "{stdout}");
    let software = stderr.contains("SOFTWARE adapter");

    // auto never trains on a software adapter: here it picks the CPU and says why.
    let out = mnist(&["--limit-train", "1000", "--limit-test", "500", "--epochs", "1", "--preview", "0"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("epoch 1/1"));
    if software {
        assert!(stderr.contains("training on the CPU instead") && stderr.contains("device: CPU"), "{stderr}");
    } else {
        assert!(stderr.contains("adapter:") && !stderr.contains("device: CPU"), "{stderr}");
    }
}

#[test]
fn predict_shows_scores_not_percentages_for_an_mse_model() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tmp.path().join("mse.safetensors");
    let model = model.to_str().unwrap();
    let out = mnist(&[
        "train", "--device", "cpu", "--limit-train", "1000", "--limit-test", "200", "--epochs", "1", "--layers", "784-32-relu-10",
        "--loss", "mse", "--save", model, "--preview", "0",
    ]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    let path = tmp.path().join("digit.png");
    let data = support::mnist();
    render_on_paper(data.test.image(0)).save(&path).unwrap();
    let out = mnist(&["predict", "--model", model, path.to_str().unwrap()]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let line = stdout.lines().find(|l| l.starts_with(&format!("{}: ", path.display()))).unwrap_or_else(|| panic!("{stdout}"));
    assert!(line.contains("(score ") && !line.contains('%'), "an MSE model's output read as a probability: {line}");
}
