//! `mnist train` (and `mnist` alone): check the flags and the output paths, load the data,
//! train with a progress bar per epoch, then write the model, metrics and plot, and show a few
//! test images with their predictions. Ctrl-C (or SIGTERM) stops the run and keeps the last
//! finished epoch.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use gpu_layers::Network;
use indicatif::{ProgressBar, ProgressStyle};
use rand::SeedableRng;
use rand::seq::index::sample;

use super::outputs::check_outputs;
use crate::cli::TrainArgs;
use crate::data::Dataset;
use crate::data_args::load_data;
use crate::datasets::DatasetKind;
use crate::error::{MnistError, Result};
use crate::metrics::{EpochMetrics, thousands, write_metrics};
use crate::model_io::{Classifier, Model, save_model};
use crate::plot;
use crate::preview::{PreviewItem, per_row_for, render_grid};
use crate::signals::{self, StopSignal};
use crate::train::{Device, Event, TrainConfig, TrainOutcome, select_device, train};

/// Builds the thread pool the CPU trainer divides its products among: `threads` workers, else
/// `RAYON_NUM_THREADS` (read by rayon itself), else one per core. Once per process, before any
/// CPU work.
fn build_thread_pool(threads: Option<usize>) -> Result<()> {
    let mut builder = rayon::ThreadPoolBuilder::new();
    if let Some(n) = threads {
        builder = builder.num_threads(n);
    }
    builder
        .build_global()
        .map_err(|e| MnistError::InvalidArgument(format!("--threads: could not start the thread pool ({e})")))?;
    // Stage 02's matmul (the composed reference path) sizes its strips the same way.
    cpu_matrix::set_num_threads(rayon::current_num_threads());
    Ok(())
}

fn terminal_columns() -> usize {
    std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()).unwrap_or(100)
}

/// Runs `mnist train` with `args`.
pub(super) fn run(args: &TrainArgs) -> Result<()> {
    // With --save, the loop hands over the parameters after every epoch, so that Ctrl-C can
    // save the model of the last finished epoch.
    let cfg = TrainConfig { epoch_models: args.save.is_some(), ..args.config() };
    cfg.validate()?;
    build_thread_pool(args.threads)?;
    let spec = cfg.spec()?;
    // Check the output paths before spending minutes training (`outputs.rs`): each a file name
    // in a folder that exists, writable under that name, and no two the same file.
    if let Some(path) = &args.plot {
        plot::check_plot_path(path)?;
    }
    let outputs = [("--save", &args.save), ("--metrics", &args.metrics), ("--plot", &args.plot)];
    let outputs: Vec<(&str, &Path)> = outputs.iter().filter_map(|(flag, p)| p.as_deref().map(|p| (*flag, p))).collect();
    check_outputs(&outputs)?;
    let data = load_data(&args.data, args.limit_train)?;
    let selected = select_device(args.device, &args.gpu_limits)?;
    match &selected.device {
        Device::Gpu(ctx) => {
            ctx.print_banner();
            if let Some(line) = args.gpu_limits.banner(&ctx.limits) {
                eprintln!("{line}");
            }
        }
        Device::Cpu => {
            if let Some(n) = selected.notice() {
                eprintln!("{n}");
            }
            eprintln!("device: {}", selected.device.describe());
        }
    }
    if let Device::Gpu(_) = &selected.device {
        match Network::fused_blocker(&spec) {
            None => println!("GPU tapes: the fused kernels"),
            Some(why) => println!("GPU tapes: composed ops, because {why}"),
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let stopped_by = stop_on_signal(stop.clone());
    println!(
        "model {} ({} parameters), {}, {:?} schedule, batch {}, {} epochs, seed {}",
        spec.describe(),
        thousands(spec.parameter_count() as u64),
        cfg.optimizer.describe(),
        cfg.schedule,
        cfg.batch_size,
        cfg.epochs,
        cfg.seed
    );

    // One bar per epoch, drawn on stderr only when it is a terminal; it fills the width.
    let new_bar = |len: u64, prefix: String| {
        let bar = ProgressBar::new(len);
        if !std::io::stderr().is_terminal() {
            bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
        }
        bar.set_style(
            ProgressStyle::with_template("{prefix} [{wide_bar:.cyan/blue}] {pos}/{len} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        bar.set_prefix(prefix);
        bar
    };
    let mut bar: Option<ProgressBar> = None;
    let epochs = cfg.epochs;
    let mut batches_per_epoch = 0;
    let mut epoch_model = None;
    let outcome = train(&selected.device, &data, &cfg, &stop, &mut |event| match event {
        Event::EpochStart { epoch, batches, lr, step_kernels, .. } => {
            if epoch == 1 && !step_kernels.is_empty() {
                // Stage 04's split step (its update also records a prologue per submission).
                let split = step_kernels.iter().any(|k| k.ends_with(" (split)"));
                let note = if split { "; each update also computes the next batch's x W1" } else { "" };
                println!("GPU step: {} dispatches ({}){note}", step_kernels.len(), step_kernels.join(", "));
            }
            batches_per_epoch = batches;
            bar = Some(new_bar(batches as u64, format!("epoch {epoch}/{epochs} lr {lr:.4}")));
        }
        Event::Progress(p) => {
            if let Some(bar) = &bar {
                let loss = if p.loss.is_nan() { "-".to_string() } else { format!("{:.4}", p.loss) };
                bar.set_message(format!("loss {loss} {} img/s", thousands(p.images_per_sec.round() as u64)));
                bar.set_position(p.batch as u64);
            }
        }
        Event::EpochEnd(m) => {
            if let Some(bar) = bar.take() {
                bar.finish_and_clear();
            }
            println!("{}", m.line(epochs));
        }
        Event::EpochModel(model) => epoch_model = Some(model.clone()),
    });
    if let Some(bar) = bar.take() {
        bar.finish_and_clear();
    }
    let outcome = outcome?;
    let train_seconds: f64 = outcome.history.iter().map(|m| m.seconds).sum();
    if let Some(last) = outcome.history.last() {
        println!(
            "trained {} epochs in {:.2} s ({:.3} s per epoch, training only): test accuracy {:.2}%",
            outcome.history.len(),
            train_seconds,
            train_seconds / outcome.history.len() as f64,
            100.0 * last.test_acc
        );
    }
    let mut outputs = OutputFiles { save: args.save.as_deref(), metrics: args.metrics.as_deref(), plot: args.plot.as_deref() };
    // Stopped: the model of the last finished epoch, which the metrics describe; before the end
    // of the first epoch, the parameters so far (there are no metrics yet).
    let signal = stopped_by.lock().unwrap_or_else(|p| p.into_inner()).unwrap_or(StopSignal::Interrupt);
    let interrupted = outcome.stopped.then(|| interrupted_message(&outcome, batches_per_epoch, &outputs, signal));
    let model = match (outcome.stopped, epoch_model) {
        (true, Some(m)) => m,
        _ => outcome.model,
    };
    if outcome.history.is_empty() {
        (outputs.metrics, outputs.plot) = (None, None);
    }
    let mut failures = write_outputs(&outputs, &model, &outcome.history);
    if let Some(last) = failures.pop() {
        for e in &failures {
            eprintln!("error: {e}");
        }
        if let Some(msg) = interrupted {
            eprintln!("{msg}");
        }
        return Err(last);
    }
    if let Some(msg) = interrupted {
        return Err(MnistError::Interrupted(msg));
    }
    if args.preview > 0 {
        let mut classifier = model.classifier()?;
        print!("{}", preview(&mut classifier, &data.test, args.preview, cfg.seed, data.kind)?);
    }
    Ok(())
}

/// First Ctrl-C or SIGTERM: sets `stop`, so the run ends after the current batch (CPU) or
/// submission (GPU) and writes what it has. Second: exits at once, writing nothing more.
/// (The handler runs on its own thread, so it works while the main thread waits for the GPU.)
/// Returns where the first signal is recorded, for the message at the end.
fn stop_on_signal(stop: Arc<AtomicBool>) -> Arc<Mutex<Option<StopSignal>>> {
    let first = Arc::new(Mutex::new(None));
    let seen = first.clone();
    let installed = signals::on_stop_signal(move |signal| {
        let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
        let name = signal.name();
        match *seen {
            None => {
                *seen = Some(signal);
                stop.store(true, Ordering::SeqCst);
                eprintln!(
                    "\n{name}: stopping after the current batch (CPU) or submission (GPU), then writing the \
                     model and metrics of the last finished epoch. {name} again exits at once."
                );
            }
            Some(before) => {
                let again = if before == signal { format!("{name} again") } else { format!("{name} after {}", before.name()) };
                eprintln!("\n{again}: exiting now; nothing more is written.");
                std::process::exit(130);
            }
        }
    });
    if let Err(e) = installed {
        eprintln!("warning: Ctrl-C or SIGTERM will end the run without saving anything ({e})");
    }
    first
}

/// What a run stopped by `signal` wrote, in one sentence per output kind.
fn interrupted_message(outcome: &TrainOutcome, batches: usize, out: &OutputFiles<'_>, signal: StopSignal) -> String {
    let done = outcome.history.len();
    let by = signal.name();
    let at = match outcome.batches_done {
        0 => format!("stopped by {by} before epoch {} began", done + 1),
        b => format!("stopped by {by} during epoch {} ({b} of {batches} batches done)", done + 1),
    };
    let written = |path: Option<&Path>, what: &str| path.map(|p| format!("{what} {}", p.display()));
    match outcome.history.last() {
        Some(m) => {
            let files: Vec<String> =
                [written(out.save, "model"), written(out.metrics, "metrics"), written(out.plot, "plot")].into_iter().flatten().collect();
            let files = if files.is_empty() { "nothing to write (no --save, --metrics or --plot)".to_string() } else { files.join(", ") };
            format!("{at}; kept epoch {}, the last finished one (test accuracy {:.2}%): {files}", m.epoch, 100.0 * m.test_acc)
        }
        None => match out.save {
            Some(p) => format!(
                "{at}: no epoch finished, so no metrics; the model as it was then (not evaluated) is in {}",
                p.display()
            ),
            None => format!("{at}: no epoch finished; nothing written"),
        },
    }
}

/// A few seeded random test images with the model's predictions, drawn in half blocks and
/// captioned with `kind`'s class names.
fn preview(
    classifier: &mut Classifier,
    test: &Dataset,
    count: usize,
    seed: u64,
    kind: DatasetKind,
) -> Result<String> {
    let count = count.min(test.len());
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let picks = sample(&mut rng, test.len(), count).into_vec();
    let images: Vec<u8> = picks.iter().flat_map(|&i| test.image(i).iter().copied()).collect();
    let predicted = classifier.predict(&images)?;
    let items: Vec<PreviewItem> = picks
        .iter()
        .zip(&predicted)
        .map(|(&i, &p)| PreviewItem { pixels: test.image(i), predicted: p, label: test.labels[i] })
        .collect();
    let names = kind.class_names();
    Ok(format!("\n{}", render_grid(&items, names, per_row_for(terminal_columns(), &items, names))))
}

/// The files a run writes when it ends.
#[derive(Debug, Clone, Copy, Default)]
struct OutputFiles<'a> {
    save: Option<&'a Path>,
    metrics: Option<&'a Path>,
    plot: Option<&'a Path>,
}

/// Writes the model first (the one output that cannot be made again without training again),
/// then the metrics, then the plot, each atomically, saying where each went. A failure of one
/// never prevents the others: the failures are returned, in that order.
fn write_outputs(out: &OutputFiles<'_>, model: &Model, history: &[EpochMetrics]) -> Vec<MnistError> {
    let mut failures = Vec::new();
    let mut write = |what: &str, path: Option<&Path>, f: &dyn Fn(&Path) -> Result<()>| {
        if let Some(path) = path {
            match f(path) {
                Ok(()) => eprintln!("{what}: {}", path.display()),
                Err(e) => failures.push(e),
            }
        }
    };
    write("model", out.save, &|p| save_model(p, model));
    write("metrics", out.metrics, &|p| write_metrics(p, history));
    write("plot", out.plot, &|p| plot::plot_history(p, history));
    failures
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_failing_output_does_not_prevent_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let spec = gpu_layers::NetworkSpec::new(784, &[4], 10).unwrap();
        let model = Model::new(spec.clone(), spec.init_parameters(1)).unwrap();
        let history = vec![EpochMetrics {
            epoch: 1,
            train_loss: 0.5,
            train_acc: 0.8,
            test_loss: 0.4,
            test_acc: 0.85,
            seconds: 1.0,
            images_per_sec: 1000.0,
            eval_seconds: 0.1,
            record_seconds: 0.0,
        }];
        // The metrics go into a folder that is not there (as if deleted during training).
        let (save, metrics, plot) = (dir.path().join("m.safetensors"), dir.path().join("gone/m.jsonl"), dir.path().join("p.png"));
        let out = OutputFiles { save: Some(&save), metrics: Some(&metrics), plot: Some(&plot) };
        let failures = write_outputs(&out, &model, &history);
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(failures[0].to_string().contains("gone"), "{}", failures[0]);
        assert_eq!(crate::model_io::load_model(&save).unwrap(), model);
        assert!(std::fs::read(&plot).unwrap().starts_with(b"\x89PNG"));
        // No temporary files are left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }
}
