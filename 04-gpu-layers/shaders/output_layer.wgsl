// output_layer.wgsl: the whole output layer of a training step in ONE dispatch, a few rows per
// workgroup:
//   1. logits z = h W + b                        h: [batch, in], params: [(in + 1), classes]
//   2. softmax + cross-entropy + dL/dz            loss/correct/rows added to the counters
//      (or mean squared error, p.loss)
//   3. dh = (dL/dz W^T) * act'(h)                 the gradient for the hidden layer below
// Done as separate kernels this is matmul, bias add, softmax-CE, matmul A*B^T and the activation
// backward: five dispatches, each a barrier on the GPU, and z and dL/dz written to memory and
// read back. Here z and dL/dz never leave workgroup memory (out receives dL/dz only because the
// weight update needs it).
//
// Each workgroup takes `rows_per_group` rows (the host picks it: `FusedTiles::output_rows`,
// fewer when the classes of that many rows would not fit in z_sh), with OUT_WG / rows_per_group
// invocations per row.
// Why several rows: W and b are staged in workgroup memory once for all of them (MNIST: 129 x 10
// floats, one load per invocation), and the loss counters take one set of atomic adds per row
// from far fewer workgroups. Why the softmax has no tree: with ten classes a row's max, sum and
// argmax are ten steps for one invocation, where a tree over 64 invocations took a dozen
// barriers; so every invocation of a row takes those ten steps itself (output_rows.wgsl), and
// after the logits no barrier is left. Every barrier below is reached by the whole workgroup
// (uniform control flow).
//
// This file stages W, b and the rows of h, then calls `output_rows` (output_rows.wgsl, which
// the host prepends: the math of steps 1-3, shared with forward_output.wgsl).

// Its uniform `p` (OutputLayerParams) and bindings 1-7 are in output_params.wgsl.
@group(0) @binding(0) var<storage, read> h: array<f32>;

// OUT_WG (invocations) comes from the prelude; OUT_Z_SHARED too (the host divides
// by it to pick rows_per_group). Also from the prelude, chosen for the device (routing.rs,
// DeviceFit): W_SHARED floats of [W; b] and H_SHARED floats of the group's rows of h are staged
// when they fit (4096 and 1024 where the device allows the ~25 KiB of workgroup memory this
// kernel then takes; 2048 and 512 within WebGPU's default 16 KiB).
var<workgroup> w_sh: array<f32, W_SHARED>;
var<workgroup> h_sh: array<f32, H_SHARED>;
var<workgroup> z_sh: array<f32, OUT_Z_SHARED>; // [rows_per_group][classes]: z, then dL/dz
var<workgroup> scratch: array<f32, OUT_WG>;

@compute @workgroup_size(OUT_WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let rpw = p.rows_per_group;
    let row0 = (wid.x + wid.y * nwg.x) * rpw;
    if row0 >= batch.rows {
        return; // the whole workgroup
    }
    let k_len = p.inputs;
    let rows_here = min(rpw, batch.rows - row0);

    // 0. Stage W, b and the group's rows of h: eight loads in flight per invocation at a time.
    let w_len = (k_len + 1u) * p.classes;
    let w_staged = w_len <= W_SHARED;
    let h_len = rows_here * k_len;
    let h_staged = rpw * k_len <= H_SHARED;
    if w_staged {
        stage_weights(lid, w_len);
    }
    if h_staged {
        stage_hidden(row0 * k_len, lid, h_len);
    }
    workgroupBarrier();

    // 1.-3. Logits, softmax cross-entropy, dL/dz and dh (output_rows.wgsl).
    output_rows(lid, row0, rows_here, rpw, w_staged, h_staged);
}

fn hidden(staged: bool, local_row: u32, row: u32, k: u32) -> f32 {
    if staged {
        return h_sh[local_row * p.inputs + k];
    }
    return h[row * p.inputs + k];
}

fn row_label(row: u32) -> u32 {
    return labels[row];
}

// h_sh[i] = h[start + i] for i in [0, len), the same way.
fn stage_hidden(start: u32, lid: u32, len: u32) {
    var i = lid;
    loop {
        if i + 7u * OUT_WG >= len {
            break;
        }
        var v: array<f32, 8>;
        for (var u = 0u; u < 8u; u++) {
            v[u] = h[start + i + u * OUT_WG];
        }
        for (var u = 0u; u < 8u; u++) {
            h_sh[i + u * OUT_WG] = v[u];
        }
        i += 8u * OUT_WG;
    }
    for (; i < len; i += OUT_WG) {
        h_sh[i] = h[start + i];
    }
}
