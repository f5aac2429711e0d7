//! Helpers shared by the integration tests: where the real MNIST and Fashion-MNIST files are.

use std::path::PathBuf;

use mnist::datasets::DatasetKind;

/// The first folder that holds the four files: `$var`, else each of `fallbacks`. Panics (the
/// test FAILS, it does not skip) naming every folder it tried and how to fix it.
fn first_with_files(var: &str, fallbacks: &[PathBuf], fix: &str) -> PathBuf {
    let from_env = std::env::var_os(var).filter(|s| !s.is_empty()).map(PathBuf::from);
    let tried: Vec<PathBuf> = from_env.into_iter().chain(fallbacks.iter().cloned()).collect();
    if let Some(dir) = tried.iter().find(|d| mnist::data::files_present(d)) {
        return dir.clone();
    }
    let names: Vec<String> = tried.iter().map(|d| d.display().to_string()).collect();
    panic!("the data set's files are in none of: {} ({fix})", names.join(", "));
}

/// The workspace's root (where `mnist` itself downloads into `data/`).
fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `$MNIST_DIR`, else `data/mnist` of the workspace (where `cargo run -p mnist` downloads it),
/// else `../shared/data/mnist` beside the workspace.
#[allow(dead_code)] // each test binary uses a different subset of these helpers
pub fn mnist_dir() -> PathBuf {
    first_with_files(
        "MNIST_DIR",
        &[workspace().join("data/mnist"), workspace().join("../shared/data/mnist")],
        "run `cargo run --release -p mnist` once to download it, or set MNIST_DIR to the folder that holds it",
    )
}

/// The training and test sets of the real data, loaded once per test binary.
#[allow(dead_code)]
pub fn mnist() -> &'static mnist::data::Mnist {
    static DATA: std::sync::OnceLock<mnist::data::Mnist> = std::sync::OnceLock::new();
    DATA.get_or_init(|| mnist::data::load(&mnist_dir(), DatasetKind::Mnist).expect("loading the real MNIST files"))
}

/// `$FASHION_MNIST_DIR`, else `data/fashion-mnist` of the workspace (where `mnist --dataset
/// fashion` downloads it), else Debian's `/usr/share/datasets/fashion-mnist` (`.ci/run` installs
/// `dataset-fashion-mnist`).
#[allow(dead_code)]
pub fn fashion_dir() -> PathBuf {
    first_with_files(
        "FASHION_MNIST_DIR",
        &[workspace().join("data/fashion-mnist"), PathBuf::from("/usr/share/datasets/fashion-mnist")],
        "install Debian's dataset-fashion-mnist, run `cargo run --release -p mnist -- --dataset fashion` once, or set FASHION_MNIST_DIR",
    )
}
