//! The binary on files that are wrong in ways that used to exhaust memory or print a wrong
//! answer: a device or a huge file where a model or an IDX file belongs, a test set of zero
//! images, a model whose finite weights overflow. Each must end at once with a message.
//!
//! The binary runs under `ulimit -v` (2 GB of address space), so a reader that tries to load
//! such a file whole fails the test with "out of memory" instead of taking the machine's memory.

mod support;

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use gpu_layers::NetworkSpec;
use mnist::data::{CLASSES, PIXELS, file_path};
use mnist::datasets::{TEST_IMAGES, TEST_LABELS, TRAIN_IMAGES, TRAIN_LABELS};
use mnist::idx::encode_idx;
use mnist::model_io::{Model, save_model};

/// Runs `mnist ARGS` with at most 2 GB of address space; returns the output and how long it took.
fn mnist_limited(args: &[&str]) -> (Output, Duration) {
    let start = Instant::now();
    let out = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 2000000 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_mnist"))
        .args(args)
        .env("MNIST_MIRRORS", "http://127.0.0.1:9/")
        .output()
        .unwrap();
    (out, start.elapsed())
}

fn fails_with(out: &Output, took: Duration, want: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(want), "{want:?} not in {err}");
    assert!(!err.contains("out of memory"), "{err}");
    assert!(took < Duration::from_secs(20), "took {took:?}");
}

/// The real training files and the given test files in a new folder.
fn data_dir_with_test(dir: &Path, images: &[u8], labels: &[u8]) {
    let src = support::mnist_dir();
    for name in [TRAIN_IMAGES, TRAIN_LABELS] {
        let from = file_path(&src, name);
        std::fs::copy(&from, dir.join(from.file_name().unwrap())).unwrap();
    }
    std::fs::write(dir.join(TEST_IMAGES), images).unwrap();
    std::fs::write(dir.join(TEST_LABELS), labels).unwrap();
}

fn saved(dir: &Path, name: &str, value: Option<f32>) -> String {
    let spec = NetworkSpec::new(PIXELS, &[16], CLASSES).unwrap();
    let mut params = spec.init_parameters(3);
    if let Some(v) = value {
        // +v, -v, +v, ...: finite, and for v = 1e30 the sums overflow on any input.
        params.iter_mut().flat_map(|p| p.data.iter_mut()).enumerate().for_each(|(i, x)| *x = if i % 2 == 0 { v } else { -v });
    }
    let path = dir.join(name);
    save_model(&path, &Model::new(spec, params).unwrap()).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn a_device_as_the_model_fails_at_once() {
    let (out, took) = mnist_limited(&["eval", "--model", "/dev/zero"]);
    fails_with(&out, took, "/dev/zero: bad model file: not a safetensors file: its first 8 bytes announce a header of 0 bytes");
    let (out, took) = mnist_limited(&["predict", "--model", "/dev/urandom", "x.png"]);
    fails_with(&out, took, "/dev/urandom: bad model file");
}

#[test]
fn a_huge_idx_file_is_refused_from_its_header() {
    let dir = tempfile::tempdir().unwrap();
    let model = saved(dir.path(), "m.safetensors", None);
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    data_dir_with_test(&data, &[], &encode_idx(&[1], &[0]));
    // 3 GB of zeros (a sparse file: no disk used), where the test images belong.
    std::fs::File::create(data.join(TEST_IMAGES)).unwrap().set_len(3 << 30).unwrap();
    let (out, took) = mnist_limited(&["eval", "--model", &model, "--data-dir", data.to_str().unwrap()]);
    fails_with(&out, took, "t10k-images-idx3-ubyte: not a valid MNIST IDX file: bad magic number 0x00000000");
    // A valid header that announces 4,000,000 images (3.1 GB): refused from the header alone.
    let mut header = encode_idx(&[4_000_000, 28, 28], &[]);
    header.resize(1 << 20, 0);
    std::fs::write(data.join(TEST_IMAGES), &header).unwrap();
    let (out, took) = mnist_limited(&["eval", "--model", &model, "--data-dir", data.to_str().unwrap()]);
    fails_with(&out, took, "more than the 512 MiB");
}

#[test]
fn a_test_set_of_zero_images_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let model = saved(dir.path(), "m.safetensors", None);
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    data_dir_with_test(&data, &encode_idx(&[0, 28, 28], &[]), &encode_idx(&[0], &[]));
    let (out, took) = mnist_limited(&["eval", "--model", &model, "--data-dir", data.to_str().unwrap()]);
    fails_with(&out, took, "it holds 0 images");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("NaN"));
}

#[test]
fn a_model_whose_outputs_overflow_is_named_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let model = saved(dir.path(), "huge.safetensors", Some(1e30));
    let dir_arg = support::mnist_dir();
    let (out, took) = mnist_limited(&["eval", "--model", &model, "--data-dir", dir_arg.to_str().unwrap(), "--limit-test", "100"]);
    fails_with(&out, took, "the forward pass overflows f32");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("test accuracy"), "an accuracy was printed");

    let digit = dir.path().join("digit.png");
    let img = support::mnist().test.image(0).to_vec();
    image::GrayImage::from_raw(28, 28, img).unwrap().save(&digit).unwrap();
    let (out, took) = mnist_limited(&["predict", "--model", &model, digit.to_str().unwrap()]);
    fails_with(&out, took, "the model cannot classify");
}

#[test]
fn a_folder_as_an_output_is_refused_before_training() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.safetensors");
    let data = support::mnist_dir();
    let (out, took) = mnist_limited(&[
        "train", "--device", "cpu", "--epochs", "1", "--limit-train", "500", "--limit-test", "100", "--preview", "0",
        "--data-dir", data.to_str().unwrap(), "--save", model.to_str().unwrap(), "--metrics", dir.path().to_str().unwrap(),
    ]);
    fails_with(&out, took, "--metrics");
    fails_with(&out, took, "that is a folder");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("epoch 1/1"), "it trained first");
    // Two outputs naming one file.
    let (out, took) = mnist_limited(&[
        "train", "--device", "cpu", "--epochs", "1", "--data-dir", data.to_str().unwrap(),
        "--save", model.to_str().unwrap(), "--metrics", model.to_str().unwrap(),
    ]);
    fails_with(&out, took, "--save and --metrics name the same file");
}
