// dropout_forward.wgsl: inverted dropout, y = x * mask, for the live rows of x: [batch, cols].
//
// Each element draws its own random number from a HASH of (layer seed, training step, element
// index): a counter-based generator. There is no generator state to advance, so every invocation
// computes its number independently, a step needs no CPU work (the step count is read from the
// counters, where the loss kernels count it), and the CPU reference (cpu::reference::dropout_forward) computes
// exactly the same numbers, so both devices drop the same units. The decision compares integers:
// dropped when the hash is below threshold = floor(p * 2^32). Kept units are scaled by
// 1 / (1 - p), so the layer is the identity in expectation and evaluation needs no rescaling
// (the network leaves dropout out of its evaluation and prediction tapes).
//
// mask: [batch, cols] receives 0 or the scale; dropout_backward.wgsl multiplies the gradient by
// the same mask.

struct DropoutParams {
    cols: u32,
    seed: u32,
    threshold: u32,
    scale: f32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<storage, read_write> mask: array<f32>;
@group(0) @binding(3) var<storage, read> counters: array<u32>;
@group(0) @binding(4) var<uniform> batch: Batch;
@group(0) @binding(5) var<uniform> p: DropoutParams;

// pcg_hash and dropout_hash are in common.wgsl (the fused kernels draw the same masks).

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if i >= batch.rows * p.cols {
        return;
    }
    let keep = dropout_hash(p.seed, counters[COUNTER_STEP], i) >= p.threshold;
    let m = select(0.0, p.scale, keep);
    mask[i] = m;
    y[i] = x[i] * m;
}
