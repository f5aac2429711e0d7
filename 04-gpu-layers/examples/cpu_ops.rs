//! Times each fast CPU op of `cpu/fast.rs` on the MNIST step's shapes (784-128-10, batch 64):
//! min / p10 / median of many short runs, on rayon's pool (`RAYON_NUM_THREADS=1` for one thread).

use std::time::Instant;
use gpu_layers::cpu::fast;
use gpu_layers::{Activation, Mode, Optimizer};

fn time(name: &str, mut f: impl FnMut()) {
    for _ in 0..20 { f(); }
    let mut v = Vec::new();
    for _ in 0..300 { let s = Instant::now(); f(); v.push(s.elapsed().as_secs_f64() * 1e6); }
    v.sort_by(f64::total_cmp);
    println!("{name:>24}: min {:7.1} p10 {:7.1} median {:7.1} us", v[0], v[v.len() / 10], v[v.len() / 2]);
}

fn main() {
    let (rows, inp, hid, cls) = (64usize, 784usize, 128usize, 10usize);
    let x: Vec<f32> = (0..rows * inp).map(|i| (i % 97) as f32 / 97.0).collect();
    let p1: Vec<f32> = (0..(inp + 1) * hid).map(|i| ((i % 89) as f32 - 44.0) / 440.0).collect();
    let p2: Vec<f32> = (0..(hid + 1) * cls).map(|i| ((i % 83) as f32 - 41.0) / 410.0).collect();
    let mut h = vec![0.0; rows * hid];
    let mut out = vec![0.0; rows * cls];
    let mut dh = vec![0.0; rows * hid];
    let labels: Vec<u32> = (0..rows as u32).map(|i| i % 10).collect();
    time("forward 64x784x128", || fast::linear_forward(&x, rows, inp, &p1, hid, Some(Activation::Relu), &mut h));
    time("output layer", || { fast::output_layer(&h, rows, hid, &p2, cls, &labels, Mode::Train, 1.0 / 64.0, &mut out, Some((&mut dh, Activation::Relu))); });
    for opt in [Optimizer::sgd(0.1, 0.0), Optimizer::adam(1e-3)] {
        let k = opt.state_per_parameter();
        let (mut p, mut g, mut st) = (p1.clone(), vec![0.0; p1.len()], vec![0.0; k * p1.len()]);
        time(&format!("update W1 {}", if k == 1 { "sgd" } else { "adam" }), || fast::linear_update(&x, rows, inp, &dh, hid, &mut p, &mut g, &mut st, opt, 3));
        let (mut p, mut g, mut st) = (p2.clone(), vec![0.0; p2.len()], vec![0.0; k * p2.len()]);
        time(&format!("update W2 {}", if k == 1 { "sgd" } else { "adam" }), || fast::linear_update(&h, rows, hid, &out, cls, &mut p, &mut g, &mut st, opt, 3));
    }
}
