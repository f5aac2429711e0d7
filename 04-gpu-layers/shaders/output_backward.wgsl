// output_backward.wgsl: the output layer of a training step AND the backward of the hidden
// layer below it, in ONE dispatch: output_wide.wgsl's work (logits z = h W + b, softmax +
// cross-entropy (or mean squared error) into the counters, dL/dz into `out`, dy = (dL/dz W^T) *
// act'(h) into `dh`), then linear_backward_input.wgsl's (dx = (dy V^T) * act'(h_below), V the
// weights of the layer below).
//
// Apart, the two are two dependent dispatches, and the second waits for the whole first. Here
// a workgroup owns the dx block of linear_backward_input (BI_K values of k for BI_R rows), and
// its BI_R rows of dy are all it needs of the output layer: it computes them itself, into
// workgroup memory, instead of reading them from `dh`. Each column of workgroups repeats the
// output layer of its rows (in x H x classes multiply-adds, a few percent of the dx block's
// work); the first column also writes `out`, `dh` (the weight update reads them) and the loss.
//
//   1. the first chunk of V is requested; then each row's LANES invocations sum its logits'
//      products over their values of k (k = lane, lane + LANES, ...) for all classes at once
//   2. the partial logits meet in workgroup memory: one invocation per (row, class) adds the
//      LANES of them and the bias
//   3. every invocation finds its row's max and sum of exponentials from the logits
//      (row_softmax.wgsl), then dy
//      for its values of k, into workgroup memory (`dys`, zero past H)
//   4. dx: the chunks of V through workgroup memory (backward_input_w.wgsl), each multiplied
//      against the rows of dy already there
//
// Classes are held in OB_C registers whatever the layer's `classes` (at most OB_C), W read at a
// clamped column past them, as in output_wide.wgsl. The same math as the two kernels apart, up
// to the order of the sums over k: the CPU reference is theirs.

// Its uniform `p` (OutputLayerParams) and bindings 1-7 are output_layer.wgsl's, in
// output_params.wgsl; the layer below's weights `params` ([(in + 1), H]), output `h_below`
// ([batch, in]), dx and uniform `q` (LinearParams) at 8-11.
@group(0) @binding(0) var<storage, read> h: array<f32>;
@group(0) @binding(8) var<storage, read> params: array<f32>;
@group(0) @binding(9) var<storage, read> h_below: array<f32>;
@group(0) @binding(10) var<storage, read_write> dx: array<f32>;
@group(0) @binding(11) var<uniform> q: LinearParams;

// From the prelude: OB_C classes in registers, OB_H the widest h (the rows of dy staged), OB_KPI
// values of k in flight per invocation. LANES invocations per row.
const LANES: u32 = THREADS / BI_R;

// First the partial logits [row][class][lane], then dy [row][OB_H].
var<workgroup> dys: array<f32, BI_R * OB_H>;
var<workgroup> z_sh: array<f32, BI_R * OB_C>; // [row][class]

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let k0 = wid.x * BI_K;
    let r0 = wid.y * BI_R;
    if r0 >= batch.rows {
        return; // the whole workgroup is past the live batch
    }
    let hw = p.inputs;
    let classes = p.classes;
    // 1-3: invocation `tid` works on row rr (rows past the batch repeat its last row and write
    // nothing), values of k lane, lane + LANES, ...
    let rr = tid / LANES;
    let lane = tid % LANES;
    let live = r0 + rr < batch.rows;
    let row = min(r0 + rr, batch.rows - 1u);
    let owner = wid.x == 0u; // the column of workgroups that writes out, dh and the counters
    let label = labels[row];
    var w_next = load_w_chunk(tid, k0, 0u, q.inputs, q.outputs);

    // 1. This invocation's partial logits.
    var acc: array<f32, OB_C>;
    for (var base = 0u; base < hw; base += OB_KPI * LANES) {
        var hv: array<f32, OB_KPI>;
        var wv: array<f32, OB_KPI * OB_C>;
        for (var i = 0u; i < OB_KPI; i++) {
            let k = base + i * LANES + lane;
            let kk = min(k, hw - 1u);
            hv[i] = select(0.0, h[row * hw + kk], k < hw);
            for (var c = 0u; c < OB_C; c++) {
                wv[i * OB_C + c] = out_params[kk * classes + min(c, classes - 1u)];
            }
        }
        for (var i = 0u; i < OB_KPI; i++) {
            for (var c = 0u; c < OB_C; c++) {
                acc[c] += hv[i] * wv[i * OB_C + c];
            }
        }
    }

    // 2. The logits: one invocation per (row, class) adds its row's lanes and the bias.
    for (var c = 0u; c < OB_C; c++) {
        dys[(rr * OB_C + c) * LANES + lane] = acc[c];
    }
    workgroupBarrier();
    for (var e = tid; e < BI_R * OB_C; e += THREADS) {
        let c = e % OB_C;
        var z = out_params[hw * classes + min(c, classes - 1u)];
        for (var j = 0u; j < LANES; j++) {
            z += dys[e * LANES + j];
        }
        z_sh[e] = z;
    }
    workgroupBarrier();

    // 3. Softmax cross-entropy (or MSE) of row rr, dL/dz, and dy for this invocation's k.
    let zr = rr * OB_C;
    let mse = p.loss == LOSS_MSE;
    let mse_scale = 2.0 * batch.inv_rows / f32(classes);
    let s = row_stats(zr, classes, label, mse);
    let label_ok = label < classes;
    if owner && live {
        if lane == 0u {
            count_row(label_ok, row_loss(zr, s, classes, label, mse), s.arg == label, p.mode, r0 + rr == 0u);
        }
        if lane < classes {
            out[row * classes + lane] = dl_dz(zr, lane, s, label, label_ok, mse, mse_scale);
        }
    }
    var dz: array<f32, OB_C>;
    for (var c = 0u; c < OB_C; c++) {
        if c < classes {
            dz[c] = dl_dz(zr, c, s, label, label_ok, mse, mse_scale);
        }
    }
    // Every invocation has read the partial logits (the barrier above): dys now takes dy.
    let mask_step = atomicLoad(&counters[COUNTER_MASK_STEP]);
    let padded = (hw + BI_J - 1u) / BI_J * BI_J;
    for (var k = lane; k < padded; k += LANES) {
        var d = 0.0;
        if k < hw {
            var g = 0.0;
            for (var c = 0u; c < OB_C; c++) {
                g += dz[c] * out_params[k * classes + min(c, classes - 1u)];
            }
            let e = row * hw + k;
            d = dropout_grad(g, h[e], p.hidden_act, p.drop, mask_step, e);
            if owner && live {
                dh[e] = d;
            }
        }
        dys[rr * OB_H + k] = d;
    }

    // 4. dx for this invocation's k (kk) and row (rb), V in chunks of BI_J rows of dy's columns.
    let kk = tid % BI_K;
    let rb = tid / BI_K;
    var g = 0.0;
    let chunks = padded / BI_J;
    for (var t = 0u; t < chunks; t++) {
        store_w_chunk(tid, w_next);
        workgroupBarrier(); // the chunk, and (first time round) dy, are in
        // The next chunk's copies, in flight during this chunk's multiply-adds.
        if t + 1u < chunks {
            w_next = load_w_chunk(tid, k0, (t + 1u) * BI_J, q.inputs, q.outputs);
        }
        let j0 = t * BI_J;
        for (var jj = 0u; jj < BI_J; jj++) {
            g += dys[rb * OB_H + j0 + jj] * wt[jj * PAD + kk];
        }
        workgroupBarrier(); // everyone is done reading before the next chunk is stored
    }
    let out_row = r0 + rb;
    let k = k0 + kk;
    if out_row < batch.rows && k < q.inputs {
        let i = out_row * q.inputs + k;
        dx[i] = dropout_grad(g, h_below[i], q.act, q.drop, mask_step, i);
    }
}
