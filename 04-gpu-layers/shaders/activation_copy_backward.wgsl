// activation_copy_backward.wgsl: dy = dy * act'(x), in place, for the live rows, with the
// activation's INPUT x (see activation_copy_forward.wgsl for why the input).
//
// dy: [batch, cols] arrives as dL/d(output of the activation) and leaves as
// dL/d(input of the activation); x: [batch, cols] is the activation's forward input.

struct ActivationParams {
    cols: u32,
    act: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read_write> dy: array<f32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<uniform> batch: Batch;
@group(0) @binding(3) var<uniform> p: ActivationParams;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if i >= batch.rows * p.cols {
        return;
    }
    dy[i] = dy[i] * activate_grad_from_input(x[i], p.act);
}
