// sgd.wgsl: one SGD-with-momentum step over `count` parameters, state on the GPU.
//
// params, grads: [count]; velocity: [count]. Elementwise: one invocation per parameter. The
// formula is sgd_step in common.wgsl, shared with the fused linear_update kernel.

@group(0) @binding(0) var<storage, read_write> params: array<f32>;
@group(0) @binding(1) var<storage, read> grads: array<f32>;
@group(0) @binding(2) var<storage, read_write> velocity: array<f32>;
@group(0) @binding(3) var<uniform> o: Opt;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if i >= o.count {
        return;
    }
    let moved = sgd_step(o, params[i], grads[i], velocity[i]);
    params[i] = moved.param;
    velocity[i] = moved.s0;
}
