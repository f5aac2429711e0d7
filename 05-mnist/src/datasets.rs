//! The two data sets this stage trains on, and everything that differs between them: where the
//! files live and what they are called, where to download them, their checksums, and the names of their classes.
//!
//! - **MNIST**: 28x28 handwritten digits, classes `0` to `9`.
//! - **Fashion-MNIST** (Zalando, 2017): 28x28 photos of clothes in the same IDX format, the same
//!   file names and the same 60,000 training and 10,000 test images, with 10 classes from `T-shirt/top` to
//!   `Ankle boot`. A drop-in replacement that is much harder: a linear model gets ~84%, where it
//!   gets ~92% on digits.
//!
//! Both are read with the same code (`data.rs`, `idx.rs`) and normalised with the same
//! constants (MNIST's mean and standard deviation; the model file records the formula).

use sha2::{Digest, Sha256};

/// The four files, by their names without `.gz` (either form is accepted on disk); both data
/// sets use the same names.
pub const TRAIN_IMAGES: &str = "train-images-idx3-ubyte";
pub const TRAIN_LABELS: &str = "train-labels-idx1-ubyte";
pub const TEST_IMAGES: &str = "t10k-images-idx3-ubyte";
pub const TEST_LABELS: &str = "t10k-labels-idx1-ubyte";
pub const FILE_NAMES: [&str; 4] = [TRAIN_IMAGES, TRAIN_LABELS, TEST_IMAGES, TEST_LABELS];

/// Lower-case hex SHA-256 of `bytes` (to compare with [`DatasetKind::expected_sha256`]).
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Which data set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DatasetKind {
    /// Handwritten digits (LeCun, Cortes and Burges).
    #[default]
    Mnist,
    /// Zalando's Fashion-MNIST: clothes, the same format and sizes.
    Fashion,
}

/// SHA-256 of each decompressed MNIST file (identical to the official files).
const MNIST_SHA256: [&str; 4] = [
    "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
];

/// SHA-256 of each decompressed Fashion-MNIST file, in [`FILE_NAMES`] order. The publisher lists
/// MD5 sums of its gzipped files; these are of the bytes inside, so a mirror that gzips them
/// again (Debian's `dataset-fashion-mnist` package does) still matches.
const FASHION_SHA256: [&str; 4] = [
    "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
    "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
    "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
    "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
];

const DIGITS: [&str; 10] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];
const FASHION_CLASSES: [&str; 10] =
    ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"];

impl DatasetKind {
    /// `MNIST`, `Fashion-MNIST`.
    pub fn title(self) -> &'static str {
        match self {
            DatasetKind::Mnist => "MNIST",
            DatasetKind::Fashion => "Fashion-MNIST",
        }
    }

    /// The name on the command line and in model files: `mnist`, `fashion`.
    pub fn name(self) -> &'static str {
        match self {
            DatasetKind::Mnist => "mnist",
            DatasetKind::Fashion => "fashion",
        }
    }

    /// The inverse of [`DatasetKind::name`].
    pub fn from_name(name: &str) -> Option<Self> {
        [DatasetKind::Mnist, DatasetKind::Fashion].into_iter().find(|k| k.name() == name)
    }

    /// The environment variable naming the data folder: `MNIST_DIR`, `FASHION_MNIST_DIR`.
    pub fn dir_env(self) -> &'static str {
        match self {
            DatasetKind::Mnist => "MNIST_DIR",
            DatasetKind::Fashion => "FASHION_MNIST_DIR",
        }
    }

    /// The folder under the workspace's `data/` when neither a flag nor the variable says.
    pub fn default_subdir(self) -> &'static str {
        match self {
            DatasetKind::Mnist => "mnist",
            DatasetKind::Fashion => "fashion-mnist",
        }
    }

    /// The public mirrors, tried in this order. Each serves `<base><name>.gz`.
    pub fn mirrors(self) -> &'static [&'static str] {
        match self {
            DatasetKind::Mnist => &["https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/"],
            DatasetKind::Fashion => &[
                "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
                "https://github.com/zalandoresearch/fashion-mnist/raw/master/data/fashion/",
            ],
        }
    }

    /// The environment variable that replaces [`DatasetKind::mirrors`]: base URLs separated by
    /// commas (a local mirror, or a dead address in tests that must not reach the internet).
    pub fn mirrors_env(self) -> &'static str {
        match self {
            DatasetKind::Mnist => "MNIST_MIRRORS",
            DatasetKind::Fashion => "FASHION_MNIST_MIRRORS",
        }
    }

    /// The known SHA-256 (hex) of the decompressed file `name`, if it is one of the four.
    pub fn expected_sha256(self, name: &str) -> Option<&'static str> {
        let sums = match self {
            DatasetKind::Mnist => &MNIST_SHA256,
            DatasetKind::Fashion => &FASHION_SHA256,
        };
        FILE_NAMES.iter().position(|n| *n == name).map(|i| sums[i])
    }

    /// The ten class names, by label.
    pub fn class_names(self) -> &'static [&'static str; 10] {
        match self {
            DatasetKind::Mnist => &DIGITS,
            DatasetKind::Fashion => &FASHION_CLASSES,
        }
    }

    /// The name of class `label` (`?` past the tenth).
    pub fn class_name(self, label: u8) -> &'static str {
        self.class_names().get(label as usize).copied().unwrap_or("?")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_of_both_sets_has_a_sum_and_names_round_trip() {
        for kind in [DatasetKind::Mnist, DatasetKind::Fashion] {
            for name in FILE_NAMES {
                assert_eq!(kind.expected_sha256(name).map(str::len), Some(64), "{kind:?} {name}");
            }
            assert!(kind.expected_sha256("other").is_none());
            assert_eq!(DatasetKind::from_name(kind.name()), Some(kind));
            assert_eq!(kind.class_names().len(), 10);
        }
        assert_eq!(DatasetKind::Fashion.class_name(9), "Ankle boot");
        assert_eq!(DatasetKind::Mnist.class_name(3), "3");
        assert_eq!(DatasetKind::from_name("cifar"), None);
    }
}
