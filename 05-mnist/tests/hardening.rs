//! The binary on what a hostile user or an unlucky disk can do, each of which once ended in a
//! lost model or a silent answer: two outputs that are one file under different spellings, a
//! file name the file system refuses, a model whose finite weights overflow into a finite
//! answer, a truncated JPEG, a data folder that is a file or a link loop. Each must end at
//! once (before any training) with a message that says what is wrong.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use gpu_layers::NetworkSpec;
use mnist::data::{CLASSES, PIXELS};
use mnist::model_io::{Model, save_model};

fn mnist(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mnist")).args(args).env("MNIST_MIRRORS", "http://127.0.0.1:9/").output().unwrap()
}

/// Exit status 1, `want` on stderr, and no epoch trained.
fn refused(out: &Output, want: &str) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(want), "{want:?} not in: {err}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("epoch 1/1"), "it trained first: {err}");
    err
}

/// `mnist train` for one small epoch with `outputs` as extra flags, run in `cwd`.
fn train_in(cwd: &Path, outputs: &[&str]) -> Output {
    let data = support::mnist_dir();
    #[rustfmt::skip]
    let mut args = vec![
        "train", "--device", "cpu", "--epochs", "1", "--limit-train", "200", "--limit-test", "50",
        "--hidden", "8", "--preview", "0", "--data-dir", data.to_str().unwrap(),
    ];
    args.extend_from_slice(outputs);
    Command::new(env!("CARGO_BIN_EXE_mnist")).args(&args).current_dir(cwd).output().unwrap()
}

#[test]
fn two_spellings_of_one_output_file_are_refused_before_training() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let abs = d.join("run.out");
    std::fs::create_dir(d.join("sub")).unwrap();
    let abs = abs.to_str().unwrap();
    for (save, metrics) in [("run.out", "./run.out"), ("run.out", abs), ("sub/../run.out", "run.out")] {
        let out = train_in(d, &["--save", save, "--metrics", metrics]);
        refused(&out, "--save and --metrics name the same file");
        assert!(!d.join("run.out").exists(), "{save} {metrics}: something was written");
    }
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(d, d.join("here")).unwrap();
        let out = train_in(d, &["--save", "here/run.out", "--metrics", "run.out"]);
        refused(&out, "name the same file");
        std::fs::write(d.join("run.out"), b"an older model").unwrap();
        std::os::unix::fs::symlink(d.join("run.out"), d.join("link.out")).unwrap();
        let out = train_in(d, &["--save", "run.out", "--metrics", "link.out"]);
        refused(&out, "name the same file");
        assert_eq!(std::fs::read(d.join("run.out")).unwrap(), b"an older model");
    }
}

#[test]
fn a_file_name_the_file_system_refuses_is_found_before_training() {
    let dir = tempfile::tempdir().unwrap();
    let long = format!("{}.safetensors", "m".repeat(300));
    let out = train_in(dir.path(), &["--save", &long]);
    refused(&out, "--save");
    refused(&out, "does not take that file name");
}

/// A model whose first layer's weights are all 3e38: each hidden sum overflows (the dark
/// background's pixels, negative once normalized, drive it to -inf), ReLU turns it into 0, so
/// the outputs are the last bias, finite, and every image reads as class 0 (an accuracy of
/// 9.80% on MNIST's test set, printed with exit status 0, before the bound).
fn model_that_overflows_into_zeros(dir: &Path) -> String {
    let spec = NetworkSpec::new(PIXELS, &[16], CLASSES).unwrap();
    let mut params = spec.init_parameters(3);
    params[0].data.iter_mut().for_each(|v| *v = 3e38);
    params[3].data[0] = 1.0;
    let path = dir.join("overflow.safetensors");
    save_model(&path, &Model::new(spec, params).unwrap()).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn eval_and_predict_refuse_an_overflowing_model_with_one_message() {
    let dir = tempfile::tempdir().unwrap();
    let model = model_that_overflows_into_zeros(dir.path());
    let data = support::mnist_dir();
    let out = mnist(&["eval", "--model", &model, "--data-dir", data.to_str().unwrap(), "--limit-test", "200"]);
    let eval_err = refused(&out, "the model cannot classify");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("test accuracy"), "an accuracy was printed");
    let digit = dir.path().join("digit.png");
    image::GrayImage::from_raw(28, 28, support::mnist().test.image(0).to_vec()).unwrap().save(&digit).unwrap();
    let out = mnist(&["predict", "--model", &model, digit.to_str().unwrap()]);
    let predict_err = refused(&out, "the model cannot classify");
    let line = |s: &str| s.lines().find(|l| l.contains("cannot classify")).unwrap_or_default().to_string();
    assert_eq!(line(&eval_err), line(&predict_err), "the same message");
}

#[test]
fn a_truncated_jpeg_is_refused_not_predicted() {
    let dir = tempfile::tempdir().unwrap();
    let spec = NetworkSpec::new(PIXELS, &[8], CLASSES).unwrap();
    let model = dir.path().join("m.safetensors");
    save_model(&model, &Model::new(spec.clone(), spec.init_parameters(1)).unwrap()).unwrap();
    // A dark digit-like bar on white paper, 120 x 160, as a photo would be.
    let img = image::GrayImage::from_fn(120, 160, |x, y| image::Luma([if (50..70).contains(&x) && (20..140).contains(&y) { 10 } else { 245 }]));
    let whole = dir.path().join("whole.jpg");
    img.save(&whole).unwrap();
    let out = mnist(&["predict", "--model", model.to_str().unwrap(), whole.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Cut in the middle of its scan.
    let bytes = std::fs::read(&whole).unwrap();
    let cut = dir.path().join("cut.jpg");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let out = mnist(&["predict", "--model", model.to_str().unwrap(), cut.to_str().unwrap()]);
    refused(&out, "truncated or damaged");
    assert!(String::from_utf8_lossy(&out.stdout).trim().is_empty(), "an answer was printed");
}

#[test]
fn a_data_folder_that_is_a_file_or_a_loop_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data.txt");
    std::fs::write(&file, b"not a folder").unwrap();
    let run = |data: &Path| {
        Command::new(env!("CARGO_BIN_EXE_mnist"))
            .args(["train", "--device", "cpu", "--epochs", "1", "--preview", "0", "--data-dir", data.to_str().unwrap()])
            .env("MNIST_MIRRORS", "http://127.0.0.1:9/")
            .output()
            .unwrap()
    };
    let err = refused(&run(&file), "is a file, not a folder");
    assert!(!err.contains("downloading"), "{err}");
    #[cfg(unix)]
    {
        let looped = dir.path().join("loop");
        std::os::unix::fs::symlink(&looped, &looped).unwrap();
        let err = refused(&run(&looped), "leads back to itself");
        assert!(!err.contains("downloading") && !err.contains("os error 17"), "{err}");
    }
}
