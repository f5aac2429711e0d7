// common.wgsl: the pieces every kernel of this stage shares. The Rust side prepends this file to
// each kernel's source (WGSL has no #include), so the activation and optimizer formulas are
// written once for all kernels, like their CPU twins in src/cpu.rs.
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

// Activations are ACT_NONE (the output layer), ACT_RELU or ACT_TANH (Activation::code in Rust).

// Both activations let NaN through (max(NaN, 0) may return 0 on some GPUs and would hide a
// broken input), so a NaN anywhere reaches the loss, where take_metrics reports it.
fn activate(z: f32, act: u32) -> f32 {
    if act == ACT_RELU {
        return select(z, 0.0, z < 0.0);
    }
    if act == ACT_TANH {
        // tanh(15) rounds to 1.0 in f32 anyway; answering +-1 there keeps drivers that compute
        // tanh as (e^2z - 1) / (e^2z + 1) away from inf / inf = NaN.
        return select(tanh(z), sign(z), abs(z) > 15.0);
    }
    return z;
}

// The derivative written with the activation's OUTPUT y, so the backward pass needs no copy of
// the pre-activation: relu' = [y > 0], tanh' = 1 - y^2.
fn activate_grad(y: f32, act: u32) -> f32 {
    if act == ACT_RELU {
        return select(0.0, 1.0, y > 0.0);
    }
    if act == ACT_TANH {
        return 1.0 - y * y;
    }
    return 1.0;
}

// Optimizer hyperparameters (wgsl::Opt on the Rust side), `kind` OPT_SGD or OPT_ADAM. `count` is the number of parameters
// the dispatch updates: the state buffer holds `count` velocities (SGD) or `count` first moments
// followed by `count` second moments (Adam). `inputs`/`outputs` give the layer's shape for the
// fused linear_update kernel (count = (inputs + 1) * outputs there).
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

// Adam with bias correction. `t` is the step number (1 for the first step); it is counted on the
// GPU (counters[COUNTER_STEP]), so a command buffer can hold many steps with no CPU work between.
fn adam_step(o: Opt, t: u32, param: f32, grad: f32, m0: f32, v0: f32) -> Moved {
    let m = o.beta1 * m0 + (1.0 - o.beta1) * grad;
    let v = o.beta2 * v0 + (1.0 - o.beta2) * grad * grad;
    let tf = f32(max(t, 1u));
    let m_hat = m / (1.0 - pow(o.beta1, tf));
    let v_hat = v / (1.0 - pow(o.beta2, tf));
    return Moved(param - o.lr * m_hat / (sqrt(v_hat) + o.eps), m, v);
}

// The counters buffer (see metrics in softmax_row.wgsl), indexed by the COUNTER_* constants:
//   [loss low word, loss high word, rows, correct, bad labels, non-finite losses, step, 0].
// The loss sum is a 64-bit fixed-point number in units of 2^-20, added with integer atomics.
