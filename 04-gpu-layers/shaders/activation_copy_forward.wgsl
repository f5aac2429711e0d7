// activation_copy_forward.wgsl: y = act(x) into a SEPARATE tensor, for the live rows.
// x, y: [batch, cols].
//
// The out-of-place form of activation_forward.wgsl. The network uses it where the in-place form
// would lose something the backward pass needs: GELU's derivative needs the input x (GELU is not
// monotonic, so its output does not determine it), and an activation stacked on another
// activation's output must not overwrite the output the lower one's backward reads.

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> batch: Batch;
@group(0) @binding(3) var<uniform> p: ActivationParams;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if i >= batch.rows * p.cols {
        return;
    }
    y[i] = activate(x[i], p.act);
}
