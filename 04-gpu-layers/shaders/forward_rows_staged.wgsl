// forward_rows_staged.wgsl: how forward_output.wgsl's gathering forms stage the input rows they
// gather (forward_input_gather.wgsl): one row after another, as its k loop (forward_k_loop.wgsl)
// reads them. (forward_transposed_gather.wgsl: linear_forward's gathering form.)

// X_SHARED (from the prelude, chosen for the device: routing.rs, DeviceFit) floats.
var<workgroup> xs: array<f32, X_SHARED>;

fn stage_fits(k_len: u32) -> bool {
    return TR * k_len <= X_SHARED;
}

// Row r's value at column k.
fn stage_value(r: u32, k: u32, k_len: u32, v: f32) {
    xs[r * k_len + k] = v;
}

// Element i of the rows, one after another.
fn staged_value(i: u32) -> f32 {
    return xs[i];
}
