// forward_transposed_plain.wgsl: linear_forward.wgsl's plain form stages its rows of the tensor x
// (forward_input.wgsl) transposed (forward_transposed.wgsl).

// Stages the rows (every invocation; `li` is this one's index) if they fit X_SHARED floats,
// and returns whether it did. Rows past the batch repeat its last row.
fn stage_transposed(row0: u32, k_len: u32, li: u32) -> bool {
    let quads = TRQ * k_pad(k_len);
    if quads > X_SHARED / 4u {
        return false;
    }
    let last = batch.rows - 1u;
    for (var i = li; i < quads; i += TN * KS) {
        let k = i / TRQ;
        let q = i % TRQ;
        var v = vec4<f32>(0.0);
        for (var e = 0u; e < 4u; e++) {
            let r = min(4u * q + e, TR - 1u);
            let loaded = x[min(row0 + r, last) * k_len + min(k, k_len - 1u)];
            v[e] = select(0.0, loaded, 4u * q + e < TR && k < k_len);
        }
        xt[i] = v;
    }
    return true;
}
