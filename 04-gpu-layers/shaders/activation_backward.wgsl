// activation_backward.wgsl: dy = dy * act'(saved), in place, for the live rows. Two kernels, told
// apart by the generated constant GRAD_OF_INPUT:
//
// - activation_backward (GRAD_OF_INPUT = 0): saved is the output y of the in-place
//   activation_forward, and the derivative is written with it (activate_grad in common.wgsl);
// - activation_copy_backward (GRAD_OF_INPUT = 1): saved is the INPUT x of
//   activation_copy_forward (see that file for why the input; activate_grad_from_input).
//
// dy: [batch, cols] arrives as dL/d(output of the activation) and leaves as
// dL/d(input of the activation); saved: [batch, cols].

@group(0) @binding(0) var<storage, read_write> dy: array<f32>;
@group(0) @binding(1) var<storage, read> saved: array<f32>;
@group(0) @binding(2) var<uniform> batch: Batch;
@group(0) @binding(3) var<uniform> p: ActivationParams;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if i >= batch.rows * p.cols {
        return;
    }
    if GRAD_OF_INPUT == 1u {
        dy[i] = dy[i] * activate_grad_from_input(saved[i], p.act);
    } else {
        dy[i] = dy[i] * activate_grad(saved[i], p.act);
    }
}
