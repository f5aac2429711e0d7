//! A drawing of any size into an MNIST-like 28x28 image, the way MNIST itself was made:
//! light ink on a dark background, the digit's bounding box scaled (keeping its aspect ratio,
//! with area averaging, which anti-aliases) to fit a 20x20 box, then placed in the 28x28 frame
//! so that its centre of mass sits at the centre.
//!
//! Skipping any of these steps costs a lot of accuracy: a network trained on MNIST has never
//! seen a digit touching the border, a tiny digit in a corner, or dark ink on white.

use crate::data::SIDE;

/// The box the digit's longer side is scaled to (MNIST: 20 pixels in a 28-pixel frame).
pub const BOX: usize = 20;
/// Pixels darker than this fraction of the brightest one do not count as ink when cropping
/// (anti-aliasing fringes, JPEG noise).
const INK_FRACTION: f32 = 0.1;
/// A drawing whose brightest ink is below this (out of 255) is taken as empty.
const MIN_INK: f32 = 32.0;

/// `grey: [height, width]` bytes, row-major, either polarity -> `[28 * 28]` bytes, 0 = background.
/// `Err` says why there is nothing to classify (an empty drawing).
pub fn to_mnist(grey: &[u8], width: usize, height: usize) -> Result<Vec<u8>, String> {
    if width == 0 || height == 0 || grey.len() != width * height {
        return Err(format!("{} pixels for a {width}x{height} image", grey.len()));
    }
    // 1. Polarity: MNIST is light ink on black. A light border means dark ink on paper.
    let border: Vec<u8> = (0..width)
        .flat_map(|x| [grey[x], grey[(height - 1) * width + x]])
        .chain((0..height).flat_map(|y| [grey[y * width], grey[y * width + width - 1]]))
        .collect();
    let border_mean = border.iter().map(|&v| v as f32).sum::<f32>() / border.len() as f32;
    let invert = border_mean > 127.5;
    // Ink is how much brighter than the (mean border) background a pixel is, after inverting.
    let background = if invert { 255.0 - border_mean } else { border_mean };
    let ink: Vec<f32> = grey
        .iter()
        .map(|&v| {
            let v = if invert { 255.0 - v as f32 } else { v as f32 };
            (v - background).max(0.0)
        })
        .collect();

    // 2. The bounding box of the ink.
    let peak = ink.iter().copied().fold(0.0, f32::max);
    if peak < MIN_INK {
        return Err("the drawing is empty: draw a digit first".to_string());
    }
    let threshold = peak * INK_FRACTION;
    let (mut x0, mut y0, mut x1, mut y1) = (width, height, 0, 0);
    for y in 0..height {
        for x in 0..width {
            if ink[y * width + x] > threshold {
                x0 = x0.min(x);
                x1 = x1.max(x + 1);
                y0 = y0.min(y);
                y1 = y1.max(y + 1);
            }
        }
    }
    let (w, h) = (x1 - x0, y1 - y0);
    let crop: Vec<f32> = (y0..y1).flat_map(|y| ink[y * width + x0..y * width + x1].iter().copied()).collect();

    // 3. Scale the longer side to BOX pixels, keeping the aspect ratio.
    let scale = BOX as f32 / w.max(h) as f32;
    let nw = ((w as f32 * scale).round() as usize).clamp(1, BOX);
    let nh = ((h as f32 * scale).round() as usize).clamp(1, BOX);
    let small = resize_area(&crop, w, h, nw, nh);
    let top = small.iter().copied().fold(0.0, f32::max).max(1e-6);

    // 4. Centre of mass at the centre of the frame.
    let mass: f32 = small.iter().sum();
    let (mut cx, mut cy) = (0.0, 0.0);
    for y in 0..nh {
        for x in 0..nw {
            let m = small[y * nw + x];
            cx += m * (x as f32 + 0.5);
            cy += m * (y as f32 + 0.5);
        }
    }
    let (cx, cy) = (cx / mass, cy / mass);
    let half = SIDE as f32 / 2.0;
    let left = ((half - cx).round().max(0.0) as usize).min(SIDE - nw);
    let upper = ((half - cy).round().max(0.0) as usize).min(SIDE - nh);
    let mut out = vec![0u8; SIDE * SIDE];
    for y in 0..nh {
        for x in 0..nw {
            // The brightest ink becomes 255, as MNIST's strokes are.
            out[(upper + y) * SIDE + left + x] = (small[y * nw + x] / top * 255.0).round().clamp(0.0, 255.0) as u8;
        }
    }
    Ok(out)
}

/// Area-averaging resize of `src: [sh, sw]` to `[dh, dw]`: each output pixel is the mean of the
/// source area it covers (fractional pixels weighted by their overlap).
fn resize_area(src: &[f32], sw: usize, sh: usize, dw: usize, dh: usize) -> Vec<f32> {
    let (fx, fy) = (sw as f32 / dw as f32, sh as f32 / dh as f32);
    let mut out = vec![0.0; dw * dh];
    for oy in 0..dh {
        let (ya, yb) = (oy as f32 * fy, (oy + 1) as f32 * fy);
        for ox in 0..dw {
            let (xa, xb) = (ox as f32 * fx, (ox + 1) as f32 * fx);
            let mut acc = 0.0;
            for iy in ya.floor() as usize..(yb.ceil() as usize).min(sh) {
                let wy = (yb.min(iy as f32 + 1.0) - ya.max(iy as f32)).max(0.0);
                for ix in xa.floor() as usize..(xb.ceil() as usize).min(sw) {
                    let wx = (xb.min(ix as f32 + 1.0) - xa.max(ix as f32)).max(0.0);
                    acc += wx * wy * src[iy * sw + ix];
                }
            }
            out[oy * dw + ox] = acc / (fx * fy);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A white-on-black "1": a vertical bar in a `w x h` image.
    fn bar(w: usize, h: usize, x: std::ops::Range<usize>, y: std::ops::Range<usize>, ink: u8, bg: u8) -> Vec<u8> {
        let mut img = vec![bg; w * h];
        for yy in y {
            for xx in x.clone() {
                img[yy * w + xx] = ink;
            }
        }
        img
    }

    fn bbox(img: &[u8]) -> (usize, usize, usize, usize) {
        let (mut x0, mut y0, mut x1, mut y1) = (SIDE, SIDE, 0, 0);
        for y in 0..SIDE {
            for x in 0..SIDE {
                if img[y * SIDE + x] > 0 {
                    (x0, y0, x1, y1) = (x0.min(x), y0.min(y), x1.max(x + 1), y1.max(y + 1));
                }
            }
        }
        (x0, y0, x1, y1)
    }

    #[test]
    fn a_bar_in_a_corner_is_scaled_to_20_and_centred() {
        // 100x100, bar 10 wide and 50 tall in the top-left corner.
        let img = bar(100, 100, 5..15, 2..52, 255, 0);
        let out = to_mnist(&img, 100, 100).unwrap();
        let (x0, y0, x1, y1) = bbox(&out);
        assert_eq!(y1 - y0, BOX, "the longer side becomes 20 pixels");
        assert_eq!(x1 - x0, 4, "10 x 50 keeps its aspect ratio: 4 x 20");
        assert_eq!((x0, y0), (12, 4), "centred: the bar's middle is the frame's middle");
        assert_eq!(*out.iter().max().unwrap(), 255);
    }

    #[test]
    fn dark_ink_on_white_is_inverted() {
        let light = bar(60, 40, 20..30, 5..35, 0, 255);
        let dark = bar(60, 40, 20..30, 5..35, 255, 0);
        assert_eq!(to_mnist(&light, 60, 40).unwrap(), to_mnist(&dark, 60, 40).unwrap());
    }

    #[test]
    fn an_mnist_sized_digit_keeps_its_mass_centre() {
        let img = bar(28, 28, 12..16, 4..24, 200, 0);
        let out = to_mnist(&img, 28, 28).unwrap();
        let (x0, y0, x1, y1) = bbox(&out);
        assert_eq!((x0, y0, x1, y1), (12, 4, 16, 24));
    }

    #[test]
    fn empty_and_malformed_drawings_are_errors() {
        assert!(to_mnist(&[0; 64], 8, 8).unwrap_err().contains("empty"));
        assert!(to_mnist(&[255; 64], 8, 8).unwrap_err().contains("empty"));
        assert!(to_mnist(&[0; 63], 8, 8).is_err());
    }

    #[test]
    fn area_resize_keeps_the_mean() {
        let src: Vec<f32> = (0..12 * 9).map(|i| (i * 37 % 101) as f32).collect();
        let out = resize_area(&src, 12, 9, 5, 4);
        let mean = |v: &[f32]| v.iter().sum::<f32>() / v.len() as f32;
        assert!((mean(&src) - mean(&out)).abs() < 1e-3, "{} vs {}", mean(&src), mean(&out));
    }
}
