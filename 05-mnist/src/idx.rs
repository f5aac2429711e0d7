//! The IDX file format, as MNIST ships it, read defensively.
//!
//! An IDX file is a big-endian header and then raw data:
//! ```text
//! bytes 0-1  always 0
//! byte  2    element type: 0x08 = u8 (the only one MNIST uses)
//! byte  3    number of dimensions d
//! then       d big-endian u32 sizes, then prod(sizes) elements, row-major
//! ```
//! So images are magic 0x00000803 with sizes [n, 28, 28] and labels 0x00000801 with [n].
//! Files may be gzipped (they start with 0x1f 0x8b); we decompress in memory with flate2.
//!
//! Every way a file can be broken gets its own message: a short or wrong magic, a size that
//! does not match the file length (truncated download or trailing garbage), a broken gzip
//! stream, a label outside 0..9.

use std::io::Read;
use std::path::Path;

use crate::error::{MnistError, Result};

/// The IDX element type for unsigned bytes.
const TYPE_U8: u8 = 0x08;
/// MNIST decompressed is 47 MB; refuse anything absurdly larger (a gzip bomb, a wrong file).
const MAX_DECOMPRESSED: u64 = 512 << 20;

/// An n-dimensional array of u8 read from an IDX file: `data` is row-major over `dims`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdxArray {
    pub dims: Vec<usize>,
    pub data: Vec<u8>,
}

/// Parses the bytes of an (uncompressed) IDX file holding u8 elements with `expected_dims`
/// dimensions. `Err(msg)` says what is wrong; callers add the file name.
pub fn parse_idx(bytes: &[u8], expected_dims: usize) -> Result<IdxArray, String> {
    if bytes.len() < 4 {
        return Err(format!("only {} bytes, too short for the 4-byte magic number", bytes.len()));
    }
    let magic = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    if bytes[0] != 0 || bytes[1] != 0 {
        return Err(format!("bad magic number 0x{magic:08x}: IDX files start with two zero bytes"));
    }
    if bytes[2] != TYPE_U8 {
        return Err(format!("bad magic number 0x{magic:08x}: element type 0x{:02x}, expected 0x08 (u8)", bytes[2]));
    }
    let ndims = bytes[3] as usize;
    if ndims != expected_dims {
        let expected = 0x0800 | expected_dims as u32;
        return Err(format!(
            "bad magic number 0x{magic:08x}: {ndims} dimensions, expected {expected_dims} (magic 0x{expected:08x})"
        ));
    }
    let header = 4 + 4 * ndims;
    if bytes.len() < header {
        return Err(format!("truncated header: {} bytes, the {ndims} sizes need {header}", bytes.len()));
    }
    let dims: Vec<usize> = (0..ndims)
        .map(|d| {
            let o = 4 + 4 * d;
            u32::from_be_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]) as usize
        })
        .collect();
    // On 64-bit targets a product of u32s cannot overflow u128; checked_mul keeps 32-bit safe.
    let expected_len = dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
    let Some(expected_len) = expected_len else {
        return Err(format!("sizes {dims:?} overflow"));
    };
    let actual = bytes.len() - header;
    if actual < expected_len {
        return Err(format!(
            "truncated: the header says {dims:?} = {expected_len} bytes of data, the file has {actual}"
        ));
    }
    if actual > expected_len {
        return Err(format!(
            "{} bytes of trailing data after the {dims:?} = {expected_len} bytes the header announces",
            actual - expected_len
        ));
    }
    Ok(IdxArray { dims, data: bytes[header..].to_vec() })
}

/// Reads a whole file, decompressing it when it is gzipped (starts with 0x1f 0x8b).
pub fn read_maybe_gzip(path: &Path) -> Result<Vec<u8>> {
    let raw = std::fs::read(path).map_err(|e| MnistError::io(path, e))?;
    if raw.starts_with(&[0x1f, 0x8b]) {
        gunzip(&raw).map_err(|msg| MnistError::Idx { path: path.to_path_buf(), msg })
    } else {
        Ok(raw)
    }
}

/// Decompresses a complete gzip stream (with all its members) in memory.
pub fn gunzip(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(bytes)
        .take(MAX_DECOMPRESSED + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("corrupt or truncated gzip data ({e})"))?;
    if out.len() as u64 > MAX_DECOMPRESSED {
        return Err(format!("decompresses to more than {} MiB; MNIST is 47 MB", MAX_DECOMPRESSED >> 20));
    }
    Ok(out)
}

/// Reads an IDX image file: `[n, rows, cols]` u8 pixels.
pub fn read_images(path: &Path) -> Result<IdxArray> {
    let bytes = read_maybe_gzip(path)?;
    let arr = parse_idx(&bytes, 3).map_err(|msg| MnistError::Idx { path: path.to_path_buf(), msg })?;
    if arr.dims[1] == 0 || arr.dims[2] == 0 {
        return Err(MnistError::Idx { path: path.to_path_buf(), msg: format!("empty images {:?}", arr.dims) });
    }
    Ok(arr)
}

/// Reads an IDX label file: `[n]` u8 labels, each checked to be a digit 0..=9.
pub fn read_labels(path: &Path) -> Result<IdxArray> {
    let bytes = read_maybe_gzip(path)?;
    let arr = parse_idx(&bytes, 1).map_err(|msg| MnistError::Idx { path: path.to_path_buf(), msg })?;
    if let Some((i, &l)) = arr.data.iter().enumerate().find(|(_, l)| **l > 9) {
        return Err(MnistError::Idx { path: path.to_path_buf(), msg: format!("label {i} is {l}, not a digit 0..9") });
    }
    Ok(arr)
}

/// Encodes `data` with `dims` as an IDX u8 file (the inverse of [`parse_idx`]); tests use it to
/// craft good and broken files.
pub fn encode_idx(dims: &[usize], data: &[u8]) -> Vec<u8> {
    let mut out = vec![0, 0, TYPE_U8, dims.len() as u8];
    for &d in dims {
        out.extend_from_slice(&(d as u32).to_be_bytes());
    }
    out.extend_from_slice(data);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(bytes).unwrap();
        enc.finish().unwrap()
    }

    #[test]
    fn round_trips_a_small_image_file() {
        let data: Vec<u8> = (0..2 * 3 * 5).map(|i| (i * 7 % 256) as u8).collect();
        let arr = parse_idx(&encode_idx(&[2, 3, 5], &data), 3).unwrap();
        assert_eq!(arr.dims, vec![2, 3, 5]);
        assert_eq!(arr.data, data);
    }

    #[test]
    fn bad_magic_numbers_are_named() {
        let good = encode_idx(&[3], &[1, 2, 3]);
        let mut zero_bytes = good.clone();
        zero_bytes[0] = 1;
        assert!(parse_idx(&zero_bytes, 1).unwrap_err().contains("two zero bytes"));
        let mut float_type = good.clone();
        float_type[2] = 0x0D;
        assert!(parse_idx(&float_type, 1).unwrap_err().contains("element type 0x0d"));
        // A label file where an image file was expected.
        let err = parse_idx(&good, 3).unwrap_err();
        assert!(err.contains("1 dimensions, expected 3") && err.contains("0x00000803"), "{err}");
        assert!(parse_idx(&[0, 0], 1).unwrap_err().contains("too short"));
    }

    #[test]
    fn truncated_and_overlong_files_are_errors() {
        let good = encode_idx(&[2, 2, 2], &[9; 8]);
        let err = parse_idx(&good[..good.len() - 1], 3).unwrap_err();
        assert!(err.contains("truncated") && err.contains("7"), "{err}");
        let err = parse_idx(&good[..10], 3).unwrap_err();
        assert!(err.contains("truncated header"), "{err}");
        let mut long = good.clone();
        long.push(0);
        assert!(parse_idx(&long, 3).unwrap_err().contains("1 bytes of trailing data"));
    }

    #[test]
    fn huge_sizes_do_not_allocate_or_overflow() {
        let bytes = encode_idx(&[u32::MAX as usize, u32::MAX as usize, u32::MAX as usize], &[]);
        assert!(parse_idx(&bytes, 3).is_err());
    }

    #[test]
    fn gzip_files_are_read_and_broken_gzip_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let labels = encode_idx(&[4], &[1, 9, 0, 5]);
        let path = dir.path().join("labels.gz");
        std::fs::write(&path, gzip(&labels)).unwrap();
        assert_eq!(read_labels(&path).unwrap().data, vec![1, 9, 0, 5]);

        // Cut the gzip stream short: flate2 reports an unexpected end of file.
        let gz = gzip(&labels);
        std::fs::write(&path, &gz[..gz.len() - 6]).unwrap();
        let err = read_labels(&path).unwrap_err().to_string();
        assert!(err.contains("corrupt or truncated gzip") && err.contains("labels.gz"), "{err}");

        // Flip a byte of the compressed data: the CRC (or the deflate stream) catches it.
        let mut flipped = gz.clone();
        let mid = flipped.len() / 2;
        flipped[mid] ^= 0xFF;
        std::fs::write(&path, &flipped).unwrap();
        assert!(read_labels(&path).is_err());
    }

    #[test]
    fn labels_must_be_digits_and_images_non_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("labels");
        std::fs::write(&path, encode_idx(&[3], &[1, 10, 2])).unwrap();
        let err = read_labels(&path).unwrap_err().to_string();
        assert!(err.contains("label 1 is 10"), "{err}");
        let path = dir.path().join("images");
        std::fs::write(&path, encode_idx(&[3, 0, 28], &[])).unwrap();
        assert!(read_images(&path).unwrap_err().to_string().contains("empty images"));
    }

    #[test]
    fn a_missing_file_says_where_to_point() {
        let err = read_images(Path::new("/nonexistent/train-images-idx3-ubyte")).unwrap_err().to_string();
        assert!(err.contains("not found") && err.contains("MNIST_DIR"), "{err}");
    }
}
