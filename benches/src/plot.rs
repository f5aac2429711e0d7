//! One SVG per operation: time per iteration against size, log-log, every function a curve.
//!
//! CPU curves are blue-green and solid, GPU kernel-only curves red and solid, GPU end-to-end
//! curves red-orange and dashed, so "with transfers" and "without" read apart at a glance.
//! Where two curves cross is where one side starts to win. The title names the GPU adapter
//! and the CPU that produced the numbers.

use std::path::Path;

use plotters::element::DashedPathElement;
use plotters::prelude::*;

use crate::crossover::{Operation, Side, fmt_size, fmt_time};

const CPU_COLORS: [RGBColor; 4] = [RGBColor(31, 119, 180), RGBColor(23, 190, 207), RGBColor(44, 160, 44), RGBColor(127, 127, 127)];
const GPU_COLORS: [RGBColor; 4] = [RGBColor(214, 39, 40), RGBColor(148, 103, 189), RGBColor(255, 127, 14), RGBColor(140, 86, 75)];

/// Writes `path` (an .svg file) for a numeric operation; titled with `adapter` and `cpu`.
pub fn plot(op: &Operation, adapter: &str, cpu: &str, path: &Path) -> Result<(), String> {
    let curves = op.curves();
    let points: Vec<(f64, f64)> = curves.iter().flat_map(|c| c.points.iter().copied()).collect();
    if points.is_empty() {
        return Err(format!("{}: nothing to plot", op.group));
    }
    let (xmin, xmax) = bounds(points.iter().map(|p| p.0));
    let (ymin, ymax) = bounds(points.iter().map(|p| p.1));
    // Some room around the data on log axes.
    let (xmin, xmax) = (xmin / 1.3, xmax * 1.3);
    let (ymin, ymax) = (ymin / 2.0, ymax * 2.0);

    let root = SVGBackend::new(path, (1000, 640)).into_drawing_area();
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let (head, body) = root.split_vertically(64);
    head.draw_text(&op.info.title, &("sans-serif", 20).into_font().color(&BLACK), (12, 8)).map_err(|e| err(&e))?;
    let sub = format!("GPU: {adapter}   CPU: {cpu}");
    head.draw_text(&sub, &("sans-serif", 13).into_font().color(&RGBColor(80, 80, 80)), (12, 38)).map_err(|e| err(&e))?;

    let mut chart = ChartBuilder::on(&body)
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(76)
        .build_cartesian_2d((xmin..xmax).log_scale(), (ymin..ymax).log_scale())
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc(op.info.x.as_str())
        .y_desc("time per iteration (lower is faster)")
        .x_label_formatter(&|x| fmt_size(x.round()))
        .y_label_formatter(&|y| fmt_time(*y))
        .label_style(("sans-serif", 13))
        .draw()
        .map_err(|e| err(&e))?;

    let (mut cpu_i, mut gpu_i) = (0, 0);
    for c in &curves {
        let color = if c.side == Side::Cpu {
            cpu_i += 1;
            CPU_COLORS[(cpu_i - 1) % CPU_COLORS.len()]
        } else {
            gpu_i += 1;
            GPU_COLORS[(gpu_i - 1) % GPU_COLORS.len()]
        };
        let style = color.stroke_width(2);
        let label = match c.side {
            Side::Cpu => format!("{} (CPU)", c.function),
            Side::GpuKernel => format!("{} (GPU, kernels only)", c.function),
            Side::GpuE2e => format!("{} (GPU, with transfers)", c.function),
        };
        let anno = if c.side == Side::GpuE2e {
            chart.draw_series(DashedLineSeries::new(c.points.iter().copied(), 8, 5, style)).map_err(|e| err(&e))?
        } else {
            chart.draw_series(LineSeries::new(c.points.iter().copied(), style)).map_err(|e| err(&e))?
        };
        let dashed = c.side == Side::GpuE2e;
        anno.label(label).legend(move |(x, y)| {
            let pts = vec![(x, y), (x + 20, y)];
            if dashed {
                DashedPathElement::new(pts, 5, 3, style).into_dyn()
            } else {
                PathElement::new(pts, style).into_dyn()
            }
        });
        chart.draw_series(c.points.iter().map(|&p| Circle::new(p, 3, color.filled()))).map_err(|e| err(&e))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .label_font(("sans-serif", 13))
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
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
    fn writes_an_svg_with_every_curve_and_the_adapter() {
        crate::harness::register_fonts();
        let dir = fixture::temp_dir("plot");
        for (i, n) in [64u64, 128, 256].into_iter().enumerate() {
            let p = n.to_string();
            fixture::write(&dir, "matmul", "cpu_best", &p, 1e4 * 8f64.powi(i as i32), false, "null");
            fixture::write(&dir, "matmul", "gpu_best_kernel", &p, 5e4 * 2f64.powi(i as i32), false, "null");
            fixture::write(&dir, "matmul", "gpu_best_e2e", &p, 9e4 * 4f64.powi(i as i32), false, "null");
        }
        let ops = operations(&results::load(&dir).unwrap());
        let path = dir.join("matmul.svg");
        plot(&ops[0], "Test GPU (Vulkan)", "Test CPU", &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        for needle in ["Test GPU (Vulkan)", "cpu_best (CPU)", "gpu_best_kernel (GPU, kernels only)", "gpu_best_e2e (GPU, with transfers)"] {
            assert!(svg.contains(needle), "{needle} missing from the plot");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
