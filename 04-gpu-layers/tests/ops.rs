//! Every op (kernel) on the GPU against its CPU twin, on random inputs and awkward shapes
//! (1, 17, 63, 65, 129 x 257, non-square), with outputs poisoned first and the rows past a
//! smaller batch checked to stay untouched.

use common::test_context;
use gpu_layers::{
    Activation, CpuTape, Dim, Elem, GpuTape, Kernels, LayerUpdate, Mode, Op, Optimizer, TensorId, TensorInfo, Transpose, View,
};
use rand::{Rng, SeedableRng};

/// Tolerance for ops with sums of `k` terms of size ~1: f32 rounding grows like k * 2^-24 in
/// the worst case; a missing or doubled term (>= ~1e-2) still fails.
fn tol(k: usize) -> (f64, f64) {
    (1e-4, 2e-6 * k.max(1) as f64)
}

struct Case {
    tensors: Vec<TensorInfo>,
    /// Tensors the op only writes: poisoned on the GPU before it runs.
    outputs: Vec<TensorId>,
    /// Labels per tensor id: u32 tensors get random values below this.
    label_range: u32,
}

impl Case {
    fn new() -> Self {
        Self { tensors: Vec::new(), outputs: Vec::new(), label_range: 2 }
    }

    fn tensor(&mut self, name: &str, rows: Dim, cols: usize, elem: Elem) -> TensorId {
        self.tensors.push(TensorInfo { name: name.into(), rows, cols, elem });
        TensorId(self.tensors.len() - 1)
    }

    fn view(&self, t: TensorId) -> View {
        View { tensor: t, rows: self.tensors[t.0].rows, cols: self.tensors[t.0].cols }
    }

    fn output(&mut self, name: &str, rows: Dim, cols: usize) -> TensorId {
        let t = self.tensor(name, rows, cols, Elem::F32);
        self.outputs.push(t);
        t
    }

    /// Fills every tensor with random values, runs `ops` on both devices at `batch` rows
    /// (capacity `max_batch`), and compares every tensor: live rows within `tol`, rows past
    /// the batch exactly as they were.
    fn check(&self, ops: &[Op], max_batch: usize, batch: usize, tol: (f64, f64)) {
        let ctx = test_context();
        let kernels = kernels();
        let mut rng = rand::rngs::StdRng::seed_from_u64(max_batch as u64 * 1000 + batch as u64);
        let mut cpu = CpuTape::new(&self.tensors, max_batch).unwrap();
        let mut gpu = GpuTape::new(ctx, &self.tensors, max_batch).unwrap();
        let tape = gpu.add_tape(ctx, kernels, ops).unwrap();
        cpu.set_batch(batch).unwrap();
        gpu.set_batch(ctx, batch).unwrap();
        for (i, t) in self.tensors.iter().enumerate() {
            let id = TensorId(i);
            let n = t.capacity(max_batch);
            match t.elem {
                Elem::F32 => {
                    // Optimizer state stays >= 0 (Adam's second moments are squares).
                    let lo = if t.name == "state" { 0.0 } else { -1.0 };
                    let data: Vec<f32> = (0..n).map(|_| rng.random_range(lo..1.0)).collect();
                    cpu.f32_mut(id).copy_from_slice(&data);
                    if self.outputs.contains(&id) {
                        ctx.poison(gpu.buffer(id));
                        // The CPU keeps NaN in the rows past the batch too, like the poison.
                        cpu.f32_mut(id).iter_mut().for_each(|v| *v = f32::NAN);
                    } else {
                        gpu.write_f32(ctx, id, &data).unwrap();
                    }
                }
                Elem::U32 => {
                    let data: Vec<u32> = if t.name == "counters" {
                        vec![0, 0, 0, 0, 0, 0, 3, 0] // step 3
                    } else {
                        (0..n).map(|_| rng.random_range(0..self.label_range)).collect()
                    };
                    cpu.u32_mut(id).copy_from_slice(&data);
                    gpu.write_u32(ctx, id, &data).unwrap();
                }
            }
        }
        cpu.run(ops).unwrap();
        gpu.run(ctx, tape, 1).unwrap();
        for (i, t) in self.tensors.iter().enumerate() {
            let id = TensorId(i);
            let n = t.capacity(max_batch);
            let live = t.rows.at(batch) * t.cols;
            match t.elem {
                Elem::F32 => {
                    let g = gpu.read_f32(ctx, id, n).unwrap();
                    let c = cpu.f32(id);
                    if let Err(e) = common::check_close(&g[..live], &c[..live], tol.0, tol.1) {
                        panic!("tensor '{}' (batch {batch} of {max_batch}): {e}", t.name);
                    }
                    // Past the batch: untouched (NaN poison stays NaN, inputs keep their values).
                    common::assert_same(&g[live..], &c[live..]);
                }
                Elem::U32 => {
                    let g = gpu.read_u32(ctx, id, n).unwrap();
                    let c = cpu.u32(id);
                    if t.name == "counters" {
                        // The loss sum: per-row losses differ in their last bits (exp and log
                        // differ between devices); the counts are exact.
                        let loss = |w: &[u32]| ((w[1] as u64) << 32 | w[0] as u64) as f32 / 1048576.0;
                        common::assert_close(&[loss(&g)], &[loss(c)], 1e-5, 1e-5);
                        assert_eq!(&g[2..], &c[2..], "counters (rows, correct, bad labels, non-finite, step)");
                    } else {
                        assert_eq!(g, c, "tensor '{}'", t.name);
                    }
                }
            }
        }
    }
}

fn kernels() -> &'static std::sync::Arc<Kernels> {
    static K: std::sync::OnceLock<std::sync::Arc<Kernels>> = std::sync::OnceLock::new();
    K.get_or_init(Kernels::new)
}

/// (max_batch, batch) pairs: full batches and smaller last batches of awkward sizes.
const BATCHES: [(usize, usize); 4] = [(1, 1), (17, 17), (65, 63), (129, 65)];
const WIDTHS: [usize; 4] = [1, 17, 63, 65];

#[test]
fn matmul_all_products() {
    for (mb, b) in BATCHES {
        for (k, n) in [(17, 63), (65, 1), (257, 65)] {
            for t in [Transpose::None, Transpose::A, Transpose::B] {
                let mut c = Case::new();
                // x: [B, k]. None: x [B,k] * w [k,n]. A: x^T [k,B] * y [B,n]. B: y [B,n] * w^T ([k,n] stored).
                let (a, b_t, out) = match t {
                    Transpose::None => (
                        c.tensor("x", Dim::Batch, k, Elem::F32),
                        c.tensor("w", Dim::Fixed(k), n, Elem::F32),
                        c.output("out", Dim::Batch, n),
                    ),
                    Transpose::A => (
                        c.tensor("x", Dim::Batch, k, Elem::F32),
                        c.tensor("y", Dim::Batch, n, Elem::F32),
                        c.output("out", Dim::Fixed(k), n),
                    ),
                    Transpose::B => (
                        c.tensor("y", Dim::Batch, n, Elem::F32),
                        c.tensor("w", Dim::Fixed(k), n, Elem::F32),
                        c.output("out", Dim::Batch, k),
                    ),
                };
                let op = Op::Matmul { a: c.view(a), b: c.view(b_t), out: c.view(out), t };
                let inner = match t {
                    Transpose::None => k,
                    Transpose::A => b,
                    Transpose::B => n,
                };
                c.check(&[op], mb, b, tol(inner));
            }
        }
    }
}

#[test]
fn bias_add_broadcasts_over_rows() {
    for (mb, b) in BATCHES {
        for cols in WIDTHS.into_iter().chain([257]) {
            let mut c = Case::new();
            let y = c.tensor("y", Dim::Batch, cols, Elem::F32);
            let p = c.tensor("params", Dim::Fixed(3), cols, Elem::F32);
            c.check(&[Op::BiasAdd { y: c.view(y), bias: p, offset: 2 * cols }], mb, b, tol(1));
        }
    }
}

#[test]
fn activations_forward_and_backward() {
    for (mb, b) in BATCHES {
        for cols in WIDTHS {
            for act in [Activation::Relu, Activation::Tanh] {
                let mut c = Case::new();
                let y = c.tensor("y", Dim::Batch, cols, Elem::F32);
                c.check(&[Op::Activate { y: c.view(y), act }], mb, b, (1e-6, 1e-6));
                let mut c = Case::new();
                let dy = c.tensor("dy", Dim::Batch, cols, Elem::F32);
                let y = c.tensor("y", Dim::Batch, cols, Elem::F32);
                c.check(&[Op::ActivateBackward { dy: c.view(dy), y: c.view(y), act }], mb, b, (1e-6, 1e-7));
            }
        }
    }
}

#[test]
fn activations_out_of_place_and_sigmoid_in_place() {
    for (mb, b) in BATCHES {
        for cols in WIDTHS {
            for act in [Activation::Relu, Activation::Tanh, Activation::Sigmoid, Activation::Gelu] {
                let mut c = Case::new();
                let x = c.tensor("x", Dim::Batch, cols, Elem::F32);
                let y = c.output("y", Dim::Batch, cols);
                c.check(&[Op::ActivateCopy { x: c.view(x), y: c.view(y), act }], mb, b, (1e-5, 1e-6));
                let mut c = Case::new();
                let dy = c.tensor("dy", Dim::Batch, cols, Elem::F32);
                let x = c.tensor("x", Dim::Batch, cols, Elem::F32);
                c.check(&[Op::ActivateCopyBackward { dy: c.view(dy), x: c.view(x), act }], mb, b, (1e-5, 1e-6));
            }
            let mut c = Case::new();
            let y = c.tensor("y", Dim::Batch, cols, Elem::F32);
            c.check(&[Op::Activate { y: c.view(y), act: Activation::Sigmoid }], mb, b, (1e-6, 1e-6));
            let mut c = Case::new();
            let dy = c.tensor("dy", Dim::Batch, cols, Elem::F32);
            let y = c.tensor("y", Dim::Batch, cols, Elem::F32);
            c.check(&[Op::ActivateBackward { dy: c.view(dy), y: c.view(y), act: Activation::Sigmoid }], mb, b, (1e-6, 1e-7));
        }
    }
}

/// The GPU and the CPU draw the SAME dropout mask (an integer hash of seed, step and element
/// index, compared with an integer threshold): masks and outputs must be bit for bit equal.
#[test]
fn dropout_masks_agree_between_devices() {
    for (mb, b) in BATCHES {
        for cols in WIDTHS.into_iter().chain([257]) {
            for p in [0.2, 0.5] {
                let mut c = Case::new();
                let x = c.tensor("x", Dim::Batch, cols, Elem::F32);
                let y = c.output("y", Dim::Batch, cols);
                let mask = c.output("mask", Dim::Batch, cols);
                let counters = c.tensor("counters", Dim::Fixed(1), 8, Elem::U32);
                let op = Op::Dropout { x: c.view(x), y: c.view(y), mask: c.view(mask), counters, seed: 12345, p };
                c.check(&[op], mb, b, (0.0, 0.0));
                let mut c = Case::new();
                let dy = c.tensor("dy", Dim::Batch, cols, Elem::F32);
                let mask = c.tensor("mask", Dim::Batch, cols, Elem::F32);
                c.check(&[Op::DropoutBackward { dy: c.view(dy), mask: c.view(mask) }], mb, b, (0.0, 0.0));
            }
        }
    }
}

#[test]
fn mean_squared_error_every_mode() {
    for (mb, b) in BATCHES {
        for classes in [2, 10, 17, 65] {
            for mode in [Mode::Train, Mode::Eval, Mode::Predict] {
                let (c, y, labels, out, counters) = loss_case(classes, true);
                let op = Op::MeanSquaredError { y: c.view(y), labels, out: c.view(out), counters, mode };
                c.check(&[op], mb, b, (1e-5, 1e-7));
            }
        }
    }
}

#[test]
fn column_sum_is_a_parallel_reduction() {
    for (mb, b) in BATCHES {
        for cols in WIDTHS.into_iter().chain([257]) {
            let mut c = Case::new();
            let x = c.tensor("x", Dim::Batch, cols, Elem::F32);
            let out = c.tensor("grads", Dim::Fixed(2), cols, Elem::F32);
            c.check(&[Op::ColumnSum { x: c.view(x), out, offset: cols }], mb, b, tol(b));
        }
    }
}

fn loss_case(classes: usize, with_counters: bool) -> (Case, TensorId, TensorId, TensorId, TensorId) {
    let mut c = Case::new();
    c.label_range = classes as u32;
    let logits = c.tensor("logits", Dim::Batch, classes, Elem::F32);
    let labels = c.tensor("labels", Dim::Batch, 1, Elem::U32);
    let out = c.output("out", Dim::Batch, classes);
    let counters = c.tensor("counters", Dim::Fixed(1), 8, Elem::U32);
    assert!(with_counters);
    (c, logits, labels, out, counters)
}

#[test]
fn softmax_cross_entropy_every_mode() {
    for (mb, b) in BATCHES {
        for classes in [2, 10, 17, 65, 257] {
            for mode in [Mode::Train, Mode::Eval, Mode::Predict] {
                let (c, logits, labels, out, counters) = loss_case(classes, true);
                let op = Op::SoftmaxCrossEntropy { logits: c.view(logits), labels, out: c.view(out), counters, mode };
                c.check(&[op], mb, b, (1e-4, 1e-6));
            }
        }
    }
}

#[test]
fn optimizers_sgd_and_adam() {
    for len in [1, 17, 63, 65, 129 * 257] {
        for opt in [Optimizer::sgd(0.1, 0.9), Optimizer::adam(0.01), Optimizer::Adam { lr: 0.1, beta1: 0.5, beta2: 0.9, eps: 1e-3 }] {
            let mut c = Case::new();
            let k = opt.state_per_parameter();
            let params = c.tensor("params", Dim::Fixed(1), len, Elem::F32);
            let grads = c.tensor("grads", Dim::Fixed(1), len, Elem::F32);
            let state = c.tensor("state", Dim::Fixed(k), len, Elem::F32);
            let counters = c.tensor("counters", Dim::Fixed(1), 8, Elem::U32);
            let op = Op::Update { params, grads, state, counters, len, opt };
            // The step is lr * (something of size ~1): allow 1e-4 of the largest lr (0.1).
            c.check(&[op], 1, 1, (1e-5, 1e-5));
        }
    }
}

#[test]
fn linear_forward_fused() {
    for (mb, b) in BATCHES {
        for (i, o) in [(1, 1), (17, 63), (65, 17), (257, 129), (784, 33)] {
            for act in [None, Some(Activation::Relu), Some(Activation::Tanh)] {
                let mut c = Case::new();
                let x = c.tensor("x", Dim::Batch, i, Elem::F32);
                let p = c.tensor("params", Dim::Fixed(i + 1), o, Elem::F32);
                let y = c.output("y", Dim::Batch, o);
                let op = Op::LinearForward { x: c.view(x), params: p, y: c.view(y), act };
                c.check(&[op], mb, b, tol(i));
            }
        }
    }
}

#[test]
fn linear_backward_input_fused() {
    for (mb, b) in BATCHES {
        for (i, o) in [(1, 1), (17, 63), (65, 17), (129, 257)] {
            for act in [Activation::Relu, Activation::Tanh] {
                let mut c = Case::new();
                let dy = c.tensor("dy", Dim::Batch, o, Elem::F32);
                let p = c.tensor("params", Dim::Fixed(i + 1), o, Elem::F32);
                let h = c.tensor("h", Dim::Batch, i, Elem::F32);
                let dx = c.output("dx", Dim::Batch, i);
                let op = Op::LinearBackwardInput { dy: c.view(dy), params: p, h: c.view(h), act, dx: c.view(dx) };
                c.check(&[op], mb, b, tol(o));
            }
        }
    }
}

#[test]
fn linear_update_fused_one_and_two_layers() {
    for (mb, b) in BATCHES {
        for ((i, o), (i2, o2)) in [((1, 1), (3, 2)), ((17, 63), (63, 5)), ((65, 17), (1, 33)), ((129, 257), (31, 32))] {
            for opt in [Optimizer::sgd(0.05, 0.9), Optimizer::adam(0.01)] {
                for two in [false, true] {
                    let mut c = Case::new();
                    let k = opt.state_per_parameter();
                    let layer = |c: &mut Case, n: &str, i: usize, o: usize| LayerUpdate {
                        x: { let t = c.tensor(&format!("x{n}"), Dim::Batch, i, Elem::F32); c.view(t) },
                        dy: { let t = c.tensor(&format!("dy{n}"), Dim::Batch, o, Elem::F32); c.view(t) },
                        params: c.tensor(&format!("params{n}"), Dim::Fixed(i + 1), o, Elem::F32),
                        grads: c.output(&format!("grads{n}"), Dim::Fixed(i + 1), o),
                        state: c.tensor("state", Dim::Fixed(k * (i + 1)), o, Elem::F32),
                    };
                    let first = layer(&mut c, "1", i, o);
                    let second = two.then(|| layer(&mut c, "2", i2, o2));
                    let counters = c.tensor("counters", Dim::Fixed(1), 8, Elem::U32);
                    c.check(&[Op::LinearUpdate { first, second, counters, opt }], mb, b, tol(b));
                }
            }
        }
    }
}

#[test]
fn output_layer_fused_every_mode() {
    for (mb, b) in BATCHES {
        for (i, classes) in [(1, 2), (17, 10), (65, 63), (129, 65), (63, 257)] {
            for mode in [Mode::Train, Mode::Eval, Mode::Predict] {
                for below in [None, Some(Activation::Relu), Some(Activation::Tanh)] {
                    let mut c = Case::new();
                    c.label_range = classes as u32;
                    let h = c.tensor("h", Dim::Batch, i, Elem::F32);
                    let params = c.tensor("params", Dim::Fixed(i + 1), classes, Elem::F32);
                    let labels = c.tensor("labels", Dim::Batch, 1, Elem::U32);
                    let out = c.output("out", Dim::Batch, classes);
                    let counters = c.tensor("counters", Dim::Fixed(1), 8, Elem::U32);
                    let dh = below.map(|act| {
                        // In eval and predict modes dh is not written: it keeps its values.
                        let t = if mode == Mode::Train { c.output("dh", Dim::Batch, i) } else { c.tensor("dh", Dim::Batch, i, Elem::F32) };
                        (c.view(t), act)
                    });
                    let op = Op::OutputLayer { h: c.view(h), params, labels, out: c.view(out), dh, counters, mode };
                    c.check(&[op], mb, b, tol(i));
                }
            }
        }
    }
}
