// forward_split_sums.wgsl: phase 1 of forward_output.wgsl in the split step. The 784-long dot
// products of x W1 were already done by the previous step's linear_update (linear_update_next.wgsl):
// each of its workgroups, owning a T x T tile of W1 just after moving it, multiplied the next
// batch's k-slice by that tile and left the result in `partials`. Here a row's sums are the
// ceil(x_inputs / T) tiles' partials added up: one round of loads per invocation instead of a
// walk over k with all of W1 streamed into every workgroup. The prologue of each submission
// (linear_update with `partials_only`) writes the first step's partials.

// [ceil((x_inputs + 1) / T) k-tiles][p.partial_rows][inputs]: tile kt's sum over
// k = kt T .. kt T + T - 1 (k < x_inputs; the bias is added by the caller).
@group(0) @binding(15) var<storage, read> partials: array<f32>;

// forward_output.wgsl may compute the slices before its first barrier: they read only `partials`.
const SUMS_FIRST: bool = true;

// Writes the TR rows' sums (no bias) as S = TN * KS / (TN * CB) slices into scratch[s][r][c],
// and returns S: invocation li takes column li % (TN * CB) and slice li / (TN * CB), which adds
// tiles s, s + S, ... (8 slices of 3-4 tiles at 784-128 with the default tiles; as KS = 32
// slices of the k loop's layout, the sum of the slices after the barrier was a chain of 32
// loads from workgroup memory). Rows past the batch read the last live row.
// ANCHOR: split_sums
fn hidden_slices(row0: u32, li: u32, lid: vec3<u32>, k_len: u32, n: u32) -> u32 {
    let cw = TN * CB;
    let slices = max((TN * KS) / cw, 1u);
    let last = batch.rows - 1u;
    let tiles = (k_len + T - 1u) / T;
    for (var o = li; o < slices * cw; o += TN * KS) {
        let c = o % cw;
        let s = o / cw;
        for (var r = 0u; r < TR; r++) {
            let base = min(row0 + r, last) * n + min(c, n - 1u);
            var z = 0.0;
            for (var kt = s; kt < tiles; kt += slices) {
                z += partials[kt * p.partial_rows * n + base];
            }
            scratch[(s * TR + r) * cw + c] = z;
        }
    }
    return slices;
}
// ANCHOR_END: split_sums
