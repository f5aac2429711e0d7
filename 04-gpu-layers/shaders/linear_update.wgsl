// linear_update.wgsl: the parameter gradients AND the optimizer step of up to TWO layers in ONE
// dispatch.
//
// For each layer: x: [batch, in] (its input), dy: [batch, out] (dL/d its pre-activation) ->
// grads: [(in + 1), out] = [x | 1]^T dy, i.e. dW = x^T dy and db = the column sums of dy (the
// bias is the weight of a constant-1 input: the last row of params); then params and the
// optimizer state move by SGD or Adam (common.wgsl). The gradient is also written to `grads`.
//
// Each workgroup owns a T x T tile of one layer's parameters (workgroups 0..b.first_group are
// layer a's tiles, the rest layer b's). The batch is the reduction dimension: R rows of x and dy
// at a time are staged in workgroup memory by all 256 invocations at once (one round of loads,
// coalesced along k and j), and each invocation then sums its 2 x 2 parameters from there.
// A thread that looped over the batch reading global memory would wait for ~64 loads one after
// another; here the loads of the next round fly while the current one is multiplied. Putting
// both layers in one dispatch saves a dispatch (and its barrier) per training step, where the
// device allows the 11 storage buffers that takes.

struct LayerShape {
    inputs: u32,
    outputs: u32,
    tiles_n: u32,     // tiles along the outputs
    first_group: u32, // first workgroup of this layer
}

struct Update {
    opt: Opt,
    a: LayerShape,
    b: LayerShape,
}

@group(0) @binding(0) var<storage, read> x_a: array<f32>;
@group(0) @binding(1) var<storage, read> dy_a: array<f32>;
@group(0) @binding(2) var<storage, read_write> params_a: array<f32>;
@group(0) @binding(3) var<storage, read_write> grads_a: array<f32>;
@group(0) @binding(4) var<storage, read_write> state_a: array<f32>;
// Bindings 5-9, layer b's x_b, dy_b, params_b, grads_b and state_b, are in
// linear_update_b.wgsl, or, on devices that allow fewer than 11 storage buffers per shader stage
// (WebGPU's default is 8), stand-ins in linear_update_b_unbound.wgsl: one layer per dispatch.
@group(0) @binding(10) var<storage, read> counters: array<u32>;
@group(0) @binding(11) var<uniform> batch: Batch;
@group(0) @binding(12) var<uniform> u: Update;

// T, the parameters per tile side, comes from the prelude (the host sizes the grid with it).
const R: u32 = 32u; // batch rows staged per round

var<workgroup> xs: array<f32, 1024>; // [R][T]: x rows, k0..k0+T
var<workgroup> ds: array<f32, 1024>; // [R][T]: dy rows, j0..j0+T

// WGSL cannot pass a buffer to a function, so the two layers' buffers are picked here. `is_b`
// is the same for the whole workgroup, so these branches never diverge.
fn load_x(is_b: bool, i: u32) -> f32 {
    if is_b {
        return x_b[i];
    }
    return x_a[i];
}

fn load_dy(is_b: bool, i: u32) -> f32 {
    if is_b {
        return dy_b[i];
    }
    return dy_a[i];
}

// The values one invocation stages for one round of R rows: 4 of x and 4 of dy. Row `in` of the
// augmented input is the constant 1 that multiplies the bias; rows past the batch are 0.
struct Staged {
    x: vec4<f32>,
    dy: vec4<f32>,
}

fn fetch(is_b: bool, shape: LayerShape, k0: u32, j0: u32, li: u32, r0: u32) -> Staged {
    var out = Staged(vec4<f32>(0.0), vec4<f32>(0.0));
    for (var e = 0u; e < 4u; e++) {
        let idx = li + 256u * e;
        let row = r0 + idx / T;
        let cc = idx % T;
        if row < batch.rows {
            let k = k0 + cc;
            if k < shape.inputs {
                out.x[e] = load_x(is_b, row * shape.inputs + k);
            } else if k == shape.inputs {
                out.x[e] = 1.0;
            }
            let j = j0 + cc;
            if j < shape.outputs {
                out.dy[e] = load_dy(is_b, row * shape.outputs + j);
            }
        }
    }
    return out;
}

// A parameter with its optimizer state, read before its gradient is known.
struct Param {
    value: f32,
    s0: f32,
    s1: f32,
}

fn load_param(is_b: bool, shape: LayerShape, k: u32, j: u32) -> Param {
    var p = Param(0.0, 0.0, 0.0);
    if k > shape.inputs || j >= shape.outputs {
        return p;
    }
    let count = (shape.inputs + 1u) * shape.outputs;
    let i = k * shape.outputs + j;
    let adam = u.opt.kind == OPT_ADAM;
    if is_b {
        p.value = params_b[i];
        p.s0 = state_b[i];
        if adam {
            p.s1 = state_b[count + i];
        }
    } else {
        p.value = params_a[i];
        p.s0 = state_a[i];
        if adam {
            p.s1 = state_a[count + i];
        }
    }
    return p;
}

// One parameter: record its gradient and move it (and its optimizer state).
fn step(is_b: bool, shape: LayerShape, k: u32, j: u32, p: Param, g: f32) {
    if k > shape.inputs || j >= shape.outputs {
        return;
    }
    let count = (shape.inputs + 1u) * shape.outputs;
    let i = k * shape.outputs + j;
    var moved: Moved;
    if u.opt.kind == OPT_SGD {
        moved = sgd_step(u.opt, p.value, g, p.s0);
    } else {
        moved = adam_step(u.opt, counters[COUNTER_STEP], p.value, g, p.s0, p.s1);
    }
    if is_b {
        grads_b[i] = g;
        params_b[i] = moved.param;
        state_b[i] = moved.s0;
        if u.opt.kind == OPT_ADAM {
            state_b[count + i] = moved.s1;
        }
    } else {
        grads_a[i] = g;
        params_a[i] = moved.param;
        state_a[i] = moved.s0;
        if u.opt.kind == OPT_ADAM {
            state_a[count + i] = moved.s1;
        }
    }
}

@compute @workgroup_size(16, 16)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let is_b = wid.x >= u.b.first_group;
    var shape = u.a;
    if is_b {
        shape = u.b;
    }
    let tile = wid.x - shape.first_group;
    let k0 = (tile / shape.tiles_n) * T;
    let j0 = (tile % shape.tiles_n) * T;
    let ka = k0 + lid.y;
    let kb = ka + 16u;
    let ja = j0 + lid.x;
    let jb = ja + 16u;

    // Every load is issued as early as possible, because each one waits a full memory latency:
    // the parameters and optimizer state now (they do not depend on the gradient), and each
    // round of rows while the previous round is being multiplied (double buffering).
    let p00 = load_param(is_b, shape, ka, ja);
    let p01 = load_param(is_b, shape, ka, jb);
    let p10 = load_param(is_b, shape, kb, ja);
    let p11 = load_param(is_b, shape, kb, jb);
    var next = fetch(is_b, shape, k0, j0, li, 0u);

    var acc = vec4<f32>(0.0); // (ka, ja), (ka, jb), (kb, ja), (kb, jb)
    for (var r0 = 0u; r0 < batch.rows; r0 += R) {
        for (var e = 0u; e < 4u; e++) {
            xs[li + 256u * e] = next.x[e];
            ds[li + 256u * e] = next.dy[e];
        }
        workgroupBarrier();
        if r0 + R < batch.rows {
            next = fetch(is_b, shape, k0, j0, li, r0 + R);
        }
        for (var rr = 0u; rr < R; rr++) {
            let xa = xs[rr * T + lid.y];
            let xb = xs[rr * T + lid.y + 16u];
            let da = ds[rr * T + lid.x];
            let db = ds[rr * T + lid.x + 16u];
            acc += vec4<f32>(xa * da, xa * db, xb * da, xb * db);
        }
        workgroupBarrier();
    }
    step(is_b, shape, ka, ja, p00, acc.x);
    step(is_b, shape, ka, jb, p01, acc.y);
    step(is_b, shape, kb, ja, p10, acc.z);
    step(is_b, shape, kb, jb, p11, acc.w);
}
