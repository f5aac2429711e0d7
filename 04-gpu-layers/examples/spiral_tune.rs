use cpu_matrix::Matrix;
use gpu_layers::*;
use rand::SeedableRng;
use rand::seq::SliceRandom;
use std::f32::consts::PI;

fn two_spirals(points: usize, seed: u64, scale: f32) -> (Matrix, Vec<u8>) {
    use rand::Rng;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut data = Vec::new();
    let mut labels = Vec::new();
    for arm in 0..2u8 {
        for i in 0..points {
            let t = 0.25 + 3.0 * PI * i as f32 / points as f32;
            let r = t / (3.0 * PI);
            let angle = t + arm as f32 * PI;
            data.push(scale * (r * angle.cos() + rng.random_range(-0.02..0.02)));
            data.push(scale * (r * angle.sin() + rng.random_range(-0.02..0.02)));
            labels.push(arm);
        }
    }
    (Matrix { rows: 2 * points, cols: 2, data }, labels)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let hidden: usize = args[1].parse().unwrap();
    let act = if args[2] == "tanh" { Activation::Tanh } else { Activation::Relu };
    let lr: f32 = args[3].parse().unwrap();
    let scale: f32 = args[4].parse().unwrap();
    let epochs: usize = args[5].parse().unwrap();
    let spec = NetworkSpec::new(2, &[hidden, hidden], 2).unwrap().with_activation(act);
    let mut cpu = CpuTrainer::new(&spec, Optimizer::adam(lr), 64, 42).unwrap();
    let (x, labels) = two_spirals(200, 7, scale);
    let mut order: Vec<usize> = (0..x.rows).collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    for epoch in 1..=epochs {
        order.shuffle(&mut rng);
        for chunk in order.chunks(64) {
            let xb = Matrix { rows: chunk.len(), cols: 2, data: chunk.iter().flat_map(|&i| [x.data[2 * i], x.data[2 * i + 1]]).collect() };
            let lb: Vec<u8> = chunk.iter().map(|&i| labels[i]).collect();
            cpu.train_step(&xb, &lb).unwrap();
        }
        let m = cpu.take_metrics().unwrap();
        if epoch % (epochs / 10) == 0 { println!("{epoch} {:.4} {:.1}", m.mean_loss(), 100.0 * m.accuracy()); }
    }
}
