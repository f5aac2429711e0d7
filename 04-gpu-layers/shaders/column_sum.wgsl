// column_sum.wgsl: out[offset + c] = sum over live rows r of x[r, c], a parallel reduction.
//
// The bias gradient of a linear layer is the column sum of dL/dy: x: [batch, cols] -> [cols].
// A workgroup owns COLS neighbouring columns and has LANES invocations per column. Each
// invocation sums every LANES-th row of its column (a row's COLS values are read side by side,
// so reads are coalesced), then the LANES partial sums meet in a tree in workgroup memory:
// log2(LANES) steps instead of LANES - 1 sequential additions.

struct ColumnSumParams {
    cols: u32,
    offset: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> batch: Batch;
@group(0) @binding(3) var<uniform> p: ColumnSumParams;

// COLS (columns per workgroup) comes from the prelude: the host sizes the grid with it.
const LANES: u32 = 8u;

var<workgroup> partial: array<f32, COLS * LANES>; // [LANES][COLS]

@compute @workgroup_size(COLS, LANES)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let col = wid.x * COLS + lid.x;
    var sum = 0.0;
    if col < p.cols {
        for (var r = lid.y; r < batch.rows; r += LANES) {
            sum += x[r * p.cols + col];
        }
    }
    partial[lid.y * COLS + lid.x] = sum;
    workgroupBarrier();
    // Tree: 8 -> 4 -> 2 -> 1 partial sums per column.
    for (var stride = LANES / 2u; stride > 0u; stride /= 2u) {
        if lid.y < stride {
            partial[lid.y * COLS + lid.x] += partial[(lid.y + stride) * COLS + lid.x];
        }
        workgroupBarrier();
    }
    if lid.y == 0u && col < p.cols {
        out[p.offset + col] = partial[lid.x];
    }
}
