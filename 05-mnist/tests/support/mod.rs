//! Helpers shared by the integration tests: where the real MNIST and Fashion-MNIST files are.

use std::path::PathBuf;

use mnist::datasets::DatasetKind;

/// `$MNIST_DIR`, else `../shared/data/mnist` beside the workspace. Panics (the test FAILS, it
/// does not skip) when the files are not there.
#[allow(dead_code)] // each test binary uses a different subset of these helpers
pub fn mnist_dir() -> PathBuf {
    let dir = std::env::var_os("MNIST_DIR")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/mnist"));
    assert!(
        mnist::data::files_present(&dir),
        "the MNIST files are missing from {} (set MNIST_DIR to the folder that holds them)",
        dir.display()
    );
    dir
}

/// The training and test sets of the real data, loaded once per test binary.
#[allow(dead_code)]
pub fn mnist() -> &'static mnist::data::Mnist {
    static DATA: std::sync::OnceLock<mnist::data::Mnist> = std::sync::OnceLock::new();
    DATA.get_or_init(|| mnist::data::load(&mnist_dir(), DatasetKind::Mnist).expect("loading the real MNIST files"))
}

/// `$FASHION_MNIST_DIR` (`.ci/run` installs Debian's `dataset-fashion-mnist` and points it at
/// `/usr/share/datasets/fashion-mnist`). Panics when the files are not there.
#[allow(dead_code)]
pub fn fashion_dir() -> PathBuf {
    let dir = std::env::var_os("FASHION_MNIST_DIR")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/share/datasets/fashion-mnist"));
    assert!(
        mnist::data::files_present(&dir),
        "the Fashion-MNIST files are missing from {} (install Debian's dataset-fashion-mnist, or set \
         FASHION_MNIST_DIR to the folder that holds them)",
        dir.display()
    );
    dir
}
