// Gather one batch of MNIST on the GPU: rows `order[first .. first + count]` of the u8 image
// set, turned into normalized f32 inputs, plus their labels, written straight into the
// trainer's input and label buffers.
//
// Why this kernel exists: the data set stays on the GPU as bytes (47 MB; as f32 it would be
// 188 MB, over many adapters' storage-binding limit), and a shuffled index buffer picks the
// batch. So a training step needs no CPU work at all, and hundreds of steps can be recorded
// into one submission. Which batch a dispatch gathers comes from `slot`, a uniform bound with
// a *dynamic offset*: step s binds the same buffer at offset s * stride, so the CPU only
// changes an offset while recording, never writes memory between steps.
//
// WGSL has no u8 type: 4 pixels share one u32 (little-endian: pixel 4w + k is byte k of word
// w). An image is 784 bytes = 196 words, so images start on word boundaries.
// One invocation handles one word: 4 pixels of one row of the batch.

// ANCHOR: slot
struct Slot {
    first: u32,  // index into `order` of the batch's first row
    count: u32,  // rows in this batch (the last batch of an epoch may be short)
    scale: f32,  // x = pixel * scale + shift  ==  (pixel / 255 - mean) / std
    shift: f32,
}
// ANCHOR_END: slot

const WORDS_PER_IMAGE: u32 = 196u;   // 784 / 4
const PIXELS: u32 = 784u;
const WORKGROUP: u32 = 256u;

// ANCHOR: kernel
@group(0) @binding(0) var<storage, read> images: array<u32>;        // [n, 196] packed u8
@group(0) @binding(1) var<storage, read> labels: array<u32>;        // [ceil(n / 4)] packed u8
@group(0) @binding(2) var<storage, read> order: array<u32>;         // [n] image indices
@group(0) @binding(3) var<storage, read_write> x: array<f32>;       // [max_batch, 784]
@group(0) @binding(4) var<storage, read_write> y: array<u32>;       // [max_batch]
@group(0) @binding(5) var<uniform> slot: Slot;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    // Flat index over (x, y) workgroups: large batches spill into y (see common::workgroups_1d).
    let t = gid.x + gid.y * nwg.x * WORKGROUP;
    let row = t / WORDS_PER_IMAGE;
    let w = t % WORDS_PER_IMAGE;
    if row >= slot.count {
        return;
    }
    let image = order[slot.first + row];
    let word = images[image * WORDS_PER_IMAGE + w];
    let base = row * PIXELS + w * 4u;
    for (var k = 0u; k < 4u; k++) {
        let pixel = f32((word >> (8u * k)) & 0xffu);
        x[base + k] = pixel * slot.scale + slot.shift;
    }
    if w == 0u {
        y[row] = (labels[image / 4u] >> (8u * (image % 4u))) & 0xffu;
    }
}
// ANCHOR_END: kernel
