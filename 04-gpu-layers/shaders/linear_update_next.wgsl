// linear_update_next.wgsl: the split step's last phase of linear_update.wgsl.
//
// A training step of 784-128-10 is two dependent dispatches: forward_output (x W1, the output
// layer, dh) and linear_update (the gradients and the optimizer). In forward_output every
// workgroup owns whole rows, so every workgroup streams all of W1 (400 KB) through its
// multiprocessor while the products themselves are tiny. But this dispatch's workgroups each hold
// a T x T tile of W1 just after moving it, and the next step's x W1 needs exactly W1 after this
// step. So each workgroup of layer a also gathers the next batch's k-slice (rows of `order`
// from the byte images, like forward_input_gather.wgsl) and writes
//
//   partials[kt][row][j0 + j] = sum over k in the tile of x_next[row][k] * W1_new[k][j0 + j]
//
// (kt = k0 / T, the bias row left out). The next forward_output (forward_split_sums.wgsl) only
// adds up a row's ceil(784 / T) tiles. The next batch's first rows are loaded during the
// update's first round (next_prefetch), so their trip to memory overlaps the rounds. The
// workgroups of the first column of tiles also keep the rows in `x_next`, which the next step's
// update reads as its x: two buffers, swapped every step, so that no update overwrites the rows
// another workgroup of the same dispatch still reads, and the next forward gathers nothing.

@group(0) @binding(13) var<storage, read> images: array<u32>;
@group(0) @binding(14) var<storage, read> order: array<u32>;
@group(0) @binding(15) var<uniform> slot: GatherSlot; // the NEXT batch's (a dynamic offset)
@group(0) @binding(16) var<storage, read_write> partials: array<f32>;
@group(0) @binding(17) var<storage, read_write> x_next: array<f32>; // [batch][inputs]

// NEXT_R (rows per chunk of the next batch) comes from the prelude.
const NEXT_WORDS: u32 = (NEXT_R * TQ + THREADS - 1u) / THREADS; // pixel words per invocation
const NEXT_Q: u32 = NEXT_R * T / THREADS;                       // outputs per invocation
const NEXT_ROW_STEP: u32 = THREADS / T;                         // between an invocation's rows

var<workgroup> next_x: array<vec4<f32>, NEXT_R * TQ>; // [NEXT_R][T / 4]: a chunk of the next batch's k-slice
var<workgroup> next_w: array<f32, T * T>; // [T][T]: the tile after the step, bias row zeroed
var<private> next_words: array<u32, NEXT_WORDS>;

// Loads word i of the chunk at row r0 (row r = i / TQ, pixels 4 (i % TQ) .. of the slice)
// into next_words. Rows past the batch repeat its last row (not written); words past the image
// repeat its last word (zeroed in next_stage).
fn next_load(shape: LayerShape, k0: u32, li: u32, r0: u32) {
    let words = (shape.inputs + 3u) / 4u;
    let last = max(batch.rows, 1u) - 1u;
    for (var m = 0u; m < NEXT_WORDS; m++) {
        let i = min(li + m * THREADS, NEXT_R * TQ - 1u);
        let row = min(r0 + i / TQ, last);
        next_words[m] = images[order[slot.first + row] * words + min(k0 / 4u + i % TQ, words - 1u)];
    }
}

fn next_prefetch(layer: u32, shape: LayerShape, k0: u32, li: u32) {
    if layer == 0u {
        next_load(shape, k0, li, 0u);
    }
}

// next_words -> next_x, a word's 4 pixels to a vec4, normalized; 0 past the layer's inputs.
// The first column of tiles (`keep`) also writes the rows of the batch into x_next.
fn next_stage(shape: LayerShape, k0: u32, li: u32, r0: u32, keep: bool) {
    for (var m = 0u; m < NEXT_WORDS; m++) {
        let i = li + m * THREADS;
        if i < NEXT_R * TQ {
            let k = k0 + 4u * (i % TQ);
            let row = r0 + i / TQ;
            var v: vec4<f32>;
            for (var e = 0u; e < 4u; e++) {
                let pixel = f32((next_words[m] >> (8u * e)) & 0xffu) * slot.scale + slot.shift;
                v[e] = select(0.0, pixel, k + e < shape.inputs);
                if keep && row < batch.rows && k + e < shape.inputs {
                    x_next[row * shape.inputs + k + e] = pixel;
                }
            }
            next_x[i] = v;
        }
    }
}

// ANCHOR: next_partials
fn next_partials(layer: u32, shape: LayerShape, k0: u32, j0: u32, li: u32, moved: array<f32, PER_THREAD>) {
    if layer != 0u {
        return; // the whole workgroup: layer b's forward is forward_output's own
    }
    for (var m = 0u; m < PER_THREAD; m++) {
        let e = li + m * THREADS;
        next_w[e] = select(0.0, moved[m], k0 + e / T < shape.inputs);
    }
    let kt = k0 / T;
    let j = li % T;
    let first_row = li / T;
    for (var r0 = 0u; r0 < batch.rows; r0 += NEXT_R) {
        if r0 > 0u {
            next_load(shape, k0, li, r0);
        }
        next_stage(shape, k0, li, r0, j0 == 0u);
        workgroupBarrier();
        // Four values of k per step: one vec4 of x per row (the same for the whole subgroup, a
        // broadcast) and four of W; read one at a time, the loads of workgroup memory (9 per 8
        // multiply-adds) took longer than the multiply-adds.
        var acc: array<f32, NEXT_Q>;
        for (var kq = 0u; kq < TQ; kq++) {
            let k = 4u * kq;
            let w = vec4<f32>(next_w[k * T + j], next_w[(k + 1u) * T + j], next_w[(k + 2u) * T + j], next_w[(k + 3u) * T + j]);
            for (var q = 0u; q < NEXT_Q; q++) {
                acc[q] += dot(next_x[(first_row + q * NEXT_ROW_STEP) * TQ + kq], w);
            }
        }
        if j0 + j < shape.outputs {
            for (var q = 0u; q < NEXT_Q; q++) {
                let row = r0 + first_row + q * NEXT_ROW_STEP;
                if row < batch.rows {
                    partials[(kt * u.split.partial_rows + row) * shape.outputs + j0 + j] = acc[q];
                }
            }
        }
        workgroupBarrier();
    }
}
// ANCHOR_END: next_partials
