// bias_add.wgsl: y[r, c] += bias[c] for every live row r: the bias is broadcast over the rows.
//
// y: [batch, cols] row-major. The bias sits inside the layer's parameter tensor at `offset` (the
// last row of the augmented weight matrix [(in + 1), out], see src/layers.rs). One invocation
// per element; `i % cols` picks the bias, so neighbouring invocations read neighbouring biases.

struct BiasAddParams {
    cols: u32,
    offset: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read_write> y: array<f32>;
@group(0) @binding(1) var<storage, read> bias: array<f32>;
@group(0) @binding(2) var<uniform> batch: Batch;
@group(0) @binding(3) var<uniform> p: BiasAddParams;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    // Large tensors spill past 65,535 workgroups into y (common::workgroups_1d).
    let i = gid.x + gid.y * nwg.x * WG;
    if i >= batch.rows * p.cols {
        return;
    }
    y[i] = y[i] + bias[p.offset + i % p.cols];
}
