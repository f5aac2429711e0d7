// forward_k_loop.wgsl: phase 1 of forward_output.wgsl in its usual form: each workgroup walks
// k = 0..x_inputs for its TR rows, as in linear_forward.wgsl with CB column blocks per
// invocation, every workgroup reading all of W1. (forward_split_sums.wgsl is the other form.)

// forward_output.wgsl may compute the slices before its first barrier: not here, the k loop
// reads the staged input rows.
const SUMS_FIRST: bool = false;

// Writes slice lid.y of the TR rows' sums (no bias) into scratch[lid.y][r][j * TN + lid.x], and
// returns the number of slices, KS. Rows past the batch read the last live row; columns past n
// read column n - 1 (in bounds, no branch in the loop); the caller uses neither.
fn hidden_slices(row0: u32, li: u32, lid: vec3<u32>, k_len: u32, n: u32) -> u32 {
    let last = batch.rows - 1u;
    var xr: array<u32, TR>;
    for (var r = 0u; r < TR; r++) {
        xr[r] = input_start(r, min(row0 + r, last), k_len);
    }
    var wc: array<u32, CB>;
    for (var j = 0u; j < CB; j++) {
        wc[j] = min(j * TN + lid.x, n - 1u);
    }
    var acc: array<f32, TR * CB>;
    var k = lid.y;
    // ANCHOR: loads_in_flight
    loop {
        if k + (U - 1u) * KS >= k_len {
            break;
        }
        // U x CB weights and U x TR inputs in flight before the first multiply.
        var w: array<f32, U * CB>;
        var a: array<f32, U * TR>;
        for (var u = 0u; u < U; u++) {
            for (var j = 0u; j < CB; j++) {
                w[u * CB + j] = params[(k + u * KS) * n + wc[j]];
            }
            for (var r = 0u; r < TR; r++) {
                a[u * TR + r] = input(xr[r], k + u * KS);
            }
        }
        for (var u = 0u; u < U; u++) {
            for (var j = 0u; j < CB; j++) {
                for (var r = 0u; r < TR; r++) {
                    acc[j * TR + r] += a[u * TR + r] * w[u * CB + j];
                }
            }
        }
        k += U * KS;
    }
    // ANCHOR_END: loads_in_flight
    for (; k < k_len; k += KS) {
        for (var j = 0u; j < CB; j++) {
            let w = params[k * n + wc[j]];
            for (var r = 0u; r < TR; r++) {
                acc[j * TR + r] += input(xr[r], k) * w;
            }
        }
    }
    for (var j = 0u; j < CB; j++) {
        for (var r = 0u; r < TR; r++) {
            scratch[(lid.y * TR + r) * TN * CB + j * TN + lid.x] = acc[j * TR + r];
        }
    }
    return KS;
}
