//! Trains a layer list on MNIST with the fused GPU kernels and prints each epoch's GPU time and
//! test accuracy: the check that a network with fused dropout learns as well as without it.
//! `mnist_epochs DIR LAYERS [EPOCHS]`, DIR holding the four uncompressed IDX files
//! (`train-images-idx3-ubyte`, ...), LAYERS stage 04's text form
//! (`784-512-relu-dropout0.2-256-relu-dropout0.2-10`). Adam 1e-3, batch 64, the batches gathered
//! from the bytes on the GPU in a new order every epoch; pixels scaled to [0, 1].

use common::{GpuContext, GpuTimer};
use cpu_matrix::Matrix;
use gpu_layers::{ByteImages, FusedTiles, GatherSlot, GpuTrainer, Kernels, Loss, NetworkSpec, Optimizer, Precision};
use rand::SeedableRng;
use rand::seq::SliceRandom;

/// An IDX file's payload (after its `4 + 4 * dims` byte header).
fn idx(dir: &str, name: &str, dims: usize) -> Vec<u8> {
    let bytes = std::fs::read(format!("{dir}/{name}")).unwrap_or_else(|e| panic!("{dir}/{name}: {e}"));
    bytes[4 + 4 * dims..].to_vec()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (dir, layers) = (args.get(1).ok_or("usage: mnist_epochs DIR LAYERS [EPOCHS]")?, args.get(2).ok_or("LAYERS")?);
    let epochs: usize = args.get(3).map_or(Ok(10), |s| s.parse())?;
    let (train_x, train_y) = (idx(dir, "train-images-idx3-ubyte", 3), idx(dir, "train-labels-idx1-ubyte", 1));
    let (test_x, test_y) = (idx(dir, "t10k-images-idx3-ubyte", 3), idx(dir, "t10k-labels-idx1-ubyte", 1));
    let (n, batch) = (train_y.len(), 64);
    let spec = NetworkSpec::parse(layers, Loss::CrossEntropy)?;
    let ctx = GpuContext::new()?;
    let kernels = Kernels::with_options(FusedTiles::for_network(batch, &spec.layer_shapes()), Precision::F32);
    let opt = Optimizer::adam(1e-3);
    let mut gpu = GpuTrainer::with_options(&ctx, &kernels, &spec, opt, batch, 42, gpu_layers::Fusion::Fused)?;
    let steps = n.div_ceil(batch);
    let stride = (ctx.limits.min_uniform_buffer_offset_alignment as u64).max(16);
    let mut slot_bytes = vec![0u8; steps * stride as usize];
    for s in 0..steps {
        let slot = GatherSlot { first: (s * batch) as u32, count: batch.min(n - s * batch) as u32, scale: 1.0 / 255.0, shift: 0.0 };
        slot_bytes[s * stride as usize..][..16].copy_from_slice(bytemuck::bytes_of(&slot));
    }
    let storage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST;
    let images = ctx.buffer_init("images", &train_x, storage)?;
    let mut label_bytes = train_y.clone();
    label_bytes.resize(n.div_ceil(4) * 4, 0);
    let labels = ctx.buffer_init("labels", &label_bytes, storage)?;
    let mut order: Vec<u32> = (0..n as u32).collect();
    let order_buf = ctx.buffer_init("order", bytemuck::cast_slice(&order), storage)?;
    let slots = ctx.buffer_init("slots", &slot_bytes, wgpu::BufferUsages::UNIFORM)?;
    let source = ByteImages { images: &images, labels: &labels, order: &order_buf, slots: &slots, stride };
    let gathered = gpu.add_gathered(&ctx, &kernels, &source)?;
    let test = Matrix::new(test_y.len(), 784, test_x.iter().map(|&p| p as f32 / 255.0).collect())?;
    let timer = GpuTimer::new(&ctx);
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    println!("{} on {}: {} dispatches per step ({})", spec.describe(), ctx.adapter_line(), gpu.step_kernels(Some(gathered)).len(), gpu.step_kernels(Some(gathered)).join(", "));
    for epoch in 1..=epochs {
        order.shuffle(&mut rng);
        ctx.queue.write_buffer(&order_buf, 0, bytemuck::cast_slice(&order));
        // The full batches in one pass, then the short last one.
        gpu.set_batch(&ctx, batch)?;
        let full = n / batch;
        let seconds = timer.time_pass(&ctx, "epoch", |pass| gpu.record_gathered_steps(gathered, 0..full, pass))?;
        if full < steps {
            gpu.set_batch(&ctx, n - full * batch)?;
            ctx.submit_pass("last step", |pass| gpu.record_gathered_steps(gathered, full..steps, pass));
        }
        let m = gpu.take_metrics(&ctx)?;
        let probs = gpu.predict_probs(&ctx, &test)?;
        let correct = probs
            .data
            .chunks_exact(10)
            .zip(&test_y)
            .filter(|(p, l)| p.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map(|(i, _)| i) == Some(**l as usize))
            .count();
        println!(
            "epoch {epoch}: train loss {:.4}, test accuracy {:.2}%, GPU {:.2} ms for {full} steps",
            m.mean_loss(),
            100.0 * correct as f64 / test_y.len() as f64,
            seconds * 1e3
        );
    }
    Ok(())
}
