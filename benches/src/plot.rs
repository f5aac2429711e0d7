//! One plot (SVG or PNG) per operation: time per iteration against size, log-log, every function a curve.
//!
//! CPU curves are blue, cyan, green and solid; each GPU variant gets a warm colour, solid for
//! its kernels alone, dashed with the simple transfers and dotted (triangles) with the fast
//! ones (short dashes and crosses for the fast upload with a read in mapped memory), so
//! "without", "with" and "with the fast path" read apart at a glance.
//! Where two curves cross is where one side starts to win. The title names the GPU adapter
//! and the CPU that produced the numbers.

use std::path::Path;

use plotters::element::DashedPathElement;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::crossover::{FAST_E2E_SUFFIXES, Operation, Side, fmt_size, fmt_time};

const CPU_COLORS: [RGBColor; 4] = [RGBColor(31, 119, 180), RGBColor(23, 190, 207), RGBColor(44, 160, 44), RGBColor(127, 127, 127)];
const GPU_COLORS: [RGBColor; 4] = [RGBColor(214, 39, 40), RGBColor(148, 103, 189), RGBColor(255, 127, 14), RGBColor(140, 86, 75)];

/// Writes `path` for a numeric operation, titled with its adapter and CPU: an SVG when the
/// name ends in `.svg`, else a PNG.
pub fn plot(op: &Operation, path: &Path) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    if path.extension().is_some_and(|e| e == "svg") {
        draw(SVGBackend::new(path, SIZE).into_drawing_area(), op).map_err(|e| err(&e))
    } else {
        draw(BitMapBackend::new(path, SIZE).into_drawing_area(), op).map_err(|e| err(&e))
    }
}

/// Pixels of every plot.
const SIZE: (u32, u32) = (1000, 640);

type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

fn draw<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, op: &Operation) -> DrawResult<DB> {
    let curves = op.curves();
    let points: Vec<(f64, f64)> = curves.iter().flat_map(|c| c.points.iter().copied()).collect();
    let (xmin, xmax) = bounds(points.iter().map(|p| p.0));
    let (ymin, ymax) = bounds(points.iter().map(|p| p.1));
    // Some room around the data on log axes (and a valid range when there is no data).
    let (xmin, xmax) = if xmin < xmax { (xmin / 1.3, xmax * 1.3) } else { (1.0, 2.0) };
    let (ymin, ymax) = if ymin <= ymax { (ymin / 2.0, ymax * 2.0) } else { (1e-9, 1.0) };

    root.fill(&WHITE)?;
    let (head, body) = root.split_vertically(64);
    head.draw_text(&op.info.title, &("sans-serif", 20).into_font().color(&BLACK), (12, 8))?;
    let sub = format!("GPU: {}   CPU: {}", op.adapter, op.cpu);
    head.draw_text(&sub, &("sans-serif", 13).into_font().color(&RGBColor(80, 80, 80)), (12, 38))?;

    let mut chart = ChartBuilder::on(&body)
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(76)
        .build_cartesian_2d((xmin..xmax).log_scale(), (ymin..ymax).log_scale())?;
    chart
        .configure_mesh()
        .x_desc(op.info.x.as_str())
        .y_desc("time per iteration (lower is faster)")
        .x_label_formatter(&|x| fmt_size(x.round()))
        .y_label_formatter(&|y| fmt_time(*y))
        .label_style(("sans-serif", 13))
        .draw()?;

    // CPU functions each get a colour; a GPU variant's kernel-only and end-to-end curves share
    // one (solid and dashed), so the gap between them is the cost of the transfers.
    let mut cpu_i = 0;
    let mut gpu_stems: Vec<&str> = Vec::new();
    for c in &curves {
        let color = if c.side == Side::Cpu {
            cpu_i += 1;
            CPU_COLORS[(cpu_i - 1) % CPU_COLORS.len()]
        } else {
            let stem = variant_stem(&c.function);
            let i = gpu_stems.iter().position(|s| *s == stem).unwrap_or_else(|| {
                gpu_stems.push(stem);
                gpu_stems.len() - 1
            });
            GPU_COLORS[i % GPU_COLORS.len()]
        };
        let style = color.stroke_width(2);
        let label = match c.side {
            Side::Cpu => format!("{} (CPU)", c.function),
            side => format!("{} (GPU, {})", c.function, side.label()),
        };
        let look = Look::of(&c.function, c.side);
        let anno = match look.dash {
            Some((on, off)) => chart.draw_series(DashedLineSeries::new(c.points.iter().copied(), on, off, style))?,
            None => chart.draw_series(LineSeries::new(c.points.iter().copied(), style))?,
        };
        anno.label(label).legend(move |(x, y)| {
            let pts = vec![(x, y), (x + 20, y)];
            match look.dash {
                Some((on, off)) => DashedPathElement::new(pts, on, off, style).into_dyn(),
                None => PathElement::new(pts, style).into_dyn(),
            }
        });
        let points = c.points.iter().copied();
        match look.marker {
            Marker::Circle => chart.draw_series(points.map(|p| Circle::new(p, 3, color.filled())))?,
            Marker::Triangle => chart.draw_series(points.map(|p| TriangleMarker::new(p, 5, color.filled())))?,
            Marker::Cross => chart.draw_series(points.map(|p| Cross::new(p, 4, style)))?,
        };
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .label_font(("sans-serif", 13))
        .draw()?;
    root.present()?;
    Ok(())
}

/// How a curve is drawn: its dashes (`(on, off)` pixels; `None`: solid) and its point marker.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Look {
    dash: Option<(u32, u32)>,
    marker: Marker,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Marker {
    Circle,
    Triangle,
    Cross,
}

impl Look {
    /// Solid for the CPU and the kernels alone, dashed with the simple transfers, dotted with
    /// the fast ones, short dashes and crosses for the read in mapped memory (`_mapped_e2e`).
    fn of(function: &str, side: Side) -> Look {
        match side {
            Side::Cpu | Side::GpuKernel => Look { dash: None, marker: Marker::Circle },
            Side::GpuE2e => Look { dash: Some((8, 5)), marker: Marker::Circle },
            Side::GpuFastE2e if function.ends_with("_mapped_e2e") => Look { dash: Some((4, 3)), marker: Marker::Cross },
            Side::GpuFastE2e => Look { dash: Some((2, 4)), marker: Marker::Triangle },
        }
    }
}

/// A GPU function's name without its `_kernel(s)` / `_e2e` suffix (and the transfer path's
/// word before `_e2e`), so that a kernel's curves share a colour: `gpu_best_e2e` and
/// `gpu_best_fast_e2e` -> `gpu_best`.
fn variant_stem(function: &str) -> &str {
    FAST_E2E_SUFFIXES.iter().chain(&["_e2e", "_kernels", "_kernel"]).find_map(|s| function.strip_suffix(s)).unwrap_or(function)
}

fn bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    values.filter(|v| v.is_finite() && *v > 0.0).fold((f64::INFINITY, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crossover::operations;
    use crate::results::{self, fixture};

    #[test]
    fn variant_stems() {
        assert_eq!(variant_stem("gpu_best_e2e"), "gpu_best");
        assert_eq!(variant_stem("gpu_best_kernel"), "gpu_best");
        assert_eq!(variant_stem("gpu_kernels"), "gpu");
        assert_eq!(variant_stem("gpu_e2e"), "gpu");
        assert_eq!(variant_stem("gpu_best_fast_e2e"), "gpu_best");
        assert_eq!(variant_stem("gpu_fast_e2e"), "gpu");
        assert_eq!(variant_stem("gpu_mapped_e2e"), "gpu");
    }

    #[test]
    fn each_transfer_path_has_its_own_look() {
        let kernel = Look::of("gpu_best_kernel", Side::GpuKernel);
        let simple = Look::of("gpu_best_e2e", Side::GpuE2e);
        let fast = Look::of("gpu_best_fast_e2e", Side::GpuFastE2e);
        let mapped = Look::of("gpu_mapped_e2e", Side::GpuFastE2e);
        assert_eq!(kernel.dash, None);
        let looks = [kernel, simple, fast, mapped];
        for (i, a) in looks.iter().enumerate() {
            for b in &looks[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn writes_an_svg_with_every_curve_and_the_adapter() {
        common::register_fonts();
        let dir = fixture::temp_dir("plot");
        for (i, n) in [64u64, 128, 256].into_iter().enumerate() {
            let p = n.to_string();
            fixture::write(&dir, "matmul", "cpu_best", &p, 1e4 * 8f64.powi(i as i32), false, "null");
            fixture::write(&dir, "matmul", "gpu_best_kernel", &p, 5e4 * 2f64.powi(i as i32), false, "null");
            fixture::write(&dir, "matmul", "gpu_best_e2e", &p, 9e4 * 4f64.powi(i as i32), false, "null");
            fixture::write(&dir, "matmul", "gpu_best_fast_e2e", &p, 4e4 * 4f64.powi(i as i32), false, "null");
        }
        let mut ops = operations(&results::load(&dir).unwrap());
        ops[0].adapter = "Test GPU (Vulkan)".into();
        let path = dir.join("matmul.svg");
        plot(&ops[0], &path).unwrap();
        let png = dir.join("matmul.png");
        plot(&ops[0], &png).unwrap();
        let bytes = std::fs::read(&png).unwrap();
        assert!(bytes.starts_with(b"\x89PNG"), "not a PNG");
        let svg = std::fs::read_to_string(&path).unwrap();
        for needle in ["Test GPU (Vulkan)", "cpu_best (CPU)", "gpu_best_kernel (GPU, kernels only)", "gpu_best_e2e (GPU, with simple transfers)", "gpu_best_fast_e2e (GPU, with fast transfers)"] {
            assert!(svg.contains(needle), "{needle} missing from the plot");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
