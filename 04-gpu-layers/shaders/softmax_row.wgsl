// softmax_row.wgsl: softmax + cross-entropy of ONE row by ONE workgroup, for the plain loss
// kernel (softmax_ce.wgsl). Prepended after common.wgsl and loss.wgsl; the including kernel
// declares `counters` (array<atomic<u32>>). (The fused output layer does the same math its own
// way, several rows per workgroup: output_layer.wgsl.)
//
// Numerically stable: with m = max_c z_c,
//     p_c  = exp(z_c - m) / sum_c' exp(z_c' - m)        (every exp is of a number <= 0)
//     loss = log(sum_c' exp(z_c' - m)) + m - z_label     (never log(0): the sum is >= 1)
// so logits of +-1e4 give a finite loss (2e4) where exp(z) alone would overflow to inf.
// The gradient of the MEAN loss over the batch with respect to the logits is
//     dL/dz_c = (p_c - [c == label]) / batch.

// One workgroup of ROW_WG invocations per row; at most MAX_CLASSES classes (both from the
// prelude). The mode is MODE_TRAIN (write dL/dz, add loss/correct/rows, count the step),
// MODE_EVAL (write probabilities, add loss/correct/rows) or MODE_PREDICT (probabilities only,
// no labels).
const NO_INDEX: u32 = 0xffffffffu;

// In: the row's logits. Out: dL/dz (train) or the probabilities (eval, predict).
var<workgroup> row_values: array<f32, MAX_CLASSES>;
var<workgroup> red_val: array<f32, ROW_WG>;
var<workgroup> red_idx: array<u32, ROW_WG>;

// Is (value b at index bi) a better argmax than (value a at index ai)? Larger wins; on a tie the
// smaller index wins, like the CPU reference's "first maximum".
fn beats(b: f32, bi: u32, a: f32, ai: u32) -> bool {
    return bi != NO_INDEX && (ai == NO_INDEX || b > a || (b == a && bi < ai));
}

// All ROW_WG invocations must call this (it has barriers). row_values[0..classes) must hold the
// logits, written before a barrier.
fn softmax_ce_row(lid: u32, classes: u32, label: u32, mode: u32, inv_rows: f32, first_row: bool) {
    // 1. Max and argmax: each invocation scans every ROW_WG-th class, then a tree of
    //    log2(ROW_WG) steps combines the 64 candidates.
    // -f32::MAX, by its bits: Chrome's WGSL compiler (Tint) refuses the decimal -3.4028235e38,
    // which as an exact number lies just past the largest f32.
    var best = bitcast<f32>(0xff7fffffu);
    var best_i = NO_INDEX;
    for (var c = lid; c < classes; c += ROW_WG) {
        let z = row_values[c];
        if beats(z, c, best, best_i) {
            best = z;
            best_i = c;
        }
    }
    red_val[lid] = best;
    red_idx[lid] = best_i;
    workgroupBarrier();
    for (var s = ROW_WG / 2u; s > 0u; s /= 2u) {
        if lid < s && beats(red_val[lid + s], red_idx[lid + s], red_val[lid], red_idx[lid]) {
            red_val[lid] = red_val[lid + s];
            red_idx[lid] = red_idx[lid + s];
        }
        workgroupBarrier();
    }
    let m = red_val[0];
    let arg = red_idx[0];
    workgroupBarrier(); // everyone has read red_val[0] before it is reused

    // 2. The sum of exp(z - m), the same way.
    var sum = 0.0;
    for (var c = lid; c < classes; c += ROW_WG) {
        sum += exp(row_values[c] - m);
    }
    red_val[lid] = sum;
    workgroupBarrier();
    for (var s = ROW_WG / 2u; s > 0u; s /= 2u) {
        if lid < s {
            red_val[lid] += red_val[lid + s];
        }
        workgroupBarrier();
    }
    let total = red_val[0];
    let label_ok = label < classes;
    var z_label = 0.0;
    if label_ok {
        z_label = row_values[label];
    }
    workgroupBarrier(); // everyone has read z_label before row_values is overwritten

    // 3. Probabilities, or the gradient. Each invocation rewrites only its own classes.
    for (var c = lid; c < classes; c += ROW_WG) {
        // (A row with a bad label contributes nothing, and is counted below.)
        row_values[c] = output_value(exp(row_values[c] - m) / total, c, label, label_ok, mode, inv_rows);
    }

    // 4. Metrics, once per row. The step counter is what Adam's bias correction reads.
    if lid == 0u && mode != MODE_PREDICT {
        count_row(label_ok, log(total) + m - z_label, arg == label, mode, first_row);
    }
    workgroupBarrier(); // row_values is complete for the caller
}
