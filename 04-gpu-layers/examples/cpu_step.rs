//! Times one whole CPU training step (`CpuTrainer`), fused and composed tapes, SGD and Adam:
//! `cpu_step [HIDDEN,..] [BATCH] [RUNS]`, min / p10 / median of RUNS runs of 5 steps each.

use std::time::Instant;
use cpu_matrix::Matrix;
use gpu_layers::{CpuTrainer, Fusion, NetworkSpec, Optimizer};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let hidden: Vec<usize> = args.get(1).map_or(vec![128], |s| s.split(',').map(|v| v.parse().unwrap()).collect());
    let batch: usize = args.get(2).map_or(64, |s| s.parse().unwrap());
    let steps: usize = args.get(3).map_or(300, |s| s.parse().unwrap());
    let spec = NetworkSpec::new(784, &hidden, 10).unwrap();
    let x = Matrix::random_uniform(batch, 784, 0.0, 1.0, 1);
    let labels: Vec<u32> = (0..batch).map(|i| (i % 10) as u32).collect();
    for (name, opt) in [("sgd", Optimizer::sgd(0.1, 0.0)), ("adam", Optimizer::adam(1e-3))] {
        for fusion in [Fusion::Fused, Fusion::Composed] {
            let mut t = CpuTrainer::with_fusion(&spec, opt, batch, 1, fusion).unwrap();
            for _ in 0..20 { t.train_step(&x, &labels).unwrap(); t.take_metrics().unwrap(); }
            let mut times = Vec::new();
            for _ in 0..steps {
                let s = Instant::now();
                for _ in 0..5 { t.train_step(&x, &labels).unwrap(); t.take_metrics().unwrap(); }
                times.push(s.elapsed().as_secs_f64() * 1e6 / 5.0);
            }
            times.sort_by(f64::total_cmp);
            println!("{name} {fusion:?} threads {}: min {:.1} p10 {:.1} median {:.1} us/step", rayon::current_num_threads(), times[0], times[times.len() / 10], times[times.len() / 2]);
        }
    }
}
