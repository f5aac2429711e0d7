// forward_output.wgsl: a hidden layer's forward AND the output layer on top of it, in ONE
// dispatch:
//   1. h = act(x W1 + b1)            x: [batch, x_inputs], params: [(x_inputs + 1), inputs]
//                                    -> y (= h): [batch, inputs]
//   2. output_rows.wgsl on h         logits, softmax + cross-entropy, dL/dz -> out [batch, classes],
//                                    dh = (dL/dz W2^T) * act'(h) -> dh [batch, inputs]
//
// Why: in a step of 784-128-10 linear_forward and output_layer are two dependent dispatches, and
// a dependent dispatch costs ~2 us on the H200 before it does anything (the chapter's "dispatch
// floor"), plus the output layer's own trip through memory for h. The output layer of a row
// needs all of that row's hidden values, and linear_forward spreads a row's columns over
// several workgroups. Here a workgroup owns TR WHOLE rows instead: every column of h for them
// (CB blocks of TN columns per invocation, the k loop split KS ways as in linear_forward.wgsl),
// kept in workgroup memory, so the output layer can start after one barrier. The price: fewer,
// larger workgroups (ceil(batch / TR)), each reading all of W1.
//
// The host merges a LinearForward and the OutputLayer that reads its output into this kernel
// when the hidden layer has at most TN x CB columns and the device allows the workgroup (see
// gpu/plan.rs); otherwise the two run as before. The input comes from forward_input.wgsl (x) or
// forward_input_gather.wgsl (the batch gathered from byte images), like linear_forward's.
// Phase 1 has two forms: the k loop (forward_k_loop.wgsl), or, in the split step, the sum of
// the partial products the previous step's linear_update wrote (forward_split_sums.wgsl).

struct ForwardOutputParams {
    // The output layer's fields, named as output_rows.wgsl reads them: h's width, classes, a
    // MODE_* code, the ACT_* code for dh (ACT_NONE: no dh).
    inputs: u32,
    classes: u32,
    mode: u32,
    hidden_act: u32,
    // The hidden layer's: its inputs (x's width) and its activation.
    x_inputs: u32,
    act: u32,
    // The split step only: rows per k-tile in the partial sums (the tape's largest batch).
    partial_rows: u32,
    // The output layer's loss: LOSS_CE or LOSS_MSE.
    loss: u32,
    // The hidden layer's dropout (none in evaluation and prediction): drawn on h as it is
    // written, drawn again for dh (output_rows.wgsl).
    drop: DropoutMask,
}

// Bindings 0 and 5-10 belong to the input form (forward_input*.wgsl).
@group(0) @binding(1) var<storage, read> params: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> batch: Batch;
@group(0) @binding(4) var<uniform> p: ForwardOutputParams;
@group(0) @binding(11) var<storage, read> out_params: array<f32>;
@group(0) @binding(12) var<storage, read_write> out: array<f32>;
@group(0) @binding(13) var<storage, read_write> dh: array<f32>;
@group(0) @binding(14) var<storage, read_write> counters: array<atomic<u32>>;

// TN, KS, TR, CB, U, OUT_WG (= TN x KS), OUT_SLICES, W_SHARED and OUT_Z_SHARED (= TR x the most
// classes) come from the prelude (src/tiles.rs, `FusedTiles::merged_*`).
var<workgroup> scratch: array<f32, SCRATCH>; // [KS][TR][TN * CB] partial sums, then the logits' slices
var<workgroup> h_sh: array<f32, TR * TN * CB>; // [TR][inputs]
var<workgroup> w_sh: array<f32, W_SHARED>;
var<workgroup> z_sh: array<f32, OUT_Z_SHARED>;
// Outputs of step 1 (the slices' sum, the bias and the activation) per invocation.
const FINISH_PER: u32 = (TR * TN * CB + TN * KS - 1u) / (TN * KS);

// ANCHOR: main
@compute @workgroup_size(TN, KS)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
) {
    let row0 = (wid.x + wid.y * nwg.x) * TR;
    if row0 >= batch.rows {
        return; // the whole workgroup
    }
    let li = lid.y * TN + lid.x;
    let k_len = p.x_inputs;
    let n = p.inputs;
    let rows_here = min(TR, batch.rows - row0);

    // 0. Stage the input rows (gathering form) and the output layer's [W2; b2].
    stage_input(row0, k_len, true, li);
    let w_len = (n + 1u) * p.classes;
    let w_staged = w_len <= W_SHARED;
    if w_staged {
        stage_weights(li, w_len);
    }
    // The bias of the columns this invocation finishes after step 1, asked for now so that it
    // arrives during step 1 rather than after its barrier (column n - 1 stands in past n).
    let cw = TN * CB;
    var bias: array<f32, FINISH_PER>;
    for (var m = 0u; m < FINISH_PER; m++) {
        bias[m] = params[k_len * n + min((li + m * TN * KS) % cw, n - 1u)];
    }

    // 1. The TR rows' pre-activations without the bias, as slices in `scratch`
    //    ([slices][TR][TN * CB]): KS slices of the k loop (forward_k_loop.wgsl), or fewer slices
    //    of the partial sums the previous step's update left (forward_split_sums.wgsl, the split
    //    step). The partial sums read nothing staged (SUMS_FIRST), so their loads go out with
    //    step 0's, and one barrier serves both steps.
    var slices = 0u;
    if SUMS_FIRST {
        slices = hidden_slices(row0, li, lid, k_len, n);
    }
    workgroupBarrier();
    if !SUMS_FIRST {
        slices = hidden_slices(row0, li, lid, k_len, n);
        workgroupBarrier();
    }
    // The slices meet; bias, activation and the dropout mask on the way into h_sh (and y, which
    // the weight update reads).
    let mask_step = dropout_step();
    for (var m = 0u; m < FINISH_PER; m++) {
        let o = li + m * TN * KS;
        let r = o / cw;
        let c = o % cw;
        if o < TR * cw && c < n {
            var z = 0.0;
            for (var s = 0u; s < slices; s++) {
                z += scratch[(s * TR + r) * cw + c];
            }
            let v = activate(z + bias[m], p.act) * mask_value(p.drop, mask_step, (row0 + r) * n + c);
            h_sh[r * n + c] = v;
            if r < rows_here {
                y[(row0 + r) * n + c] = v;
            }
        }
    }
    workgroupBarrier();

    // 2. The output layer on these rows, h read from h_sh (output_rows.wgsl).
    output_rows(li, row0, rows_here, TR, w_staged, true);
}
// ANCHOR_END: main

fn hidden(staged: bool, local_row: u32, row: u32, k: u32) -> f32 {
    return h_sh[local_row * p.inputs + k];
}
