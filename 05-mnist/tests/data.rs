//! The IDX reader on the real MNIST files, and on broken copies of them.

mod support;

use mnist::data::{self, PIXELS};
use mnist::datasets::{self, DatasetKind, TEST_IMAGES, TEST_LABELS, TRAIN_LABELS};
use mnist::idx;

#[test]
fn real_files_have_the_documented_sanity_figures() {
    let m = support::mnist();
    assert_eq!(m.train.len(), 60_000);
    assert_eq!(m.test.len(), 10_000);
    assert_eq!(m.train.images.len(), 60_000 * PIXELS);
    assert_eq!(&m.train.labels[..10], &[5, 0, 4, 1, 9, 2, 1, 3, 1, 4]);
    assert_eq!(&m.test.labels[..10], &[7, 2, 1, 0, 4, 1, 4, 9, 5, 9]);
    let mean = m.train.images.iter().map(|&p| p as f64).sum::<f64>() / m.train.images.len() as f64;
    assert!((mean - 33.318).abs() < 0.001, "mean training pixel {mean}");
    // Every digit occurs, roughly 10% each.
    for d in 0..10u8 {
        let n = m.train.labels.iter().filter(|&&l| l == d).count();
        assert!((5_000..7_000).contains(&n), "digit {d}: {n}");
    }
}

/// Fashion-MNIST: the same format and sizes, its own checksums, ten balanced classes.
#[test]
fn fashion_mnist_loads_with_its_checksums_and_classes() {
    let dir = support::fashion_dir();
    let kind = DatasetKind::Fashion;
    for name in datasets::FILE_NAMES {
        let bytes = idx::read_maybe_gzip(&data::file_path(&dir, name)).unwrap();
        assert_eq!(mnist::download::sha256_hex(&bytes), kind.expected_sha256(name).unwrap(), "{name}");
    }
    let m = data::load(&dir, kind).unwrap();
    assert_eq!((m.train.len(), m.test.len(), m.kind), (60_000, 10_000, kind));
    for c in 0..10u8 {
        assert_eq!(m.train.labels.iter().filter(|&&l| l == c).count(), 6_000, "{}", kind.class_name(c));
    }
    // The first test image is an ankle boot (the publisher's README shows it).
    assert_eq!(kind.class_name(m.test.labels[0]), "Ankle boot");
}

#[test]
fn decompressed_files_match_the_known_checksums() {
    let dir = support::mnist_dir();
    for name in datasets::FILE_NAMES {
        let bytes = idx::read_maybe_gzip(&data::file_path(&dir, name)).unwrap();
        assert_eq!(mnist::download::sha256_hex(&bytes), mnist::download::expected_sha256(name).unwrap(), "{name}");
    }
}

#[test]
fn mismatched_counts_truncated_and_swapped_files_are_clear_errors() {
    let src = support::mnist_dir();
    let tmp = tempfile::tempdir().unwrap();
    let test_images = idx::read_maybe_gzip(&data::file_path(&src, TEST_IMAGES)).unwrap();
    let test_labels = idx::read_maybe_gzip(&data::file_path(&src, TEST_LABELS)).unwrap();
    let train_labels = idx::read_maybe_gzip(&data::file_path(&src, TRAIN_LABELS)).unwrap();
    let images = tmp.path().join("images");
    let labels = tmp.path().join("labels");
    std::fs::write(&images, &test_images).unwrap();

    // 10,000 test images with 60,000 training labels.
    std::fs::write(&labels, &train_labels).unwrap();
    let err = data::load_set(&images, &labels).unwrap_err().to_string();
    assert!(err.contains("10000 images") && err.contains("60000 labels"), "{err}");

    // A truncated image file (an interrupted copy).
    std::fs::write(&labels, &test_labels).unwrap();
    std::fs::write(&images, &test_images[..test_images.len() - 1000]).unwrap();
    let err = data::load_set(&images, &labels).unwrap_err().to_string();
    assert!(err.contains("truncated") && err.contains("images"), "{err}");

    // Labels where images belong.
    std::fs::write(&images, &test_labels).unwrap();
    let err = data::load_set(&images, &labels).unwrap_err().to_string();
    assert!(err.contains("bad magic number 0x00000801"), "{err}");

    // Random bytes in a .gz file.
    let gz = tmp.path().join("junk.gz");
    let mut junk = vec![0x1f, 0x8b];
    junk.extend((0..5000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8));
    std::fs::write(&gz, &junk).unwrap();
    let err = data::load_set(&gz, &labels).unwrap_err().to_string();
    assert!(err.contains("gzip"), "{err}");

    // Good files load.
    std::fs::write(&images, &test_images).unwrap();
    assert_eq!(data::load_set(&images, &labels).unwrap().len(), 10_000);
}
