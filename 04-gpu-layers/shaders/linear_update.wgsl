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
// another; here each round costs one memory latency. Putting both layers in one dispatch saves
// a dispatch (and its barrier) per training step.

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
@group(0) @binding(5) var<storage, read> x_b: array<f32>;
@group(0) @binding(6) var<storage, read> dy_b: array<f32>;
@group(0) @binding(7) var<storage, read_write> params_b: array<f32>;
@group(0) @binding(8) var<storage, read_write> grads_b: array<f32>;
@group(0) @binding(9) var<storage, read_write> state_b: array<f32>;
@group(0) @binding(10) var<storage, read> counters: array<u32>;
@group(0) @binding(11) var<uniform> batch: Batch;
@group(0) @binding(12) var<uniform> u: Update;

const T: u32 = 32u; // parameters per tile side
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

// One parameter: record its gradient and move it (and its optimizer state).
fn step(is_b: bool, shape: LayerShape, k: u32, j: u32, g: f32) {
    if k > shape.inputs || j >= shape.outputs {
        return;
    }
    let count = (shape.inputs + 1u) * shape.outputs;
    let i = k * shape.outputs + j;
    if is_b {
        grads_b[i] = g;
        if u.opt.kind == OPT_SGD {
            let moved = sgd_step(u.opt, params_b[i], g, state_b[i]);
            params_b[i] = moved.param;
            state_b[i] = moved.s0;
        } else {
            let moved = adam_step(u.opt, counters[COUNTER_STEP], params_b[i], g, state_b[i], state_b[count + i]);
            params_b[i] = moved.param;
            state_b[i] = moved.s0;
            state_b[count + i] = moved.s1;
        }
    } else {
        grads_a[i] = g;
        if u.opt.kind == OPT_SGD {
            let moved = sgd_step(u.opt, params_a[i], g, state_a[i]);
            params_a[i] = moved.param;
            state_a[i] = moved.s0;
        } else {
            let moved = adam_step(u.opt, counters[COUNTER_STEP], params_a[i], g, state_a[i], state_a[count + i]);
            params_a[i] = moved.param;
            state_a[i] = moved.s0;
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
    let k_len = shape.inputs;
    let n = shape.outputs;
    let k0 = (tile / shape.tiles_n) * T;
    let j0 = (tile % shape.tiles_n) * T;
    let rows = batch.rows;

    var acc = vec4<f32>(0.0); // (k, j), (k, j + 16), (k + 16, j), (k + 16, j + 16)
    for (var r0 = 0u; r0 < rows; r0 += R) {
        // Stage R rows: 1024 values of x and of dy, 4 of each per invocation. Row `in` of the
        // augmented input is the constant 1 that multiplies the bias; rows past the batch are 0.
        for (var e = 0u; e < 4u; e++) {
            let idx = li + 256u * e;
            let rr = idx / T;
            let cc = idx % T;
            let row = r0 + rr;
            var xv = 0.0;
            var dv = 0.0;
            if row < rows {
                let k = k0 + cc;
                if k < k_len {
                    xv = load_x(is_b, row * k_len + k);
                } else if k == k_len {
                    xv = 1.0;
                }
                let j = j0 + cc;
                if j < n {
                    dv = load_dy(is_b, row * n + j);
                }
            }
            xs[idx] = xv;
            ds[idx] = dv;
        }
        workgroupBarrier();
        for (var rr = 0u; rr < R; rr++) {
            let xa = xs[rr * T + lid.y];
            let xb = xs[rr * T + lid.y + 16u];
            let da = ds[rr * T + lid.x];
            let db = ds[rr * T + lid.x + 16u];
            acc += vec4<f32>(xa * da, xa * db, xb * da, xb * db);
        }
        workgroupBarrier();
    }
    step(is_b, shape, k0 + lid.y, j0 + lid.x, acc.x);
    step(is_b, shape, k0 + lid.y, j0 + lid.x + 16u, acc.y);
    step(is_b, shape, k0 + lid.y + 16u, j0 + lid.x, acc.z);
    step(is_b, shape, k0 + lid.y + 16u, j0 + lid.x + 16u, acc.w);
}
