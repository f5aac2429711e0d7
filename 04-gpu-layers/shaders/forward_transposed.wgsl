// forward_transposed.wgsl: linear_forward.wgsl stages the workgroup's TR input rows in
// workgroup memory TRANSPOSED, and its k loop reads four rows' inputs with one 16-byte load. The
// plain form stages them from x (forward_transposed_plain.wgsl), the gathering form as it
// gathers them (forward_transposed_gather.wgsl).
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
