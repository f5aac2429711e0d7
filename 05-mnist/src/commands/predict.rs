//! `mnist predict --model PATH IMAGE...`: classify PNG or JPEG images with a saved model,
//! printing each one's class and the ten outputs (and, with `--show`, the 28x28 image the
//! network saw).

use crate::cli::PredictArgs;
use crate::error::{MnistError, Result};
use crate::model_io::{argmax, load_model};
use crate::preprocess;
use crate::preview::digit_lines;

/// Runs `mnist predict` with `args`.
pub(super) fn run(args: &PredictArgs) -> Result<()> {
    let model = load_model(&args.model)?;
    let mut classifier = model.classifier()?;
    let mut failures = 0;
    for path in &args.images {
        let result = preprocess::preprocess_file(path).and_then(|px| Ok((classifier.probabilities(&px)?, px)));
        match result {
            Ok((probs, px)) => {
                let class = argmax(&probs);
                let names = model.dataset.class_names();
                // A cross-entropy model's outputs are probabilities; an MSE model's are scores
                // (regressions on one-hot targets, possibly negative or above 1): no percent.
                let best = match model.spec.loss() {
                    gpu_layers::Loss::Mse => format!("score {:.3}", probs[class as usize]),
                    gpu_layers::Loss::CrossEntropy => format!("{:.1}%", 100.0 * probs[class as usize]),
                };
                println!("{}: {} ({best})", path.display(), names[class as usize]);
                let row: Vec<String> = probs.iter().enumerate().map(|(d, p)| format!("{}: {p:.4}", names[d])).collect();
                println!("  {}", row.join("  "));
                if args.show {
                    for line in digit_lines(&px) {
                        println!("  |{line}|");
                    }
                }
            }
            Err(e) => {
                eprintln!("error: {e}");
                failures += 1;
            }
        }
    }
    if failures > 0 {
        return Err(MnistError::InvalidArgument(format!("{failures} of {} images could not be classified", args.images.len())));
    }
    Ok(())
}
