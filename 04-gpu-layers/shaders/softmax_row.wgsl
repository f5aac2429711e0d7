// softmax_row.wgsl: softmax + cross-entropy of ONE row by ONE workgroup, shared by the plain loss
// kernel (softmax_ce.wgsl) and the fused output layer (output_layer.wgsl). Prepended after
// common.wgsl; the including kernel declares `counters` (array<atomic<u32>>).
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

// Adds one row's loss to the 64-bit fixed-point sum in counters[LO], counters[HI] (units of
// 2^-20). WGSL atomics exist only for 32-bit integers, and a float compare-exchange loop makes
// the rows of a batch queue up and retry on one address; integer adds never retry, and the
// sum no longer depends on the order the rows arrive in, so it is reproducible and the CPU twin
// computes exactly the same bits. The carry out of the low word is detected from the value
// atomicAdd returns, so concurrent adds stay exact. A NaN or absurd loss (> 1e12) is counted
// instead, and take_metrics reports it.
fn add_loss(loss: f32) {
    if !(loss <= 1e12) {
        atomicAdd(&counters[COUNTER_NON_FINITE], 1u);
        return;
    }
    let v = max(loss, 0.0);               // rounding can make a perfect row's loss -1e-7
    let hi = floor(v * 0.000244140625);   // whole multiples of 2^12 (= 2^32 units); * 2^-12 is exact
    let lo = u32((v - hi * 4096.0) * 1048576.0); // the rest, in units of 2^-20
    let old = atomicAdd(&counters[COUNTER_LOSS_LO], lo);
    let carry = select(0u, 1u, old > 0xffffffffu - lo);
    let high = u32(hi) + carry;
    if high != 0u {
        atomicAdd(&counters[COUNTER_LOSS_HI], high);
    }
}

// Is (value b at index bi) a better argmax than (value a at index ai)? Larger wins; on a tie the
// smaller index wins, like the CPU twin's "first maximum".
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
        let prob = exp(row_values[c] - m) / total;
        if mode == MODE_TRAIN {
            // A row with a bad label contributes nothing (and is counted below).
            row_values[c] = select(0.0, (prob - select(0.0, 1.0, c == label)) * inv_rows, label_ok);
        } else {
            row_values[c] = prob;
        }
    }

    // 4. Metrics, once per row. The step counter is what Adam's bias correction reads.
    if lid == 0u && mode != MODE_PREDICT {
        atomicAdd(&counters[COUNTER_ROWS], 1u);
        if label_ok {
            add_loss(log(total) + m - z_label);
            if arg == label {
                atomicAdd(&counters[COUNTER_CORRECT], 1u);
            }
        } else {
            atomicAdd(&counters[COUNTER_BAD_LABELS], 1u);
        }
        if mode == MODE_TRAIN && first_row {
            atomicAdd(&counters[COUNTER_STEP], 1u);
        }
    }
    workgroupBarrier(); // row_values is complete for the caller
}
