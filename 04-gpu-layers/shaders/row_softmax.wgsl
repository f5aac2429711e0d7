// row_softmax.wgsl: what the output kernels (output_rows.wgsl's two and output_wide.wgsl) do
// with a row of logits once it is in workgroup memory: its max, argmax and sum (`row_stats`),
// the loss the counters take (`row_loss`), what the layer writes for each class (`dl_dz`), and
// the step h's dropout masks are drawn for (`dropout_step`). The including kernel declares
// `z_sh` (the logits; a row starts at `zr`), the uniform `p` (`mode`, `drop`), `batch` and
// `counters` (array<atomic<u32>>).
//
// Numerically stable, as in softmax_row.wgsl: with m = max_c z_c,
//     p_c = exp(z_c - m) / sum_c' exp(z_c' - m),  loss = log(sum_c' exp(z_c' - m)) + m - z_label,
//     dL/dz_c = (p_c - [c == label]) / batch.

// A row's max logit `m`, the class of its first maximum `arg` (the CPU's choice too), and
// `total`: its sum of exponentials (softmax cross-entropy) or of squared differences from the
// one-hot label (mean squared error).
struct RowStats {
    m: f32,
    arg: u32,
    total: f32,
}

// ANCHOR: row_stats
fn row_stats(zr: u32, classes: u32, label: u32, mse: bool) -> RowStats {
    var s = RowStats(z_sh[zr], 0u, 0.0);
    for (var c = 1u; c < classes; c++) {
        let z = z_sh[zr + c];
        if z > s.m {
            s.m = z;
            s.arg = c;
        }
    }
    // (Each loop is written for one loss, so no branch sits inside it.)
    if mse {
        for (var c = 0u; c < classes; c++) {
            let diff = z_sh[zr + c] - select(0.0, 1.0, c == label);
            s.total += diff * diff;
        }
    } else {
        for (var c = 0u; c < classes; c++) {
            s.total += exp(z_sh[zr + c] - s.m);
        }
    }
    return s;
}
// ANCHOR_END: row_stats

// The row's loss: cross-entropy, or the mean of the squared differences.
fn row_loss(zr: u32, s: RowStats, classes: u32, label: u32, mse: bool) -> f32 {
    let ce = log(s.total) + s.m - z_sh[zr + min(label, classes - 1u)];
    return select(ce, s.total / f32(classes), mse);
}

// What the output layer writes for class c of the row: with softmax cross-entropy the
// probability or dL/dz; with mean squared error the output or dL/dz (`mse_scale`: 2 / (batch x
// classes)).
fn dl_dz(zr: u32, c: u32, s: RowStats, label: u32, label_ok: bool, mse: bool, mse_scale: f32) -> f32 {
    if mse {
        return mse_value(z_sh[zr + c], c, label, label_ok, p.mode, mse_scale);
    }
    return output_value(exp(z_sh[zr + c] - s.m) / s.total, c, label, label_ok, p.mode, batch.inv_rows);
}

// The step h's dropout masks are drawn for (0 when h has none; only the weight updates write it).
fn dropout_step() -> u32 {
    if p.drop.threshold == 0u {
        return 0u;
    }
    return atomicLoad(&counters[COUNTER_MASK_STEP]);
}
