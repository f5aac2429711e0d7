// dropout_backward.wgsl: dy = dy * mask, in place, for the live rows: the gradient flows only
// through the units the forward pass kept, scaled like them. dy, mask: [batch, cols]; the mask is
// the one dropout_forward.wgsl drew in the same step.

struct DropoutBackwardParams {
    cols: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<storage, read_write> dy: array<f32>;
@group(0) @binding(1) var<storage, read> mask: array<f32>;
@group(0) @binding(2) var<uniform> batch: Batch;
@group(0) @binding(3) var<uniform> p: DropoutBackwardParams;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if i >= batch.rows * p.cols {
        return;
    }
    dy[i] = dy[i] * mask[i];
}
