// linear_backward_input.wgsl: dx = (dy W^T) * act'(h), matmul and activation backward fused.
//
// dy: [batch, out] (dL/d pre-activation of this layer), params: [(in + 1), out] (only W is
// read), h: [batch, in] (the forward output of the layer below, whose activation is `act`)
// -> dx: [batch, in] (dL/d pre-activation of the layer below). Used between two hidden layers;
// one invocation per element of dx, each a dot product of a dy row and a W row.

// `p` is the layer's LinearParams (common.wgsl).
@group(0) @binding(0) var<storage, read> dy: array<f32>;
@group(0) @binding(1) var<storage, read> params: array<f32>;
@group(0) @binding(2) var<storage, read> h: array<f32>;
@group(0) @binding(3) var<storage, read_write> dx: array<f32>;
@group(0) @binding(4) var<uniform> batch: Batch;
@group(0) @binding(5) var<uniform> p: LinearParams;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if i >= batch.rows * p.inputs {
        return;
    }
    let row = i / p.inputs;
    let k = i % p.inputs;
    var g = 0.0;
    for (var j = 0u; j < p.outputs; j++) {
        g += dy[row * p.outputs + j] * params[k * p.outputs + j];
    }
    dx[i] = g * activate_grad(h[i], p.act);
}
