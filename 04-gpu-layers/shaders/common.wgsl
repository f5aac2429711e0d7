// common.wgsl: the pieces every kernel of this stage shares. The Rust side prepends this file to
// each kernel's source (WGSL has no #include), so the activation and optimizer formulas are
// written once for all kernels, like their CPU references in src/cpu/reference.rs.
//
// Before this file comes a prelude that src/wgsl.rs generates from the Rust definitions: the
// workgroup sizes the host divides by (WG, ROW_WG, and each kernel's tile), MAX_CLASSES, and the
// ACT_*, OPT_*, MODE_* and COUNTER_* codes. They are defined there once, never here.

// The live batch size, one uniform buffer shared by every dispatch of a network. Buffers are
// sized for the largest batch; a smaller last batch only rewrites this uniform (no new buffers),
// and kernels skip rows at or past `rows`.
struct Batch {
    rows: u32,
    // 1 / rows: the loss is a mean over the batch, so each row's gradient is scaled by it.
    inv_rows: f32,
    _pad0: u32,
    _pad1: u32,
}

// A linear layer's shape and activation, the uniform of linear_forward, linear_forward_tiled and
// linear_backward_input (`act` is the activation after the layer in the forward kernels, the
// activation of `h` in the backward one).
struct LinearParams {
    inputs: u32,
    outputs: u32,
    act: u32,
    // linear_forward_tiled only: > 1 when its k loop is split over that many workgroups
    // (wid.z), each writing its raw partial sums (no bias, no activation) for output_wide.wgsl.
    k_split: u32,
    // The dropout of this layer's output (forward kernels) or of h (the backward one).
    drop: DropoutMask,
}

// Activations are ACT_NONE (the output layer), ACT_RELU, ACT_TANH, ACT_SIGMOID or ACT_GELU
// (Activation::code in Rust, written into the prelude by src/wgsl.rs).

// GELU's tanh form: 0.5 z (1 + tanh(K0 (z + K1 z^3))), K0 = sqrt(2 / pi) (WGSL has no erf).
const GELU_K0: f32 = 0.7978846;
const GELU_K1: f32 = 0.044715;

// tanh(15) rounds to 1.0 in f32 anyway; answering +-1 there keeps drivers that compute tanh as
// (e^2z - 1) / (e^2z + 1) away from inf / inf = NaN.
fn guarded_tanh(z: f32) -> f32 {
    return select(tanh(z), sign(z), abs(z) > 15.0);
}

// ReLU is written to let NaN through (max(NaN, 0) may return 0 on some GPUs and would hide a
// broken input), but WGSL lets a compiler assume floats are finite and rewrite it: on lavapipe
// on an Intel Xeon build machine, a NaN input of a ReLU network did not reach the loss. So the
// trainers refuse non-finite inputs on the host (`Network::check_finite_input`).
fn activate(z: f32, act: u32) -> f32 {
    if act == ACT_RELU {
        return select(z, 0.0, z < 0.0);
    }
    if act == ACT_TANH {
        return guarded_tanh(z);
    }
    if act == ACT_SIGMOID {
        return 1.0 / (1.0 + exp(-z));
    }
    if act == ACT_GELU {
        return 0.5 * z * (1.0 + guarded_tanh(GELU_K0 * (z + GELU_K1 * z * z * z)));
    }
    return z;
}

// The derivative written with the activation's OUTPUT y, so the backward pass needs no copy of
// the pre-activation: relu' = [y > 0], tanh' = 1 - y^2, sigmoid' = y (1 - y). GELU has no such
// form (it is not monotonic); the Rust side never asks for it (it uses the input form below).
fn activate_grad(y: f32, act: u32) -> f32 {
    if act == ACT_RELU {
        return select(0.0, 1.0, y > 0.0);
    }
    if act == ACT_TANH {
        return 1.0 - y * y;
    }
    if act == ACT_SIGMOID {
        return y * (1.0 - y);
    }
    return 1.0;
}

// The derivative written with the activation's INPUT z, for the out-of-place kernels
// (activation_copy_*.wgsl), which keep z: GELU needs it.
fn activate_grad_from_input(z: f32, act: u32) -> f32 {
    if act == ACT_RELU {
        return select(0.0, 1.0, z > 0.0);
    }
    if act == ACT_TANH {
        let t = guarded_tanh(z);
        return 1.0 - t * t;
    }
    if act == ACT_SIGMOID {
        let s = 1.0 / (1.0 + exp(-z));
        return s * (1.0 - s);
    }
    if act == ACT_GELU {
        // 0.5 (1 + tanh u) + 0.5 z (1 - tanh^2 u) u'(z); past |u| = 15 the second term is 0
        // (and z^2 could overflow), so it is left out there.
        let u = GELU_K0 * (z + GELU_K1 * z * z * z);
        let t = guarded_tanh(u);
        let tail = select(0.0, 0.5 * z * (1.0 - t * t) * GELU_K0 * (1.0 + 3.0 * GELU_K1 * z * z), abs(u) <= 15.0);
        return 0.5 * (1.0 + t) + tail;
    }
    return 1.0;
}

// Dropout fused into the kernel that writes a hidden layer's output (DropoutMask in src/wgsl.rs):
// inverted dropout drawn from the same counter-based hash as dropout_forward.wgsl, so the fused
// and the composed tapes drop the same units. `threshold` = floor(p * 2^32) (0: no dropout, then
// `scale` and `keep` are 1 and every helper below returns its input unchanged), `scale` =
// 1 / (1 - p), `keep` = 1 - p. The mask is never stored: the forward draws it, and the backward
// draws it again from the same (seed, step, element index), the step being
// counters[COUNTER_MASK_STEP], which only the weight updates write (the step count at the end of
// a step), so no kernel reads it while another changes it.
struct DropoutMask {
    seed: u32,
    threshold: u32,
    scale: f32,
    keep: f32,
}

// The PCG hash (Jarzynski and Olano, "Hash Functions for GPU Rendering", JCGT 2020): a
// permutation of u32 with good avalanche. u32 arithmetic wraps in WGSL, as wrapping_* in Rust.
fn pcg_hash(v: u32) -> u32 {
    let state = v * 747796405u + 2891336453u;
    let word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
    return (word >> 22u) ^ word;
}

fn dropout_hash(seed: u32, step: u32, index: u32) -> u32 {
    return pcg_hash(index + pcg_hash(step + pcg_hash(seed)));
}

// ANCHOR: dropout
// The mask of element `index` (row * cols + col of the layer's output): 0 or d.scale, 1 without
// dropout.
fn mask_value(d: DropoutMask, step: u32, index: u32) -> f32 {
    if d.threshold == 0u {
        return 1.0;
    }
    return select(0.0, d.scale, dropout_hash(d.seed, step, index) >= d.threshold);
}

// dL/d(pre-activation) of a unit whose dropped-out output `stored` the forward wrote, given
// g = dL/d(that output): g * act'(y) * mask, with y = stored * keep the activation's output
// before the mask (exact for ReLU, within a rounding of y otherwise; a dropped unit's y is 0 and
// its mask 0).
fn dropout_grad(g: f32, stored: f32, act: u32, d: DropoutMask, step: u32, index: u32) -> f32 {
    return g * activate_grad(stored * d.keep, act) * mask_value(d, step, index);
}
// ANCHOR_END: dropout

// Optimizer hyperparameters (wgsl::Opt on the Rust side), `kind` OPT_SGD or OPT_ADAM. `count` is the number of parameters
// the dispatch updates: the state buffer holds `count` velocities (SGD) or `count` first moments
// followed by `count` second moments (Adam). `inputs`/`outputs` give the layer's shape for the
// fused linear_update kernel (count = (inputs + 1) * outputs there). `keep_grads` 1: the fused
// updates also write each gradient to `grads`, for the host to read (GpuTrainer::keep_gradients);
// 0: they use it and drop it (the optimizers of the composed tape always read it from there).
struct Opt {
    count: u32,
    inputs: u32,
    outputs: u32,
    kind: u32,
    lr: f32,
    // SGD: momentum. Adam: beta1.
    beta1: f32,
    beta2: f32,
    eps: f32,
    keep_grads: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

// One parameter after one step, with its new state.
struct Moved {
    param: f32,
    s0: f32,
    s1: f32,
}

// SGD with momentum, PyTorch's form: v = mu v + g; p -= lr v.
fn sgd_step(o: Opt, param: f32, grad: f32, velocity: f32) -> Moved {
    let v = o.beta1 * velocity + grad;
    return Moved(param - o.lr * v, v, 0.0);
}

// Adam's step size and epsilon at step `t` (1 for the first step) with its two bias corrections
// folded in, the same for every parameter of a step, so each kernel computes them once:
//   lr m_hat / (sqrt(v_hat) + eps) = lr_t m / (sqrt(v) + eps_t),
//   m_hat = m / c1, v_hat = v / c2, c = 1 - beta^t, lr_t = lr sqrt(c2) / c1, eps_t = eps sqrt(c2).
// `t` is counted on the GPU (counters[COUNTER_STEP]), so a command buffer can hold many steps
// with no CPU work between.
struct AdamScale {
    lr: f32,
    eps: f32,
}

fn adam_scale(o: Opt, t: u32) -> AdamScale {
    let tf = f32(max(t, 1u));
    let root_c2 = sqrt(1.0 - pow(o.beta2, tf));
    return AdamScale(o.lr * root_c2 / (1.0 - pow(o.beta1, tf)), o.eps * root_c2);
}

// Adam with bias correction (`s`: adam_scale of this step).
fn adam_step(o: Opt, s: AdamScale, param: f32, grad: f32, m0: f32, v0: f32) -> Moved {
    let m = o.beta1 * m0 + (1.0 - o.beta1) * grad;
    let v = o.beta2 * v0 + (1.0 - o.beta2) * grad * grad;
    return Moved(param - s.lr * m / (sqrt(v) + s.eps), m, v);
}

// The counters buffer (see metrics in softmax_row.wgsl), indexed by the COUNTER_* constants:
//   [loss low word, loss high word, rows, correct, bad labels, non-finite losses, step,
//    the step the fused dropout masks are drawn for].
// The loss sum is a 64-bit fixed-point number in units of 2^-20, added with integer atomics.

// Where batch s of an epoch starts in a gathering source's `order`, its rows, and the
// normalization `x = pixel * scale + shift` (forward_input_gather.wgsl, linear_update_next.wgsl).
struct GatherSlot {
    first: u32, // index into `order` of the batch's first row
    count: u32, // rows in this batch (the host also sets the batch uniform to it)
    scale: f32,
    shift: f32,
}
