// forward_transposed_gather.wgsl: linear_forward.wgsl's gathering form stages the rows it
// gathers (forward_input_gather.wgsl) transposed (forward_transposed.wgsl): each value goes
// where the k loop reads it, and stage_transposed only zeroes the rest.

fn stage_fits(k_len: u32) -> bool {
    return TRQ * k_pad(k_len) <= X_SHARED / 4u;
}

// Row r's value at column k.
fn stage_value(r: u32, k: u32, k_len: u32, v: f32) {
    xt[k * TRQ + r / 4u][r % 4u] = v;
}

// Staged rows are read by transposed_k_loop only: input() never asks for one here.
fn staged_value(i: u32) -> f32 {
    return 0.0;
}

// After stage_input (every invocation; `li` is this one's index): zeroes what the gathering left
// out, the columns past the input up to whole rounds and the rows past TR in the last quad, and
// returns whether the rows were staged.
fn stage_transposed(row0: u32, k_len: u32, li: u32) -> bool {
    if !staged {
        return false;
    }
    for (var i = li; i < TRQ * k_pad(k_len); i += TN * KS) {
        let k = i / TRQ;
        let q = i % TRQ;
        if k >= k_len {
            xt[i] = vec4<f32>(0.0);
        } else {
            for (var e = 0u; e < 4u; e++) {
                if 4u * q + e >= TR {
                    xt[i][e] = 0.0;
                }
            }
        }
    }
    return true;
}
