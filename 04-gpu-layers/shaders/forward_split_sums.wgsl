// forward_split_sums.wgsl: phase 1 of forward_output.wgsl in the split step. The 784-long dot
// products of x W1 were already done by the previous step's linear_update (linear_update_next.wgsl):
// each of its workgroups, owning a T x T tile of W1 just after moving it, multiplied the next
// batch's k-slice by that tile and left the result in `partials`. Here a row's sums are the
// ceil(x_inputs / T) tiles' partials added up: one round of loads per invocation instead of a
// walk over k with all of W1 streamed into every workgroup. The prologue of each submission
// (linear_update with UPD_ONLY_PARTIALS) writes the first step's partials.

// [ceil((x_inputs + 1) / T) k-tiles][p.partial_rows][inputs]: tile kt's sum over
// k = kt T .. kt T + T - 1 (k < x_inputs; the bias is added by the caller).
@group(0) @binding(15) var<storage, read> partials: array<f32>;

// Slice lid.y of the TR rows' sums (no bias), acc[j * TR + r] for column j * TN + lid.x: the
// slice adds tiles lid.y, lid.y + KS, ... Rows past the batch read the last live row, columns
// past n column n - 1, as in forward_k_loop.wgsl.
fn hidden_slices(row0: u32, lid: vec3<u32>, k_len: u32, n: u32) -> array<f32, TR * CB> {
    let last = batch.rows - 1u;
    let tiles = (k_len + T - 1u) / T;
    var acc: array<f32, TR * CB>;
    for (var kt = lid.y; kt < tiles; kt += KS) {
        for (var r = 0u; r < TR; r++) {
            let base = (kt * p.partial_rows + min(row0 + r, last)) * n;
            for (var j = 0u; j < CB; j++) {
                acc[j * TR + r] += partials[base + min(j * TN + lid.x, n - 1u)];
            }
        }
    }
    return acc;
}
