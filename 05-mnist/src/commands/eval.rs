//! `mnist eval --model PATH`: a saved model's accuracy and confusion matrix on the test set of
//! its data set (or `--dataset`'s), computed on the CPU.

use crate::cli::EvalArgs;
use crate::data;
use crate::data_args::find_data;
use crate::datasets::{DatasetKind, TEST_IMAGES, TEST_LABELS};
use crate::error::Result;
use crate::metrics::{Confusion, thousands};
use crate::model_io::load_model;

/// Runs `mnist eval` with `args`.
pub(super) fn run(args: &EvalArgs) -> Result<()> {
    let model = load_model(&args.model)?;
    let kind = args.data.dataset.unwrap_or(model.dataset);
    let dir = find_data(&args.data, kind)?;
    let mut test = data::load_set(&data::file_path(&dir, TEST_IMAGES), &data::file_path(&dir, TEST_LABELS))?;
    if let Some(n) = args.data.limit_test {
        test = test.take(n);
    }
    let start = std::time::Instant::now();
    let predicted = model.classifier()?.predict(&test.images)?;
    let confusion = Confusion::new(&test.labels, &predicted);
    println!("model {} ({}) from {}, on the {} test set", model.spec.describe(), model.dataset.title(), args.model.display(), kind.title());
    println!(
        "test accuracy {:.2}% ({} of {} images) in {:.2} s on the CPU",
        100.0 * confusion.accuracy(),
        thousands(confusion.correct()),
        thousands(confusion.total()),
        start.elapsed().as_secs_f64()
    );
    print!("{}", confusion.render());
    if kind != DatasetKind::Mnist {
        let names: Vec<String> = kind.class_names().iter().enumerate().map(|(i, n)| format!("{i} {n}")).collect();
        println!("classes: {}", names.join(", "));
    }
    Ok(())
}
