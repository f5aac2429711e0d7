//! Whole training steps: the GPU trainer against the CPU trainer (the reference), the buffer
//! manager's promise (no allocation per step), the metrics, and the errors.

use std::sync::{Arc, OnceLock};

use common::{GpuContext, assert_close, test_context};
use cpu_matrix::Matrix;
use gpu_layers::{Activation, CpuTrainer, Fusion, FusedTiles, GpuTrainer, Kernels, LayersError, Loss, NetworkSpec, Optimizer, Routing};

fn kernels() -> &'static Arc<Kernels> {
    static K: OnceLock<Arc<Kernels>> = OnceLock::new();
    K.get_or_init(Kernels::new)
}

fn gpu(spec: &NetworkSpec, opt: Optimizer, max_batch: usize, fusion: Fusion) -> GpuTrainer {
    GpuTrainer::with_options(test_context(), kernels(), spec, opt, max_batch, 7, fusion).unwrap()
}

fn gpu_routed(spec: &NetworkSpec, opt: Optimizer, max_batch: usize, routing: Routing) -> GpuTrainer {
    GpuTrainer::with_routing(test_context(), kernels(), spec, opt, max_batch, 7, Fusion::Fused, routing).unwrap()
}

/// A device held to WebGPU's default limits (what a browser may offer and no more), with its
/// own kernels: `DeviceFit::WEBGPU_DEFAULTS` (smaller workgroups and staging, one layer
/// per `linear_update`).
fn webgpu_defaults() -> &'static (GpuContext, Arc<Kernels>) {
    static CTX: OnceLock<(GpuContext, Arc<Kernels>)> = OnceLock::new();
    CTX.get_or_init(|| {
        let ctx = GpuContext::with_limits(wgpu::Limits::defaults()).expect("an adapter that offers WebGPU's defaults");
        assert_eq!(gpu_layers::DeviceFit::for_limits(&ctx.limits), gpu_layers::DeviceFit::WEBGPU_DEFAULTS);
        (ctx, Kernels::new())
    })
}

/// A batch of `rows` random inputs in [-1, 1] and labels below `classes`.
fn batch(rows: usize, cols: usize, classes: usize, seed: u64) -> (Matrix, Vec<u32>) {
    let x = Matrix::random_uniform(rows, cols, -1.0, 1.0, seed);
    let labels = (0..rows).map(|r| ((r * 7 + seed as usize) % classes) as u32).collect();
    (x, labels)
}

/// Parameters after a step: `lr * g` with g accurate to ~1e-6 relative. These tolerances
/// (1e-4 relative + 1e-5 absolute) allow f32 summation-order differences over a few steps and
/// fail on any real error (a wrong term moves a parameter by ~lr * 1e-2 or more).
const PARAM_TOL: (f64, f64) = (1e-4, 1e-5);

fn assert_params_close(ctx: &GpuContext, g: &GpuTrainer, c: &CpuTrainer, what: &str) {
    for (i, (a, b)) in g.parameters(ctx).unwrap().iter().zip(c.parameters()).enumerate() {
        if let Err(e) = common::check_close(&a.data, &b.data, PARAM_TOL.0, PARAM_TOL.1) {
            panic!("{what}: parameter {i} ({}x{}): {e}", b.rows, b.cols);
        }
    }
}

/// Trains both devices on the same batches, the last one smaller, comparing the parameters
/// after every step, the gradients of the first step and the metrics at the end.
fn gpu_matches_cpu(spec: &NetworkSpec, opt: Optimizer, fusion: Fusion) {
    gpu_matches_cpu_on(test_context(), kernels(), spec, opt, fusion);
}

fn gpu_matches_cpu_on(ctx: &GpuContext, kernels: &Arc<Kernels>, spec: &NetworkSpec, opt: Optimizer, fusion: Fusion) {
    let g = GpuTrainer::with_options(ctx, kernels, spec, opt, 17, 7, fusion).unwrap();
    gpu_trainer_matches_cpu(ctx, g, spec, opt, &format!("{fusion:?}"));
}

fn gpu_trainer_matches_cpu(ctx: &GpuContext, g: GpuTrainer, spec: &NetworkSpec, opt: Optimizer, fusion: &str) {
    let max_batch = g.max_batch();
    let mut c = CpuTrainer::new(spec, opt, max_batch, 7).unwrap();
    assert_params_close(ctx, &g, &c, "initial parameters");
    for (step, rows) in [17, 17, 17, 6].into_iter().enumerate() {
        let (x, labels) = batch(rows, spec.input(), spec.output(), step as u64);
        g.write_batch(ctx, &x, &labels).unwrap();
        // The steps whose gradients are read keep them; the others run as training does.
        let read = step == 0 || rows == 6;
        g.keep_gradients(ctx, read).unwrap();
        g.train_steps(ctx, 1).unwrap();
        c.train_step(&x, &labels).unwrap();
        let what = format!("{} {} {fusion}, step {step} ({rows} rows)", spec.describe(), opt.describe());
        if read {
            // Gradients: sums of `rows` products of values ~1 -> (1e-4, 1e-6) covers f32 rounding.
            for (i, (a, b)) in g.gradients(ctx).unwrap().iter().zip(c.gradients()).enumerate() {
                if let Err(e) = common::check_close(&a.data, &b.data, 1e-4, 1e-6) {
                    panic!("{what}: gradient {i}: {e}");
                }
            }
        }
        assert_params_close(ctx, &g, &c, &what);
    }
    let (gm, cm) = (g.take_metrics(ctx).unwrap(), c.take_metrics().unwrap());
    assert_eq!((gm.rows, gm.correct), (cm.rows, cm.correct));
    assert_eq!(gm.rows, 17 * 3 + 6);
    assert_close(&[gm.loss_sum as f32], &[cm.loss_sum as f32], 1e-5, 1e-5);
}

#[test]
fn sgd_momentum_step_gpu_equals_cpu_fused_and_composed() {
    let spec = NetworkSpec::new(13, &[17], 5).unwrap();
    for fusion in [Fusion::Fused, Fusion::Composed] {
        gpu_matches_cpu(&spec, Optimizer::sgd(0.1, 0.9), fusion);
    }
}

#[test]
fn adam_step_gpu_equals_cpu_fused_and_composed() {
    let spec = NetworkSpec::new(13, &[17], 5).unwrap();
    for fusion in [Fusion::Fused, Fusion::Composed] {
        gpu_matches_cpu(&spec, Optimizer::adam(1e-3), fusion);
    }
}

#[test]
fn deeper_tanh_and_hidden_free_networks_gpu_equals_cpu() {
    let deep = NetworkSpec::new(9, &[17, 6], 3).unwrap().with_activation(Activation::Tanh);
    let flat = NetworkSpec::new(9, &[], 4).unwrap();
    for spec in [deep, flat] {
        for fusion in [Fusion::Fused, Fusion::Composed] {
            gpu_matches_cpu(&spec, Optimizer::sgd(0.05, 0.5), fusion);
            gpu_matches_cpu(&spec, Optimizer::adam(1e-3), fusion);
        }
    }
}

/// Dropout (the same masks on both devices, drawn from the step counter), GELU, sigmoid, flatten
/// and MSE: with GELU or MSE the fused kernels do not cover the network, so both "fusions" run
/// the composed tapes (its dropout layers as `dropout_forward` and `dropout_backward`).
#[test]
fn dropout_gelu_sigmoid_and_mse_networks_gpu_equals_cpu() {
    for (text, loss) in [("13-17-relu-dropout0.3-9-gelu-5", Loss::CrossEntropy), ("flatten-13-17-sigmoid-dropout0.5-5-tanh", Loss::Mse)] {
        let spec = NetworkSpec::parse(text, loss).unwrap();
        gpu_matches_cpu(&spec, Optimizer::sgd(0.1, 0.9), Fusion::Fused);
        gpu_matches_cpu(&spec, Optimizer::adam(1e-3), Fusion::Composed);
    }
}

/// The dropout networks the fused kernels cover (one to three hidden layers, ReLU, tanh and
/// sigmoid, dropout after some or all of them, odd widths): no dropout dispatch on the GPU; both
/// devices' fused tapes step by step (the last batch short), three steps in one submission (the
/// mask step handed from each step's update to the next step), and the CPU's fused tape against
/// its composed one (the same masks, from the same seeds and steps).
#[test]
fn fused_dropout_networks_gpu_equals_cpu() {
    let ctx = test_context();
    for text in [
        "13-17-relu-dropout0.3-5",
        "9-17-tanh-dropout0.5-6-sigmoid-dropout0.2-3",
        "13-33-relu-dropout0.2-9-relu-7-sigmoid-dropout0.4-5",
        "flatten-13-63-relu-dropout0.1-65-tanh-dropout0.5-4",
    ] {
        let spec = NetworkSpec::parse(text, Loss::CrossEntropy).unwrap();
        assert_eq!(gpu_layers::Network::fused_blocker(&spec), None, "{text}");
        for opt in [Optimizer::sgd(0.1, 0.9), Optimizer::adam(1e-3)] {
            let g = gpu(&spec, opt, 17, Fusion::Fused);
            assert_eq!(g.network().fusion, Fusion::Fused, "{text}");
            let kernels = g.step_kernels(None);
            assert!(!kernels.iter().any(|k| k.starts_with("dropout")), "{text}: {kernels:?}");
            gpu_matches_cpu(&spec, opt, Fusion::Fused);
            // Three steps in one submission.
            let mut c = CpuTrainer::new(&spec, opt, 17, 7).unwrap();
            let (x, labels) = batch(11, spec.input(), spec.output(), 9);
            g.write_batch(ctx, &x, &labels).unwrap();
            g.train_steps(ctx, 3).unwrap();
            for _ in 0..3 {
                c.train_step(&x, &labels).unwrap();
            }
            assert_params_close(ctx, &g, &c, &format!("{text} {}: 3 steps in one submission", opt.describe()));
        }
        let opt = Optimizer::sgd(0.1, 0.9);
        let mut fused = CpuTrainer::new(&spec, opt, 17, 7).unwrap();
        let mut composed = CpuTrainer::with_fusion(&spec, opt, 17, 7, Fusion::Composed).unwrap();
        assert_eq!(composed.network().fusion, Fusion::Composed);
        cpu_fused_matches_composed(&spec, &mut fused, &mut composed, &[17, 17, 6], 20, text);
    }
    // A dropout the fused kernels cannot take (not after an activation) keeps the composed tapes.
    let spec = NetworkSpec::parse("13-17-dropout0.2-9-relu-5", Loss::CrossEntropy).unwrap();
    assert!(gpu_layers::Network::fused_blocker(&spec).unwrap().contains("dropout"));
    gpu_matches_cpu(&spec, Optimizer::sgd(0.1, 0.9), Fusion::Fused);
}

/// The CPU's fused tape against its composed one, one step per entry of `rows` (batch `step +
/// seed`): every gradient within f32 rounding of the other's.
fn cpu_fused_matches_composed(spec: &NetworkSpec, fused: &mut CpuTrainer, composed: &mut CpuTrainer, rows: &[usize], seed: u64, what: &str) {
    for (step, &rows) in rows.iter().enumerate() {
        let (x, labels) = batch(rows, spec.input(), spec.output(), step as u64 + seed);
        fused.train_step(&x, &labels).unwrap();
        composed.train_step(&x, &labels).unwrap();
        for (i, (a, b)) in fused.gradients().iter().zip(composed.gradients()).enumerate() {
            if let Err(e) = common::check_close(&a.data, &b.data, 1e-4, 1e-6) {
                panic!("{what} step {step}: fused and composed CPU gradient {i}: {e}");
            }
        }
    }
}

/// The tiles of a network with a 512-wide layer and two hidden layers in small batches
/// (`FusedTiles::for_network`: 4 rows per workgroup, the forwards' k loops in 16 slices, 512
/// invocations): both devices step by step, the last batch short. (With SGD: Adam's step has a
/// slope of lr / eps at a gradient near 0, so one step leaves the devices' parameters up to 1e-6
/// apart and the fourth step's gradients of a 512-wide layer a few parts in 10^4, past the
/// tolerance, with these tiles and the default ones alike.)
#[test]
fn a_wide_deep_network_with_its_own_tiles_gpu_equals_cpu() {
    let ctx = test_context();
    let spec = NetworkSpec::parse("13-512-relu-dropout0.2-17-relu-5", Loss::CrossEntropy).unwrap();
    let tiles = FusedTiles::for_network(17, &spec.layer_shapes());
    assert_eq!((tiles.forward_ks, tiles.forward_tr), (16, 4));
    let opt = Optimizer::sgd(0.1, 0.9);
    let g = GpuTrainer::with_options(ctx, &Kernels::with_tiles(tiles), &spec, opt, 17, 7, Fusion::Fused).unwrap();
    gpu_trainer_matches_cpu(ctx, g, &spec, opt, "for_network tiles");
}

/// The sweep's variants whose `forward_output` spans 256 columns (32 x 8 and 64 x 4, 1 or 2
/// rows per workgroup) merge the second hidden layer of a deep network with the output layer:
/// 4 dispatches a step instead of 5. Both devices step by step, full and odd widths, dropout
/// after both layers.
#[test]
fn a_second_hidden_layer_merged_with_the_output_layer_gpu_equals_cpu() {
    let ctx = test_context();
    for s in ["13-512-relu-dropout0.2-256-relu-dropout0.2-5", "13-300-relu-dropout0.2-255-tanh-dropout0.2-10"] {
        let spec = NetworkSpec::parse(s, Loss::CrossEntropy).unwrap();
        let base = FusedTiles::for_network(17, &spec.layer_shapes());
        for (tn, cb, ks, tr) in [(32, 8, 16, 1), (64, 4, 16, 1), (32, 8, 8, 2), (64, 4, 8, 2)] {
            let tiles = FusedTiles { merged_tn: tn, merged_cb: cb, merged_ks: ks, merged_tr: tr, ..base };
            let opt = Optimizer::sgd(0.1, 0.9);
            let g = GpuTrainer::with_options(ctx, &Kernels::with_tiles(tiles), &spec, opt, 17, 7, Fusion::Fused).unwrap();
            assert_eq!(g.step_kernels(None), ["linear_forward", "forward_output", "linear_backward_input", "linear_update"], "{s} {tn} x {cb}, {tr} rows");
            gpu_trainer_matches_cpu(ctx, g, &spec, opt, &format!("forward_output {tn} x {cb}, {tr} rows"));
        }
    }
}

/// GELU beside the fused kernels (the linear kernel writes the pre-activation, an elementwise op
/// the GELU; a dropout after it composed): first, middle and only hidden layer, with and without
/// dropout, both losses, odd widths; both devices step by step (the last batch short), and the
/// CPU's fused tape against its composed one (the same masks, from the same seeds and steps).
#[test]
fn fused_gelu_networks_gpu_equals_cpu() {
    for (text, loss) in [
        ("13-17-gelu-5", Loss::CrossEntropy),
        ("9-17-gelu-dropout0.3-6-relu-dropout0.2-3", Loss::CrossEntropy),
        ("13-33-relu-dropout0.2-9-gelu-7-sigmoid-5", Loss::CrossEntropy),
        ("flatten-13-63-gelu-dropout0.5-4", Loss::Mse),
    ] {
        let spec = NetworkSpec::parse(text, loss).unwrap();
        assert_eq!(gpu_layers::Network::fused_blocker(&spec), None, "{text}");
        for opt in [Optimizer::sgd(0.1, 0.9), Optimizer::adam(1e-3)] {
            let g = gpu(&spec, opt, 17, Fusion::Fused);
            assert_eq!(g.network().fusion, Fusion::Fused, "{text}");
            let kernels = g.step_kernels(None);
            assert!(kernels.contains(&"activation_copy_forward"), "{text}: {kernels:?}");
            assert!(kernels.iter().any(|k| k.starts_with("linear_update")), "{text}: {kernels:?}");
            gpu_matches_cpu(&spec, opt, Fusion::Fused);
        }
        let opt = Optimizer::adam(1e-3);
        let mut fused = CpuTrainer::new(&spec, opt, 17, 7).unwrap();
        let mut composed = CpuTrainer::with_fusion(&spec, opt, 17, 7, Fusion::Composed).unwrap();
        assert_eq!(composed.network().fusion, Fusion::Composed);
        cpu_fused_matches_composed(&spec, &mut fused, &mut composed, &[17, 17, 6], 40, text);
        let (fm, cm) = (fused.take_metrics().unwrap(), composed.take_metrics().unwrap());
        assert_eq!((fm.rows, fm.correct), (cm.rows, cm.correct), "{text}");
        assert_close(&[fm.loss_sum as f32], &[cm.loss_sum as f32], 1e-5, 1e-5);
    }
}

/// Mean squared error on the fused kernels (with and without dropout, one and two hidden
/// layers), both devices step by step, and the CPU's fused tape against its composed one.
#[test]
fn fused_mean_squared_error_networks_gpu_equals_cpu() {
    for text in ["2-8-tanh-2", "13-17-relu-dropout0.3-5", "9-17-sigmoid-6-tanh-dropout0.2-3"] {
        let spec = NetworkSpec::parse(text, Loss::Mse).unwrap();
        assert_eq!(gpu_layers::Network::fused_blocker(&spec), None, "{text}");
        for opt in [Optimizer::sgd(0.1, 0.9), Optimizer::adam(1e-3)] {
            assert_eq!(gpu(&spec, opt, 17, Fusion::Fused).network().fusion, Fusion::Fused);
            gpu_matches_cpu(&spec, opt, Fusion::Fused);
        }
        let opt = Optimizer::sgd(0.1, 0.9);
        let mut fused = CpuTrainer::new(&spec, opt, 17, 7).unwrap();
        let mut composed = CpuTrainer::with_fusion(&spec, opt, 17, 7, Fusion::Composed).unwrap();
        cpu_fused_matches_composed(&spec, &mut fused, &mut composed, &[17, 6], 30, &format!("{text} mse"));
        let (fm, cm) = (fused.take_metrics().unwrap(), composed.take_metrics().unwrap());
        assert_eq!((fm.rows, fm.correct), (cm.rows, cm.correct));
        assert_close(&[fm.loss_sum as f32], &[cm.loss_sum as f32], 1e-5, 1e-5);
    }
}

/// The same within WebGPU's default limits (the browser's kernels: one layer per update, the
/// smaller workgroups).
#[test]
fn fused_dropout_within_webgpu_default_limits_gpu_equals_cpu() {
    let (ctx, kernels) = webgpu_defaults();
    for text in ["13-17-relu-dropout0.3-5", "100-40-relu-dropout0.2-9-tanh-dropout0.5-5"] {
        let spec = NetworkSpec::parse(text, Loss::CrossEntropy).unwrap();
        for opt in [Optimizer::sgd(0.1, 0.9), Optimizer::adam(1e-3)] {
            gpu_matches_cpu_on(ctx, kernels, &spec, opt, Fusion::Fused);
        }
    }
}

/// Dropout is the identity at evaluation and prediction: a network with dropout layers gives
/// the same metrics and probabilities as the same network without them, on both devices.
#[test]
fn dropout_is_off_at_evaluation_and_prediction() {
    let ctx = test_context();
    let with = NetworkSpec::parse("13-17-relu-dropout0.5-9-tanh-dropout0.2-5", Loss::CrossEntropy).unwrap();
    let without = NetworkSpec::parse("13-17-relu-9-tanh-5", Loss::CrossEntropy).unwrap();
    let opt = Optimizer::sgd(0.1, 0.0);
    let params = with.init_parameters(3);
    let (x, labels) = batch(17, 13, 5, 4);
    let mut results = Vec::new();
    for spec in [&with, &without] {
        // Composed tapes for both (the network without dropout would get the fused kernels, which
        // sum in another order).
        let g = gpu(spec, opt, 17, Fusion::Composed);
        g.load_parameters(ctx, &params).unwrap();
        g.write_batch(ctx, &x, &labels).unwrap();
        g.eval(ctx).unwrap();
        let gm = g.take_metrics(ctx).unwrap();
        let mut c = CpuTrainer::new(spec, opt, 17, 3).unwrap();
        c.load_parameters(&params).unwrap();
        c.eval_batch(&x, &labels).unwrap();
        let cm = c.take_metrics().unwrap();
        results.push((gm, cm, g.predict_probs(ctx, &x).unwrap(), c.predict_probs(&x).unwrap()));
    }
    let (a, b) = (&results[0], &results[1]);
    assert_eq!((a.0, a.1), (b.0, b.1), "metrics with and without dropout layers");
    common::assert_same(&a.2.data, &b.2.data);
    // On the CPU the two networks take different code: with dropout layers the composed CPU
    // references of cpu/reference.rs, without them the fast CPU path of cpu/fast.rs, whose AVX-512 register tiles sum in
    // another order: 1 ulp on 47 of 85 probabilities on an AVX-512 Xeon, where this test used to
    // compare bits. Dropout left on at p = 0.5 would change them by far more.
    common::assert_close(&a.3.data, &b.3.data, 1e-6, 1e-7);
}

/// The XOR demo with the loss of the original devlog: mean squared error on sigmoid outputs.
#[test]
fn xor_trains_with_mse_on_both_devices() {
    let ctx = test_context();
    let spec = NetworkSpec::parse("2-8-tanh-2-sigmoid", Loss::Mse).unwrap();
    let opt = Optimizer::adam(0.05);
    let g = gpu(&spec, opt, 4, Fusion::Fused);
    let mut c = CpuTrainer::new(&spec, opt, 4, 7).unwrap();
    let x = Matrix::new(4, 2, vec![0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0]).unwrap();
    let labels = [0u32, 1, 1, 0];
    g.write_batch(ctx, &x, &labels).unwrap();
    g.train_steps(ctx, 1).unwrap();
    c.train_step(&x, &labels).unwrap();
    let first = (g.take_metrics(ctx).unwrap().mean_loss(), c.take_metrics().unwrap().mean_loss());
    g.train_steps(ctx, 299).unwrap();
    for _ in 0..299 {
        c.train_step(&x, &labels).unwrap();
    }
    g.take_metrics(ctx).unwrap();
    c.take_metrics().unwrap();
    g.eval(ctx).unwrap();
    c.eval_batch(&x, &labels).unwrap();
    for (who, start, m) in [("GPU", first.0, g.take_metrics(ctx).unwrap()), ("CPU", first.1, c.take_metrics().unwrap())] {
        assert_eq!(m.correct, 4, "{who}: XOR with MSE classifies all four points");
        assert!(m.mean_loss() < 0.01 && m.mean_loss() < 0.1 * start, "{who}: MSE {start} -> {}", m.mean_loss());
    }
}

#[test]
fn layers_routed_through_stage_03_gpu_equals_cpu() {
    // Both hidden layers through stage 03's matmul, bias, activation, column sum and optimizer
    // ops; the CPU runs its fused ops.
    let deep = NetworkSpec::new(13, &[17, 9], 5).unwrap();
    for opt in [Optimizer::sgd(0.1, 0.9), Optimizer::adam(1e-3)] {
        let g = gpu_routed(&deep, opt, 17, Routing::Always);
        assert!(g.network().routed[..2].iter().all(|&r| r), "{:?}", g.network().routed);
        gpu_trainer_matches_cpu(test_context(), g, &deep, opt, "routed");
    }
    // The measured rule routes only wide layers trained in big batches (f32 here: the tests'
    // kernels ask for f32 products).
    let wide = NetworkSpec::new(20, &[1024, 64], 10).unwrap();
    let auto = gpu_routed(&wide, Optimizer::sgd(0.1, 0.0), gpu_layers::ROUTE_MIN_F32 / 1024, Routing::Auto);
    assert_eq!(auto.network().routed, [true, false, false]);
    let small = gpu_routed(&wide, Optimizer::sgd(0.1, 0.0), 64, Routing::Auto);
    assert_eq!(small.network().routed, [false, false, false]);
}

#[test]
fn many_steps_in_one_submission_count_adam_steps_on_the_gpu() {
    let ctx = test_context();
    let spec = NetworkSpec::new(6, &[8], 3).unwrap();
    let opt = Optimizer::adam(1e-2);
    let g = gpu(&spec, opt, 10, Fusion::Fused);
    let mut c = CpuTrainer::new(&spec, opt, 10, 7).unwrap();
    let (x, labels) = batch(10, 6, 3, 1);
    g.write_batch(ctx, &x, &labels).unwrap();
    // Ten steps recorded into ONE pass: Adam's t must go 1, 2, ..., 10 with no CPU help.
    g.train_steps(ctx, 10).unwrap();
    for _ in 0..10 {
        c.train_step(&x, &labels).unwrap();
    }
    assert_params_close(ctx, &g, &c, "10 Adam steps in one submission");
    let m = g.take_metrics(ctx).unwrap();
    assert_eq!(m.rows, 100);
}

/// One, two and three hidden layers: the last two put three and four layers' updates in one
/// dispatch and two (each update's uniform must be the one whose learning rate changes).
#[test]
fn learning_rate_changes_keep_the_optimizer_state() {
    let ctx = test_context();
    let specs = [&[8][..], &[8, 7], &[8, 7, 5]].map(|hidden| NetworkSpec::new(6, hidden, 3).unwrap());
    for (spec, opt) in specs.iter().flat_map(|s| [(s, Optimizer::sgd(0.1, 0.9)), (s, Optimizer::adam(1e-2))]) {
        let g = gpu(spec, opt, 10, Fusion::Fused);
        let mut c = CpuTrainer::new(spec, opt, 10, 7).unwrap();
        let (x, labels) = batch(10, 6, 3, 2);
        g.write_batch(ctx, &x, &labels).unwrap();
        for lr in [opt.lr(), opt.lr() * 0.5, opt.lr() * 0.1] {
            g.set_learning_rate(ctx, lr).unwrap();
            c.set_learning_rate(lr).unwrap();
            assert_eq!((g.learning_rate(), c.learning_rate()), (lr, lr));
            g.train_steps(ctx, 3).unwrap();
            for _ in 0..3 {
                c.train_step(&x, &labels).unwrap();
            }
            assert_params_close(ctx, &g, &c, &format!("{} {} after lr {lr}", spec.describe(), opt.describe()));
        }
        assert!(g.set_learning_rate(ctx, -1.0).is_err() && c.set_learning_rate(f32::NAN).is_err());
    }
}

#[test]
fn steady_state_training_allocates_no_buffers() {
    let ctx = test_context();
    let spec = NetworkSpec::new(20, &[16], 4).unwrap();
    for fusion in [Fusion::Fused, Fusion::Composed] {
        let g = gpu(&spec, Optimizer::adam(1e-3), 32, fusion);
        let (x, labels) = batch(32, 20, 4, 3);
        g.write_batch(ctx, &x, &labels).unwrap();
        g.train_steps(ctx, 1).unwrap();
        g.take_metrics(ctx).unwrap();
        let before = g.allocations();
        assert!(before.buffers > 0 && before.bind_groups > 0, "{before:?}");
        for step in 0..20 {
            // Smaller batches, metrics, evaluation and predictions all reuse what exists.
            let rows = if step % 5 == 4 { 7 } else { 32 };
            let (x, labels) = batch(rows, 20, 4, step);
            g.write_batch(ctx, &x, &labels).unwrap();
            g.train_steps(ctx, 2).unwrap();
            g.eval(ctx).unwrap();
            g.take_metrics(ctx).unwrap();
        }
        g.predict_probs(ctx, &Matrix::random_uniform(70, 20, -1.0, 1.0, 9)).unwrap();
        g.parameters(ctx).unwrap();
        assert_eq!(g.allocations(), before, "{fusion:?}: a step allocated GPU memory");
    }
}

#[test]
fn metrics_eval_and_predict_match_cpu() {
    let ctx = test_context();
    let spec = NetworkSpec::new(7, &[12], 5).unwrap();
    let g = gpu(&spec, Optimizer::sgd(0.2, 0.0), 16, Fusion::Fused);
    let mut c = CpuTrainer::new(&spec, Optimizer::sgd(0.2, 0.0), 16, 7).unwrap();
    let (x, labels) = batch(16, 7, 5, 4);
    for _ in 0..5 {
        g.write_batch(ctx, &x, &labels).unwrap();
        g.train_steps(ctx, 1).unwrap();
        c.train_step(&x, &labels).unwrap();
    }
    g.take_metrics(ctx).unwrap();
    c.take_metrics().unwrap();
    let (xe, le) = batch(11, 7, 5, 8);
    g.write_batch(ctx, &xe, &le).unwrap();
    g.eval(ctx).unwrap();
    c.eval_batch(&xe, &le).unwrap();
    let (gm, cm) = (g.take_metrics(ctx).unwrap(), c.take_metrics().unwrap());
    assert_eq!((gm.rows, gm.correct), (11, cm.correct));
    assert_close(&[gm.mean_loss() as f32], &[cm.mean_loss() as f32], 1e-5, 1e-6);
    // 40 rows = 2 full chunks of 16 and one of 8.
    let xp = Matrix::random_uniform(40, 7, -2.0, 2.0, 5);
    let (gp, cp) = (g.predict_probs(ctx, &xp).unwrap(), c.predict_probs(&xp).unwrap());
    assert_eq!(gp.shape(), (40, 5));
    assert_close(&gp.data, &cp.data, 1e-4, 1e-6);
    for row in gp.data.chunks(5) {
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5, "{row:?}");
    }
    assert_eq!(g.batch(), 11, "predict_probs restores the batch size");
}

/// A network without hidden layers whose logits are `x * [1e4, -1e4]`: +-1e4 exactly.
fn huge_logits(ctx: &GpuContext) -> (GpuTrainer, CpuTrainer, Matrix, Vec<u32>) {
    let spec = NetworkSpec::new(1, &[], 2).unwrap();
    let opt = Optimizer::sgd(1e-6, 0.0);
    let g = gpu(&spec, opt, 4, Fusion::Fused);
    let mut c = CpuTrainer::new(&spec, opt, 4, 7).unwrap();
    let params = vec![Matrix::new(1, 2, vec![1e4, -1e4]).unwrap(), Matrix::zeros(1, 2)];
    g.load_parameters(ctx, &params).unwrap();
    c.load_parameters(&params).unwrap();
    let x = Matrix::new(4, 1, vec![1.0, -1.0, 1.0, -1.0]).unwrap();
    (g, c, x, vec![0, 0, 1, 1])
}

#[test]
fn softmax_cross_entropy_is_finite_for_logits_of_1e4() {
    let ctx = test_context();
    let (g, mut c, x, labels) = huge_logits(ctx);
    g.keep_gradients(ctx, true).unwrap();
    g.write_batch(ctx, &x, &labels).unwrap();
    g.train_steps(ctx, 1).unwrap();
    c.train_step(&x, &labels).unwrap();
    let (gm, cm) = (g.take_metrics(ctx).unwrap(), c.take_metrics().unwrap());
    // Rows 1 and 2 are wrong by 2e4 each; rows 0 and 3 are right with loss ~0.
    assert!((gm.loss_sum - 4e4).abs() < 1.0, "{gm:?}");
    assert_eq!(gm.correct, 2);
    assert_close(&[gm.loss_sum as f32], &[cm.loss_sum as f32], 1e-6, 0.0);
    for (a, b) in g.gradients(ctx).unwrap().iter().zip(c.gradients()) {
        assert!(a.data.iter().all(|v| v.is_finite()), "{a:?}");
        assert_close(&a.data, &b.data, 1e-6, 1e-7);
    }
    let p = g.predict_probs(ctx, &x).unwrap();
    assert_eq!(p.data, vec![1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0], "saturated probabilities, no NaN");
}

#[test]
fn nan_inputs_and_nan_losses_are_errors_on_both_devices() {
    let ctx = test_context();
    let spec = NetworkSpec::new(3, &[4], 2).unwrap();
    let g = gpu(&spec, Optimizer::sgd(0.1, 0.0), 4, Fusion::Fused);
    let mut c = CpuTrainer::new(&spec, Optimizer::sgd(0.1, 0.0), 4, 7).unwrap();
    // A NaN input is refused before it reaches a device, where it could vanish (max(NaN, 0)).
    let x = Matrix::new(2, 3, vec![0.5, f32::NAN, 0.1, 0.2, 0.3, 0.4]).unwrap();
    for err in [g.write_batch(ctx, &x, &[0u32, 1]).unwrap_err(), c.train_step(&x, &[0u32, 1]).unwrap_err()] {
        assert!(matches!(&err, LayersError::NonFinite { what } if what == "input row 0, column 1 (NaN)"), "{err}");
    }
    // A NaN bias in the output layer makes the loss NaN: reported by take_metrics.
    let x = Matrix::new(2, 3, vec![0.5, 0.6, 0.1, 0.2, 0.3, 0.4]).unwrap();
    let mut params = c.parameters();
    params[3].data[0] = f32::NAN;
    g.load_parameters(ctx, &params).unwrap();
    c.load_parameters(&params).unwrap();
    g.write_batch(ctx, &x, &[0u32, 1]).unwrap();
    g.train_steps(ctx, 1).unwrap();
    c.train_step(&x, &[0u32, 1]).unwrap();
    let got = g.take_metrics(ctx);
    assert!(matches!(got, Err(LayersError::NonFinite { .. })), "{got:?}");
    assert!(matches!(c.take_metrics(), Err(LayersError::NonFinite { .. })));
}

#[test]
fn labels_out_of_range_on_the_gpu_are_reported() {
    let ctx = test_context();
    let spec = NetworkSpec::new(3, &[4], 2).unwrap();
    for fusion in [Fusion::Fused, Fusion::Composed] {
        let g = gpu(&spec, Optimizer::sgd(0.1, 0.0), 4, fusion);
        let (x, labels) = batch(4, 3, 2, 0);
        g.write_batch(ctx, &x, &labels).unwrap();
        // A gather kernel (stage 05) could write anything: bypass write_batch's checks.
        ctx.queue.write_buffer(g.labels(), 0, bytemuck::cast_slice(&[0u32, 9, 1, 2]));
        g.train_steps(ctx, 1).unwrap();
        match g.take_metrics(ctx) {
            Err(LayersError::LabelsOnGpu { count: 2, classes: 2 }) => {}
            other => panic!("{fusion:?}: expected 2 bad labels, got {other:?}"),
        }
        for p in g.parameters(ctx).unwrap() {
            assert!(p.data.iter().all(|v| v.is_finite()));
        }
    }
}

#[test]
fn shape_errors_are_results_not_panics() {
    let ctx = test_context();
    let spec = NetworkSpec::new(3, &[4], 2).unwrap();
    let g = gpu(&spec, Optimizer::sgd(0.1, 0.0), 4, Fusion::Fused);
    let mut c = CpuTrainer::new(&spec, Optimizer::sgd(0.1, 0.0), 4, 7).unwrap();
    let wide = Matrix::zeros(2, 5);
    let ok = Matrix::zeros(2, 3);
    let too_many = Matrix::zeros(5, 3);
    let cases: Vec<(&str, Matrix, Vec<u32>)> = vec![
        ("wrong input width", wide.clone(), vec![0, 1]),
        ("wrong label count", ok.clone(), vec![0]),
        ("label >= classes", ok.clone(), vec![0, 2]),
        ("batch > max_batch", too_many, vec![0; 5]),
        ("empty batch", Matrix::zeros(0, 3), vec![]),
    ];
    for (what, x, labels) in cases {
        let ge = g.write_batch(ctx, &x, &labels).expect_err(what);
        let ce = c.train_step(&x, &labels).expect_err(what);
        assert_eq!(ge, ce, "{what}: both devices give the same error");
        assert!(!ge.to_string().is_empty());
    }
    assert!(matches!(c.train_step(&ok, &[0u32, 2]), Err(LayersError::Label { row: 1, label: 2, classes: 2 })));
    assert!(g.set_batch(ctx, 0).is_err() && g.set_batch(ctx, 5).is_err());
    assert!(g.predict_probs(ctx, &wide).is_err() && c.predict_probs(&wide).is_err());
    let mut params = spec.init_parameters(1);
    params[1] = Matrix::zeros(1, 5);
    assert!(matches!(g.load_parameters(ctx, &params), Err(LayersError::Shape { .. })));
    assert!(matches!(c.load_parameters(&params), Err(LayersError::Shape { .. })));
    assert!(GpuTrainer::new(ctx, &spec, Optimizer::sgd(0.1, 0.0), 0, 1).is_err());
    assert!(GpuTrainer::new(ctx, &spec, Optimizer::sgd(-0.1, 0.0), 4, 1).is_err());
    // A layer too big for the device is an error, not a crash.
    let huge = NetworkSpec::new(1 << 20, &[1 << 10], 2).unwrap();
    let err = GpuTrainer::new(ctx, &huge, Optimizer::sgd(0.1, 0.0), 1, 1).err().expect("too large");
    assert!(err.to_string().contains("max_"), "{err}");
}

#[test]
fn training_lowers_the_loss_on_the_gpu() {
    let ctx = test_context();
    let spec = NetworkSpec::new(2, &[8], 2).unwrap();
    let g = gpu(&spec, Optimizer::adam(0.05), 4, Fusion::Fused);
    let x = Matrix::new(4, 2, vec![0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0]).unwrap();
    g.write_batch(ctx, &x, &[0u32, 1, 1, 0]).unwrap();
    g.train_steps(ctx, 1).unwrap();
    let first = g.take_metrics(ctx).unwrap().mean_loss();
    g.train_steps(ctx, 300).unwrap();
    g.take_metrics(ctx).unwrap();
    g.eval(ctx).unwrap();
    let last = g.take_metrics(ctx).unwrap();
    assert!(last.mean_loss() < 0.1 * first, "XOR loss {first} -> {}", last.mean_loss());
    assert_eq!(last.correct, 4);
}

#[test]
fn kernels_with_bounds_checks_compute_the_same() {
    let ctx = test_context();
    let spec = NetworkSpec::new(13, &[17, 9], 5).unwrap();
    let opt = Optimizer::adam(1e-3);
    let checked = Kernels::with_bounds_checks();
    assert!(checked.bounds_checks() && !kernels().bounds_checks());
    let a = GpuTrainer::with_options(ctx, &checked, &spec, opt, 17, 7, Fusion::Fused).unwrap();
    let b = gpu(&spec, opt, 17, Fusion::Fused);
    let (x, labels) = batch(11, 13, 5, 3);
    for t in [&a, &b] {
        t.write_batch(ctx, &x, &labels).unwrap();
        t.train_steps(ctx, 2).unwrap();
    }
    for (p, q) in a.parameters(ctx).unwrap().iter().zip(b.parameters(ctx).unwrap()) {
        common::assert_same(&p.data, &q.data);
    }
}

/// Byte images (4 pixels a word), byte labels, an order and one slot per batch, as stage 05
/// keeps MNIST on the GPU: `n` images of `inputs` pixels.
struct Bytes {
    pixels: Vec<u8>,
    labels: Vec<u8>,
    order: Vec<u32>,
    images: wgpu::Buffer,
    label_words: wgpu::Buffer,
    order_buf: wgpu::Buffer,
    slots: wgpu::Buffer,
    stride: u64,
}

const SCALE: f32 = 1.0 / 255.0;
const SHIFT: f32 = -0.25;

impl Bytes {
    fn new(ctx: &GpuContext, n: usize, inputs: usize, classes: usize, batch: usize) -> Self {
        let words = inputs.div_ceil(4);
        let pixels: Vec<u8> = (0..n * inputs).map(|i| ((i * 37 + i / 7) % 256) as u8).collect();
        let labels: Vec<u8> = (0..n).map(|i| ((i * 5 + 3) % classes) as u8).collect();
        let order: Vec<u32> = (0..n as u32).map(|i| (i * 7 + 3) % n as u32).collect();
        let mut padded = vec![0u8; n * words * 4];
        for i in 0..n {
            padded[i * words * 4..i * words * 4 + inputs].copy_from_slice(&pixels[i * inputs..(i + 1) * inputs]);
        }
        let mut label_bytes = labels.clone();
        label_bytes.resize(n.div_ceil(4) * 4, 0);
        let stride = ctx.limits.min_uniform_buffer_offset_alignment as u64;
        let steps = n.div_ceil(batch);
        let mut slot_bytes = vec![0u8; steps * stride as usize];
        for s in 0..steps {
            let slot = gpu_layers::GatherSlot {
                first: (s * batch) as u32,
                count: batch.min(n - s * batch) as u32,
                scale: SCALE,
                shift: SHIFT,
            };
            slot_bytes[s * stride as usize..s * stride as usize + 16].copy_from_slice(bytemuck::bytes_of(&slot));
        }
        let init = |label: &str, contents: &[u8], usage: wgpu::BufferUsages| {
            wgpu::util::DeviceExt::create_buffer_init(&ctx.device, &wgpu::util::BufferInitDescriptor { label: Some(label), contents, usage })
        };
        let storage = wgpu::BufferUsages::STORAGE;
        Self {
            images: init("images", &padded, storage),
            label_words: init("labels", &label_bytes, storage),
            order_buf: init("order", bytemuck::cast_slice(&order), storage),
            slots: init("slots", &slot_bytes, wgpu::BufferUsages::UNIFORM),
            pixels,
            labels,
            order,
            stride,
        }
    }

    fn source(&self) -> gpu_layers::ByteImages<'_> {
        gpu_layers::ByteImages { images: &self.images, labels: &self.label_words, order: &self.order_buf, slots: &self.slots, stride: self.stride }
    }

    /// Batch `s` as the CPU sees it: normalized rows in order, and their labels.
    fn batch(&self, s: usize, batch: usize, inputs: usize) -> (Matrix, Vec<u32>) {
        let rows = batch.min(self.order.len() - s * batch);
        let mut x = Vec::with_capacity(rows * inputs);
        let mut labels = Vec::with_capacity(rows);
        for &i in &self.order[s * batch..s * batch + rows] {
            let i = i as usize;
            x.extend(self.pixels[i * inputs..(i + 1) * inputs].iter().map(|&p| p as f32 * SCALE + SHIFT));
            labels.push(self.labels[i] as u32);
        }
        (Matrix::new(rows, inputs, x).unwrap(), labels)
    }
}

#[test]
fn a_wide_layer_split_over_k_trains_like_the_cpu() {
    // The hidden layer's forward split over k 3 ways (not merged with the output layer, which
    // would take precedence on this small layer), the output layer adding up the slices and
    // writing h, which the update then reads: steps, gradients and metrics against the CPU.
    let ctx = test_context();
    let tiles = FusedTiles { merge: false, tiled_min: 1, wide_min: 1, k_splits: 3, ..FusedTiles::DEFAULT };
    let kernels = Kernels::with_tiles(tiles);
    let spec = NetworkSpec::new(77, &[40], 10).unwrap();
    for opt in [Optimizer::sgd(0.1, 0.9), Optimizer::adam(0.01)] {
        let g = GpuTrainer::with_options(ctx, &kernels, &spec, opt, 17, 7, Fusion::Fused).unwrap();
        assert_eq!(g.step_kernels(None)[..2], ["linear_forward_tiled (k split)", "output_wide (sums)"]);
        // A tiled first layer, split or not, reads a ready input: a gather dispatch feeds it.
        assert!(!g.can_gather());
        // An evaluation-only trainer of it prepares no split (its tapes are not training ones)
        // and knows its first layer is tiled all the same.
        let e = GpuTrainer::for_evaluation(ctx, &kernels, &spec, opt, 17, 7).unwrap();
        assert!(!e.can_gather());
        assert!(e.allocations().bytes < g.allocations().bytes, "{:?} against {:?}", e.allocations(), g.allocations());
        gpu_trainer_matches_cpu(ctx, g, &spec, opt, "split over k");
    }
}

/// A gathering tape added after the learning rate changed trains at the new rate, split (the
/// default tiles on this adapter) or not (a network of two hidden layers).
#[test]
fn a_gathering_tape_added_after_a_new_learning_rate_takes_it() {
    let ctx = test_context();
    let kernels = gpu_layers::Kernels::new();
    let (n, inputs, classes, batch) = (37, 13, 5, 8);
    let bytes = Bytes::new(ctx, n, inputs, classes, batch);
    for hidden in [&[11][..], &[11, 7]] {
        let spec = NetworkSpec::new(inputs, hidden, classes).unwrap();
        let mut g = GpuTrainer::with_options(ctx, &kernels, &spec, Optimizer::sgd(0.1, 0.9), batch, 7, Fusion::Fused).unwrap();
        g.set_learning_rate(ctx, 0.03).unwrap();
        let gathered = g.add_gathered(ctx, &kernels, &bytes.source()).unwrap();
        let mut c = CpuTrainer::new(&spec, Optimizer::sgd(0.03, 0.9), batch, 7).unwrap();
        gathered_epoch_matches_cpu(ctx, &g, gathered, &mut c, &bytes, (n, batch, inputs), &format!("{hidden:?} at lr 0.03"));
    }
}

#[test]
fn a_forward_that_gathers_its_batches_trains_like_the_cpu() {
    // The default tiles run the training steps split on this device (each step recorded alone,
    // with its prologue); without the split, the usual k loop.
    gathered_steps_match_cpu(test_context(), kernels());
    gathered_steps_match_cpu(test_context(), &Kernels::with_tiles(FusedTiles { split: false, ..FusedTiles::DEFAULT }));
    // The gathering linear_forward on its own (not merged), with 4 rows per workgroup (a deep
    // network's) and the k loop in 32 slices (1,024 invocations, `--sweep`'s `forward KS 32`).
    let deep = FusedTiles { merge: false, split: false, forward_tr: 4, forward_ks: 32, ..FusedTiles::DEFAULT };
    gathered_steps_match_cpu(test_context(), &Kernels::with_tiles(deep));
    // The same within WebGPU's default limits (the browser's kernels: fewer invocations, less
    // workgroup memory for the staged rows).
    let (ctx, kernels) = webgpu_defaults();
    gathered_steps_match_cpu(ctx, kernels);
    // A first layer that runs the tiled forward of wide layers (forced onto this small one, not
    // merged with the output layer, which would take precedence) does not gather: a separate
    // gather dispatch feeds it.
    let ctx = test_context();
    let tiled = Kernels::with_tiles(FusedTiles { tiled_min: 1, merge: false, ..FusedTiles::DEFAULT });
    let spec = NetworkSpec::new(13, &[11], 5).unwrap();
    let mut g = GpuTrainer::with_options(ctx, &tiled, &spec, Optimizer::sgd(0.1, 0.0), 8, 7, Fusion::Fused).unwrap();
    assert_eq!(g.step_kernels(None)[0], "linear_forward_tiled");
    assert!(!g.can_gather());
    let bytes = Bytes::new(ctx, 37, 13, 5, 8);
    assert!(g.add_gathered(ctx, &tiled, &bytes.source()).is_err());
}

fn gathered_steps_match_cpu(ctx: &GpuContext, kernels: &Arc<Kernels>) {
    // 37 images of 13 pixels (not a multiple of 4: padded words), batches of 8 (the last 5).
    let (n, inputs, classes, batch) = (37, 13, 5, 8);
    let bytes = Bytes::new(ctx, n, inputs, classes, batch);
    for opt in [Optimizer::sgd(0.1, 0.9), Optimizer::adam(1e-2)] {
        let spec = NetworkSpec::new(inputs, &[11], classes).unwrap();
        let mut g = GpuTrainer::with_options(ctx, kernels, &spec, opt, batch, 7, Fusion::Fused).unwrap();
        assert!(g.can_gather());
        let gathered = g.add_gathered(ctx, kernels, &bytes.source()).unwrap();
        let split = kernels.tiles().runs_split_step(&ctx.limits);
        assert_eq!(g.gathered_split(gathered), split);
        let first = g.step_kernels(Some(gathered))[0];
        assert!(first.ends_with(if split { " (split)" } else { " (gathering)" }), "{first}");
        let mut c = CpuTrainer::new(&spec, opt, batch, 7).unwrap();
        gathered_epoch_matches_cpu(ctx, &g, gathered, &mut c, &bytes, (n, batch, inputs), &opt.describe());
        let (gm, cm) = (g.take_metrics(ctx).unwrap(), c.take_metrics().unwrap());
        assert_eq!((gm.rows, gm.correct), (cm.rows, cm.correct));
        assert_close(&[gm.loss_sum as f32], &[cm.loss_sum as f32], 1e-5, 1e-5);
        // Evaluation through the same source, in order.
        g.set_batch(ctx, batch).unwrap();
        ctx.submit_pass("gathered eval", |pass| g.record_gathered_eval(gathered.eval(), 0, pass));
        let (x, labels) = bytes.batch(0, batch, inputs);
        c.eval_batch(&x, &labels).unwrap();
        let (gm, cm) = (g.take_metrics(ctx).unwrap(), c.take_metrics().unwrap());
        assert_eq!((gm.rows, gm.correct), (cm.rows, cm.correct));
        // An evaluator: the same network in batches of 16 (the last 5), other initial
        // parameters, given the trained ones on the GPU. It evaluates all 37 images as the CPU
        // trainer does. It does not train.
        let mut e = GpuTrainer::for_evaluation(ctx, kernels, &spec, opt, 16, 99).unwrap();
        assert_eq!(e.dispatches_per_step(), 0);
        assert!(e.train_steps(ctx, 1).unwrap_err().to_string().contains("only evaluates"));
        let eval_bytes = Bytes::new(ctx, n, inputs, classes, 16);
        let eval = e.add_gathered_eval(ctx, kernels, &eval_bytes.source()).unwrap();
        assert!(e.add_gathered(ctx, kernels, &eval_bytes.source()).is_err());
        g.copy_parameters_to(ctx, &e).unwrap();
        for s in 0..n.div_ceil(16) {
            e.set_batch(ctx, 16.min(n - 16 * s)).unwrap();
            ctx.submit_pass("evaluator", |pass| e.record_gathered_eval(eval, s, pass));
        }
        // The CPU reference in its batches of 8 (the sums do not depend on the batching).
        for s in 0..n.div_ceil(batch) {
            let (x, labels) = eval_bytes.batch(s, batch, inputs);
            c.eval_batch(&x, &labels).unwrap();
        }
        let (em, cm) = (e.take_metrics(ctx).unwrap(), c.take_metrics().unwrap());
        assert_eq!((em.rows, em.correct), (cm.rows, cm.correct));
        assert_eq!(em.rows, n as u64);
        assert_close(&[em.loss_sum as f32], &[cm.loss_sum as f32], 1e-5, 1e-5);
        assert_eq!(e.parameters(ctx).unwrap(), g.parameters(ctx).unwrap());
    }
    // Parameters go only to the same network.
    let other = GpuTrainer::with_options(ctx, kernels, &NetworkSpec::new(inputs, &[12], classes).unwrap(), Optimizer::adam(1e-2), batch, 7, Fusion::Fused).unwrap();
    let g = GpuTrainer::with_options(ctx, kernels, &NetworkSpec::new(inputs, &[11], classes).unwrap(), Optimizer::adam(1e-2), batch, 7, Fusion::Fused).unwrap();
    let err = g.copy_parameters_to(ctx, &other).unwrap_err().to_string();
    assert!(err.contains("networks differ"), "{err}");
    // A network whose first op is not a fused linear_forward cannot gather.
    let spec = NetworkSpec::new(inputs, &[], classes).unwrap();
    let mut flat = GpuTrainer::with_options(ctx, kernels, &spec, Optimizer::sgd(0.1, 0.0), batch, 7, Fusion::Fused).unwrap();
    assert!(!flat.can_gather());
    assert!(flat.add_gathered(ctx, kernels, &bytes.source()).is_err());
    assert!(flat.add_gathered_eval(ctx, kernels, &bytes.source()).is_err());
}

/// The split step ([`GpuTrainer::record_gathered_steps`]): every step's update writes the next
/// batch's partial sums of x W1, which the next step's forward adds up, so a run of steps in ONE
/// submission checks the hand-over (each step recorded alone only checks the prologue). Shapes:
/// 77 inputs (three k-tiles of 32, the last one short, with the bias row), 40 hidden units (a
/// short second tile of columns), batches of 8 and of 70 (more rows than one chunk of the next
/// batch, `SPLIT_NEXT_R` = 64), each epoch ending in a short batch; SGD with momentum and Adam.
#[test]
fn split_steps_train_like_the_cpu() {
    split_steps_match_cpu(kernels(), &[Optimizer::sgd(0.1, 0.9), Optimizer::adam(1e-3)]);
    // Other tiles of both split kernels (rows per forward workgroup, its slices, the update's
    // tile side, batch slices and rows per round): the kernels' index arithmetic is written for
    // any of them.
    let d = FusedTiles::DEFAULT;
    for tiles in [
        FusedTiles { merged_ks: 16, merged_tr: 2, ..d },
        FusedTiles { merged_tn: 128, merged_cb: 1, merged_ks: 8, ..d },
        FusedTiles { update_t: 16, ..d },
        FusedTiles { split_step_batch_slices: 4, ..d },
        FusedTiles { split_step_batch_slices: 2, update_r: 32, ..d },
    ] {
        split_steps_match_cpu(&Kernels::with_tiles(tiles), &[Optimizer::sgd(0.1, 0.9)]);
    }
    // Within WebGPU's default limits (8 storage buffers) the steps are not split.
    let (ctx, kernels) = webgpu_defaults();
    let spec = NetworkSpec::new(77, &[40], 5).unwrap();
    let bytes = Bytes::new(ctx, 37, 77, 5, 8);
    let mut g = GpuTrainer::with_options(ctx, kernels, &spec, Optimizer::sgd(0.1, 0.0), 8, 7, Fusion::Fused).unwrap();
    if g.can_gather() {
        let gathered = g.add_gathered(ctx, kernels, &bytes.source()).unwrap();
        assert!(!g.gathered_split(gathered));
    }
}

fn split_steps_match_cpu(kernels: &Arc<Kernels>, opts: &[Optimizer]) {
    split_steps_of_match_cpu(kernels, opts, &NetworkSpec::new(77, &[40], 5).unwrap());
}

/// The split step with a dropout after the hidden layer: drawn in `forward_output (split)`
/// (the mask step written by the previous step's update, in the same submission) and again
/// for dh.
#[test]
fn split_steps_with_a_fused_dropout_train_like_the_cpu() {
    let spec = NetworkSpec::parse("77-40-relu-dropout0.3-5", Loss::CrossEntropy).unwrap();
    split_steps_of_match_cpu(kernels(), &[Optimizer::sgd(0.1, 0.9), Optimizer::adam(1e-3)], &spec);
}

/// The gathering `linear_forward` stages its rows transposed where they fit, else one after
/// another, else reads the bytes in its k loop: rows of 600 and 1,100 pixels, within WebGPU's
/// default limits (one after another; the bytes) and on this adapter (transposed; one after
/// another), against the CPU.
#[test]
fn gathered_rows_too_long_to_stage_transposed_train_like_the_cpu() {
    let (web_ctx, web_kernels) = webgpu_defaults();
    let unsplit = Kernels::with_tiles(FusedTiles { split: false, ..FusedTiles::DEFAULT });
    for (ctx, kernels) in [(web_ctx, web_kernels), (test_context(), &unsplit)] {
        for inputs in [600, 1100] {
            let (n, batch) = (21, 8);
            let spec = NetworkSpec::new(inputs, &[11, 7], 5).unwrap();
            let bytes = Bytes::new(ctx, n, inputs, 5, batch);
            let opt = Optimizer::sgd(0.1, 0.9);
            let mut g = GpuTrainer::with_options(ctx, kernels, &spec, opt, batch, 7, Fusion::Fused).unwrap();
            let gathered = g.add_gathered(ctx, kernels, &bytes.source()).unwrap();
            assert_eq!(g.step_kernels(Some(gathered))[0], "linear_forward (gathering)");
            let mut c = CpuTrainer::new(&spec, opt, batch, 7).unwrap();
            gathered_epoch_matches_cpu(ctx, &g, gathered, &mut c, &bytes, (n, batch, inputs), &format!("{inputs} pixels"));
        }
    }
}

/// One epoch of `bytes` (`n` images of `inputs` pixels, batches of `batch`), each step recorded
/// alone on the GPU and taken by the CPU, the parameters compared after every step.
fn gathered_epoch_matches_cpu(
    ctx: &GpuContext,
    g: &GpuTrainer,
    gathered: gpu_layers::Gathered,
    c: &mut CpuTrainer,
    bytes: &Bytes,
    (n, batch, inputs): (usize, usize, usize),
    what: &str,
) {
    for s in 0..n.div_ceil(batch) {
        let (x, labels) = bytes.batch(s, batch, inputs);
        g.set_batch(ctx, x.rows).unwrap();
        ctx.submit_pass("gathered step", |pass| g.record_gathered_step(gathered, s, pass));
        c.train_step(&x, &labels).unwrap();
        assert_params_close(ctx, g, c, &format!("{what} gathered step {s}"));
    }
}

/// A first layer that gathers its batches from bytes with a dropout after it: merged with the
/// output layer (`forward_output (gathering)`, the split step off) and, in a deeper network,
/// `linear_forward (gathering)`, each step recorded alone and then a whole epoch in one
/// submission, on this adapter and within WebGPU's default limits.
#[test]
fn gathered_steps_with_a_fused_dropout_train_like_the_cpu() {
    let unsplit = Kernels::with_tiles(FusedTiles { split: false, ..FusedTiles::DEFAULT });
    let (web_ctx, web_kernels) = webgpu_defaults();
    for (ctx, kernels) in [(test_context(), &unsplit), (web_ctx, web_kernels)] {
        for text in ["13-11-relu-dropout0.3-5", "13-11-tanh-dropout0.5-7-relu-dropout0.2-5"] {
            let (n, batch) = (37, 8);
            let spec = NetworkSpec::parse(text, Loss::CrossEntropy).unwrap();
            let bytes = Bytes::new(ctx, n, 13, 5, batch);
            let opt = Optimizer::adam(1e-2);
            let mut g = GpuTrainer::with_options(ctx, kernels, &spec, opt, batch, 7, Fusion::Fused).unwrap();
            if !g.can_gather() {
                continue;
            }
            let gathered = g.add_gathered(ctx, kernels, &bytes.source()).unwrap();
            let mut c = CpuTrainer::new(&spec, opt, batch, 7).unwrap();
            let steps = n.div_ceil(batch);
            for s in 0..steps {
                let (x, labels) = bytes.batch(s, batch, 13);
                g.set_batch(ctx, x.rows).unwrap();
                ctx.submit_pass("gathered step", |pass| g.record_gathered_step(gathered, s, pass));
                c.train_step(&x, &labels).unwrap();
                assert_params_close(ctx, &g, &c, &format!("{text} gathered step {s}"));
            }
            g.set_batch(ctx, batch).unwrap();
            ctx.submit_pass("gathered steps", |pass| g.record_gathered_steps(gathered, 0..steps - 1, pass));
            for s in 0..steps - 1 {
                let (x, labels) = bytes.batch(s, batch, 13);
                c.train_step(&x, &labels).unwrap();
            }
            assert_params_close(ctx, &g, &c, &format!("{text}: gathered steps in one submission"));
        }
    }
}

fn split_steps_of_match_cpu(kernels: &Arc<Kernels>, opts: &[Optimizer], spec: &NetworkSpec) {
    let ctx = test_context();
    let (inputs, classes) = (spec.input(), spec.output());
    let spec = spec.clone();
    for (n, batch) in [(37, 8), (150, 70)] {
        let bytes = Bytes::new(ctx, n, inputs, classes, batch);
        let full = n / batch;
        for &opt in opts {
            let what = format!("{} batch {batch}, {:?}", opt.describe(), kernels.tiles());
            let mut g = GpuTrainer::with_options(ctx, kernels, &spec, opt, batch, 7, Fusion::Fused).unwrap();
            let gathered = g.add_gathered(ctx, kernels, &bytes.source()).unwrap();
            assert!(g.gathered_split(gathered), "lavapipe runs the split step");
            assert_eq!(g.step_kernels(Some(gathered)), ["forward_output (split)", "linear_update (split)"]);
            let mut c = CpuTrainer::new(&spec, opt, batch, 7).unwrap();
            for epoch in 0..2 {
                g.set_batch(ctx, batch).unwrap();
                // Runs that start on an even and on an odd step (the steps swap two buffers of
                // rows), the second one several steps long.
                for steps in [0..1, 1..full] {
                    ctx.submit_pass("split steps", |pass| g.record_gathered_steps(gathered, steps.clone(), pass));
                    for s in steps.clone() {
                        let (x, labels) = bytes.batch(s, batch, inputs);
                        c.train_step(&x, &labels).unwrap();
                    }
                    assert_params_close(ctx, &g, &c, &format!("{what}, epoch {epoch}, split steps {steps:?} in one submission"));
                }
                let (x, labels) = bytes.batch(full, batch, inputs);
                g.set_batch(ctx, x.rows).unwrap();
                ctx.submit_pass("short split step", |pass| g.record_gathered_steps(gathered, full..full + 1, pass));
                c.train_step(&x, &labels).unwrap();
                assert_params_close(ctx, &g, &c, &format!("{what}, epoch {epoch}, the short batch"));
            }
            let (gm, cm) = (g.take_metrics(ctx).unwrap(), c.take_metrics().unwrap());
            assert_eq!((gm.rows, gm.correct), (cm.rows, cm.correct), "{what}");
            assert_close(&[gm.loss_sum as f32], &[cm.loss_sum as f32], 1e-5, 1e-5);
        }
    }
}

/// The kernels a browser gets, against the CPU, both optimizers: one to three layers (an odd
/// number leaves the last `linear_update` with one layer on every device), and 100 inputs so
/// that `linear_forward`'s unrolled k loop runs with its smaller KS. (Adam at 1e-3: at 1e-2 its
/// steps of ~lr whatever the gradient's size turn rounding differences in near-zero gradients
/// into parameter differences that, in three layers, exceed the gradient tolerance by step 4 on
/// any device, the adapter's own limits included.)
#[test]
fn webgpu_default_limits_step_gpu_equals_cpu() {
    let (ctx, kernels) = webgpu_defaults();
    for (input, hidden) in [(13, &[][..]), (13, &[17]), (13, &[33, 9]), (100, &[40])] {
        let spec = NetworkSpec::new(input, hidden, 5).unwrap();
        for opt in [Optimizer::sgd(0.1, 0.9), Optimizer::adam(1e-3)] {
            gpu_matches_cpu_on(ctx, kernels, &spec, opt, Fusion::Fused);
        }
    }
}
