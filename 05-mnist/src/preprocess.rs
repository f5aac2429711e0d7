//! Any picture of a digit -> an MNIST-like 28x28 image, the way MNIST itself was made.
//!
//! A network trained on MNIST has only seen light ink on black, the digit scaled so its longer
//! side is 20 pixels, and placed so that its centre of mass is the centre of the 28x28 frame.
//! A photo or a canvas drawing is none of these, so `predict` (and the web page) first:
//! 1. turn the image grey (transparent pixels count as white paper);
//! 2. invert it when the background (the border) is light;
//! 3. stretch the levels so the background is 0 and the darkest ink 255 (photos of paper are
//!    grey, not white);
//! 4. crop to the bounding box of the ink;
//! 5. scale the box, keeping its aspect ratio, so that its longer side is 20 pixels, averaging
//!    the area each output pixel covers (this anti-aliases like MNIST's own scaling);
//! 6. paste it into 28x28 so that its centre of mass lands on the centre.

#[cfg(not(target_arch = "wasm32"))]
use std::path::Path;

use crate::data::{PIXELS, SIDE};
#[cfg(not(target_arch = "wasm32"))]
use crate::error::{MnistError, Result};

/// The box the digit's longer side is scaled to (MNIST: 20 pixels in a 28-pixel frame).
pub const BOX: usize = 20;
/// After the level stretch, pixels below this (of 255) are noise, not ink, for the bounding box.
/// A trade-off: MNIST's 20x20 box includes the faint edges of the strokes (lower is closer),
/// but JPEG rings around strokes (12 let the ringing into the box: measured on 100 test digits
/// saved as JPEG, the median error per pixel was 3.1 at 12 and 0.4 at 24; see tests/preprocess.rs).
const INK_THRESHOLD: f32 = 24.0;
/// A picture whose ink differs from its background by less than this (of 255) is blank.
const MIN_CONTRAST: f32 = 32.0;

/// `grey: [height, width]` bytes, row-major, either polarity -> `[28 * 28]` bytes, 0 = background
/// (MNIST's convention). `Err` says why there is nothing to classify.
pub fn to_mnist(grey: &[u8], width: usize, height: usize) -> Result<Vec<u8>, String> {
    let expected = width.checked_mul(height).filter(|&n| n > 0 && n == grey.len());
    if expected.is_none() {
        return Err(format!("{} pixels for a {width}x{height} image (expected width x height)", grey.len()));
    }
    // 1-2. Polarity, from the border: MNIST is light ink on a dark background.
    let border: Vec<u8> = (0..width)
        .flat_map(|x| [grey[x], grey[(height - 1) * width + x]])
        .chain((0..height).flat_map(|y| [grey[y * width], grey[y * width + width - 1]]))
        .collect();
    let border_mean = border.iter().map(|&v| v as f32).sum::<f32>() / border.len() as f32;
    let invert = border_mean > 127.5;
    let ink: Vec<f32> = grey.iter().map(|&v| if invert { 255.0 - v as f32 } else { v as f32 }).collect();

    // 3. Levels: background (the border's median) -> 0, the strongest ink -> 255.
    let mut border_ink: Vec<f32> = border.iter().map(|&v| if invert { 255.0 - v as f32 } else { v as f32 }).collect();
    border_ink.sort_by(f32::total_cmp);
    let background = border_ink[border_ink.len() / 2];
    let peak = ink.iter().copied().fold(0.0, f32::max);
    if peak - background < MIN_CONTRAST {
        return Err("no digit found: the image is blank (no ink stands out from the background)".into());
    }
    let gain = 255.0 / (peak - background);
    let ink: Vec<f32> = ink.iter().map(|&v| ((v - background) * gain).clamp(0.0, 255.0)).collect();

    // 4. Bounding box of the ink.
    let (mut x0, mut y0, mut x1, mut y1) = (width, height, 0, 0);
    for y in 0..height {
        for x in 0..width {
            if ink[y * width + x] >= INK_THRESHOLD {
                (x0, y0, x1, y1) = (x0.min(x), y0.min(y), x1.max(x + 1), y1.max(y + 1));
            }
        }
    }
    let (bw, bh) = (x1 - x0, y1 - y0);

    // 5. Scale the box so its longer side is BOX pixels.
    let scale = BOX as f32 / bw.max(bh) as f32;
    let (ow, oh) = (((bw as f32 * scale).round() as usize).clamp(1, BOX), ((bh as f32 * scale).round() as usize).clamp(1, BOX));
    let patch = resample_area(&ink, width, (x0, y0, bw, bh), ow, oh);

    // 6. Centre of mass of the patch -> centre of the frame. In pixel indices, as MNIST did:
    //    the mean centre of mass of the MNIST test digits is at index (14.00, 13.99).
    let mass: f32 = patch.iter().sum();
    let (mut cx, mut cy) = (0.0f32, 0.0f32);
    for y in 0..oh {
        for x in 0..ow {
            let v = patch[y * ow + x];
            cx += x as f32 * v;
            cy += y as f32 * v;
        }
    }
    let (cx, cy) = (cx / mass, cy / mass);
    let centre = (SIDE / 2) as f32;
    let (ox, oy) = ((centre - cx).round() as isize, (centre - cy).round() as isize);
    let mut out = vec![0u8; PIXELS];
    for y in 0..oh {
        for x in 0..ow {
            let (tx, ty) = (x as isize + ox, y as isize + oy);
            if (0..SIDE as isize).contains(&tx) && (0..SIDE as isize).contains(&ty) {
                out[ty as usize * SIDE + tx as usize] = patch[y * ow + x].round().clamp(0.0, 255.0) as u8;
            }
        }
    }
    Ok(out)
}

/// Area-averaging resample of the window `(x0, y0, w, h)` of `src` (row stride `stride`) to
/// `ow x oh`: each output pixel is the mean of the source area it covers, partial pixels
/// weighted by how much of them it covers.
fn resample_area(src: &[f32], stride: usize, (x0, y0, w, h): (usize, usize, usize, usize), ow: usize, oh: usize) -> Vec<f32> {
    // Source span [start, end) of output cell i along one axis, and the weight of source pixel s.
    let spans = |n_in: usize, n_out: usize| -> Vec<Vec<(usize, f32)>> {
        let step = n_in as f32 / n_out as f32;
        (0..n_out)
            .map(|i| {
                let (a, b) = (i as f32 * step, (i + 1) as f32 * step);
                let first = a.floor() as usize;
                let last = (b.ceil() as usize).min(n_in);
                (first..last)
                    .map(|s| (s, ((s + 1) as f32).min(b) - (s as f32).max(a)))
                    .filter(|&(_, wgt)| wgt > 0.0)
                    .collect()
            })
            .collect()
    };
    let (xs, ys) = (spans(w, ow), spans(h, oh));
    let mut out = vec![0f32; ow * oh];
    for (oy, yspan) in ys.iter().enumerate() {
        for (ox, xspan) in xs.iter().enumerate() {
            let (mut sum, mut area) = (0.0, 0.0);
            for &(sy, wy) in yspan {
                for &(sx, wx) in xspan {
                    sum += src[(y0 + sy) * stride + x0 + sx] * wy * wx;
                    area += wy * wx;
                }
            }
            out[oy * ow + ox] = sum / area;
        }
    }
    out
}

/// The largest picture file `predict` reads (a phone photo is a few MB).
pub const MAX_IMAGE_FILE: u64 = 64 << 20;
/// The largest side and decoded size of a picture: far above any photo of a digit, far below
/// what a crafted header can announce (a PNG may claim 2^31 x 2^31 pixels in 33 bytes).
pub const MAX_IMAGE_SIDE: u32 = 16384;
pub const MAX_IMAGE_ALLOC: u64 = 256 << 20;

#[cfg(not(target_arch = "wasm32"))]
/// Reads a PNG or JPEG as grey bytes `[height, width]`. Transparent pixels become white
/// paper, so a drawing on a transparent canvas reads as dark ink on white. Files over
/// [`MAX_IMAGE_FILE`] are refused without being read whole.
pub fn read_grey(path: &Path) -> Result<(Vec<u8>, usize, usize)> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| MnistError::io(path, e))?;
    let mut bytes = Vec::new();
    file.take(MAX_IMAGE_FILE + 1).read_to_end(&mut bytes).map_err(|e| MnistError::io(path, e))?;
    if bytes.len() as u64 > MAX_IMAGE_FILE {
        let msg = format!("more than {} MiB: not a picture of a digit; use a PNG or JPEG", MAX_IMAGE_FILE >> 20);
        return Err(MnistError::Image { path: path.to_path_buf(), msg });
    }
    decode_grey(&bytes).map_err(|msg| MnistError::Image { path: path.to_path_buf(), msg })
}

#[cfg(not(target_arch = "wasm32"))]
/// [`read_grey`] on the bytes of a file: decodes with limits on the size and the memory the
/// decoder may use, so a crafted header cannot make it allocate gigabytes.
pub fn decode_grey(bytes: &[u8]) -> Result<(Vec<u8>, usize, usize), String> {
    // A picture cut short or damaged would decode into a partial one: refuse it first.
    crate::strict_image::check_complete(bytes, MAX_IMAGE_SIDE as usize, MAX_IMAGE_ALLOC as usize)?;
    let mut reader = image::ImageReader::new(std::io::Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| format!("cannot read the image ({e})"))?;
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(MAX_IMAGE_SIDE);
    limits.max_image_height = Some(MAX_IMAGE_SIDE);
    limits.max_alloc = Some(MAX_IMAGE_ALLOC);
    reader.limits(limits);
    let img = reader.decode().map_err(|e| format!("cannot decode the image ({e}); use PNG or JPEG"))?;
    let (w, h) = (img.width() as usize, img.height() as usize);
    let la = img.to_luma_alpha8();
    let grey = la
        .pixels()
        .map(|p| {
            let (l, a) = (p.0[0] as u32, p.0[1] as u32);
            ((l * a + 255 * (255 - a) + 127) / 255) as u8
        })
        .collect();
    Ok((grey, w, h))
}

#[cfg(not(target_arch = "wasm32"))]
/// [`read_grey`] then [`to_mnist`]: a picture file -> `[28 * 28]` MNIST-like bytes.
pub fn preprocess_file(path: &Path) -> Result<Vec<u8>> {
    let (grey, w, h) = read_grey(path)?;
    to_mnist(&grey, w, h).map_err(|msg| MnistError::Image { path: path.to_path_buf(), msg })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thick "1"-like bar drawn in dark ink on white paper, `w x h`, at `(x, y)`.
    fn bar(w: usize, h: usize, x: usize, y: usize, bw: usize, bh: usize) -> Vec<u8> {
        let mut img = vec![255u8; w * h];
        for r in y..y + bh {
            for c in x..x + bw {
                img[r * w + c] = 20;
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

    fn centre_of_mass(img: &[u8]) -> (f32, f32) {
        let (mut m, mut cx, mut cy) = (0.0, 0.0, 0.0);
        for y in 0..SIDE {
            for x in 0..SIDE {
                let v = img[y * SIDE + x] as f32;
                m += v;
                cx += x as f32 * v;
                cy += y as f32 * v;
            }
        }
        (cx / m, cy / m)
    }

    #[test]
    fn a_small_mark_in_a_corner_is_scaled_to_20_and_centred() {
        let img = bar(300, 200, 250, 10, 10, 40);
        let out = to_mnist(&img, 300, 200).unwrap();
        let (x0, y0, x1, y1) = bbox(&out);
        assert_eq!(y1 - y0, BOX, "the longer side becomes 20 pixels");
        assert_eq!(x1 - x0, 5, "the aspect ratio is kept (10x40 -> 5x20)");
        let (cx, cy) = centre_of_mass(&out);
        assert!((cx - 14.0).abs() <= 0.5 && (cy - 14.0).abs() <= 0.5, "centre of mass ({cx}, {cy})");
        assert_eq!(out.iter().max(), Some(&255), "ink is bright after inversion");
    }

    #[test]
    fn both_polarities_give_the_same_image() {
        let light = bar(64, 64, 10, 5, 12, 30);
        let dark: Vec<u8> = light.iter().map(|v| 255 - v).collect();
        assert_eq!(to_mnist(&light, 64, 64).unwrap(), to_mnist(&dark, 64, 64).unwrap());
    }

    #[test]
    fn grey_paper_is_stretched_to_black() {
        let img: Vec<u8> = bar(40, 40, 15, 5, 8, 30).iter().map(|&v| if v == 255 { 200 } else { 60 }).collect();
        let out = to_mnist(&img, 40, 40).unwrap();
        assert!(out.iter().filter(|&&v| v == 255).count() > 50);
        assert_eq!(out[0], 0);
    }

    #[test]
    fn blank_and_malformed_inputs_are_errors() {
        assert!(to_mnist(&[255; 100], 10, 10).unwrap_err().contains("blank"));
        assert!(to_mnist(&[0; 100], 10, 10).unwrap_err().contains("blank"));
        assert!(to_mnist(&[0; 99], 10, 10).is_err());
        assert!(to_mnist(&[], 0, 0).is_err());
        // Sizes whose product overflows are an error, not a panic.
        assert!(to_mnist(&[0; 4], usize::MAX, 2).unwrap_err().contains("width x height"));
    }

    #[test]
    fn a_picture_announcing_huge_sides_is_refused_before_decoding() {
        // A valid PNG of 1x1, then its header edited to claim 100000 x 100000 pixels (10 GB as
        // grey): the decoder's limits refuse it instead of allocating.
        let mut png = Vec::new();
        image::GrayImage::new(1, 1).write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png).unwrap();
        png[16..20].copy_from_slice(&100_000u32.to_be_bytes());
        png[20..24].copy_from_slice(&100_000u32.to_be_bytes());
        let mut crc = flate2::Crc::new();
        crc.update(&png[12..29]);
        png[29..33].copy_from_slice(&crc.sum().to_be_bytes());
        let err = decode_grey(&png).unwrap_err();
        assert!(err.contains("cannot decode") && err.contains("limit"), "{err}");
        assert!(decode_grey(b"not a picture").is_err());
    }

    #[test]
    fn area_resampling_keeps_the_mean() {
        let src: Vec<f32> = (0..12 * 9).map(|i| (i * 37 % 255) as f32).collect();
        let out = resample_area(&src, 12, (0, 0, 12, 9), 5, 4);
        let mean_in = src.iter().sum::<f32>() / src.len() as f32;
        let mean_out = out.iter().sum::<f32>() / out.len() as f32;
        assert!((mean_in - mean_out).abs() < 1.0, "{mean_in} vs {mean_out}");
        // Upscaling a constant stays constant.
        let up = resample_area(&[7.0; 4], 2, (0, 0, 2, 2), 7, 5);
        assert!(up.iter().all(|&v| (v - 7.0).abs() < 1e-4));
    }
}
