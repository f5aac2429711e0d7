// Stage 01: output[i] = 2 * input[i], one invocation per element.
//
// The smallest useful compute shader. Everything interesting about it is in how it is launched:
// the Rust side (src/walkthrough.rs spells it out) binds three buffers and dispatches enough
// workgroups of WORKGROUP_SIZE invocations to cover `len` elements.

// 256 invocations per workgroup: a multiple of every GPU's SIMD width (32 on NVIDIA, 64 on AMD,
// 8 on lavapipe), and the largest size WebGPU guarantees. Must equal `WORKGROUP_SIZE` in
// src/lib.rs (a test checks).
const WORKGROUP_SIZE: u32 = 256u;

// Bindings in the order the Rust side lists them. `read` lets the driver assume the input never
// changes during the dispatch.
@group(0) @binding(0) var<storage, read> input: array<f32>;
@group(0) @binding(1) var<storage, read_write> output: array<f32>;
// The number of elements to double. The buffers may be larger than `len` (they are allocated
// once for the largest size and reused), and a binding can never be empty, so the length comes
// in separately instead of from `arrayLength`.
@group(0) @binding(2) var<uniform> len: u32;

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(num_workgroups) num_groups: vec3<u32>,
) {
    // One dispatch dimension holds at most 65,535 workgroups (65,535 x 256 = 16,776,960
    // elements). Longer arrays spill into y: row `gid.y` starts after all the invocations of
    // the rows before it, `num_groups.x * WORKGROUP_SIZE` each.
    let i = gid.x + gid.y * (num_groups.x * WORKGROUP_SIZE);
    // The last workgroup (and, with y > 1, the tail of the last row) runs past the end.
    if i >= len {
        return;
    }
    // Exact in binary floating point: doubling only adds one to the exponent, so the GPU must
    // match the CPU bit for bit (infinities stay infinite, NaN stays NaN, and values above
    // f32::MAX / 2 overflow to infinity on both).
    output[i] = input[i] * 2.0;
}
