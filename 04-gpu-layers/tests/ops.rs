//! Every op (kernel) on the GPU against its CPU reference, on random inputs and awkward shapes
//! (1, 17, 63, 65, 129 x 257, non-square), with outputs poisoned first and the rows past a
//! smaller batch checked to stay untouched.

use common::test_context;
use gpu_layers::{
    Activation, CpuStore, FusedDropout, FusedTiles, Dim, Elem, GpuStore, KernelId, Kernels, LayerUpdate, Loss, Mode, Op, Optimizer, TensorId, TensorInfo,
    Transpose, View,
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
    /// Every f32 input rounded to a value f16 holds exactly (for the kernels with f16 inputs).
    f16_inputs: bool,
    /// The fused updates run as in training, without keeping their gradients
    /// (`GpuStore::set_keep_gradients`): the "grads" tensors must stay as poisoned.
    drops_grads: bool,
}

/// `v` rounded to 11 significant bits, or to a multiple of 2^-24 below f16's normal range: a
/// value f16 holds exactly, for |v| < 65504.
fn round_to_f16(v: f32) -> f32 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let exponent = ((v.to_bits() >> 23) & 0xff) as i32 - 127;
    let quantum = 2f32.powi(exponent.max(-14) - 10);
    (v / quantum).round() * quantum
}

impl Case {
    fn new() -> Self {
        Self { tensors: Vec::new(), outputs: Vec::new(), label_range: 2, f16_inputs: false, drops_grads: false }
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
        self.check_with(kernels(), ops, max_batch, batch, tol);
    }

    /// [`Case::check`] with the given kernels (other tile sizes); returns the dispatches the
    /// GPU tape made of `ops`.
    fn check_with(&self, kernels: &std::sync::Arc<Kernels>, ops: &[Op], max_batch: usize, batch: usize, tol: (f64, f64)) -> usize {
        let ctx = test_context();
        let mut rng = rand::rngs::StdRng::seed_from_u64(max_batch as u64 * 1000 + batch as u64);
        let mut cpu = CpuStore::new(&self.tensors, max_batch).unwrap();
        let mut gpu = GpuStore::new(ctx, &self.tensors, max_batch).unwrap();
        let tape = gpu.add_tape(ctx, kernels, ops).unwrap();
        gpu.set_keep_gradients(ctx, !self.drops_grads);
        cpu.set_batch(batch).unwrap();
        gpu.set_batch(ctx, batch).unwrap();
        for (i, t) in self.tensors.iter().enumerate() {
            let id = TensorId(i);
            let n = t.capacity(max_batch);
            match t.elem {
                Elem::F32 => {
                    // Everything in [-1, 1): SGD velocities and Adam's first moments of both
                    // signs too. Only Adam's second moments (the back half of "moments") are
                    // squares, in [0, 1).
                    let lo = |j: usize| if t.name == "moments" && j >= n / 2 { 0.0 } else { -1.0 };
                    let mut data: Vec<f32> = (0..n).map(|j| rng.random_range(lo(j)..1.0)).collect();
                    if self.f16_inputs {
                        data.iter_mut().for_each(|v| *v = round_to_f16(*v));
                    }
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
                        vec![0, 0, 0, 0, 0, 0, 3, 5] // step 3; the fused dropout masks drawn for step 5
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
                    if self.drops_grads && t.name.starts_with("grads") {
                        assert!(g.iter().all(|v| v.is_nan()), "tensor '{}' written by an update that keeps no gradients", t.name);
                        continue;
                    }
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
        gpu.dispatches(tape)
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

/// The optimizer state's tensor name, which [`Case::check`] fills by: "velocity" (SGD) all in
/// [-1, 1); "moments" (Adam) first moments in [-1, 1), then second moments in [0, 1).
fn state_name(opt: Optimizer) -> &'static str {
    match opt {
        Optimizer::Sgd { .. } => "velocity",
        Optimizer::Adam { .. } => "moments",
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
            let state = c.tensor(state_name(opt), Dim::Fixed(k), len, Elem::F32);
            let counters = c.tensor("counters", Dim::Fixed(1), 8, Elem::U32);
            let op = Op::Update { params, grads, state, counters, len, opt };
            // The step is lr * (something of size ~1): allow 1e-4 of the largest lr (0.1).
            c.check(&[op], 1, 1, (1e-5, 1e-5));
        }
    }
}

/// Adam worked by hand at steps 2 and 3, from first moments of both signs, on both devices:
/// the optimizer the CLI and the page use by default (beta1 0.9, beta2 0.999, eps 1e-8; lr 0.01
/// here). At step 1 from zero moments every parameter moves by lr * sign(g) whatever the bias
/// corrections do; from step 2 on, the old moments and the corrections 1 - beta^t count.
///
/// ```text
/// parameter 0: p = 1, m = -0.2, v = 0.04; g = 0.5 at t = 2, then -1 at t = 3
///   t = 2: m = 0.9 (-0.2) + 0.1 (0.5) = -0.13          v = 0.999 (0.04) + 0.001 (0.25) = 0.04021
///          m^ = -0.13 / (1 - 0.9^2 = 0.19) = -0.684211  v^ = 0.04021 / (1 - 0.999^2 = 0.001999) = 20.1151
///          p = 1 - 0.01 (-0.684211) / (sqrt 20.1151 = 4.48498) = 1.0015256   (the old m wins over g)
///   t = 3: m = 0.9 (-0.13) + 0.1 (-1) = -0.217         v = 0.999 (0.04021) + 0.001 (1) = 0.04116979
///          m^ = -0.217 / 0.271 = -0.800738              v^ = 0.04116979 / 0.002997001 = 13.7370
///          p = 1.0015256 - 0.01 (-0.800738) / 3.70634 = 1.0036860
/// parameter 1: p = -2, m = 0.3, v = 0.09; g = -0.25, then 0.75
///   t = 2: m = 0.245, v = 0.0899725, m^ = 1.289474, v^ = 45.0088, p = -2.0019221
///   t = 3: m = 0.2955, v = 0.09044503, m^ = 1.090406, v^ = 30.1785, p = -2.0039070
/// ```
///
/// With t stuck at 1 the same two steps would end at 1.00543 and -2.00569, and from zero
/// moments at 0.99570 and -1.99680: both far outside the tolerance (1e-6 on p, 1e-7 on m, v;
/// f32 keeps p to 1.2e-7 and the step to about 1e-9).
#[test]
fn adam_by_hand_at_steps_2_and_3_on_both_devices() {
    let ctx = test_context();
    let opt = Optimizer::adam(0.01);
    let tensors = [
        TensorInfo { name: "params".into(), rows: Dim::Fixed(1), cols: 2, elem: Elem::F32 },
        TensorInfo { name: "grads".into(), rows: Dim::Fixed(1), cols: 2, elem: Elem::F32 },
        TensorInfo { name: "moments".into(), rows: Dim::Fixed(2), cols: 2, elem: Elem::F32 },
        TensorInfo { name: "counters".into(), rows: Dim::Fixed(1), cols: 8, elem: Elem::U32 },
    ];
    let (params, grads, moments, counters) = (TensorId(0), TensorId(1), TensorId(2), TensorId(3));
    let ops = [Op::Update { params, grads, state: moments, counters, len: 2, opt }];
    // (t, g, then p, [m; v]), as worked out above.
    type Step = (u32, [f32; 2], [f32; 2], [f32; 4]);
    let steps: [Step; 2] = [
        (2, [0.5, -0.25], [1.0015256, -2.0019221], [-0.13, 0.245, 0.04021, 0.0899725]),
        (3, [-1.0, 0.75], [1.003686, -2.003907], [-0.217, 0.2955, 0.04116979, 0.09044503]),
    ];
    let start = ([1.0f32, -2.0], [-0.2f32, 0.3, 0.04, 0.09]);
    let check = |device: &str, t: u32, p: &[f32], st: &[f32], want_p: &[f32], want_st: &[f32]| {
        if let Err(e) = common::check_close(p, want_p, 0.0, 1e-6) {
            panic!("{device}, Adam step {t}: parameters {p:?}, by hand {want_p:?}: {e}");
        }
        if let Err(e) = common::check_close(st, want_st, 0.0, 1e-7) {
            panic!("{device}, Adam step {t}: moments {st:?}, by hand {want_st:?}: {e}");
        }
    };

    let mut cpu = CpuStore::new(&tensors, 1).unwrap();
    cpu.f32_mut(params).copy_from_slice(&start.0);
    cpu.f32_mut(moments).copy_from_slice(&start.1);
    for (t, g, want_p, want_st) in steps {
        cpu.f32_mut(grads).copy_from_slice(&g);
        cpu.u32_mut(counters)[6] = t;
        cpu.run(&ops).unwrap();
        check("CPU", t, cpu.f32(params), cpu.f32(moments), &want_p, &want_st);
    }

    let mut gpu = GpuStore::new(ctx, &tensors, 1).unwrap();
    let tape = gpu.add_tape(ctx, kernels(), &ops).unwrap();
    gpu.set_batch(ctx, 1).unwrap();
    gpu.write_f32(ctx, params, &start.0).unwrap();
    gpu.write_f32(ctx, moments, &start.1).unwrap();
    for (t, g, want_p, want_st) in steps {
        gpu.write_f32(ctx, grads, &g).unwrap();
        gpu.write_u32(ctx, counters, &[0, 0, 0, 0, 0, 0, t, 0]).unwrap();
        gpu.run(ctx, tape, 1).unwrap();
        let (p, st) = (gpu.read_f32(ctx, params, 2).unwrap(), gpu.read_f32(ctx, moments, 4).unwrap());
        check("GPU", t, &p, &st, &want_p, &want_st);
    }
}

/// A `LinearForward` of `inputs -> outputs` and the case that holds its tensors.
fn linear_forward_case(inputs: usize, outputs: usize, act: Option<Activation>) -> (Case, Op) {
    let mut c = Case::new();
    let x = c.tensor("x", Dim::Batch, inputs, Elem::F32);
    let p = c.tensor("params", Dim::Fixed(inputs + 1), outputs, Elem::F32);
    let y = c.output("y", Dim::Batch, outputs);
    let op = Op::LinearForward { x: c.view(x), params: p, y: c.view(y), act, drop: None };
    (c, op)
}

#[test]
fn linear_forward_fused() {
    for (mb, b) in BATCHES {
        // 1,100 inputs are more than the plain form stages (forward_transposed.wgsl): its
        // loop over the rows where they lie.
        for (i, o) in [(1, 1), (17, 63), (65, 17), (257, 129), (784, 33), (1100, 17)] {
            for act in [None, Some(Activation::Relu), Some(Activation::Tanh)] {
                let (c, op) = linear_forward_case(i, o, act);
                c.check(&[op], mb, b, tol(i));
            }
        }
    }
}

/// `linear_forward_tiled` (forced onto every shape, `tiled_min: 1`) against the CPU: awkward
/// widths and batches (rows and columns past its 32 x 64 tile, k past a round of 32), in the
/// tile sizes `--sweep` times that fit this adapter, each checked to run the tiled kernel.
#[test]
fn linear_forward_tiled() {
    let d = FusedTiles { tiled_min: 1, ..FusedTiles::DEFAULT };
    let variants = [
        d,
        FusedTiles { tiled_s: 1, ..d },
        FusedTiles { tiled_s: 4, ..d },
        FusedTiles { tiled_m: 64, ..d },
        FusedTiles { tiled_n: 128, ..d },
        FusedTiles { tiled_k: 16, ..d },
        FusedTiles { tiled_k: 64, ..d },
    ];
    for (v, tiles) in variants.into_iter().enumerate() {
        let kernels = Kernels::with_tiles(tiles);
        for (mb, b) in BATCHES {
            for (i, o) in [(1, 1), (17, 63), (65, 17), (257, 129), (784, 65)] {
                // Every variant on every shape would take minutes on lavapipe: the default
                // tiles everywhere, the others on two shapes.
                if v > 0 && !matches!((i, o), (17, 63) | (257, 129)) {
                    continue;
                }
                for act in [None, Some(Activation::Relu), Some(Activation::Tanh)] {
                    let (c, op) = linear_forward_case(i, o, act);
                    c.check_with(&kernels, std::slice::from_ref(&op), mb, b, tol(i));
                    let names = gpu_layers::plan(&[op], &tiles, false, &test_context().limits, mb);
                    assert_eq!(names, ["linear_forward_tiled"], "{tiles:?}");
                }
            }
        }
    }
    // Below `tiled_min`, linear_forward.
    let x = View { tensor: TensorId(0), rows: Dim::Batch, cols: 784 };
    let y = View { tensor: TensorId(2), rows: Dim::Batch, cols: 128 };
    let op = Op::LinearForward { x, params: TensorId(1), y, act: None, drop: None };
    let limits = &test_context().limits;
    assert_eq!(gpu_layers::plan(std::slice::from_ref(&op), &FusedTiles::DEFAULT, false, limits, 64), ["linear_forward"]);
    // A wide layer takes it when it reads a ready input; gathering, it would run linear_forward
    // (GpuTrainer does not gather then, tests/training.rs).
    let wide = View { cols: 1024, ..y };
    let op = Op::LinearForward { x, params: TensorId(1), y: wide, act: None, drop: None };
    assert_eq!(gpu_layers::plan(std::slice::from_ref(&op), &FusedTiles::DEFAULT, false, limits, 256), ["linear_forward_tiled"]);
    assert_eq!(gpu_layers::plan(&[op], &FusedTiles::DEFAULT, true, limits, 256), ["linear_forward (gathering)"]);
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
                let op = Op::LinearBackwardInput { dy: c.view(dy), params: p, h: c.view(h), act, dx: c.view(dx), drop: None };
                c.check(&[op], mb, b, tol(o));
            }
        }
    }
}

/// `linear_update` in its default 4 x 4 blocks and in 8 x 8 blocks (tiles of 64 and of 32).
#[test]
fn linear_update_fused_one_two_and_three_layers() {
    let d = FusedTiles::DEFAULT;
    let b8 = FusedTiles { update_block: 8, update_t: 64, update_batch_slices: 2, split_step_batch_slices: 2, ..d };
    let b8_t32 = FusedTiles { update_block: 8, update_batch_slices: 8, ..d };
    for tiles in [d, b8, b8_t32] {
        let kernels = Kernels::with_tiles(tiles);
        linear_update_cases(&kernels, &BATCHES, &UPDATE_SHAPES, false);
    }
}

/// `linear_update_coop`: the gradients of one layer and of two on the tensor cores (the tiled
/// forward's rule and `coop_min` taking every layer, products with f16 inputs), where the adapter has
/// cooperative matrices (lavapipe has none: the test says so and checks that the kernel is
/// refused there). The shapes of `linear_update`, and 784-1024-10 in batches of 256 and 96
/// (rounds of 32 rows, a short last one); inputs rounded to values f16 holds exactly, so the
/// CPU reference's f32 sums are the reference within the f32 tolerance.
#[test]
fn linear_update_on_the_tensor_cores() {
    if !runs_on_this_adapter(KernelId::LinearUpdateCoop) {
        return;
    }
    for slices in [2, 1] {
        let tiles = FusedTiles { tiled_min: 1, coop_min: 1, coop_update_batch_slices: slices, ..FusedTiles::DEFAULT };
        let kernels = Kernels::with_options(tiles, gpu_layers::Precision::F16Inputs);
        linear_update_cases(&kernels, &BATCHES, &UPDATE_SHAPES, true);
        linear_update_cases(&kernels, &[(256, 256), (256, 96)], &[((784, 1024), (1024, 10))], true);
    }
}

/// Whether the tensor-core kernel `id` can run on the test adapter; where it cannot (lavapipe:
/// no cooperative matrices), says so and checks that building it is refused.
fn runs_on_this_adapter(id: KernelId) -> bool {
    let ctx = test_context();
    let Err(why) = gpu_matmul::coop_support(ctx) else {
        return true;
    };
    eprintln!("{} not run: {why}", id.name());
    let err = Kernels::with_matmul_precision(gpu_layers::Precision::F16Inputs).pipeline(ctx, id);
    assert!(err.is_err(), "an adapter without cooperative matrices must refuse {}", id.name());
    false
}

/// (inputs, outputs) of the first and the second layer of `linear_update_cases` (the third is
/// the second's outputs to the first's inputs).
type TwoLayers = ((usize, usize), (usize, usize));
const UPDATE_SHAPES: [TwoLayers; 4] = [((1, 1), (3, 2)), ((17, 63), (63, 5)), ((65, 17), (1, 33)), ((129, 257), (31, 32))];

/// Every shape at every (max_batch, batch), SGD with momentum and Adam, one, two and three layers
/// (each in ONE dispatch: the test adapters bind three layers' buffers), inputs rounded to f16
/// where `f16`; with `f16`, the update must run `linear_update_coop`.
fn linear_update_cases(
    kernels: &std::sync::Arc<Kernels>,
    batches: &[(usize, usize)],
    shapes: &[TwoLayers],
    f16: bool,
) {
    for &(mb, b) in batches {
        for &((i, o), (i2, o2)) in shapes {
            for opt in [Optimizer::sgd(0.05, 0.9), Optimizer::adam(0.01)] {
                for layers in 1..=3 {
                    let mut c = Case::new();
                    c.f16_inputs = f16;
                    let k = opt.state_per_parameter();
                    let layer = |c: &mut Case, n: &str, i: usize, o: usize| LayerUpdate {
                        x: { let t = c.tensor(&format!("x{n}"), Dim::Batch, i, Elem::F32); c.view(t) },
                        dy: { let t = c.tensor(&format!("dy{n}"), Dim::Batch, o, Elem::F32); c.view(t) },
                        params: c.tensor(&format!("params{n}"), Dim::Fixed(i + 1), o, Elem::F32),
                        grads: c.output(&format!("grads{n}"), Dim::Fixed(i + 1), o),
                        state: c.tensor(state_name(opt), Dim::Fixed(k * (i + 1)), o, Elem::F32),
                    };
                    let first = layer(&mut c, "1", i, o);
                    let second = (layers >= 2).then(|| layer(&mut c, "2", i2, o2));
                    let third = (layers == 3).then(|| layer(&mut c, "3", o2, i));
                    let counters = c.tensor("counters", Dim::Fixed(1), 8, Elem::U32);
                    let ops = [Op::LinearUpdate { first, second, third, counters, opt }];
                    let dispatches = c.check_with(kernels, &ops, mb, b, tol(b));
                    assert_eq!(dispatches, 1, "{layers} layers: {i}-{o}, {i2}-{o2}, {o2}-{i}");
                    if layers == 3 && !f16 {
                        // As in training: the same parameters and state, no gradients written.
                        c.drops_grads = true;
                        c.check_with(kernels, &ops, mb, b, tol(b));
                    }
                    if f16 {
                        let ctx = test_context();
                        let mut gpu = GpuStore::new(ctx, &c.tensors, mb).unwrap();
                        let tape = gpu.add_tape(ctx, kernels, &ops).unwrap();
                        assert_eq!(dispatches, 1);
                        assert_eq!(gpu.dispatch_names(tape), ["linear_update_coop"]);
                    }
                }
            }
        }
    }
}

/// An `OutputLayer` on `inputs` columns of `h` with `classes` classes, labels below
/// `label_range`, and `dh` when there is a layer `below` (written only in training).
fn output_layer_case(inputs: usize, classes: usize, label_range: u32, mode: Mode, below: Option<Activation>) -> (Case, Op) {
    let mut c = Case::new();
    c.label_range = label_range;
    let h = c.tensor("h", Dim::Batch, inputs, Elem::F32);
    let params = c.tensor("params", Dim::Fixed(inputs + 1), classes, Elem::F32);
    let labels = c.tensor("labels", Dim::Batch, 1, Elem::U32);
    let out = c.output("out", Dim::Batch, classes);
    let counters = c.tensor("counters", Dim::Fixed(1), 8, Elem::U32);
    let dh = below.map(|act| {
        // In eval and predict modes dh is not written: it keeps its values.
        let t = if mode == Mode::Train { c.output("dh", Dim::Batch, inputs) } else { c.tensor("dh", Dim::Batch, inputs, Elem::F32) };
        (c.view(t), act)
    });
    let op = Op::OutputLayer { h: c.view(h), params, labels, out: c.view(out), dh, drop: None, loss: Loss::CrossEntropy, counters, mode };
    (c, op)
}

#[test]
fn output_layer_fused_every_mode() {
    for (mb, b) in BATCHES {
        for (i, classes) in [(1, 2), (17, 10), (65, 63), (129, 65), (63, 257)] {
            for mode in [Mode::Train, Mode::Eval, Mode::Predict] {
                for below in [None, Some(Activation::Relu), Some(Activation::Tanh)] {
                    let (c, op) = output_layer_case(i, classes, classes as u32, mode, below);
                    c.check(&[op], mb, b, tol(i));
                }
            }
        }
    }
}

/// `output_wide` against the CPU in every mode: wide `h` (one chunk of k, exactly one, two and a
/// short one), 1 to 16 classes, and with `wide_min` 1 the narrow shapes too (most invocations
/// past k); each checked to run `output_wide`. 17 classes stay with `output_layer`.
#[test]
fn output_wide_every_mode() {
    let everywhere = FusedTiles { wide_min: 1, ..FusedTiles::DEFAULT };
    let limits = &test_context().limits;
    let cases = [
        (FusedTiles::DEFAULT, 256, 10),
        (FusedTiles::DEFAULT, 1024, 16),
        (FusedTiles::DEFAULT, 1025, 2),
        (FusedTiles::DEFAULT, 2100, 10),
        (everywhere, 1, 2),
        (everywhere, 17, 1),
        (everywhere, 65, 16),
        (everywhere, 129, 3),
    ];
    for (tiles, i, classes) in cases {
        let kernels = Kernels::with_tiles(tiles);
        for (mb, b) in BATCHES {
            for mode in [Mode::Train, Mode::Eval, Mode::Predict] {
                for below in [None, Some(Activation::Relu), Some(Activation::Tanh)] {
                    // Labels up to one past the classes: some rows have a bad label.
                    let (c, op) = output_layer_case(i, classes, classes as u32 + 1, mode, below);
                    c.check_with(&kernels, std::slice::from_ref(&op), mb, b, tol(i));
                    assert_eq!(gpu_layers::plan(&[op], &tiles, false, limits, mb), ["output_wide"], "{i} x {classes}");
                }
            }
        }
    }
    let h = View { tensor: TensorId(0), rows: Dim::Batch, cols: 1024 };
    let out = View { tensor: TensorId(3), rows: Dim::Batch, cols: 17 };
    let op = Op::OutputLayer { h, params: TensorId(1), labels: TensorId(2), out, dh: None, drop: None, loss: Loss::CrossEntropy, counters: TensorId(4), mode: Mode::Eval };
    assert_eq!(gpu_layers::plan(&[op], &everywhere, false, limits, 64), ["output_layer"]);
}

/// A hidden layer and the output layer on top of it: `[LinearForward, OutputLayer]`, which the
/// GPU tape runs as one `forward_output` dispatch where the shapes allow.
fn forward_then_output(c: &mut Case, (i, hidden, classes): (usize, usize, usize), act: Option<Activation>, mode: Mode) -> [Op; 2] {
    c.label_range = classes as u32;
    let x = c.tensor("x", Dim::Batch, i, Elem::F32);
    let p1 = c.tensor("params1", Dim::Fixed(i + 1), hidden, Elem::F32);
    let h = c.output("h", Dim::Batch, hidden);
    let p2 = c.tensor("params2", Dim::Fixed(hidden + 1), classes, Elem::F32);
    let labels = c.tensor("labels", Dim::Batch, 1, Elem::U32);
    let out = c.output("out", Dim::Batch, classes);
    let counters = c.tensor("counters", Dim::Fixed(1), 8, Elem::U32);
    // dh only in training, with the hidden layer's activation (as the networks build it).
    let dh = match (mode, act) {
        (Mode::Train, Some(a)) => {
            let t = c.output("dh", Dim::Batch, hidden);
            Some((c.view(t), a))
        }
        _ => None,
    };
    [
        Op::LinearForward { x: c.view(x), params: p1, y: c.view(h), act, drop: None },
        Op::OutputLayer { h: c.view(h), params: p2, labels, out: c.view(out), dh, drop: None, loss: Loss::CrossEntropy, counters, mode },
    ]
}

#[test]
fn forward_output_merged_every_mode() {
    for (mb, b) in BATCHES {
        for shape in [(1, 1, 2), (17, 63, 10), (65, 128, 17), (257, 65, 32), (784, 128, 10), (63, 17, 3)] {
            for mode in [Mode::Train, Mode::Eval, Mode::Predict] {
                for act in [None, Some(Activation::Relu), Some(Activation::Tanh)] {
                    let mut c = Case::new();
                    let ops = forward_then_output(&mut c, shape, act, mode);
                    let dispatches = c.check_with(kernels(), &ops, mb, b, tol(shape.0.max(shape.1)));
                    assert_eq!(dispatches, 1, "{shape:?} {mode:?} {act:?}: the pair should run merged on this adapter");
                }
            }
        }
    }
    // Too wide a hidden layer (or too many classes) for one workgroup: two dispatches, same results.
    for shape in [(17, 129, 10), (17, 63, 33)] {
        let mut c = Case::new();
        let ops = forward_then_output(&mut c, shape, Some(Activation::Relu), Mode::Train);
        assert_eq!(c.check_with(kernels(), &ops, 65, 63, tol(129)), 2, "{shape:?}");
    }
}

/// A wide layer's forward split over k (2, 3 and 4 ways: slices of 1 to 9 rounds of 32, some
/// empty) and the `output_wide` that adds up its partial sums, writes `h` and goes on as usual,
/// against the CPU. Only training pairs them; evaluation and prediction run the two unsplit.
#[test]
fn a_forward_split_over_k_and_output_wide_adding_it_up() {
    let limits = &test_context().limits;
    for splits in [2, 3, 4] {
        let tiles = FusedTiles { merge: false, tiled_min: 1, wide_min: 1, k_splits: splits, ..FusedTiles::DEFAULT };
        let kernels = Kernels::with_tiles(tiles);
        for (mb, b) in [(17, 17), (65, 63), (129, 65)] {
            for shape in [(17, 63, 10), (65, 17, 2), (784, 300, 16), (129, 257, 1)] {
                for mode in [Mode::Train, Mode::Eval, Mode::Predict] {
                    for act in [None, Some(Activation::Relu), Some(Activation::Tanh)] {
                        // The big shape once per split count.
                        if shape.0 == 784 && (mb, mode, act) != (65, Mode::Train, Some(Activation::Relu)) {
                            continue;
                        }
                        let mut c = Case::new();
                        let ops = forward_then_output(&mut c, shape, act, mode);
                        c.check_with(&kernels, &ops, mb, b, tol(shape.0));
                        let want: [&str; 2] = if mode == Mode::Train {
                            ["linear_forward_tiled (k split)", "output_wide (sums)"]
                        } else {
                            ["linear_forward_tiled", "output_wide"]
                        };
                        assert_eq!(gpu_layers::plan(&ops, &tiles, false, limits, mb), want, "{shape:?} {mode:?} {splits}");
                    }
                }
            }
        }
    }
}

/// The same pair with the forward on the tensor cores (`linear_forward_coop`: products with f16
/// inputs, where the adapter has cooperative matrices; lavapipe has none, and the test says so
/// and checks only that the kernel is refused there). Every input is first rounded to a value
/// f16 holds exactly, so the kernel's own rounding changes nothing, each product of two f16
/// values is exact in f32, and the CPU reference's f32 sums are the reference within the f32
/// tolerance: a wrong fragment, tile, round or split fails by far more. Tiles of 64 x 64,
/// 32 x 32 and 32 x 64, with each way of loading the inputs (`FusedTiles::coop_loads`).
#[test]
fn a_forward_split_over_k_on_the_tensor_cores() {
    let ctx = test_context();
    if !runs_on_this_adapter(KernelId::LinearForwardCoop) {
        return;
    }
    // (splits, rows and columns per workgroup, loads)
    for (splits, coop_m, coop_n, coop_loads) in [(2, 64, 64, 0), (3, 64, 64, 1), (4, 64, 64, 2), (2, 32, 32, 1), (3, 32, 64, 2)] {
        let d = FusedTiles::DEFAULT;
        let tiles = FusedTiles { merge: false, tiled_min: 1, wide_min: 1, k_splits: splits, coop_m, coop_n, coop_loads, ..d };
        let kernels = Kernels::with_options(tiles, gpu_layers::Precision::F16Inputs);
        for (mb, b) in [(17, 17), (65, 63), (129, 65), (256, 96)] {
            for shape in [(17, 63, 10), (65, 17, 2), (784, 300, 16), (129, 257, 1), (784, 1024, 10)] {
                for act in [None, Some(Activation::Relu), Some(Activation::Tanh)] {
                    // The big shapes once per split count and batch.
                    if shape.0 == 784 && act != Some(Activation::Relu) {
                        continue;
                    }
                    let mut c = Case::new();
                    c.f16_inputs = true;
                    let ops = forward_then_output(&mut c, shape, act, Mode::Train);
                    c.check_with(&kernels, &ops, mb, b, tol(shape.0));
                    let mut gpu = GpuStore::new(ctx, &c.tensors, mb).unwrap();
                    let tape = gpu.add_tape(ctx, &kernels, &ops).unwrap();
                    assert_eq!(gpu.dispatch_names(tape), ["linear_forward_coop (k split)", "output_wide (sums)"], "{shape:?} {splits}");
                }
            }
        }
    }
}

#[test]
fn fused_kernels_with_every_tile_size_the_sweep_times() {
    // A short-batch case and MNIST-like widths, for each variant of `gpu-layers --sweep`.
    for (what, tiles) in gpu_layers::sweep_variants().into_iter().skip(1) {
        let kernels = Kernels::with_tiles(tiles);
        for (mb, b) in [(65, 63), (17, 17)] {
            let mut c = Case::new();
            let x = c.tensor("x", Dim::Batch, 129, Elem::F32);
            let p = c.tensor("params", Dim::Fixed(130), 33, Elem::F32);
            let y = c.output("y", Dim::Batch, 33);
            let op = Op::LinearForward { x: c.view(x), params: p, y: c.view(y), act: Some(Activation::Relu), drop: None };
            c.check_with(&kernels, &[op], mb, b, tol(129));

            let mut c = Case::new();
            c.label_range = 10;
            let h = c.tensor("h", Dim::Batch, 65, Elem::F32);
            let params = c.tensor("params", Dim::Fixed(66), 10, Elem::F32);
            let labels = c.tensor("labels", Dim::Batch, 1, Elem::U32);
            let out = c.output("out", Dim::Batch, 10);
            let counters = c.tensor("counters", Dim::Fixed(1), 8, Elem::U32);
            let dh = c.output("dh", Dim::Batch, 65);
            let op = Op::OutputLayer {
                h: c.view(h),
                params,
                labels,
                out: c.view(out),
                dh: Some((c.view(dh), Activation::Relu)),
                drop: None,
                loss: Loss::CrossEntropy,
                counters,
                mode: Mode::Train,
            };
            c.check_with(&kernels, &[op], mb, b, tol(65));

            for opt in [Optimizer::sgd(0.05, 0.9), Optimizer::adam(0.01)] {
                let mut c = Case::new();
                let k = opt.state_per_parameter();
                let mut layer = |n: &str, i: usize, o: usize| LayerUpdate {
                    x: {
                        let t = c.tensor(&format!("x{n}"), Dim::Batch, i, Elem::F32);
                        c.view(t)
                    },
                    dy: {
                        let t = c.tensor(&format!("dy{n}"), Dim::Batch, o, Elem::F32);
                        c.view(t)
                    },
                    params: c.tensor(&format!("params{n}"), Dim::Fixed(i + 1), o, Elem::F32),
                    grads: c.output(&format!("grads{n}"), Dim::Fixed(i + 1), o),
                    state: c.tensor(state_name(opt), Dim::Fixed(k * (i + 1)), o, Elem::F32),
                };
                let first = layer("1", 70, 33);
                let second = Some(layer("2", 33, 10));
                let counters = c.tensor("counters", Dim::Fixed(1), 8, Elem::U32);
                c.check_with(&kernels, &[Op::LinearUpdate { first, second, third: None, counters, opt }], mb, b, tol(b));
            }
            let mut c = Case::new();
            let ops = forward_then_output(&mut c, (129, 100, 10), Some(Activation::Relu), Mode::Train);
            let dispatches = c.check_with(&kernels, &ops, mb, b, tol(129));
            let merged = tiles.merges(100, 10, false, &test_context().limits);
            assert_eq!(dispatches, if merged { 1 } else { 2 }, "{what}");

            eprintln!("{what}: ok");
        }
    }
}

// ---- dropout fused into the layer kernels ----------------------------------------------------

/// A fused dropout with probability `p` whose mask step is read from `counters`.
fn fused_dropout(counters: TensorId, p: f32) -> Option<FusedDropout> {
    Some(FusedDropout { p, seed: 0x5eed_0017 ^ p.to_bits(), counters })
}

/// `ops` with a fused dropout `p` after their hidden layer: on the `LinearForward` that writes
/// it and on the training `OutputLayer` that backpropagates through it.
fn with_dropout(mut ops: [Op; 2], p: f32) -> [Op; 2] {
    let Op::OutputLayer { counters, .. } = ops[1] else { panic!("an output layer second") };
    for op in ops.iter_mut() {
        match op {
            Op::LinearForward { drop, .. } | Op::OutputLayer { drop, .. } => *drop = fused_dropout(counters, p),
            _ => {}
        }
    }
    ops
}

/// `linear_forward` (and `linear_forward_tiled`, forced onto every shape) with a dropout after
/// its activation: the kernel draws the same mask as the CPU, from the mask step (5 here, the
/// step count 3), so the outputs agree as without dropout, and about `p` of them are 0.
#[test]
fn linear_forward_with_a_fused_dropout() {
    let tiled = Kernels::with_tiles(FusedTiles { tiled_min: 1, ..FusedTiles::DEFAULT });
    for (kernels, name) in [(kernels(), "linear_forward"), (&tiled, "linear_forward_tiled")] {
        for (mb, b) in BATCHES {
            for (i, o) in [(1, 1), (17, 63), (65, 17), (784, 33)] {
                for act in [Activation::Relu, Activation::Tanh, Activation::Sigmoid] {
                    for p in [0.2, 0.5] {
                        let (mut c, mut op) = linear_forward_case(i, o, Some(act));
                        let counters = c.tensor("counters", Dim::Fixed(1), 8, Elem::U32);
                        if let Op::LinearForward { drop, .. } = &mut op {
                            *drop = fused_dropout(counters, p);
                        }
                        c.check_with(kernels, std::slice::from_ref(&op), mb, b, tol(i));
                        let names = gpu_layers::plan(&[op], &kernels.tiles(), false, &test_context().limits, mb);
                        assert_eq!(names, [name]);
                    }
                }
            }
        }
    }
    // The mask is the composed tape's (`Op::Dropout`'s) for the same seed, step and element.
    let d = FusedDropout { p: 0.3, seed: 99, counters: TensorId(0) };
    let x: Vec<f32> = (0..500).map(|i| 1.0 + i as f32).collect();
    let (mut y, mut mask) = (vec![0.0; 500], vec![0.0; 500]);
    let scale = 1.0 / (1.0 - 0.3f32);
    gpu_layers::cpu::reference::dropout_forward(&x, &mut y, &mut mask, 99, 4, d.threshold(), scale);
    let mut fused = x.clone();
    gpu_layers::cpu::reference::fused_dropout_forward(&mut fused, &d, 4);
    assert_eq!(fused, y);
    let dropped = fused.iter().filter(|&&v| v == 0.0).count();
    assert!((100..200).contains(&dropped), "{dropped} of 500 dropped at p = 0.3");
}

/// `linear_backward_input` through the dropout of h: the mask drawn again, the activation's
/// derivative at `stored * (1 - p)`.
#[test]
fn linear_backward_input_through_a_fused_dropout() {
    for (mb, b) in BATCHES {
        for (i, o) in [(1, 1), (17, 63), (65, 17), (129, 257)] {
            for act in [Activation::Relu, Activation::Tanh, Activation::Sigmoid] {
                let mut c = Case::new();
                let dy = c.tensor("dy", Dim::Batch, o, Elem::F32);
                let p = c.tensor("params", Dim::Fixed(i + 1), o, Elem::F32);
                let h = c.tensor("h", Dim::Batch, i, Elem::F32);
                let dx = c.output("dx", Dim::Batch, i);
                let counters = c.tensor("counters", Dim::Fixed(1), 8, Elem::U32);
                let drop = fused_dropout(counters, 0.25);
                let op = Op::LinearBackwardInput { dy: c.view(dy), params: p, h: c.view(h), act, dx: c.view(dx), drop };
                c.check(&[op], mb, b, tol(o));
            }
        }
    }
}

/// The output layers' dh through the dropout of h: `output_layer` and `output_wide` (forced
/// onto the narrow shapes too), and a hidden layer and the output layer with a dropout between
/// them merged into `forward_output`, or split over k into `linear_forward_tiled` and
/// `output_wide`'s sums.
#[test]
fn output_layers_and_merged_pairs_through_a_fused_dropout() {
    let limits = &test_context().limits;
    let wide = Kernels::with_tiles(FusedTiles { wide_min: 1, ..FusedTiles::DEFAULT });
    for (mb, b) in BATCHES {
        for (i, classes) in [(1, 2), (17, 10), (65, 16), (129, 3)] {
            for act in [Activation::Relu, Activation::Tanh] {
                for (kernels, name) in [(kernels(), "output_layer"), (&wide, "output_wide")] {
                    let (c, mut op) = output_layer_case(i, classes, classes as u32, Mode::Train, Some(act));
                    let Op::OutputLayer { counters, .. } = op else { unreachable!() };
                    if let Op::OutputLayer { drop, .. } = &mut op {
                        *drop = fused_dropout(counters, 0.4);
                    }
                    c.check_with(kernels, std::slice::from_ref(&op), mb, b, tol(i));
                    assert_eq!(gpu_layers::plan(&[op], &kernels.tiles(), false, limits, mb), [name]);
                }
            }
        }
        for shape in [(17, 63, 10), (65, 128, 17), (784, 128, 10), (63, 17, 3)] {
            for act in [Activation::Relu, Activation::Tanh, Activation::Sigmoid] {
                let mut c = Case::new();
                let ops = with_dropout(forward_then_output(&mut c, shape, Some(act), Mode::Train), 0.2);
                let dispatches = c.check_with(kernels(), &ops, mb, b, tol(shape.0.max(shape.1)));
                assert_eq!(dispatches, 1, "{shape:?} {act:?}: merged with its dropout");
            }
        }
    }
    let tiles = FusedTiles { merge: false, tiled_min: 1, wide_min: 1, k_splits: 3, ..FusedTiles::DEFAULT };
    let split = Kernels::with_tiles(tiles);
    for (mb, b) in [(17, 17), (65, 63)] {
        for shape in [(17, 63, 10), (129, 257, 1)] {
            let mut c = Case::new();
            let ops = with_dropout(forward_then_output(&mut c, shape, Some(Activation::Relu), Mode::Train), 0.5);
            c.check_with(&split, &ops, mb, b, tol(shape.0));
            let want = ["linear_forward_tiled (k split)", "output_wide (sums)"];
            assert_eq!(gpu_layers::plan(&ops, &tiles, false, limits, mb), want, "{shape:?}");
        }
    }
}

/// The fused output layers with mean squared error instead of softmax cross-entropy, in every
/// mode: `output_layer`, `output_wide` (forced onto narrow shapes), `forward_output` merged, and
/// dh through a dropout; labels one past the classes, so some rows have a bad one.
#[test]
fn output_layers_with_mean_squared_error() {
    let wide = Kernels::with_tiles(FusedTiles { wide_min: 1, ..FusedTiles::DEFAULT });
    let mse = |mut op: Op| {
        if let Op::OutputLayer { loss, .. } = &mut op {
            *loss = Loss::Mse;
        }
        op
    };
    for (mb, b) in BATCHES {
        for mode in [Mode::Train, Mode::Eval, Mode::Predict] {
            for (i, classes) in [(1, 2), (17, 10), (65, 16), (129, 3)] {
                for (kernels, name) in [(kernels(), "output_layer"), (&wide, "output_wide")] {
                    let (c, op) = output_layer_case(i, classes, classes as u32 + 1, mode, Some(Activation::Tanh));
                    let op = mse(op);
                    c.check_with(kernels, std::slice::from_ref(&op), mb, b, tol(i));
                    assert_eq!(gpu_layers::plan(&[op], &kernels.tiles(), false, &test_context().limits, mb), [name]);
                }
            }
            for shape in [(17, 63, 10), (63, 17, 3)] {
                let mut c = Case::new();
                let [f, o] = forward_then_output(&mut c, shape, Some(Activation::Relu), mode);
                let ops = [f, mse(o)];
                let ops = if mode == Mode::Train { with_dropout(ops, 0.3) } else { ops };
                assert_eq!(c.check_with(kernels(), &ops, mb, b, tol(shape.0.max(shape.1))), 1, "{shape:?} merged");
            }
        }
    }
}
