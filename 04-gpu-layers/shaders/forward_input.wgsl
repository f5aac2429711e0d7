// forward_input.wgsl: where linear_forward.wgsl reads its input, in its plain form: the tensor
// x: [batch, in] f32, row-major. (forward_input_gather.wgsl is the other form.)

@group(0) @binding(0) var<storage, read> x: array<f32>;
// The batch's labels, read only by forward_output.wgsl's output layer (`row_label`).
@group(0) @binding(10) var<storage, read> labels: array<u32>;

// Nothing to stage: the rows are read from x where they lie (in L2, written by the step before).
fn stage_input(row0: u32, k_len: u32, first_column: bool, li: u32) {}

// Where row `row` (the workgroup's row r) of the input starts.
fn input_start(r: u32, row: u32, k_len: u32) -> u32 {
    return row * k_len;
}

// Element k of the row that starts at `start`.
fn input(start: u32, k: u32) -> f32 {
    return x[start + k];
}

// The label of batch row `row` (forward_output.wgsl).
fn row_label(row: u32) -> u32 {
    return labels[row];
}
