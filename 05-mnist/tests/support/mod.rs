//! Helpers shared by the integration tests: where the real MNIST files are.

use std::path::PathBuf;

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

/// Both splits of the real data, loaded once per test binary.
#[allow(dead_code)]
pub fn mnist() -> &'static mnist::data::Mnist {
    static DATA: std::sync::OnceLock<mnist::data::Mnist> = std::sync::OnceLock::new();
    DATA.get_or_init(|| mnist::data::load(&mnist_dir()).expect("loading the real MNIST files"))
}
