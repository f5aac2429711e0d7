// forward_input_gather.wgsl: the other form of linear_forward.wgsl's input: the batch is
// gathered by the forward dispatch itself, from byte images on the GPU, so a training step
// needs no separate gather dispatch (one dependent dispatch fewer per step).
//
// Rows `order[slot.first ..]` of `images` (u8 pixels, 4 to a u32 word, each image starting on a
// word boundary: `ceil(in / 4)` words), normalized as `pixel * slot.scale + slot.shift`. `slot`
// is a uniform bound with a dynamic offset: step s of an epoch binds the same buffer at offset
// s * stride, so the CPU changes an offset while recording and writes nothing between steps.
//
// The images are scattered over the 47 MB data set, so they come from DRAM, not L2: read in the
// k loop, every round of loads would wait for DRAM (the first version did: 30 ms per epoch
// instead of 25). So all invocations first load the workgroup's TR rows, one word each, in ONE
// round, into workgroup memory, and the k loop reads them there, laid out as that loop wants
// them (stage_fits, stage_value, staged_value): row after row for forward_output.wgsl
// (forward_rows_staged.wgsl), transposed for linear_forward.wgsl (forward_transposed_gather.wgsl).
// The first column of workgroups also keeps what the step's later dispatches read: the rows in
// `x_out` (the weight update needs x) and the labels in `labels_out` (the loss).

// GatherSlot (common.wgsl): the batch's first row in `order`, its rows, the normalization.
@group(0) @binding(0) var<storage, read> images: array<u32>;
@group(0) @binding(5) var<storage, read> label_bytes: array<u32>;
@group(0) @binding(6) var<storage, read> order: array<u32>;
@group(0) @binding(7) var<uniform> slot: GatherSlot;
@group(0) @binding(8) var<storage, read_write> x_out: array<f32>;
@group(0) @binding(9) var<storage, read_write> labels_out: array<u32>;

// Whether the rows fit the staging area (X_SHARED floats, from the prelude, chosen for the device:
// routing.rs, DeviceFit); if not, the k loop reads the bytes.
var<private> staged: bool;

fn pixel_value(word: u32, e: u32) -> f32 {
    return f32((word >> (8u * e)) & 0xffu) * slot.scale + slot.shift;
}

// Rows row0..row0 + TR (rows past the batch repeat its last row), word by word. GATHER_ROWS
// (prelude) is 0 in the split step, whose forward needs no pixels (the previous update gathered
// them) and keeps only the labels.
fn stage_input(row0: u32, k_len: u32, first_column: bool, li: u32) {
    staged = stage_fits(k_len);
    let words = (k_len + 3u) / 4u;
    let last = batch.rows - 1u;
    for (var i = li; i < TR * words * GATHER_ROWS; i += TN * KS) {
        let r = i / words;
        let w = i % words;
        let row = min(row0 + r, last);
        let word = images[order[slot.first + row] * words + w];
        for (var e = 0u; e < 4u; e++) {
            let k = 4u * w + e;
            if k < k_len {
                let v = pixel_value(word, e);
                if staged {
                    stage_value(r, k, k_len, v);
                }
                if first_column && row0 + r < batch.rows {
                    x_out[(row0 + r) * k_len + k] = v;
                }
            }
        }
    }
    if first_column && li < TR && row0 + li < batch.rows {
        labels_out[row0 + li] = row_label(row0 + li);
    }
}

// The label of batch row `row`, from the label bytes (4 to a word). forward_output.wgsl's
// output layer reads it here too: the copy in `labels_out` is written by this same dispatch.
fn row_label(row: u32) -> u32 {
    let image = order[slot.first + row];
    return (label_bytes[image / 4u] >> (8u * (image % 4u))) & 0xffu;
}

// Where the workgroup's row r (batch row `row`) starts: among the staged rows, else the byte
// where its image starts (rows too long for the staging area are read as bytes in the loop).
fn input_start(r: u32, row: u32, k_len: u32) -> u32 {
    if staged {
        return r * k_len;
    }
    return order[slot.first + row] * ((k_len + 3u) / 4u) * 4u;
}

// Element k of the row that starts at `start`.
fn input(start: u32, k: u32) -> f32 {
    if staged {
        return staged_value(start + k);
    }
    let b = start + k;
    return pixel_value(images[b / 4u], b % 4u);
}
