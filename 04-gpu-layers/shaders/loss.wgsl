// loss.wgsl: how the loss kernels (softmax_ce.wgsl, output_layer.wgsl, output_wide.wgsl,
// mse.wgsl) add a row's loss to the counters, and what the softmax ones write for each class. Prepended after common.wgsl; the including kernel declares `counters`
// (array<atomic<u32>>).

// Adds one row's loss to the 64-bit fixed-point sum in counters[LO], counters[HI] (units of
// 2^-20). WGSL atomics exist only for 32-bit integers, and a float compare-exchange loop makes
// the rows of a batch queue up and retry on one address; integer adds never retry, and the
// sum no longer depends on the order the rows arrive in, so it is reproducible and the CPU reference
// computes exactly the same bits. The carry out of the low word is detected from the value
// atomicAdd returns, so concurrent adds stay exact. A NaN or infinite loss (all exponent bits
// set) or an absurd one (> 1e12) is counted instead, and take_metrics reports it. The test is on
// the bits: WGSL lets a compiler assume floats are finite, so a float comparison meant to catch
// NaN may be rewritten into one that does not; an integer test cannot be.
fn add_loss(loss: f32) {
    if (bitcast<u32>(loss) & 0x7f800000u) == 0x7f800000u || loss > 1e12 {
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

// Counts one row into the counters (the loss kernels, once per row, except in MODE_PREDICT):
// the row; when its label is a class, its loss and whether it was predicted right, else a bad
// label; and in training, once per step (`first_row`), the step Adam's bias correction reads.
fn count_row(label_ok: bool, loss: f32, correct: bool, mode: u32, first_row: bool) {
    atomicAdd(&counters[COUNTER_ROWS], 1u);
    if label_ok {
        add_loss(loss);
        if correct {
            atomicAdd(&counters[COUNTER_CORRECT], 1u);
        }
    } else {
        atomicAdd(&counters[COUNTER_BAD_LABELS], 1u);
    }
    if mode == MODE_TRAIN && first_row {
        atomicAdd(&counters[COUNTER_STEP], 1u);
    }
}

// What a softmax kernel writes for class c of a row whose probability is `prob`: the probability
// (MODE_EVAL, MODE_PREDICT), or in training dL/dz_c = (p_c - [c == label]) * inv_rows, 0 for a
// row with a bad label (which is counted instead and contributes nothing).
fn output_value(prob: f32, c: u32, label: u32, label_ok: bool, mode: u32, inv_rows: f32) -> f32 {
    if mode == MODE_TRAIN {
        return select(0.0, (prob - select(0.0, 1.0, c == label)) * inv_rows, label_ok);
    }
    return prob;
}

// What an output layer with mean squared error writes for class c of a row whose output is v:
// v itself (MODE_EVAL, MODE_PREDICT), or in training dL/dv = (v - [c == label]) * scale, scale =
// 2 / (batch x classes), 0 for a row with a bad label (mse.wgsl's numbers).
fn mse_value(v: f32, c: u32, label: u32, label_ok: bool, mode: u32, scale: f32) -> f32 {
    if mode == MODE_TRAIN {
        return select(0.0, (v - select(0.0, 1.0, c == label)) * scale, label_ok);
    }
    return v;
}
