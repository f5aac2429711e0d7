// forward_transposed_none.wgsl: the gathering form of linear_forward.wgsl stages its rows as
// it gathers them (forward_input_gather.wgsl), not transposed (forward_transposed.wgsl).

fn stage_transposed(row0: u32, k_len: u32, li: u32) -> bool {
    return false;
}

fn transposed_k_loop(k0: u32, k_len: u32, n: u32, col: u32) -> array<vec4<f32>, TRQ> {
    return array<vec4<f32>, TRQ>();
}
