//! Every backward pass against central finite differences of the forward pass computed in f64:
//! `dF/dp_i ~ (F(p + h e_i) - F(p - h e_i)) / 2h` with h = 1e-6, whose error (about h^2 plus
//! 1e-16 / h) is far below the f32 rounding of the backward passes under test. The layers run
//! as the ops they emit, on the CPU tape (the GPU is compared with the same ops in ops.rs and
//! training.rs) and, for the whole network, on the GPU too.
//!
//! Tolerance: |backward - fd| <= 1e-6 + 1e-4 |fd|. Measured over every check in this file
//! (lavapipe and the CPU, 118 comparisons): the worst relative error was 1.4e-5 (GELU's backward,
//! whose f32 tanh approximation is the least exact step; linear layers 1.5e-6 to 4.5e-6) and the
//! worst absolute error 1.2e-7 (one f32 rounding of values below 1). The bounds sit 7-8x above
//! those, so a different adapter's rounding passes, while a wrong term, a missing 1/rows or a
//! mask from the wrong step misses by orders of magnitude more.

use common::{check_close, test_context};
use cpu_matrix::Matrix;
use gpu_layers::{
    Activation, ActivationLayer, CpuStore, CpuTrainer, Dim, DropoutLayer, Elem, Fusion, GpuTrainer, Layer, Linear, Loss,
    MeanSquaredError, Mode, NetworkSpec, Op, Optimizer, SoftmaxCrossEntropy, TensorId, TensorInfo, View,
};
use rand::{Rng, SeedableRng};

const H: f64 = 1e-6;
const TOL: (f64, f64) = (1e-4, 1e-6);

fn random(n: usize, lo: f64, hi: f64, seed: u64) -> Vec<f64> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..n).map(|_| rng.random_range(lo..hi)).collect()
}

fn to32(v: &[f64]) -> Vec<f32> {
    v.iter().map(|&x| x as f32).collect()
}

/// The f64 values the f32 tensors hold, so both sides start from identical numbers.
fn rounded(v: &[f64]) -> Vec<f64> {
    v.iter().map(|&x| x as f32 as f64).collect()
}

// ANCHOR: finite_differences
/// Central differences of `f` at `p`.
fn finite_differences(p: &[f64], f: impl Fn(&[f64]) -> f64) -> Vec<f32> {
    let mut q = p.to_vec();
    (0..p.len())
        .map(|i| {
            q[i] = p[i] + H;
            let up = f(&q);
            q[i] = p[i] - H;
            let down = f(&q);
            q[i] = p[i];
            ((up - down) / (2.0 * H)) as f32
        })
        .collect()
}
// ANCHOR_END: finite_differences

#[track_caller]
fn assert_matches_fd(what: &str, backward: &[f32], fd: &[f32]) {
    if let Err(e) = check_close(backward, fd, TOL.0, TOL.1) {
        panic!("{what}: backward pass vs finite differences: {e}");
    }
}

// ---- f64 forward passes --------------------------------------------------------------------

/// x: [rows, inputs], p: [(inputs + 1), outputs] -> [rows, outputs].
fn linear64(x: &[f64], rows: usize, inputs: usize, p: &[f64], outputs: usize) -> Vec<f64> {
    let mut y = vec![0.0; rows * outputs];
    for r in 0..rows {
        for o in 0..outputs {
            let mut s = p[inputs * outputs + o];
            for i in 0..inputs {
                s += x[r * inputs + i] * p[i * outputs + o];
            }
            y[r * outputs + o] = s;
        }
    }
    y
}

fn act64(z: f64, act: Activation) -> f64 {
    match act {
        Activation::Relu => z.max(0.0),
        Activation::Tanh => z.tanh(),
        Activation::Sigmoid => 1.0 / (1.0 + (-z).exp()),
        Activation::Gelu => 0.5 * z * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (z + 0.044715 * z * z * z)).tanh()),
    }
}

/// Mean over rows and classes of (y - onehot)^2.
fn mse64(y: &[f64], classes: usize, labels: &[u32]) -> f64 {
    let mut total = 0.0;
    for (z, &label) in y.chunks(classes).zip(labels) {
        total += z.iter().enumerate().map(|(c, v)| (v - if c == label as usize { 1.0 } else { 0.0 }).powi(2)).sum::<f64>();
    }
    total / (labels.len() * classes) as f64
}

/// Mean cross-entropy of softmax(logits) over the rows.
fn cross_entropy64(logits: &[f64], classes: usize, labels: &[u32]) -> f64 {
    let rows = labels.len();
    let mut total = 0.0;
    for (z, &label) in logits.chunks(classes).zip(labels) {
        let m = z.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let lse = z.iter().map(|v| (v - m).exp()).sum::<f64>().ln() + m;
        total += lse - z[label as usize];
    }
    total / rows as f64
}

/// Loss of a whole network at the parameters `params[l]` (linear layer l's [(in + 1), out]).
/// `masks[i]` is the mask of the dropout at position i of the layer list (values 0 or 1/(1-p)):
/// a FIXED mask, the one the trainers drew, so the loss is a smooth function of the parameters.
fn network_loss64(spec: &NetworkSpec, params: &[Vec<f64>], masks: &[Option<Vec<f64>>], x: &[f64], rows: usize, labels: &[u32]) -> f64 {
    let mut h = x.to_vec();
    let mut k = 0;
    for (i, layer) in spec.layers().iter().enumerate() {
        match *layer {
            Layer::Flatten => {}
            Layer::Linear { inputs, outputs } => {
                h = linear64(&h, rows, inputs, &params[k], outputs);
                k += 1;
            }
            Layer::Activation(act) => h.iter_mut().for_each(|v| *v = act64(*v, act)),
            Layer::Dropout(_) => {
                let m = masks[i].as_ref().expect("a mask for every dropout");
                h.iter_mut().zip(m).for_each(|(v, m)| *v *= m);
            }
        }
    }
    match spec.loss() {
        Loss::CrossEntropy => cross_entropy64(&h, spec.output(), labels),
        Loss::Mse => mse64(&h, spec.output(), labels),
    }
}

// ---- a tiny harness for running a layer's ops on the CPU tape -------------------------------

struct Tensors(Vec<TensorInfo>);

impl Tensors {
    fn add(&mut self, name: &str, rows: usize, cols: usize) -> View {
        let rows = Dim::Fixed(rows);
        self.0.push(TensorInfo { name: name.into(), rows, cols, elem: Elem::F32 });
        View { tensor: TensorId(self.0.len() - 1), rows, cols }
    }
}

#[test]
fn linear_backward_matches_finite_differences() {
    let (rows, inputs, outputs) = (5, 7, 4);
    let x = rounded(&random(rows * inputs, -1.0, 1.0, 1));
    let p = rounded(&random((inputs + 1) * outputs, -1.0, 1.0, 2));
    let r = rounded(&random(rows * outputs, -1.0, 1.0, 3)); // F = sum(R * y), so dF/dy = R
    let mut t = Tensors(Vec::new());
    let (xv, yv, dyv, dxv) = (t.add("x", rows, inputs), t.add("y", rows, outputs), t.add("dy", rows, outputs), t.add("dx", rows, inputs));
    let params = t.add("params", inputs + 1, outputs).tensor;
    let grads = t.add("grads", inputs + 1, outputs).tensor;
    let state = t.add("state", inputs + 1, outputs).tensor;
    let layer = Linear { inputs, outputs, params, grads, state };
    let mut tape = CpuStore::new(&t.0, rows).unwrap();
    tape.f32_mut(xv.tensor).copy_from_slice(&to32(&x));
    tape.f32_mut(params).copy_from_slice(&to32(&p));
    tape.f32_mut(dyv.tensor).copy_from_slice(&to32(&r));
    let mut ops = layer.forward(xv, yv);
    ops.push(layer.backward_input(dyv, dxv));
    ops.extend(layer.backward_params(xv, dyv));
    tape.run(&ops).unwrap();

    let f = |x: &[f64], p: &[f64]| linear64(x, rows, inputs, p, outputs).iter().zip(&r).map(|(a, b)| a * b).sum::<f64>();
    assert_matches_fd("Linear dL/dx = dy W^T", tape.f32(dxv.tensor), &finite_differences(&x, |x| f(x, &p)));
    assert_matches_fd("Linear dL/d[W; b] = [x | 1]^T dy", tape.f32(grads), &finite_differences(&p, |p| f(&x, p)));
}

#[test]
fn activation_backward_matches_finite_differences() {
    let (rows, cols) = (6, 9);
    for act in [Activation::Relu, Activation::Tanh, Activation::Sigmoid] {
        // Keep |z| away from ReLU's kink at 0, where the derivative does not exist.
        let z: Vec<f64> = rounded(&random(rows * cols, 0.05, 2.0, 4))
            .iter()
            .zip(random(rows * cols, -1.0, 1.0, 5))
            .map(|(m, s)| if s < 0.0 { -m } else { *m })
            .collect();
        let r = rounded(&random(rows * cols, -1.0, 1.0, 6));
        let mut t = Tensors(Vec::new());
        let (y, dy) = (t.add("y", rows, cols), t.add("dy", rows, cols));
        let layer = ActivationLayer { act };
        let mut tape = CpuStore::new(&t.0, rows).unwrap();
        tape.f32_mut(y.tensor).copy_from_slice(&to32(&z));
        tape.f32_mut(dy.tensor).copy_from_slice(&to32(&r));
        tape.run(&[layer.forward(y), layer.backward(dy, y)]).unwrap();
        let fd = finite_differences(&z, |z| z.iter().zip(&r).map(|(v, w)| act64(*v, act) * w).sum());
        assert_matches_fd(&format!("{act:?} backward"), tape.f32(dy.tensor), &fd);
    }
}

/// The out-of-place activations (GELU's only form), whose backward reads the input.
#[test]
fn activation_copy_backward_matches_finite_differences() {
    let (rows, cols) = (6, 9);
    for act in [Activation::Relu, Activation::Tanh, Activation::Sigmoid, Activation::Gelu] {
        let z: Vec<f64> = rounded(&random(rows * cols, 0.05, 3.0, 4))
            .iter()
            .zip(random(rows * cols, -1.0, 1.0, 5))
            .map(|(m, s)| if s < 0.0 { -m } else { *m })
            .collect();
        let r = rounded(&random(rows * cols, -1.0, 1.0, 6));
        let mut t = Tensors(Vec::new());
        let (x, y, dy) = (t.add("x", rows, cols), t.add("y", rows, cols), t.add("dy", rows, cols));
        let layer = ActivationLayer { act };
        let mut tape = CpuStore::new(&t.0, rows).unwrap();
        tape.f32_mut(x.tensor).copy_from_slice(&to32(&z));
        tape.f32_mut(dy.tensor).copy_from_slice(&to32(&r));
        tape.run(&[layer.forward_copy(x, y), layer.backward_copy(dy, x)]).unwrap();
        let fd = finite_differences(&z, |z| z.iter().zip(&r).map(|(v, w)| act64(*v, act) * w).sum());
        assert_matches_fd(&format!("{act:?} backward (out of place)"), tape.f32(dy.tensor), &fd);
    }
}

/// Dropout with its mask fixed (the one the forward pass drew): the layer is then `y = x * m`.
#[test]
fn dropout_backward_matches_finite_differences_with_a_fixed_mask() {
    let (rows, cols) = (7, 9);
    let x = rounded(&random(rows * cols, -1.0, 1.0, 12));
    let r = rounded(&random(rows * cols, -1.0, 1.0, 13));
    let mut t = Tensors(Vec::new());
    let (xv, y, mask, dy) = (t.add("x", rows, cols), t.add("y", rows, cols), t.add("mask", rows, cols), t.add("dy", rows, cols));
    t.0.push(TensorInfo { name: "counters".into(), rows: Dim::Fixed(1), cols: 8, elem: Elem::U32 });
    let counters = TensorId(t.0.len() - 1);
    let layer = DropoutLayer { p: 0.4, seed: 99 };
    let mut tape = CpuStore::new(&t.0, rows).unwrap();
    tape.f32_mut(xv.tensor).copy_from_slice(&to32(&x));
    tape.f32_mut(dy.tensor).copy_from_slice(&to32(&r));
    tape.u32_mut(counters)[6] = 5; // step 5
    tape.run(&[layer.forward(xv, y, mask, counters), layer.backward(dy, mask)]).unwrap();
    let m: Vec<f64> = tape.f32(mask.tensor).iter().map(|&v| v as f64).collect();
    let dropped = m.iter().filter(|&&v| v == 0.0).count();
    assert!(dropped > 0 && dropped < m.len(), "a mask with some units dropped and some kept: {dropped} of {}", m.len());
    let fd = finite_differences(&x, |x| x.iter().zip(&m).zip(&r).map(|((v, m), w)| v * m * w).sum());
    assert_matches_fd("Dropout dL/dx = dy * mask", tape.f32(dy.tensor), &fd);
}

#[test]
fn mse_backward_matches_finite_differences() {
    let (rows, classes) = (6, 4);
    let y = rounded(&random(rows * classes, -1.5, 1.5, 14));
    let labels: Vec<u32> = (0..rows as u32).map(|r| (r * 3) % classes as u32).collect();
    let mut t = Tensors(Vec::new());
    let (yv, out) = (t.add("y", rows, classes), t.add("out", rows, classes));
    t.0.push(TensorInfo { name: "labels".into(), rows: Dim::Fixed(rows), cols: 1, elem: Elem::U32 });
    t.0.push(TensorInfo { name: "counters".into(), rows: Dim::Fixed(1), cols: 8, elem: Elem::U32 });
    let (label_id, counters) = (TensorId(2), TensorId(3));
    let mut tape = CpuStore::new(&t.0, rows).unwrap();
    tape.f32_mut(yv.tensor).copy_from_slice(&to32(&y));
    tape.u32_mut(label_id).copy_from_slice(&labels);
    tape.run(&[MeanSquaredError.forward_backward(yv, label_id, out, counters, Mode::Train)]).unwrap();
    assert_matches_fd("MSE dL/dy", tape.f32(out.tensor), &finite_differences(&y, |y| mse64(y, classes, &labels)));
    let c = tape.u32(counters);
    let loss = ((c[1] as u64) << 32 | c[0] as u64) as f64 / 1048576.0 / rows as f64;
    assert!((loss - mse64(&y, classes, &labels)).abs() < 1e-5, "{loss}");
}

#[test]
fn softmax_cross_entropy_backward_matches_finite_differences() {
    let (rows, classes) = (6, 5);
    let logits = rounded(&random(rows * classes, -3.0, 3.0, 7));
    let labels: Vec<u32> = (0..rows as u32).map(|r| (r * 3) % classes as u32).collect();
    let mut t = Tensors(Vec::new());
    let (z, out) = (t.add("logits", rows, classes), t.add("out", rows, classes));
    t.0.push(TensorInfo { name: "labels".into(), rows: Dim::Fixed(rows), cols: 1, elem: Elem::U32 });
    t.0.push(TensorInfo { name: "counters".into(), rows: Dim::Fixed(1), cols: 8, elem: Elem::U32 });
    let (label_id, counters) = (TensorId(2), TensorId(3));
    let mut tape = CpuStore::new(&t.0, rows).unwrap();
    tape.f32_mut(z.tensor).copy_from_slice(&to32(&logits));
    tape.u32_mut(label_id).copy_from_slice(&labels);
    tape.run(&[SoftmaxCrossEntropy.forward_backward(z, label_id, out, counters, Mode::Train)]).unwrap();
    let fd = finite_differences(&logits, |z| cross_entropy64(z, classes, &labels));
    assert_matches_fd("softmax cross-entropy dL/dlogits", tape.f32(out.tensor), &fd);
    // The loss itself: the counters hold the sum over rows, F is the mean.
    let c = tape.u32(counters);
    let loss = ((c[1] as u64) << 32 | c[0] as u64) as f64 / 1048576.0 / rows as f64;
    assert!((loss - cross_entropy64(&logits, classes, &labels)).abs() < 1e-5);
}

/// The fused ops: the output layer's dh and linear_backward_input, as dL/d pre-activation of
/// the hidden layer below them.
#[test]
fn fused_backward_ops_match_finite_differences() {
    let (rows, hidden, wide, classes) = (4, 6, 5, 3);
    let labels: Vec<u32> = vec![0, 2, 1, 2];
    for act in [Activation::Relu, Activation::Tanh] {
        // Pre-activations of the lower hidden layer, away from 0.
        let z = rounded(&random(rows * wide, 0.1, 1.5, 8)).iter().enumerate().map(|(i, v)| if i % 3 == 0 { -v } else { *v }).collect::<Vec<_>>();
        let p1 = rounded(&random((wide + 1) * hidden, -1.0, 1.0, 9));
        let p2 = rounded(&random((hidden + 1) * classes, -1.0, 1.0, 10));
        let mut t = Tensors(Vec::new());
        let h1 = t.add("h1", rows, wide);
        let h2 = t.add("h2", rows, hidden);
        let d2 = t.add("d2", rows, hidden);
        let d1 = t.add("d1", rows, wide);
        let out = t.add("out", rows, classes);
        let params1 = t.add("params1", wide + 1, hidden).tensor;
        let params2 = t.add("params2", hidden + 1, classes).tensor;
        t.0.push(TensorInfo { name: "labels".into(), rows: Dim::Fixed(rows), cols: 1, elem: Elem::U32 });
        t.0.push(TensorInfo { name: "counters".into(), rows: Dim::Fixed(1), cols: 8, elem: Elem::U32 });
        let (label_id, counters) = (TensorId(t.0.len() - 2), TensorId(t.0.len() - 1));
        let layer1 = Linear { inputs: wide, outputs: hidden, params: params1, grads: params1, state: params1 };
        let mut tape = CpuStore::new(&t.0, rows).unwrap();
        tape.f32_mut(h1.tensor).copy_from_slice(&to32(&z.iter().map(|v| act64(*v, act)).collect::<Vec<_>>()));
        tape.f32_mut(params1).copy_from_slice(&to32(&p1));
        tape.f32_mut(params2).copy_from_slice(&to32(&p2));
        tape.u32_mut(label_id).copy_from_slice(&labels);
        let ops = [
            layer1.forward_fused(h1, h2, Some(act), None),
            Op::OutputLayer { h: h2, params: params2, labels: label_id, out, dh: Some((d2, act)), drop: None, loss: Loss::CrossEntropy, counters, mode: Mode::Train },
            layer1.backward_input_fused(d2, h1, act, None, d1),
        ];
        tape.run(&ops).unwrap();
        // F(z) = CE(act(act(z) W1 + b1) W2 + b2); its gradient with respect to z is d1.
        let f = |z: &[f64]| {
            let a1: Vec<f64> = z.iter().map(|v| act64(*v, act)).collect();
            let a2: Vec<f64> = linear64(&a1, rows, wide, &p1, hidden).iter().map(|v| act64(*v, act)).collect();
            cross_entropy64(&linear64(&a2, rows, hidden, &p2, classes), classes, &labels)
        };
        // F is the loss of the original activations, so compare d1 * act'(z) chain: d1 already
        // includes act'(h1) (h1 = act(z)), which is dF/dz.
        assert_matches_fd(&format!("{act:?}: output_layer + linear_backward_input"), tape.f32(d1.tensor), &finite_differences(&z, f));
    }
}

/// The whole network: the gradients one training step computes (CPU composed, CPU fused, GPU
/// fused, GPU composed; networks the fused kernels do not cover get composed tapes either way)
/// against finite differences of the f64 loss at the starting parameters, with the dropout
/// masks the first step drew held fixed.
#[test]
fn network_gradients_match_finite_differences_on_both_devices() {
    let ctx = test_context();
    let rows = 6;
    let specs = [
        NetworkSpec::new(4, &[6], 3).unwrap(),
        NetworkSpec::new(4, &[5, 3], 3).unwrap().with_activation(Activation::Tanh),
        NetworkSpec::parse("4-6-sigmoid-5-gelu-3", Loss::CrossEntropy).unwrap(),
        NetworkSpec::parse("flatten-4-6-gelu-dropout0.5-5-tanh-3-sigmoid", Loss::Mse).unwrap(),
        NetworkSpec::parse("4-7-relu-dropout0.3-3", Loss::CrossEntropy).unwrap(),
        // Fused: two dropouts (masks drawn in the kernels and drawn again backward) and MSE.
        NetworkSpec::parse("4-6-tanh-dropout0.5-5-sigmoid-dropout0.2-3", Loss::CrossEntropy).unwrap(),
        NetworkSpec::parse("4-7-relu-dropout0.3-3", Loss::Mse).unwrap(),
        // Fused with a GELU beside the kernels (and above, "4-6-sigmoid-5-gelu-3"), its dropout
        // composed.
        NetworkSpec::parse("4-6-gelu-dropout0.5-5-tanh-3", Loss::CrossEntropy).unwrap(),
    ];
    // Each network twice: trainers sized for exactly `rows`, and for 2 rows + 1 (a short last
    // batch: the loss must average over the live rows only and leave the others out).
    for (spec, max_batch) in specs.iter().flat_map(|s| [(s, rows), (s, 2 * rows + 1)]) {
        let x32 = Matrix::random_uniform(rows, spec.input(), -1.0, 1.0, 11);
        let x: Vec<f64> = x32.data.iter().map(|&v| v as f64).collect();
        let labels: Vec<u32> = (0..rows as u32).map(|r| r % spec.output() as u32).collect();
        let start = spec.init_parameters(3);
        let flat: Vec<Vec<f64>> =
            start.chunks(2).map(|wb| wb[0].data.iter().chain(&wb[1].data).map(|&v| v as f64).collect()).collect();
        // Check that no ReLU pre-activation sits within 1e-3 of the kink.
        if spec.layers().get(1) == Some(&Layer::Activation(Activation::Relu)) {
            let (i, o) = spec.layer_shapes()[0];
            assert!(linear64(&x, rows, i, &flat[0], o).iter().all(|z| z.abs() > 1e-3), "pick another seed");
        }
        let opt = Optimizer::sgd(0.1, 0.0);
        let mut computed: Vec<(String, Vec<Matrix>)> = Vec::new();
        let mut masks: Vec<Option<Vec<f64>>> = vec![None; spec.layers().len()];
        for fusion in [Fusion::Composed, Fusion::Fused] {
            let mut c = CpuTrainer::with_fusion(spec, opt, max_batch, 3, fusion).unwrap();
            c.train_step(&x32, &labels).unwrap();
            computed.push((format!("CPU {fusion:?}"), c.gradients()));
            // The masks of the first step, from the CPU reference of the dropout kernel: the dropout
            // at layer position i drew the mask of the op whose seed belongs to it.
            let dropouts = c.network().train.iter().filter_map(|op| match op {
                Op::Dropout { seed, p, .. } => Some((*seed, *p)),
                _ => None,
            });
            let positions = spec.layers().iter().enumerate().filter(|(_, l)| matches!(l, Layer::Dropout(_))).map(|(i, _)| i);
            for (i, (seed, p)) in positions.zip(dropouts) {
                // The width at position i: the outputs of the last linear layer before it.
                let cols = spec.layers()[..i]
                    .iter()
                    .rev()
                    .find_map(|l| match l {
                        Layer::Linear { outputs, .. } => Some(*outputs),
                        _ => None,
                    })
                    .unwrap_or(spec.input());
                let x1 = vec![1.0f32; rows * cols];
                let (mut y, mut m) = (vec![0.0; x1.len()], vec![0.0; x1.len()]);
                gpu_layers::cpu::reference::dropout_forward(&x1, &mut y, &mut m, seed, 0, gpu_layers::cpu::reference::dropout_threshold(p), 1.0 / (1.0 - p));
                masks[i] = Some(m.iter().map(|&v| v as f64).collect());
            }
            let g = GpuTrainer::with_options(ctx, &gpu_layers::Kernels::new(), spec, opt, max_batch, 3, fusion).unwrap();
            g.keep_gradients(ctx, true).unwrap();
            g.write_batch(ctx, &x32, &labels).unwrap();
            g.train_steps(ctx, 1).unwrap();
            computed.push((format!("GPU {fusion:?}"), g.gradients(ctx).unwrap()));
        }
        for l in 0..flat.len() {
            let fd = finite_differences(&flat[l], |p| {
                let mut params = flat.clone();
                params[l] = p.to_vec();
                network_loss64(spec, &params, &masks, &x, rows, &labels)
            });
            for (who, grads) in &computed {
                let g: Vec<f32> = grads[2 * l].data.iter().chain(&grads[2 * l + 1].data).copied().collect();
                assert_matches_fd(&format!("{} layer {} [dW; db], {who}, batch {rows} of {max_batch}", spec.describe(), l + 1), &g, &fd);
            }
        }
    }
}
