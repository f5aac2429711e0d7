// activation_forward.wgsl: y = act(y), in place, for the live rows. y: [batch, cols].
//
// In place because nothing needs the pre-activation afterwards: the backward pass writes the
// derivative with the output (activate_grad in common.wgsl).

@group(0) @binding(0) var<storage, read_write> y: array<f32>;
@group(0) @binding(1) var<uniform> batch: Batch;
@group(0) @binding(2) var<uniform> p: ActivationParams;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if i >= batch.rows * p.cols {
        return;
    }
    y[i] = activate(y[i], p.act);
}
