//! MNIST in memory: where the files are, loading the training and test sets, subsets, and turning u8 pixels
//! into the f32 inputs the network sees.
//!
//! Pixels stay `u8` (47 MB for the training set; as f32 it would be 188 MB, more than one
//! storage binding holds on many adapters). They become f32 only when a batch is gathered:
//! `x = pixel * SCALE + SHIFT`, i.e. `(pixel / 255 - mean) / std` with MNIST's mean and
//! standard deviation, so inputs have mean 0 and variance 1. The GPU gather kernel
//! (`gather.rs`) uses the same two constants, and so does `predict`.

use std::path::{Path, PathBuf};

use crate::datasets::{DatasetKind, sha256_hex, FILE_NAMES, TEST_IMAGES, TEST_LABELS, TRAIN_IMAGES, TRAIN_LABELS};
use crate::error::{MnistError, Result};
use crate::idx::{self, IdxArray};

/// Side of an MNIST image; one image is `PIXELS = 28 * 28` bytes.
pub const SIDE: usize = 28;
pub const PIXELS: usize = SIDE * SIDE;
pub const CLASSES: usize = 10;

// ANCHOR: normalization
/// Mean and standard deviation of the training pixels scaled to [0, 1] (0.1307 = 33.318 / 255).
pub const MEAN: f32 = 0.1307;
pub const STD: f32 = 0.3081;
/// `x = pixel * SCALE + SHIFT` equals `(pixel / 255 - MEAN) / STD`.
pub const SCALE: f32 = 1.0 / (255.0 * STD);
pub const SHIFT: f32 = -MEAN / STD;
// ANCHOR_END: normalization

/// The environment variable naming the MNIST folder (Fashion-MNIST's is `FASHION_MNIST_DIR`,
/// see `datasets.rs`).
pub const DATA_ENV: &str = "MNIST_DIR";

/// One set (the training set or the test set): `images` is `[len, 28 * 28]` u8 row-major (0 = background), `labels` is `[len]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dataset {
    pub images: Vec<u8>,
    pub labels: Vec<u8>,
}

impl Dataset {
    /// Checks that `images` holds exactly one 784-byte image per label and labels are digits.
    pub fn new(images: Vec<u8>, labels: Vec<u8>) -> Result<Self> {
        if images.len() != labels.len() * PIXELS {
            return Err(MnistError::Dataset(format!(
                "{} bytes of pixels for {} labels (expected {} = labels x 784)",
                images.len(),
                labels.len(),
                labels.len() * PIXELS
            )));
        }
        if let Some(l) = labels.iter().find(|&&l| l as usize >= CLASSES) {
            return Err(MnistError::Dataset(format!("label {l} is not a class 0..9")));
        }
        Ok(Self { images, labels })
    }

    pub fn len(&self) -> usize {
        self.labels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Image `i`: 784 bytes, row-major.
    pub fn image(&self, i: usize) -> &[u8] {
        &self.images[i * PIXELS..(i + 1) * PIXELS]
    }

    /// The first `n` examples (all of them when `n >= len`).
    pub fn take(&self, n: usize) -> Dataset {
        let n = n.min(self.len());
        Dataset { images: self.images[..n * PIXELS].to_vec(), labels: self.labels[..n].to_vec() }
    }
}

/// The training set and the test set of a data set (MNIST or Fashion-MNIST: `kind` says which).
#[derive(Debug, Clone)]
pub struct Mnist {
    pub train: Dataset,
    pub test: Dataset,
    pub kind: DatasetKind,
}

/// The path of `name` in `dir`: the raw file if present, else `name.gz` (which may not exist).
pub fn file_path(dir: &Path, name: &str) -> PathBuf {
    let raw = dir.join(name);
    if raw.is_file() { raw } else { dir.join(format!("{name}.gz")) }
}

/// True when all four files are in `dir` (raw or gzipped).
pub fn files_present(dir: &Path) -> bool {
    FILE_NAMES.iter().all(|n| file_path(dir, n).is_file())
}

/// Loads one set (training or test) from an image and a label file, checking that their counts agree.
pub fn load_set(images: &Path, labels: &Path) -> Result<Dataset> {
    let img = idx::read_images(images)?;
    let lab = idx::read_labels(labels)?;
    set_from_arrays(img, lab, &images.display().to_string(), &labels.display().to_string())
        .map_err(|(on_images, msg)| if on_images { MnistError::Idx { path: images.to_path_buf(), msg } } else { MnistError::Dataset(msg) })
}

/// One set from checked IDX arrays: 28x28 images, as many as there are labels. `Err((true,
/// msg))` is about the image file alone, `Err((false, msg))` about the pair.
fn set_from_arrays(img: IdxArray, lab: IdxArray, images: &str, labels: &str) -> Result<Dataset, (bool, String)> {
    if img.dims[1] != SIDE || img.dims[2] != SIDE {
        return Err((true, format!("images are {}x{}, MNIST images are 28x28", img.dims[1], img.dims[2])));
    }
    // Zero images is a valid IDX file, but no data set: an accuracy over it is 0 / 0.
    if img.dims[0] == 0 {
        return Err((true, "it holds 0 images; a training or test set needs at least one".into()));
    }
    if img.dims[0] != lab.dims[0] {
        return Err((
            false,
            format!(
                "{images} holds {} images but {labels} holds {} labels; the counts must agree",
                img.dims[0], lab.dims[0]
            ),
        ));
    }
    Dataset::new(img.data, lab.data).map_err(|e| (false, e.to_string()))
}

/// The bytes of one of the four files of `kind` as a visitor's browser got them (fetched or
/// picked, gzipped or not) -> the checked IDX array. `name` is one of [`FILE_NAMES`] (with or
/// without `.gz`): the decompressed bytes must have its known SHA-256, so a truncated or altered
/// file is refused with a message that says which and why.
pub fn check_file(kind: DatasetKind, name: &str, bytes: &[u8]) -> Result<IdxArray, String> {
    let base = name.strip_suffix(".gz").unwrap_or(name);
    let want = kind
        .expected_sha256(base)
        .ok_or_else(|| format!("{name} is not one of {}'s files {FILE_NAMES:?}", kind.title()))?;
    let raw = if bytes.starts_with(&[0x1f, 0x8b]) { idx::gunzip(bytes).map_err(|e| format!("{name}: {e}"))? } else { bytes.to_vec() };
    let got = sha256_hex(&raw);
    if got != want {
        return Err(format!(
            "{name}: SHA-256 {got}, expected {want} for {} (a damaged or different file; fetch or pick it again)",
            kind.title()
        ));
    }
    let dims = if base.contains("labels") { 1 } else { 3 };
    let arr = idx::parse_idx(&raw, dims).map_err(|e| format!("{name}: {e}"))?;
    if dims == 1 {
        if let Some((i, &l)) = arr.data.iter().enumerate().find(|(_, l)| **l > 9) {
            return Err(format!("{name}: label {i} is {l}, not a class 0..9"));
        }
    }
    Ok(arr)
}

/// The training and test sets of `kind` from the checked files of [`check_file`], in the order of
/// [`FILE_NAMES`].
pub fn from_arrays(kind: DatasetKind, [train_images, train_labels, test_images, test_labels]: [IdxArray; 4]) -> Result<Mnist> {
    let set = |img, lab, i: &str, l: &str| set_from_arrays(img, lab, i, l).map_err(|(_, msg)| MnistError::Dataset(msg));
    Ok(Mnist {
        train: set(train_images, train_labels, TRAIN_IMAGES, TRAIN_LABELS)?,
        test: set(test_images, test_labels, TEST_IMAGES, TEST_LABELS)?,
        kind,
    })
}

/// Loads the training and test sets of `kind` from `dir` (both data sets use the same file
/// names and format).
pub fn load(dir: &Path, kind: DatasetKind) -> Result<Mnist> {
    let train = load_set(&file_path(dir, TRAIN_IMAGES), &file_path(dir, TRAIN_LABELS))?;
    let test = load_set(&file_path(dir, TEST_IMAGES), &file_path(dir, TEST_LABELS))?;
    Ok(Mnist { train, test, kind })
}

/// Where the data of `kind` lives: `--data-dir` if given, then `$MNIST_DIR` (Fashion-MNIST:
/// `$FASHION_MNIST_DIR`), then `data/mnist` (`data/fashion-mnist`) under the workspace (the
/// nearest folder above the current one whose Cargo.toml has `[workspace]`), else under the
/// current folder.
pub fn resolve_data_dir(cli: Option<&Path>, kind: DatasetKind) -> PathBuf {
    if let Some(dir) = cli {
        return dir.to_path_buf();
    }
    if let Some(dir) = std::env::var_os(kind.dir_env()).filter(|s| !s.is_empty()) {
        return PathBuf::from(dir);
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let root = cwd
        .ancestors()
        .find(|d| std::fs::read_to_string(d.join("Cargo.toml")).is_ok_and(|s| s.contains("[workspace]")))
        .unwrap_or(&cwd);
    root.join("data").join(kind.default_subdir())
}

/// `pixels` (u8) -> normalized f32 inputs, `out.len() == pixels.len()`.
pub fn normalize_into(pixels: &[u8], out: &mut [f32]) {
    for (o, &p) in out.iter_mut().zip(pixels) {
        *o = normalize(p);
    }
}

/// One pixel (u8) -> its normalized f32 input.
fn normalize(p: u8) -> f32 {
    p as f32 * SCALE + SHIFT
}

/// CPU reference of the GPU gather kernel: the batch `order[first .. first + count]` of `data`.
/// Returns `x: [count, 784]` normalized f32 and `labels: [count]`.
pub fn gather_batch_cpu(data: &Dataset, order: &[u32], first: usize, count: usize) -> (Vec<f32>, Vec<u8>) {
    let (mut x, mut labels) = (Vec::new(), Vec::new());
    gather_batch_into(data, order, first, count, &mut x, &mut labels);
    (x, labels)
}

/// [`gather_batch_cpu`] into vectors the caller keeps from batch to batch (their old contents
/// are replaced), so a training loop allocates and zeroes nothing per batch.
pub fn gather_batch_into(data: &Dataset, order: &[u32], first: usize, count: usize, x: &mut Vec<f32>, labels: &mut Vec<u8>) {
    x.clear();
    labels.clear();
    x.reserve(count * PIXELS);
    for &i in &order[first..first + count] {
        let i = i as usize;
        x.extend(data.image(i).iter().map(|&p| normalize(p)));
        labels.push(data.labels[i]);
    }
}

// ANCHOR: prefetch_batch
/// Asks the CPU to bring the images of the batch `order[first .. first + count]` into its caches
/// (x86-64 prefetch instructions; a no-op elsewhere), without waiting for them. A shuffled batch
/// is 64 images scattered over 47 MB: gathered cold, each of its 832 cache lines is a miss to
/// memory, which cost the CPU trainer about a sixth of its epoch. Asked for during the step
/// before, the lines arrive while that step computes.
pub fn prefetch_batch(data: &Dataset, order: &[u32], first: usize, count: usize) {
    #[cfg(target_arch = "x86_64")]
    for &i in &order[first.min(order.len())..(first + count).min(order.len())] {
        let image = data.image(i as usize);
        for line in (0..image.len()).step_by(64) {
            // SAFETY: a prefetch reads nothing and faults on nothing; the address is inside the image.
            unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(image.as_ptr().add(line).cast()) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (data, order, first, count);
}
// ANCHOR_END: prefetch_batch

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalization_matches_the_formula() {
        let mut out = [0f32; 3];
        normalize_into(&[0, 33, 255], &mut out);
        for (o, p) in out.iter().zip([0f32, 33.0, 255.0]) {
            let want = (p / 255.0 - MEAN) / STD;
            assert!((o - want).abs() < 1e-5, "{o} vs {want}");
        }
    }

    #[test]
    fn dataset_checks_counts_and_labels() {
        assert!(Dataset::new(vec![0; PIXELS * 2], vec![1, 2]).is_ok());
        let err = Dataset::new(vec![0; PIXELS * 2 + 1], vec![1, 2]).unwrap_err().to_string();
        assert!(err.contains("for 2 labels"), "{err}");
        assert!(Dataset::new(vec![0; PIXELS], vec![12]).is_err());
    }

    #[test]
    fn gather_into_reused_vectors_equals_a_fresh_gather_and_prefetch_is_harmless() {
        let images: Vec<u8> = (0..5 * PIXELS).map(|i| (i * 7 % 251) as u8).collect();
        let ds = Dataset::new(images, vec![1, 2, 3, 4, 5]).unwrap();
        let order = [4, 2, 0, 3, 1];
        // Stale, longer contents first: they must be replaced, not added to.
        let (mut x, mut labels) = (vec![f32::NAN; 7 * PIXELS], vec![9u8; 7]);
        for (first, count) in [(0, 3), (3, 2), (1, 4)] {
            gather_batch_into(&ds, &order, first, count, &mut x, &mut labels);
            assert_eq!((x.clone(), labels.clone()), gather_batch_cpu(&ds, &order, first, count));
        }
        // Prefetching past the end of the order (the batch after the last) asks for nothing.
        prefetch_batch(&ds, &order, 5, 64);
        prefetch_batch(&ds, &order, 3, 64);
    }

    #[test]
    fn gather_follows_the_order() {
        let images: Vec<u8> = (0..3 * PIXELS).map(|i| (i / PIXELS * 100) as u8).collect();
        let ds = Dataset::new(images, vec![4, 5, 6]).unwrap();
        let (x, labels) = gather_batch_cpu(&ds, &[2, 0, 1], 1, 2);
        assert_eq!(labels, vec![4, 5]);
        assert_eq!(x[0], SHIFT);
        assert!((x[PIXELS] - (100.0 * SCALE + SHIFT)).abs() < 1e-6);
    }

    #[test]
    fn a_set_of_zero_images_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (images, labels) = (dir.path().join("images"), dir.path().join("labels"));
        std::fs::write(&images, idx::encode_idx(&[0, 28, 28], &[])).unwrap();
        std::fs::write(&labels, idx::encode_idx(&[0], &[])).unwrap();
        let err = load_set(&images, &labels).unwrap_err().to_string();
        assert!(err.contains("0 images"), "{err}");
    }

    #[test]
    fn data_dir_prefers_the_flag() {
        assert_eq!(resolve_data_dir(Some(Path::new("/x/y")), DatasetKind::Fashion), PathBuf::from("/x/y"));
    }
}
