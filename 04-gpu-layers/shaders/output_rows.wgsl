// output_rows.wgsl: the output layer's work on a workgroup's rows, once their hidden values
// can be read: logits z = h W + b, softmax + cross-entropy (loss/correct/rows into the counters),
// dL/dz into `out`, and dh = (dL/dz W^T) * act'(h) for the layer below. Shared by two kernels:
// output_layer.wgsl, which reads h from memory, and forward_output.wgsl, which computes h in the
// same workgroup a moment before (one dispatch fewer per step).
//
// The including kernel declares: the uniform `p` with fields `inputs` (h's width), `classes`,
// `mode`, `hidden_act`, `drop` (h's dropout), `loss` (LOSS_CE or LOSS_MSE); `out_params` ([(inputs + 1), classes]: W, then b), `out`, `dh`,
// `counters`, `batch`; the workgroup arrays `w_sh` [W_SHARED], `z_sh` [OUT_Z_SHARED],
// `scratch` [>= OUT_WG]; the constants OUT_WG
// (invocations) and OUT_SLICES (most k-slices of a logit); and two functions:
// `hidden(staged, local_row, row, k) -> f32` (h[row, k]) and `row_label(row) -> u32`. What it
// does with a row of logits is row_softmax.wgsl's (prepended by the host).

// Reads [W; b] through workgroup memory when staged (`staged` is the same for the whole dispatch).
fn weight(staged: bool, i: u32) -> f32 {
    if staged {
        return w_sh[i];
    }
    return out_params[i];
}

// Rows row0 .. row0 + rows_here of the batch, `rpw` rows per workgroup (OUT_WG / rpw invocations
// per row), `lid` this invocation's index. Every barrier is reached by the whole workgroup.
fn output_rows(lid: u32, row0: u32, rows_here: u32, rpw: u32, w_staged: bool, h_staged: bool) {
    let k_len = p.inputs;
    let classes = p.classes;
    let per_row = OUT_WG / rpw; // invocations per row
    let lr = lid / per_row;     // this invocation's row in the group (>= rows_here: idle)
    let t = lid % per_row;      // its place in the row
    let row = row0 + lr;
    let live = lr < rows_here;
    var label = 0u;
    if live && p.mode != MODE_PREDICT {
        label = row_label(row); // issued now, used much later
    }

    // 1. Logits. With few classes, split k too: the row's invocations form `slices` groups of
    //    `classes`, each summing every slices-th k (ten classes, 64 invocations: 6 slices).
    let small = classes <= per_row;
    if small {
        let slices = min(per_row / classes, OUT_SLICES);
        let c = t % classes;
        let s = t / classes;
        var acc = 0.0;
        if live && s < slices {
            for (var k = s; k < k_len; k += slices) {
                acc += hidden(h_staged, lr, row, k) * weight(w_staged, k * classes + c);
            }
        }
        scratch[lid] = acc;
    }
    workgroupBarrier();
    if live {
        if small {
            if t < classes {
                var z = weight(w_staged, k_len * classes + t);
                for (var s = 0u; s < min(per_row / classes, OUT_SLICES); s++) {
                    z += scratch[lr * per_row + s * classes + t];
                }
                z_sh[lr * classes + t] = z;
            }
        } else {
            for (var c = t; c < classes; c += per_row) {
                var z = weight(w_staged, k_len * classes + c);
                for (var k = 0u; k < k_len; k++) {
                    z += hidden(h_staged, lr, row, k) * weight(w_staged, k * classes + c);
                }
                z_sh[lr * classes + c] = z;
            }
        }
    }
    workgroupBarrier();

    // 2. Softmax cross-entropy and 3. dh, with no barrier between them: z_sh keeps the logits
    //    (it is only read from here on), and every invocation of a row reads all of them and
    //    finds the row's max, argmax (the first maximum wins, as on the CPU) and sum of
    //    exponentials itself. With ten classes that is ten reads and ten exponentials each:
    //    redundant work, but cheaper than the four barriers and two one-invocation phases that
    //    a shared max and sum cost. The invocation that counts the row (the row's last, which
    //    has no dh to compute when the row has more invocations than h has columns) issues its
    //    atomic adds while the others go on with dL/dz and dh. Invocations with none of the
    //    three to do skip it all (in forward_output 1,024 invocations share a row).
    // ANCHOR: softmax
    let backprop = p.mode == MODE_TRAIN && p.hidden_act != ACT_NONE;
    let counts = t == per_row - 1u && p.mode != MODE_PREDICT;
    if live && (t < classes || counts || (backprop && t < k_len)) {
        let zr = lr * classes;
        let mse = p.loss == LOSS_MSE;
        let mse_scale = 2.0 * batch.inv_rows / f32(classes);
        let s = row_stats(zr, classes, label, mse);
        let label_ok = label < classes;
        if counts {
            count_row(label_ok, row_loss(zr, s, classes, label, mse), s.arg == label, p.mode, row == 0u);
        }
        for (var c = t; c < classes; c += per_row) {
            out[row * classes + c] = dl_dz(zr, c, s, label, label_ok, mse, mse_scale);
        }
        // Backpropagate into the layer below, straight from workgroup memory (through h's
        // dropout mask, drawn again, when it has one).
        if backprop {
            // A literal `mse`, so that each inlined copy of the loop has no branch on the loss.
            if mse {
                backprop_row(lr, row, t, per_row, zr, s, label, label_ok, true, mse_scale, w_staged, h_staged);
            } else {
                backprop_row(lr, row, t, per_row, zr, s, label, label_ok, false, mse_scale, w_staged, h_staged);
            }
        }
    }
    // ANCHOR_END: softmax
}

// dh of this invocation's values of k of the row: (dL/dz W^T) * act'(h), through h's dropout
// mask (drawn again) when it has one.
fn backprop_row(lr: u32, row: u32, t: u32, per_row: u32, zr: u32, s: RowStats, label: u32, label_ok: bool,
                mse: bool, mse_scale: f32, w_staged: bool, h_staged: bool) {
    let k_len = p.inputs;
    let classes = p.classes;
    let mask_step = dropout_step();
    for (var k = t; k < k_len; k += per_row) {
        var g = 0.0;
        for (var c = 0u; c < classes; c++) {
            let dz = dl_dz(zr, c, s, label, label_ok, mse, mse_scale);
            g += dz * weight(w_staged, k * classes + c);
        }
        let i = row * k_len + k;
        dh[i] = dropout_grad(g, hidden(h_staged, lr, row, k), p.hidden_act, p.drop, mask_step, i);
    }
}

// w_sh[i] = out_params[i] for i in [0, len), by all OUT_WG invocations, eight loads in flight each
// before the stores (MNIST's 1,290 floats: one round).
fn stage_weights(lid: u32, len: u32) {
    var i = lid;
    loop {
        if i + 7u * OUT_WG >= len {
            break;
        }
        var v: array<f32, 8>;
        for (var u = 0u; u < 8u; u++) {
            v[u] = out_params[i + u * OUT_WG];
        }
        for (var u = 0u; u < 8u; u++) {
            w_sh[i + u * OUT_WG] = v[u];
        }
        i += 8u * OUT_WG;
    }
    for (; i < len; i += OUT_WG) {
        w_sh[i] = out_params[i];
    }
}

