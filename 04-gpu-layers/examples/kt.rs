use gpu_layers::*;
fn main() {
    let ctx = common::GpuContext::new().unwrap();
    let spec = NetworkSpec::new(2, &[32, 32], 2).unwrap().with_activation(Activation::Tanh);
    let g = GpuTrainer::new(&ctx, &spec, Optimizer::adam(0.03), 64, 1).unwrap();
    let timer = common::GpuTimer::new(&ctx);
    let (tape, p) = g.tape();
    for (i, op) in g.network().train.iter().enumerate() {
        let t = timer.time_pass(&ctx, "x", |pass| (0..20).for_each(|_| tape.record_one(p, i, pass))).unwrap();
        println!("{} {:.1} us", op.kernel_name(), t * 1e6 / 20.0);
    }
    let s = std::time::Instant::now();
    for _ in 0..20 { g.train_steps(&ctx, 1).unwrap(); }
    ctx.wait().unwrap();
    println!("20 submits: {:.1} ms each", s.elapsed().as_secs_f64() * 1e3 / 20.0);
    let s = std::time::Instant::now();
    g.train_steps(&ctx, 20).unwrap();
    ctx.wait().unwrap();
    println!("1 submit of 20: {:.1} ms per step", s.elapsed().as_secs_f64() * 1e3 / 20.0);
}
