//! `predict`'s preprocessing on real MNIST test digits drawn the way a user would: scaled up,
//! dark ink on (off-)white paper, off-centre on a bigger page, saved as PNG or JPEG, or as
//! black strokes on a transparent canvas. Undoing all that must give back nearly the original
//! digit, and a trained network must read the drawings as it reads the originals.

mod support;

use std::sync::atomic::AtomicBool;

use gpu_layers::Optimizer;
use image::{GrayImage, Luma, Rgba, RgbaImage};
use mnist::data::{Mnist, PIXELS};
use mnist::preprocess::preprocess_file;
use mnist::train::{Device, TrainConfig, train};

/// Mean absolute difference per pixel, of 255.
fn mean_abs_diff(a: &[u8], b: &[u8]) -> f64 {
    a.iter().zip(b).map(|(&x, &y)| (x as f64 - y as f64).abs()).sum::<f64>() / PIXELS as f64
}

/// `px` at 10x, ink 250 - p on paper 250, at (20 + shift, 20) on a 420x330 page.
fn paper(px: &[u8], shift: u32) -> GrayImage {
    let mut page = GrayImage::from_pixel(420, 330, Luma([250]));
    for y in 0..280u32 {
        for x in 0..280u32 {
            let v = px[(y as usize / 10) * 28 + x as usize / 10];
            page.put_pixel(x + 20 + shift, y + 20, Luma([250 - v.min(250)]));
        }
    }
    page
}

/// `px` at 6x as black strokes whose opacity is the pixel, on a transparent 200x200 canvas.
fn transparent(px: &[u8]) -> RgbaImage {
    let mut canvas = RgbaImage::from_pixel(200, 200, Rgba([0, 0, 0, 0]));
    for y in 0..168u32 {
        for x in 0..168u32 {
            canvas.put_pixel(x + 16, y + 16, Rgba([0, 0, 0, px[(y as usize / 6) * 28 + x as usize / 6]]));
        }
    }
    canvas
}

#[test]
fn drawn_digits_come_back_and_read_the_same() {
    let data = support::mnist();
    // A network to read with: 20,000 images, 2 epochs, on the CPU (a second or two).
    let subset = Mnist { train: data.train.take(20_000), test: data.test.take(100), kind: data.kind };
    let cfg = TrainConfig { layers: TrainConfig::mlp(&[64]), epochs: 2, optimizer: Optimizer::sgd(0.02, 0.9), ..TrainConfig::default() };
    let out = train(&Device::Cpu, &subset, &cfg, &AtomicBool::new(false), &mut |_| {}).unwrap();
    let mut net = out.model.classifier().unwrap();
    let originals = net.predict(&subset.test.images).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let kinds = ["png", "jpeg", "transparent png"];
    let mut diffs: [Vec<f64>; 3] = Default::default();
    let mut agree = [0usize; 3];
    for (i, &original) in originals.iter().enumerate() {
        let px = subset.test.image(i);
        let files = [dir.path().join("d.png"), dir.path().join("d.jpg"), dir.path().join("t.png")];
        paper(px, i as u32).save(&files[0]).unwrap();
        paper(px, i as u32).save(&files[1]).unwrap();
        transparent(px).save(&files[2]).unwrap();
        for k in 0..3 {
            let back = preprocess_file(&files[k]).unwrap();
            diffs[k].push(mean_abs_diff(px, &back));
            agree[k] += usize::from(net.predict(&back).unwrap()[0] == original);
        }
    }
    for k in 0..3 {
        diffs[k].sort_by(f64::total_cmp);
        eprintln!(
            "{}: mean abs difference per pixel median {:.2}, worst {:.2}; same prediction {} of 100",
            kinds[k], diffs[k][50], diffs[k][99], agree[k]
        );
    }
    // Measured: png median 0.41, worst 23.33, 99 of 100; jpeg median 0.44, worst 11.39,
    // 100 of 100; transparent median 0.00, worst 14.56, 99 of 100. (The worst cases are a
    // one-pixel shift of the centre of mass, or a faint edge below the ink threshold.)
    for k in 0..3 {
        assert!(diffs[k][50] < 2.0, "{}: median difference {}", kinds[k], diffs[k][50]);
        assert!(agree[k] >= 97, "{}: only {} of 100 read as the originals", kinds[k], agree[k]);
    }
}
