// forward_transposed.wgsl: linear_forward.wgsl's plain form stages the workgroup's TR input
// rows in workgroup memory TRANSPOSED, and its k loop reads four rows' inputs with one 16-byte
// load. (forward_transposed_none.wgsl: the gathering form, which stages its rows as it
// gathers them.)
//
// Read where they lie, each input value is a load instruction of its own, TR of them per
// weight, the same value for every invocation of a column block. Here xt[k TRQ + q] holds rows
// 4q..4q+3 at column k (rows past TR zero), so a round of U weights needs U x TRQ loads of
// workgroup memory. The rows are staged up to a whole number of rounds (k_pad), zero past the
// input, so the last round needs no loop of its own.

var<workgroup> xt: array<vec4<f32>, X_SHARED / 4u>;

// k_len rounded up to whole rounds of U values of k for each of the KS slices.
fn k_pad(k_len: u32) -> u32 {
    return (k_len + U * KS - 1u) / (U * KS) * (U * KS);
}

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

// ANCHOR: transposed_k_loop
// The slice's sums over k = k0, k0 + KS, .. of column `col`, rows 4q..4q+3 in element q: rounds
// of U weights loaded before the first multiply (past k_len, the last weight again, times 0).
fn transposed_k_loop(k0: u32, k_len: u32, n: u32, col: u32) -> array<vec4<f32>, TRQ> {
    var acc: array<vec4<f32>, TRQ>;
    for (var k = k0; k < k_len; k += U * KS) {
        var w: array<f32, U>;
        for (var u = 0u; u < U; u++) {
            w[u] = params[min(k + u * KS, k_len - 1u) * n + col];
        }
        for (var u = 0u; u < U; u++) {
            for (var q = 0u; q < TRQ; q++) {
                acc[q] += xt[(k + u * KS) * TRQ + q] * w[u];
            }
        }
    }
    return acc;
}
// ANCHOR_END: transposed_k_loop
