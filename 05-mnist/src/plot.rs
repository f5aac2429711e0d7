//! The loss and accuracy curves of a run, drawn with plotters into a PNG or an SVG.
//!
//! Fonts: plotters' default "ttf" feature asks the system (fontconfig) for fonts, so a plot
//! would fail, or the binary would not even start, on a machine without them. We enable
//! plotters' "ab_glyph" feature instead and register DejaVu Sans, embedded in the binary
//! (`common::register_fonts`): plots draw the same on any machine, with no font installed.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::{MnistError, Result};
use crate::metrics::EpochMetrics;

/// Checks that `path` ends in `.png` or `.svg` (before training, not after it).
pub fn check_plot_path(path: &Path) -> Result<()> {
    match path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
        Some("png" | "svg") => Ok(()),
        _ => Err(MnistError::InvalidArgument(format!("--plot {}: the file name must end in .png or .svg", path.display()))),
    }
}

/// Draws train/test loss (left) and accuracy (right) per epoch into `path`: `.svg` gives an
/// SVG, `.png` a PNG. The picture is drawn in memory and written atomically (a temporary file
/// and a rename), so an interrupted write never leaves half a plot.
pub fn plot_history(path: &Path, history: &[EpochMetrics]) -> Result<()> {
    check_plot_path(path)?;
    if history.is_empty() {
        return Err(MnistError::Plot("no epochs to plot".into()));
    }
    common::register_fonts();
    let size = (1100, 450);
    let svg = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("svg"));
    let plot_error = |e: String| MnistError::Plot(format!("{}: {e}", path.display()));
    let bytes = if svg {
        let mut text = String::new();
        {
            let root = SVGBackend::with_string(&mut text, size).into_drawing_area();
            draw(&root, history).and_then(|_| root.present().map_err(|e| e.to_string())).map_err(plot_error)?;
        }
        text.into_bytes()
    } else {
        let mut rgb = vec![0u8; size.0 as usize * size.1 as usize * 3];
        {
            let root = BitMapBackend::with_buffer(&mut rgb, size).into_drawing_area();
            draw(&root, history).and_then(|_| root.present().map_err(|e| e.to_string())).map_err(plot_error)?;
        }
        let img = image::RgbImage::from_raw(size.0, size.1, rgb).ok_or_else(|| plot_error("the picture has the wrong size".into()))?;
        let mut png = Vec::new();
        img.write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png).map_err(|e| plot_error(e.to_string()))?;
        png
    };
    crate::download::write_atomically(path, &bytes)
}

/// One curve: its legend, the value it plots, its colour.
type Series = (&'static str, fn(&EpochMetrics) -> f64, RGBColor);

fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, history: &[EpochMetrics]) -> Result<(), String> {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (left, right) = root.split_horizontally(550);
    let epochs = history.len() as f64;
    let x_range = 0.5..epochs + 0.5;
    let pick = |f: fn(&EpochMetrics) -> f64| history.iter().map(move |m| (m.epoch as f64, f(m)));

    let max_loss = history.iter().flat_map(|m| [m.train_loss, m.test_loss]).filter(|v| v.is_finite()).fold(0.0, f64::max);
    let loss_series: [Series; 2] = [("train", |m| m.train_loss, BLUE), ("test", |m| m.test_loss, RED)];
    panel(&left, "loss (cross-entropy)", x_range.clone(), 0.0..(max_loss * 1.1).max(1e-3), &loss_series, &pick)?;

    let min_acc = history.iter().flat_map(|m| [m.train_acc, m.test_acc]).fold(1.0, f64::min) * 100.0;
    let lo = (min_acc - 1.0).floor().clamp(0.0, 99.0);
    let acc_series: [Series; 2] = [("train", |m| 100.0 * m.train_acc, BLUE), ("test", |m| 100.0 * m.test_acc, RED)];
    panel(&right, "accuracy (%)", x_range, lo..100.0, &acc_series, &pick)
}

fn panel<'a, DB: DrawingBackend, I: Iterator<Item = (f64, f64)> + 'a>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
    series: &[Series],
    pick: &impl Fn(fn(&EpochMetrics) -> f64) -> I,
) -> Result<(), String> {
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(55)
        .build_cartesian_2d(x, y)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("epoch")
        // Epochs are whole numbers: label only the integer ticks.
        .x_label_formatter(&|v| if (v - v.round()).abs() < 1e-6 { format!("{v:.0}") } else { String::new() })
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(|e| e.to_string())?;
    for &(name, f, color) in series {
        chart
            .draw_series(LineSeries::new(pick(f), color.stroke_width(2)).point_size(3))
            .map_err(|e| e.to_string())?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history() -> Vec<EpochMetrics> {
        (1..=3)
            .map(|e| EpochMetrics {
                epoch: e,
                train_loss: 0.5 / e as f64,
                train_acc: 0.9 + 0.02 * e as f64,
                test_loss: 0.45 / e as f64,
                test_acc: 0.91 + 0.015 * e as f64,
                seconds: 1.0,
                images_per_sec: 6e4,
                eval_seconds: 0.1,
                record_seconds: 0.0,
            })
            .collect()
    }

    #[test]
    fn draws_png_and_svg_with_text() {
        let dir = tempfile::tempdir().unwrap();
        let png = dir.path().join("curves.png");
        plot_history(&png, &history()).unwrap();
        let bytes = std::fs::read(&png).unwrap();
        assert!(bytes.starts_with(b"\x89PNG"), "not a PNG");
        let svg = dir.path().join("curves.svg");
        plot_history(&svg, &history()[..1]).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("<svg") && text.contains("accuracy"), "no title text in the SVG");
    }

    #[test]
    fn nothing_to_plot_is_an_error() {
        assert!(plot_history(Path::new("x.png"), &[]).is_err());
    }

    #[test]
    fn only_png_and_svg_names_are_accepted() {
        for ok in ["a.png", "dir/b.SVG"] {
            check_plot_path(Path::new(ok)).unwrap();
        }
        for bad in ["curves.txt", "curves", "curves.jpg"] {
            let err = check_plot_path(Path::new(bad)).unwrap_err().to_string();
            assert!(err.contains(".png or .svg"), "{bad}: {err}");
        }
    }
}
