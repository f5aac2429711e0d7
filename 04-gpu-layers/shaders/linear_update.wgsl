// linear_update.wgsl: a layer's parameter gradient AND its optimizer step in ONE dispatch.
//
// x: [batch, in] (the layer's input), dy: [batch, out] (dL/d its pre-activation) ->
// grads: [(in + 1), out] = [x | 1]^T dy, i.e. dW = x^T dy and db = column sums of dy (the bias
// is the weight of a constant-1 input, the last row of params); then params and the optimizer
// state move by SGD or Adam (common.wgsl). One invocation per parameter: it sums its gradient
// over the batch (consecutive invocations read consecutive dy values and the same x value) and
// updates its parameter at once, so the gradient never has to be read back from memory by a
// second kernel. It is still written to `grads`, for tests and for the curious.

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read_write> params: array<f32>;
@group(0) @binding(3) var<storage, read_write> grads: array<f32>;
@group(0) @binding(4) var<storage, read_write> state: array<f32>;
@group(0) @binding(5) var<storage, read> counters: array<u32>;
@group(0) @binding(6) var<uniform> batch: Batch;
@group(0) @binding(7) var<uniform> o: Opt;

const WG: u32 = 256u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if i >= o.count {
        return;
    }
    let n = o.outputs;
    let k = i / n;
    let j = i % n;
    var g = 0.0;
    if k < o.inputs {
        for (var r = 0u; r < batch.rows; r++) {
            g += x[r * o.inputs + k] * dy[r * n + j];
        }
    } else {
        for (var r = 0u; r < batch.rows; r++) {
            g += dy[r * n + j];
        }
    }
    grads[i] = g;
    var moved: Moved;
    if o.kind == OPT_SGD {
        moved = sgd_step(o, params[i], g, state[i]);
        state[i] = moved.s0;
    } else {
        moved = adam_step(o, counters[COUNTER_STEP], params[i], g, state[i], state[o.count + i]);
        state[i] = moved.s0;
        state[o.count + i] = moved.s1;
    }
    params[i] = moved.param;
}
