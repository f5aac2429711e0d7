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
//! Files may be gzipped (they start with 0x1f 0x8b); flate2 decompresses them as they are read.
//! The reader streams: it reads the header, refuses one that announces more than
//! [`MAX_IDX_BYTES`], and then reads exactly the data announced, so neither a huge raw file nor a
//! device like `/dev/zero` nor a gzip bomb can make it allocate more than that.
//!
//! Every way a file can be broken gets its own message: a short or wrong magic, a size that
//! does not match the file length (truncated download or trailing garbage), a broken gzip
//! stream, a label outside 0..9.

use std::io::{BufRead, Read};
use std::path::Path;

use crate::error::{MnistError, Result};

/// The IDX element type for unsigned bytes.
const TYPE_U8: u8 = 0x08;
/// The most data bytes an IDX file may hold, raw or after decompression. MNIST's largest file,
/// the training images, is 47 MB; anything far larger is a gzip bomb, a wrong file or a device
/// (`/dev/zero`), and is refused before it is read.
pub const MAX_IDX_BYTES: u64 = 512 << 20;

/// Trailing bytes after the data are counted up to this many (the message says "at least").
const TRAILING_COUNTED: u64 = 1 << 20;

/// An n-dimensional array of u8 read from an IDX file: `data` is row-major over `dims`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdxArray {
    pub dims: Vec<usize>,
    pub data: Vec<u8>,
}

/// Parses the bytes of an (uncompressed) IDX file holding u8 elements with `expected_dims`
/// dimensions. `Err(msg)` says what is wrong; callers add the file name.
pub fn parse_idx(bytes: &[u8], expected_dims: usize) -> Result<IdxArray, String> {
    read_idx(bytes, expected_dims, MAX_IDX_BYTES)
}

/// Reads an IDX file from a stream: the header first, then exactly the data it announces, then
/// a check that nothing follows. Memory use is bounded by what the stream really holds, never by
/// what the header claims, and a header announcing more than `max_bytes` of data is refused
/// before any data is read.
pub fn read_idx(mut r: impl Read, expected_dims: usize, max_bytes: u64) -> Result<IdxArray, String> {
    let io = |e: std::io::Error| format!("read error ({e})");
    let mut magic = [0u8; 4];
    let got = read_up_to(&mut r, &mut magic).map_err(io)?;
    if got < 4 {
        return Err(format!("only {got} bytes, too short for the 4-byte magic number"));
    }
    let magic_u32 = u32::from_be_bytes(magic);
    if magic[0] != 0 || magic[1] != 0 {
        return Err(format!("bad magic number 0x{magic_u32:08x}: IDX files start with two zero bytes"));
    }
    if magic[2] != TYPE_U8 {
        return Err(format!("bad magic number 0x{magic_u32:08x}: element type 0x{:02x}, expected 0x08 (u8)", magic[2]));
    }
    let ndims = magic[3] as usize;
    if ndims != expected_dims {
        let expected = 0x0800 | expected_dims as u32;
        return Err(format!(
            "bad magic number 0x{magic_u32:08x}: {ndims} dimensions, expected {expected_dims} (magic 0x{expected:08x})"
        ));
    }
    let header = 4 + 4 * ndims;
    let mut sizes = vec![0u8; 4 * ndims];
    let got = read_up_to(&mut r, &mut sizes).map_err(io)?;
    if got < sizes.len() {
        return Err(format!("truncated header: {} bytes, the {ndims} sizes need {header}", 4 + got));
    }
    let dims: Vec<usize> = sizes.chunks_exact(4).map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]) as usize).collect();
    // On 64-bit targets a product of u32s cannot overflow u128; checked_mul keeps 32-bit safe.
    let expected_len = dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
    let Some(expected_len) = expected_len else {
        return Err(format!("sizes {dims:?} overflow"));
    };
    if expected_len as u64 > max_bytes {
        return Err(format!(
            "the header announces {dims:?} = {expected_len} bytes of data, more than the {} MiB this reader accepts \
             (MNIST's largest file holds 47 MB)",
            max_bytes >> 20
        ));
    }
    // No `with_capacity(expected_len)`: a 16-byte file may claim 500 MB. The vector grows with
    // the data that really arrives.
    let mut data = Vec::new();
    (&mut r).take(expected_len as u64).read_to_end(&mut data).map_err(io)?;
    if data.len() < expected_len {
        return Err(format!(
            "truncated: the header says {dims:?} = {expected_len} bytes of data, the file has {}",
            data.len()
        ));
    }
    // Count what follows, without storing it, and only so far: a device never ends.
    let trailing = std::io::copy(&mut r.take(TRAILING_COUNTED), &mut std::io::sink()).map_err(io)?;
    if trailing > 0 {
        let more = if trailing == TRAILING_COUNTED { "at least " } else { "" };
        return Err(format!(
            "{more}{trailing} bytes of trailing data after the {dims:?} = {expected_len} bytes the header announces"
        ));
    }
    Ok(IdxArray { dims, data })
}

/// Fills `buf` as far as the stream goes; returns how many bytes it got (less at the end).
fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Opens `path` as a stream of its IDX bytes, decompressing on the fly when it is gzipped
/// (starts with 0x1f 0x8b). Nothing is read whole: [`read_idx`] pulls what it needs.
fn open_idx(path: &Path) -> Result<Box<dyn Read>> {
    let file = std::fs::File::open(path).map_err(|e| MnistError::io(path, e))?;
    let mut r = std::io::BufReader::new(file);
    let gzipped = r.fill_buf().map_err(|e| MnistError::io(path, e))?.starts_with(&[0x1f, 0x8b]);
    Ok(if gzipped { Box::new(GzErrors(flate2::bufread::MultiGzDecoder::new(r))) } else { Box::new(r) })
}

/// Says "gzip" in the read errors of a gzip stream, so a broken download reads as one.
struct GzErrors<R>(R);

impl<R: Read> Read for GzErrors<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf).map_err(|e| std::io::Error::new(e.kind(), format!("corrupt or truncated gzip data: {e}")))
    }
}

/// Reads a whole file, decompressing it when it is gzipped (starts with 0x1f 0x8b). Files
/// (raw or decompressed) over [`MAX_IDX_BYTES`] are refused.
pub fn read_maybe_gzip(path: &Path) -> Result<Vec<u8>> {
    let idx = |msg| MnistError::Idx { path: path.to_path_buf(), msg };
    let mut out = Vec::new();
    open_idx(path)?.take(MAX_IDX_BYTES + 1).read_to_end(&mut out).map_err(|e| idx(e.to_string()))?;
    if out.len() as u64 > MAX_IDX_BYTES {
        return Err(idx(format!("more than {} MiB; MNIST's largest file is 47 MB", MAX_IDX_BYTES >> 20)));
    }
    Ok(out)
}

/// Decompresses a complete gzip stream (with all its members) in memory.
pub fn gunzip(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(bytes)
        .take(MAX_IDX_BYTES + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("corrupt or truncated gzip data ({e})"))?;
    if out.len() as u64 > MAX_IDX_BYTES {
        return Err(format!("decompresses to more than {} MiB; MNIST is 47 MB", MAX_IDX_BYTES >> 20));
    }
    Ok(out)
}

/// Reads an IDX image file: `[n, rows, cols]` u8 pixels (streamed, gzipped or not).
pub fn read_images(path: &Path) -> Result<IdxArray> {
    let arr = read_idx(open_idx(path)?, 3, MAX_IDX_BYTES).map_err(|msg| MnistError::Idx { path: path.to_path_buf(), msg })?;
    if arr.dims[1] == 0 || arr.dims[2] == 0 {
        return Err(MnistError::Idx { path: path.to_path_buf(), msg: format!("empty images {:?}", arr.dims) });
    }
    Ok(arr)
}

/// Reads an IDX label file: `[n]` u8 labels, each checked to be a digit 0..=9.
pub fn read_labels(path: &Path) -> Result<IdxArray> {
    let arr = read_idx(open_idx(path)?, 1, MAX_IDX_BYTES).map_err(|msg| MnistError::Idx { path: path.to_path_buf(), msg })?;
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
    fn a_header_announcing_too_much_is_refused_before_reading() {
        // 4096^3 bytes announced: refused from the header alone, with the cap in the message.
        let err = parse_idx(&encode_idx(&[4096, 4096, 4096], &[]), 3).unwrap_err();
        assert!(err.contains("more than the 512 MiB"), "{err}");
        // A header that fits, followed by an endless stream (a device): the data is read, the
        // trailing bytes are counted up to a limit, and the answer comes at once.
        let endless = std::io::Cursor::new(encode_idx(&[2, 2, 2], &[])).chain(std::io::repeat(7));
        let err = read_idx(endless, 3, MAX_IDX_BYTES).unwrap_err();
        assert!(err.contains("at least 1048576 bytes of trailing data"), "{err}");
        // `/dev/zero` itself: four zero bytes are not a magic number.
        let err = read_idx(std::io::repeat(0), 3, MAX_IDX_BYTES).unwrap_err();
        assert!(err.contains("element type 0x00"), "{err}");
    }

    #[test]
    fn a_gzip_bomb_is_refused_from_its_header() {
        // A gzipped image file announcing 1 x 24576 x 24576 = 576 MiB: refused from the header,
        // so only its first kilobytes are ever decompressed.
        let mut bomb = encode_idx(&[1, 24576, 24576], &[]);
        bomb.resize(bomb.len() + (1 << 20), 0);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bomb.gz");
        std::fs::write(&path, gzip(&bomb)).unwrap();
        let err = read_images(&path).unwrap_err().to_string();
        assert!(err.contains("more than the 512 MiB") && err.contains("bomb.gz"), "{err}");
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
