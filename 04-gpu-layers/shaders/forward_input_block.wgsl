// forward_input_block.wgsl: one round of the k loop's inputs for linear_forward.wgsl and
// forward_k_loop.wgsl, from either form of the input (forward_input.wgsl,
// forward_input_gather.wgsl).
//
// Elements k, k + KS, .. k + (U - 1) KS of the TR rows that start at `xr`, as [U][TR], under ONE
// branch on the form: the driver waits at the end of a branch for the loads issued in it, so
// `input`'s branch around each value (the gathering form's, staged or not) made the loop wait
// U x TR times a round.
fn input_block(xr: array<u32, TR>, k: u32) -> array<f32, U * TR> {
    var a: array<f32, U * TR>;
    if input_direct() {
        for (var u = 0u; u < U; u++) {
            for (var r = 0u; r < TR; r++) {
                a[u * TR + r] = input_value(xr[r], k + u * KS);
            }
        }
    } else {
        for (var u = 0u; u < U; u++) {
            for (var r = 0u; r < TR; r++) {
                a[u * TR + r] = input(xr[r], k + u * KS);
            }
        }
    }
    return a;
}
