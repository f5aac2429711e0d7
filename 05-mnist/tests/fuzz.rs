//! Property tests of the readers of untrusted input: the IDX reader, the safetensors model
//! loader, and the image decoding and preprocessing of `predict`. (The JSON API is fuzzed
//! through the HTTP layer in `serve_fuzz.rs`.)
//!
//! Each property feeds random bytes, and valid files with random damage (flipped bytes, cuts,
//! junk appended, headers with random sizes), and checks three things:
//! - no panic: every input gives `Ok` or an `Err` with a message;
//! - what `Ok` returns is consistent (sizes, finite weights, 784 pixels);
//! - memory: a counting allocator measures the peak bytes allocated by each call, and each
//!   reader stays under a stated bound that depends on the input's real size, never on the
//!   sizes its header claims.
//!
//! They run inside `cargo test` on stable Rust with proptest, a few hundred cases each (about
//! a second in all). `PROPTEST_CASES=100000 cargo test -p mnist --test fuzz --release` runs a
//! longer search; a failure prints the smallest input that fails.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};

use gpu_layers::NetworkSpec;
use mnist::data::{CLASSES, PIXELS};
use mnist::idx::{encode_idx, parse_idx};
use mnist::model_io::{FORMAT, Model, parse_model, read_model_bytes, save_model};
use mnist::preprocess::{MAX_IMAGE_ALLOC, decode_grey, to_mnist};
use proptest::prelude::*;
use proptest::test_runner::Config;
use safetensors::Dtype;
use safetensors::tensor::TensorView;

// ---------------------------------------------------------------------------------------------
// A counting allocator: the live and peak bytes of the current thread.

struct Counting;

thread_local! {
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn grew(bytes: usize) {
    let _ = LIVE.try_with(|live| {
        let now = live.get() + bytes;
        live.set(now);
        let _ = PEAK.try_with(|p| p.set(p.get().max(now)));
    });
}

fn shrank(bytes: usize) {
    let _ = LIVE.try_with(|live| live.set(live.get().saturating_sub(bytes)));
}

// SAFETY: every call is passed on to the system allocator unchanged; the counters only add.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grew(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        grew(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        shrank(layout.size());
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() {
            grew(new_size - layout.size());
        } else {
            shrank(layout.size() - new_size);
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `f` and returns its result and the most bytes it had allocated at once (on this thread,
/// above what was live before).
fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(before));
    let out = f();
    (out, PEAK.with(Cell::get) - before)
}

#[test]
fn the_allocation_counter_counts() {
    let (v, peak) = peak_of(|| vec![1u8; 1 << 20]);
    assert!(peak >= 1 << 20, "{peak}");
    drop(v);
    let ((), peak) = peak_of(|| {});
    assert!(peak < 1024, "{peak}");
}

/// Cases per property: a few hundred by default, `PROPTEST_CASES` when set.
fn config(cases: u32) -> Config {
    let d = Config::default();
    let cases = if std::env::var_os("PROPTEST_CASES").is_some() { d.cases } else { cases };
    Config { cases, failure_persistence: None, ..d }
}

/// Damage to a valid file: flip bytes, cut it, or append junk.
#[derive(Debug, Clone)]
enum Damage {
    Flip(Vec<(usize, u8)>),
    Cut(usize),
    Append(Vec<u8>),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        prop::collection::vec((any::<usize>(), 1u8..=255), 1..6).prop_map(Damage::Flip),
        any::<usize>().prop_map(Damage::Cut),
        prop::collection::vec(any::<u8>(), 1..64).prop_map(Damage::Append),
    ]
}

fn apply(mut bytes: Vec<u8>, d: &Damage, header_len: usize) -> Vec<u8> {
    match d {
        // Most flips land in the header: that is where the interesting decisions are.
        Damage::Flip(flips) => {
            for (i, (at, x)) in flips.iter().enumerate() {
                let span = if i % 2 == 0 { header_len.min(bytes.len()) } else { bytes.len() };
                if span > 0 {
                    bytes[at % span] ^= x;
                }
            }
        }
        Damage::Cut(at) => bytes.truncate(at % (bytes.len() + 1)),
        Damage::Append(junk) => bytes.extend_from_slice(junk),
    }
    bytes
}

// ---------------------------------------------------------------------------------------------
// The IDX reader. Bound: the data it returns is at most the input, plus the header's sizes.

const IDX_SLACK: usize = 64 << 10;

fn check_idx(bytes: &[u8], dims: usize) -> Result<(), TestCaseError> {
    let (result, peak) = peak_of(|| parse_idx(bytes, dims));
    prop_assert!(peak <= bytes.len() + IDX_SLACK, "{peak} bytes allocated for {} bytes of input", bytes.len());
    if let Ok(arr) = result {
        prop_assert_eq!(arr.dims.len(), dims);
        prop_assert_eq!(arr.data.len(), arr.dims.iter().product::<usize>());
        prop_assert_eq!(bytes.len(), 4 + 4 * dims + arr.data.len());
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn idx_random_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512), dims in 0usize..5) {
        check_idx(&bytes, dims)?;
    }

    /// A valid header with random (often huge) sizes, and a little data.
    #[test]
    fn idx_random_sizes(sizes in prop::collection::vec(any::<u32>(), 1..4), data in prop::collection::vec(any::<u8>(), 0..256)) {
        let mut bytes = vec![0, 0, 0x08, sizes.len() as u8];
        for s in &sizes {
            bytes.extend_from_slice(&s.to_be_bytes());
        }
        bytes.extend_from_slice(&data);
        check_idx(&bytes, sizes.len())?;
    }

    #[test]
    fn idx_damaged_files(
        dims in prop::collection::vec(0usize..9, 1..4),
        seed in any::<u8>(),
        d in damage(),
    ) {
        let data: Vec<u8> = (0..dims.iter().product::<usize>()).map(|i| (i as u8).wrapping_mul(seed)).collect();
        let good = encode_idx(&dims, &data);
        let bytes = apply(good.clone(), &d, 4 + 4 * dims.len());
        check_idx(&bytes, dims.len())?;
    }
}

// ---------------------------------------------------------------------------------------------
// The model loader: `read_model_bytes` (streamed, capped) then `parse_model`. Bound: a small
// multiple of the input (the JSON header parsed into maps and shapes, the f32 values copied
// into matrices), never the sizes the header claims.

const MODEL_FACTOR: usize = 12;
const MODEL_SLACK: usize = 256 << 10;

fn check_model(bytes: &[u8]) -> Result<(), TestCaseError> {
    let (result, peak) = peak_of(|| read_model_bytes(bytes).and_then(|b| parse_model(&b)));
    prop_assert!(peak <= MODEL_FACTOR * bytes.len() + MODEL_SLACK, "{peak} bytes allocated for {} bytes of input", bytes.len());
    if let Ok(m) = result {
        prop_assert_eq!(m.spec.input(), PIXELS);
        prop_assert_eq!(m.spec.output(), CLASSES);
        prop_assert!(m.params.iter().all(|p| p.data.iter().all(|v| v.is_finite())));
        let expected: usize = m.spec.layer_shapes().iter().map(|&(i, o)| (i + 1) * o).sum();
        prop_assert_eq!(m.params.iter().map(|p| p.data.len()).sum::<usize>(), expected);
    }
    Ok(())
}

/// Three valid model files (softmax regression, one and two hidden layers), made once.
fn good_models() -> &'static [Vec<u8>] {
    static MODELS: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    MODELS.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        [&[][..], &[3], &[2, 4]]
            .iter()
            .map(|hidden| {
                let spec = NetworkSpec::new(PIXELS, hidden, CLASSES).unwrap();
                let model = Model::new(spec.clone(), spec.init_parameters(7)).unwrap();
                let path = dir.path().join("m.safetensors");
                save_model(&path, &model).unwrap();
                std::fs::read(path).unwrap()
            })
            .collect()
    })
}

/// Tensor names a model has, and some it does not.
const NAMES: [&str; 6] = ["layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias", "layers.9.bias", "w"];
const DTYPES: [Dtype; 5] = [Dtype::F32, Dtype::F16, Dtype::U8, Dtype::F64, Dtype::I64];

/// A well-formed safetensors file whose metadata and tensors are random: sizes that do not
/// parse or are huge, tensors missing, extra, of another type or shape, NaN values.
fn crafted_model() -> impl Strategy<Value = Vec<u8>> {
    let size = prop_oneof![Just("784".to_string()), Just("10".to_string()), any::<u64>().prop_map(|v| v.to_string()), "[ 0-9a-z,-]{0,12}"];
    let hidden = prop_oneof![
        Just(String::new()),
        prop::collection::vec(prop_oneof![1u64..64, any::<u64>()], 1..4)
            .prop_map(|v| v.iter().map(u64::to_string).collect::<Vec<_>>().join(",")),
        "[ 0-9,]{0,12}",
    ];
    let activation = prop_oneof![Just("relu".to_string()), Just("tanh".to_string()), "[a-z]{0,6}"];
    let tensor = (0..NAMES.len(), 0..DTYPES.len(), prop::collection::vec(prop_oneof![1usize..20, Just(784), Just(10)], 1..3));
    let fill = prop_oneof![Just(0.0f32), Just(f32::NAN), Just(f32::INFINITY), Just(1e38f32), -1.0f32..1.0];
    (size.clone(), hidden, size, activation, any::<bool>(), prop::collection::vec(tensor, 0..5), fill).prop_map(
        |(input, hidden, output, activation, right_format, tensors, fill)| {
            let meta = HashMap::from([
                ("format".to_string(), if right_format { FORMAT.to_string() } else { "other".to_string() }),
                ("input".to_string(), input),
                ("hidden".to_string(), hidden),
                ("output".to_string(), output),
                ("activation".to_string(), activation),
            ]);
            let mut buffers = BTreeMap::new();
            for (name, dtype, shape) in tensors {
                let elems: usize = shape.iter().product();
                let bytes = elems * DTYPES[dtype].bitsize() / 8;
                let data: Vec<u8> = fill.to_le_bytes().iter().copied().cycle().take(bytes).collect();
                buffers.insert(NAMES[name].to_string(), (DTYPES[dtype], shape, data));
            }
            let views: BTreeMap<String, TensorView<'_>> = buffers
                .iter()
                .map(|(n, (dtype, shape, data))| (n.clone(), TensorView::new(*dtype, shape.clone(), data).unwrap()))
                .collect();
            safetensors::serialize(views, Some(meta)).unwrap()
        },
    )
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn model_valid_files_load(which in 0usize..3) {
        let bytes = &good_models()[which];
        check_model(bytes)?;
        prop_assert!(parse_model(bytes).is_ok());
    }

    #[test]
    fn model_random_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        check_model(&bytes)?;
    }

    /// Random bytes after a plausible header length, so the JSON parser gets exercised.
    #[test]
    fn model_random_headers(header in "\\{[ -~]{0,200}\\}", tail in prop::collection::vec(any::<u8>(), 0..64)) {
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(&tail);
        check_model(&bytes)?;
    }

    #[test]
    fn model_crafted_files(bytes in crafted_model()) {
        check_model(&bytes)?;
    }

    #[test]
    fn model_damaged_files(which in 0usize..3, d in damage()) {
        let good = good_models()[which].clone();
        let header = 8 + u64::from_le_bytes(good[..8].try_into().unwrap()) as usize;
        let bytes = apply(good, &d, header);
        check_model(&bytes)?;
    }
}

// ---------------------------------------------------------------------------------------------
// Pictures: decoding any bytes (with the decoder's limits), and preprocessing any grey image.

/// Decoding: at most the decoder's limit plus the converted copies of what it decoded.
const DECODE_BOUND: usize = 3 * MAX_IMAGE_ALLOC as usize;
/// Preprocessing: the image as f32 twice (4 bytes per pixel each), plus small buffers.
const PREPROCESS_FACTOR: usize = 12;
const PREPROCESS_SLACK: usize = 64 << 10;

fn check_decode(bytes: &[u8]) -> Result<(), TestCaseError> {
    let (result, peak) = peak_of(|| decode_grey(bytes));
    prop_assert!(peak <= DECODE_BOUND, "{peak} bytes allocated for {} bytes of input", bytes.len());
    if let Ok((grey, w, h)) = result {
        prop_assert_eq!(grey.len(), w * h);
        // What decodes must preprocess without panicking too.
        let _ = to_mnist(&grey, w, h);
    }
    Ok(())
}

fn encoded(format: image::ImageFormat, w: u32, h: u32, seed: u8) -> Vec<u8> {
    let img = image::GrayImage::from_fn(w, h, |x, y| image::Luma([(x * 31 + y * 17) as u8 ^ seed]));
    let mut out = Vec::new();
    img.write_to(&mut std::io::Cursor::new(&mut out), format).unwrap();
    out
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn picture_random_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        check_decode(&bytes)?;
    }

    #[test]
    fn picture_damaged_png_and_jpeg(jpeg in any::<bool>(), w in 1u32..40, h in 1u32..40, seed in any::<u8>(), d in damage()) {
        let format = if jpeg { image::ImageFormat::Jpeg } else { image::ImageFormat::Png };
        let good = encoded(format, w, h, seed);
        // PNG's header (signature and IHDR) is 33 bytes; a JPEG's first segments about 20.
        check_decode(&apply(good, &d, if jpeg { 20 } else { 33 }))?;
    }

    #[test]
    fn preprocess_any_grey_image(w in 1usize..80, h in 1usize..80, seed in any::<u64>(), kind in 0u8..4) {
        // Random noise, a constant, two levels, and a noisy blob: blank pictures, pictures all
        // ink, single pixels, thin lines.
        let mut state = seed | 1;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let grey: Vec<u8> = (0..w * h)
            .map(|i| match kind {
                0 => next() as u8,
                1 => seed as u8,
                2 => if next() % 7 == 0 { 255 } else { 0 },
                _ => if (i % w).abs_diff(w / 2) + (i / w).abs_diff(h / 2) < 3 { 200 } else { (next() % 40) as u8 },
            })
            .collect();
        let (result, peak) = peak_of(|| to_mnist(&grey, w, h));
        prop_assert!(peak <= PREPROCESS_FACTOR * grey.len() + PREPROCESS_SLACK, "{peak} bytes for {} pixels", grey.len());
        if let Ok(out) = result {
            prop_assert_eq!(out.len(), PIXELS);
            prop_assert!(out.iter().any(|&v| v > 0), "a digit was found but nothing was drawn");
        }
    }

    #[test]
    fn preprocess_wrong_sizes(w in any::<usize>(), h in any::<usize>(), len in 0usize..64) {
        let grey = vec![128u8; len];
        let result = to_mnist(&grey, w, h);
        if w.checked_mul(h) != Some(len) || len == 0 {
            prop_assert!(result.is_err());
        }
    }
}
