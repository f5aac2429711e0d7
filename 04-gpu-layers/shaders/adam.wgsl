// adam.wgsl: one Adam step over `count` parameters, state and step count on the GPU.
//
// params, grads: [count]; moments: [2 * count] = first moments, then second moments. The step
// number t comes from the counters buffer, where the loss kernel of the same training step
// added 1 (an earlier dispatch, so every invocation here sees the same t). The CPU never has to
// tell the GPU which step it is, so N steps can be recorded into one submission.

@group(0) @binding(0) var<storage, read_write> params: array<f32>;
@group(0) @binding(1) var<storage, read> grads: array<f32>;
@group(0) @binding(2) var<storage, read_write> moments: array<f32>;
@group(0) @binding(3) var<storage, read> counters: array<u32>;
@group(0) @binding(4) var<uniform> o: Opt;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if i >= o.count {
        return;
    }
    let moved = adam_step(o, adam_scale(o, counters[COUNTER_STEP]), params[i], grads[i], moments[i], moments[o.count + i]);
    params[i] = moved.param;
    moments[i] = moved.s0;
    moments[o.count + i] = moved.s1;
}
