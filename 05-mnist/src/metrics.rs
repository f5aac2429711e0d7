//! What training reports: one [`EpochMetrics`] per epoch (printed, written as JSON lines,
//! plotted), and the [`Confusion`] matrix that `eval` prints.

#[cfg(not(target_arch = "wasm32"))]
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::data::CLASSES;
#[cfg(not(target_arch = "wasm32"))]
use crate::error::{MnistError, Result};

/// One epoch. Losses are mean cross-entropy per image; accuracies are fractions in [0, 1].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EpochMetrics {
    /// 1-based.
    pub epoch: usize,
    pub train_loss: f64,
    pub train_acc: f64,
    pub test_loss: f64,
    pub test_acc: f64,
    /// Wall-clock seconds of the epoch's training (evaluation not included).
    pub seconds: f64,
    /// Training images per second of wall-clock time.
    pub images_per_sec: f64,
    /// Wall-clock seconds of the evaluation on the test set that follows the training (0 in
    /// files written before it was measured).
    #[serde(default)]
    pub eval_seconds: f64,
    /// On the GPU: wall-clock seconds of the epoch's training the CPU spent recording and
    /// submitting its steps (0 on the CPU, and in files written before it was measured). Where
    /// it nears `seconds`, the CPU, not the GPU, sets the pace.
    #[serde(default)]
    pub record_seconds: f64,
}

impl EpochMetrics {
    /// `epoch  3  train loss 0.0812 acc 97.58%  test loss 0.0921 acc 97.12%  1.840 s  32,608 img/s  eval 0.020 s`
    pub fn line(&self, epochs: usize) -> String {
        let w = epochs.to_string().len();
        format!(
            "epoch {:>w$}/{epochs}  train loss {:.4} acc {:6.2}%  test loss {:.4} acc {:6.2}%  {:7.3} s  {:>9} img/s  eval {:.3} s",
            self.epoch,
            self.train_loss,
            100.0 * self.train_acc,
            self.test_loss,
            100.0 * self.test_acc,
            self.seconds,
            thousands(self.images_per_sec.round() as u64),
            self.eval_seconds,
        )
    }
}

/// `1234567` -> `1,234,567`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Writes `history` to `path`, one JSON object per line (JSON Lines), replacing the file.
/// Native only: a browser page has no files.
#[cfg(not(target_arch = "wasm32"))]
pub fn write_metrics(path: &Path, history: &[EpochMetrics]) -> Result<()> {
    let mut text = Vec::new();
    for m in history {
        serde_json::to_writer(&mut text, m).map_err(|e| MnistError::io(path, e.into()))?;
        text.push(b'\n');
    }
    // Atomically, like the model: an interrupted write never leaves half a file.
    crate::download::write_atomically(path, &text)
}

/// `counts[true][predicted]`: how often digit `true` was read as `predicted`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Confusion {
    pub counts: [[u64; CLASSES]; CLASSES],
}

impl Confusion {
    pub fn new(labels: &[u8], predicted: &[u8]) -> Self {
        let mut c = Confusion::default();
        for (&l, &p) in labels.iter().zip(predicted) {
            c.counts[l as usize][p as usize] += 1;
        }
        c
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().flatten().sum()
    }

    pub fn correct(&self) -> u64 {
        (0..CLASSES).map(|i| self.counts[i][i]).sum()
    }

    pub fn accuracy(&self) -> f64 {
        self.correct() as f64 / self.total() as f64
    }

    /// The matrix as a table: rows are true digits, columns predicted digits, with each row's
    /// recall at the end.
    pub fn render(&self) -> String {
        let mut s = String::from("true \\ predicted");
        s.push('\n');
        s.push_str("      ");
        for p in 0..CLASSES {
            s.push_str(&format!("{p:>6}"));
        }
        s.push_str("   recall\n");
        for t in 0..CLASSES {
            s.push_str(&format!("{t:>5} "));
            for p in 0..CLASSES {
                s.push_str(&format!("{:>6}", self.counts[t][p]));
            }
            let row: u64 = self.counts[t].iter().sum();
            s.push_str(&format!("   {:6.2}%\n", 100.0 * self.counts[t][t] as f64 / row.max(1) as f64));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confusion_counts_and_renders() {
        let c = Confusion::new(&[1, 1, 2, 3], &[1, 7, 2, 3]);
        assert_eq!((c.total(), c.correct()), (4, 3));
        assert_eq!(c.counts[1][7], 1);
        let text = c.render();
        assert_eq!(text.lines().count(), 12);
        assert!(text.contains(" 50.00%"), "{text}");
    }

    #[test]
    fn metrics_are_json_lines_with_the_documented_keys() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.jsonl");
        let m = EpochMetrics { epoch: 1, train_loss: 0.5, train_acc: 0.9, test_loss: 0.4, test_acc: 0.91, seconds: 2.0, images_per_sec: 3e4, eval_seconds: 0.1, record_seconds: 0.0 };
        write_metrics(&path, &[m, EpochMetrics { epoch: 2, ..m }]).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 2);
        let v: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        for key in ["epoch", "train_loss", "train_acc", "test_loss", "test_acc", "seconds", "eval_seconds", "record_seconds"] {
            assert!(v.get(key).is_some(), "missing {key}");
        }
        assert_eq!(thousands(1234567), "1,234,567");
        assert!(m.line(10).contains("acc  90.00%"));
    }
}
