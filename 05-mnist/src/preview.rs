//! A look at what the network does: test digits drawn in the terminal with Unicode half
//! blocks, each with its predicted and true label.
//!
//! One character cell is about twice as tall as it is wide, so a cell holds two pixels stacked
//! vertically: `▀` (upper on), `▄` (lower on), `█` (both), space (neither). A 28x28 digit is
//! 28 columns by 14 lines, and its pixels come out square.
//!
//! ```text
//!        ▄▄▄▄▄▄▄▄▄▄
//!      ▄██▀▀▀▀▀▀▀▀███
//!   ...
//!   pred 7 ok   true 7
//! ```

use crate::data::SIDE;

/// Pixels at or above this (of 255) are drawn as ink.
const INK: u8 = 100;
/// Blank columns between two digits.
const GAP: usize = 3;

/// One digit to draw: 784 pixels (0 = background), the network's guess and the truth.
pub struct PreviewItem<'a> {
    pub pixels: &'a [u8],
    pub predicted: u8,
    pub label: u8,
}

/// The lines of one digit: 14 rows of 28 half-block characters.
pub fn digit_lines(pixels: &[u8]) -> Vec<String> {
    (0..SIDE / 2)
        .map(|row| {
            (0..SIDE)
                .map(|x| {
                    let top = pixels[(2 * row) * SIDE + x] >= INK;
                    let bottom = pixels[(2 * row + 1) * SIDE + x] >= INK;
                    match (top, bottom) {
                        (true, true) => '█',
                        (true, false) => '▀',
                        (false, true) => '▄',
                        (false, false) => ' ',
                    }
                })
                .collect()
        })
        .collect()
}

/// `pred 7 ok   true 7` (or `pred 3 XX   true 5` when wrong), with the class names `names`.
fn caption(it: &PreviewItem<'_>, names: &[&str]) -> String {
    let name = |label: u8| names.get(label as usize).copied().unwrap_or("?");
    let mark = if it.predicted == it.label { "ok" } else { "XX" };
    format!("pred {} {mark}   true {}", name(it.predicted), name(it.label))
}

/// The width of one column of the grid: an image, or a longer caption.
fn column_width(items: &[PreviewItem<'_>], names: &[&str]) -> usize {
    items.iter().map(|it| caption(it, names).chars().count()).max().unwrap_or(0).max(SIDE)
}

/// Draws `items` side by side, `per_row` images to a row, each with a caption
/// `pred 7 ok   true 7` (or `pred 3 XX   true 5` when wrong) under it, in `names` (the data
/// set's class names: digits, or `Sneaker`, `Bag`, ...).
pub fn render_grid(items: &[PreviewItem<'_>], names: &[&str], per_row: usize) -> String {
    let per_row = per_row.max(1);
    let width = column_width(items, names);
    let pad = |s: &str| format!("{s}{}", " ".repeat(width - s.chars().count()));
    let mut out = String::new();
    for chunk in items.chunks(per_row) {
        let drawn: Vec<Vec<String>> = chunk.iter().map(|it| digit_lines(it.pixels)).collect();
        for line in 0..SIDE / 2 {
            let parts: Vec<String> = drawn.iter().map(|d| pad(&d[line])).collect();
            out.push_str(parts.join(&" ".repeat(GAP)).trim_end());
            out.push('\n');
        }
        let captions: Vec<String> = chunk.iter().map(|it| pad(&caption(it, names))).collect();
        out.push_str(captions.join(&" ".repeat(GAP)).trim_end());
        out.push_str("\n\n");
    }
    out
}

/// How many of `items` fit side by side in `columns` terminal columns.
pub fn per_row_for(columns: usize, items: &[PreviewItem<'_>], names: &[&str]) -> usize {
    let width = column_width(items, names);
    ((columns + GAP) / (width + GAP)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_blocks_stack_two_pixels() {
        let mut px = vec![0u8; SIDE * SIDE];
        px[0] = 255; // row 0, col 0: upper half of cell (0, 0)
        px[SIDE + 1] = 255; // row 1, col 1: lower half of cell (0, 1)
        px[2] = 255;
        px[SIDE + 2] = 255; // both halves of cell (0, 2)
        let lines = digit_lines(&px);
        assert_eq!(lines.len(), 14);
        assert!(lines[0].starts_with("▀▄█ "), "{:?}", lines[0]);
        assert_eq!(lines[0].chars().count(), 28);
    }

    #[test]
    fn grid_has_captions_and_marks_mistakes() {
        let px = vec![200u8; SIDE * SIDE];
        let items = [
            PreviewItem { pixels: &px, predicted: 7, label: 7 },
            PreviewItem { pixels: &px, predicted: 3, label: 5 },
            PreviewItem { pixels: &px, predicted: 1, label: 1 },
        ];
        let digits = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];
        let grid = render_grid(&items, &digits, 2);
        assert!(grid.contains("pred 7 ok   true 7"));
        assert!(grid.contains("pred 3 XX   true 5"));
        // Two rows of digits: 2 x (14 lines + caption + blank line).
        assert_eq!(grid.lines().count(), 32);
        assert_eq!(per_row_for(80, &items, &digits), 2);
        assert_eq!(per_row_for(124, &items, &digits), 4);
        // Longer class names widen the columns.
        let clothes = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"];
        let grid = render_grid(&items, &clothes, 3);
        assert!(grid.contains("pred Sneaker ok   true Sneaker   pred Dress XX   true Sandal"), "{grid}");
        assert_eq!(per_row_for(124, &items, &clothes), 3);
    }
}
