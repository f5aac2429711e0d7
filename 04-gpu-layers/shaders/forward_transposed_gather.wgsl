// forward_transposed_gather.wgsl: linear_forward.wgsl's gathering form stages the rows it
// gathers (forward_input_gather.wgsl) transposed (forward_transposed.wgsl): each value goes
// where the k loop reads it, and stage_transposed only zeroes the rest. Rows too long for that
// (the transposed rows are padded to whole rounds and to quads of rows) are staged one after
// another in the same memory if they fit so, for the k loop that reads them one value at a time.

var<private> rows_transposed: bool;

fn stage_fits(k_len: u32) -> bool {
    rows_transposed = TRQ * k_pad(k_len) <= X_SHARED / 4u;
    return rows_transposed || TR * k_len <= X_SHARED;
}

// Row r's value at column k.
fn stage_value(r: u32, k: u32, k_len: u32, v: f32) {
    if rows_transposed {
        xt[k * TRQ + r / 4u][r % 4u] = v;
    } else {
        let i = r * k_len + k;
        xt[i / 4u][i % 4u] = v;
    }
}

// Element i of the rows staged one after another.
fn staged_value(i: u32) -> f32 {
    return xt[i / 4u][i % 4u];
}

// After stage_input (every invocation; `li` is this one's index): where the rows were staged
// transposed, zeroes what the gathering left out (the columns past the input up to whole rounds,
// the rows past TR in the last quad) and returns true.
fn stage_transposed(row0: u32, k_len: u32, li: u32) -> bool {
    if !(staged && rows_transposed) {
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
