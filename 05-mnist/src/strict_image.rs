//! Strict checks on a picture file before it is decoded: a JPEG or PNG that was cut short or
//! damaged is refused with a sentence that says so, never turned into a partial picture.
//!
//! The `image` crate's decoders are lenient, as browsers are: a JPEG cut in the middle of its
//! scan decodes into a picture whose lower part is grey, and `mnist predict` would answer for
//! it with high confidence. Here:
//! - JPEG: the whole file is decoded by zune-jpeg in strict mode (a damaged or short scan is
//!   an error instead of grey fill), and the last scan must be followed by the end-of-image
//!   marker (`FF D9`);
//! - PNG: the file must end with its `IEND` chunk, the marker a complete PNG ends with (the
//!   PNG decoder itself checks every chunk's CRC and the image data's length).

use zune_jpeg::JpegDecoder;
use zune_jpeg::zune_core::bytestream::ZCursor;
use zune_jpeg::zune_core::colorspace::ColorSpace;
use zune_jpeg::zune_core::options::DecoderOptions;

/// A PNG's last 12 bytes: the empty `IEND` chunk (length 0, type, CRC).
const PNG_END: [u8; 12] = [0, 0, 0, 0, b'I', b'E', b'N', b'D', 0xAE, 0x42, 0x60, 0x82];
const PNG_SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1A, b'\n'];

/// `Err` (a sentence for the user) when `bytes` is a JPEG or PNG that is truncated or corrupt.
/// Other bytes pass: the decoder says what it makes of them. `max_side` bounds the sides a
/// JPEG may announce and `max_bytes` its decoded size (both checked before its pixels are
/// decoded).
pub fn check_complete(bytes: &[u8], max_side: usize, max_bytes: usize) -> Result<(), String> {
    if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        check_jpeg(bytes, max_side, max_bytes)
    } else if bytes.starts_with(&PNG_SIGNATURE) {
        if bytes.ends_with(&PNG_END) {
            Ok(())
        } else {
            Err("the PNG is truncated or damaged (it does not end with its IEND chunk); save or copy the picture again".into())
        }
    } else {
        Ok(())
    }
}

fn check_jpeg(bytes: &[u8], max_side: usize, max_bytes: usize) -> Result<(), String> {
    let damaged = |why: String| Err(format!("the JPEG is truncated or damaged ({why}); save or copy the picture again"));
    // The last start-of-scan marker (`FF DA`), then the end-of-image marker after it. Markers
    // inside the scan's data are escaped (`FF 00`), so a cut scan has no `FF D9` after it; the
    // thumbnail a camera embeds ends before the main picture's scans begin.
    let last_scan = bytes.windows(2).rposition(|w| w == [0xFF, 0xDA]);
    let Some(last_scan) = last_scan else { return damaged("it has no image data".into()) };
    if !bytes[last_scan..].windows(2).any(|w| w == [0xFF, 0xD9]) {
        return damaged("it stops before its end-of-image marker".into());
    }
    let options = DecoderOptions::default()
        .set_strict_mode(true)
        .set_max_width(max_side)
        .set_max_height(max_side)
        .jpeg_set_out_colorspace(ColorSpace::Luma);
    let mut decoder = JpegDecoder::new_with_options(ZCursor::new(bytes), options);
    decoder.decode_headers().or_else(|e| damaged(format!("{e:?}")))?;
    let size = decoder.output_buffer_size().unwrap_or(usize::MAX);
    if size > max_bytes {
        return Err(format!("the JPEG would take {size} bytes decoded, over the limit of {max_bytes}; use a smaller picture"));
    }
    decoder.decode().map(|_| ()).or_else(|e| damaged(format!("{e:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 64 x 48 grey JPEG with a gradient and a bar (so its scan has real data to cut).
    pub(crate) fn jpeg() -> Vec<u8> {
        let img = image::GrayImage::from_fn(64, 48, |x, y| image::Luma([((x * 4 + y * 3) % 256) as u8 / if (20..30).contains(&x) { 4 } else { 1 }]));
        let mut out = Vec::new();
        img.write_to(&mut std::io::Cursor::new(&mut out), image::ImageFormat::Jpeg).unwrap();
        out
    }

    fn png() -> Vec<u8> {
        let img = image::GrayImage::from_fn(16, 16, |x, y| image::Luma([(x * 16 + y) as u8]));
        let mut out = Vec::new();
        img.write_to(&mut std::io::Cursor::new(&mut out), image::ImageFormat::Png).unwrap();
        out
    }

    #[test]
    fn whole_pictures_pass() {
        check_complete(&jpeg(), 1000, 1 << 20).unwrap();
        check_complete(&png(), 1000, 1 << 20).unwrap();
        check_complete(b"neither", 1000, 1 << 20).unwrap();
    }

    #[test]
    fn a_jpeg_cut_anywhere_in_its_scan_is_refused() {
        let full = jpeg();
        let scan = full.windows(2).rposition(|w| w == [0xFF, 0xDA]).unwrap();
        for cut in [scan + 20, (scan + full.len()) / 2, full.len() - 1] {
            let err = check_complete(&full[..cut], 1000, 1 << 20).unwrap_err();
            assert!(err.contains("JPEG is truncated or damaged"), "cut at {cut} of {}: {err}", full.len());
        }
        assert!(check_complete(&full[..scan], 1000, 1 << 20).unwrap_err().contains("no image data"));
    }

    #[test]
    fn a_jpeg_with_a_damaged_scan_is_refused() {
        let mut bad = jpeg();
        let scan = bad.windows(2).rposition(|w| w == [0xFF, 0xDA]).unwrap();
        // A marker where the entropy-coded data should be: strict decoding stops there.
        let at = (scan + bad.len()) / 2;
        bad[at] = 0xFF;
        bad[at + 1] = 0xC4;
        assert!(check_complete(&bad, 1000, 1 << 20).unwrap_err().contains("truncated or damaged"));
    }

    #[test]
    fn a_jpeg_larger_than_the_limits_is_refused() {
        assert!(check_complete(&jpeg(), 32, 1 << 20).is_err());
        assert!(check_complete(&jpeg(), 1000, 64 * 47).unwrap_err().contains("over the limit"));
    }

    #[test]
    fn a_png_without_its_end_is_refused() {
        let full = png();
        let err = check_complete(&full[..full.len() - 12], 1000, 1 << 20).unwrap_err();
        assert!(err.contains("PNG is truncated or damaged"), "{err}");
    }
}
