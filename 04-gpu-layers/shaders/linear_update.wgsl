// linear_update.wgsl: the parameter gradients AND the optimizer step of up to THREE layers in
// ONE dispatch.
//
// For each layer: x: [batch, in] (its input), dy: [batch, out] (dL/d its pre-activation) ->
// grads: [(in + 1), out] = [x | 1]^T dy, i.e. dW = x^T dy and db = the column sums of dy (the
// bias is the weight of a constant-1 input: the last row of params); then params and the
// optimizer state move by SGD or Adam (common.wgsl). The gradient is also written to `grads`
// where the host keeps gradients (`u.opt.keep_grads`).
//
// Each workgroup owns a T x T tile of one layer's parameters (workgroups 0..b.first_group are
// layer a's tiles, then layer b's up to c.first_group, the rest layer c's). The batch is the reduction dimension. Its rows are
// staged in workgroup memory, UPD_R at a time (64: all of an MNIST batch in one round), by all
// invocations at once: one round of loads, coalesced along k and j. The invocations are UPDATE_BATCH_SLICES
// slices of the batch times a grid of UPD_B x UPD_B parameter blocks (T = 32, UPD_B = 4: an
// 8 x 8 grid of 4 x 4 blocks, 64 x UPDATE_BATCH_SLICES invocations): each invocation sums every UPDATE_BATCH_SLICES-th
// row for its block (UPD_B / 4 vec4 of x and of dy per row, UPD_B^2 multiply-adds), then the
// slices' partial sums meet in workgroup memory and each invocation moves T^2 / invocations
// parameters. An 8 x 8 block (UPD_B = 8) does 64 multiply-adds per 4 loads of workgroup memory
// instead of 16 per 2, for wide layers in big batches; its 4 x 4 quads are strided (quads
// bk, bk + T / 8 along k, the same along j), so that neighbouring invocations read neighbouring
// vec4 of the staged rows. Splitting the batch over slices shortens each chain of
// dependent multiply-adds UPDATE_BATCH_SLICES times; `gpu-layers --sweep` times UPDATE_BATCH_SLICES = 1, 2, 4, 8. With
// UPD_PRE = 1 the parameters and their optimizer state are loaded at the start, while the rows
// are staged, because they do not depend on the gradient; with UPD_PRE = 0 they are loaded at
// the end, which keeps those registers free during the rounds. Putting the layers in one dispatch saves a
// dispatch (and its barrier) per layer, where the device allows the storage buffers that takes:
// 11 for two layers, 16 for three (else linear_update_b_unbound.wgsl and
// linear_update_c_unbound.wgsl: one layer per dispatch, or two). In the split step,
// linear_update_next.wgsl adds a last phase: the next step's partial sums of x W1 for this
// tile (else linear_update_next_none.wgsl: nothing). The uniform, the bindings and the indices
// and masks of the rows' quads are in linear_update_rows.wgsl.

// T (the tile side the host divides by), UPD_B (an invocation's block side: 4 or 8), UPDATE_BATCH_SLICES
// (batch slices), UPD_R (rows per round) and UPD_PRE come from the prelude (src/tiles.rs,
// `FusedTiles`).
const TQ: u32 = T / 4u;                  // 4-wide quads along a tile side
const BQ: u32 = UPD_B / 4u;              // quads along an invocation's block side
const TB: u32 = T / UPD_B;               // blocks along a tile side
const THREADS: u32 = TB * TB * UPDATE_BATCH_SLICES;   // invocations per workgroup
const PER_THREAD: u32 = T * T / THREADS; // parameters each invocation moves at the end
const QPI: u32 = UPD_R * TQ / THREADS;   // quads of x, and of dy, each invocation stages a round

// x rows (k0..k0+T) in the first half, dy rows (j0..j0+T) in the second, as vec4 quads; after
// the last round the slices' partial sums: [UPDATE_BATCH_SLICES][T][TQ] vec4 (slice, k, quad of j).
var<workgroup> sh: array<vec4<f32>, max(2u * UPD_R * TQ, UPDATE_BATCH_SLICES * TQ * TQ * 4u)>;

// A parameter with its optimizer state, read before its gradient is known.
struct Param {
    value: f32,
    s0: f32,
    s1: f32,
}

// This invocation's parameters (element e = li + m * THREADS of the tile, row e / T, column
// e % T) and their optimizer state, every load under ONE branch on the layer (as load_round).
// Indices past the layer are clamped into it; step() never uses those values.
fn load_params(layer: u32, shape: LayerShape, k0: u32, j0: u32, li: u32) -> array<Param, PER_THREAD> {
    let count = (shape.inputs + 1u) * shape.outputs;
    let adam = u.opt.kind == OPT_ADAM;
    var i: array<u32, PER_THREAD>;
    var i1: array<u32, PER_THREAD>; // Adam's second moment (SGD: its one state again, unused)
    for (var m = 0u; m < PER_THREAD; m++) {
        let e = li + m * THREADS;
        i[m] = min(k0 + e / T, shape.inputs) * shape.outputs + min(j0 + e % T, shape.outputs - 1u);
        i1[m] = select(i[m], count + i[m], adam);
    }
    var p: array<Param, PER_THREAD>;
    if UPD_LAYERS == 3u && layer == 2u {
        for (var m = 0u; m < PER_THREAD; m++) {
            p[m] = Param(params_c[i[m]], state_c[i[m]], state_c[i1[m]]);
        }
    } else if UPD_LAYERS >= 2u && layer == 1u {
        for (var m = 0u; m < PER_THREAD; m++) {
            p[m] = Param(params_b[i[m]], state_b[i[m]], state_b[i1[m]]);
        }
    } else {
        for (var m = 0u; m < PER_THREAD; m++) {
            p[m] = Param(params_a[i[m]], state_a[i[m]], state_a[i1[m]]);
        }
    }
    return p;
}

// One parameter: move it (and its optimizer state), and keep its gradient where asked. `adam` is
// this step's adam_scale, from the step count read once at the start of the kernel (read here,
// the H200's driver loaded it again for each parameter after the previous one's stores, one
// memory round trip after another).
// Returns the parameter's new value.
fn step(layer: u32, shape: LayerShape, k: u32, j: u32, p: Param, g: f32, adam: AdamScale) -> f32 {
    if k > shape.inputs || j >= shape.outputs {
        return p.value;
    }
    var moved: Moved;
    if u.opt.kind == OPT_SGD {
        moved = sgd_step(u.opt, p.value, g, p.s0);
    } else {
        moved = adam_step(u.opt, adam, p.value, g, p.s0, p.s1);
    }
    store_moved(layer, k * shape.outputs + j, (shape.inputs + 1u) * shape.outputs, g, moved);
    return moved.param;
}

// An invocation's quads of a round, x's at the indices xi and dy's at di (x_quad_index,
// dy_quad_index): x's in the first QPI, dy's after. All 8 QPI loads sit under ONE branch on the
// layer, so they are in flight together. (With a branch around each load, the loads went one
// memory trip after another, as if each branch waited for its own: on an H100 the update of
// 784-512-256-10 at batch 64 took 11.5-12.5 us alone, 9.9 with one branch per round and per
// parameter load; results/h100-update-branches/.)
fn load_round(layer: u32, xi: array<vec4<u32>, QPI>, di: array<vec4<u32>, QPI>) -> array<vec4<f32>, 2u * QPI> {
    var q: array<vec4<f32>, 2u * QPI>;
    if UPD_LAYERS == 3u && layer == 2u {
        for (var m = 0u; m < QPI; m++) {
            q[m] = vec4<f32>(x_c[xi[m].x], x_c[xi[m].y], x_c[xi[m].z], x_c[xi[m].w]);
            q[QPI + m] = vec4<f32>(dy_c[di[m].x], dy_c[di[m].y], dy_c[di[m].z], dy_c[di[m].w]);
        }
    } else if UPD_LAYERS >= 2u && layer == 1u {
        for (var m = 0u; m < QPI; m++) {
            q[m] = vec4<f32>(x_b[xi[m].x], x_b[xi[m].y], x_b[xi[m].z], x_b[xi[m].w]);
            q[QPI + m] = vec4<f32>(dy_b[di[m].x], dy_b[di[m].y], dy_b[di[m].z], dy_b[di[m].w]);
        }
    } else {
        for (var m = 0u; m < QPI; m++) {
            q[m] = vec4<f32>(x_a[xi[m].x], x_a[xi[m].y], x_a[xi[m].z], x_a[xi[m].w]);
            q[QPI + m] = vec4<f32>(dy_a[di[m].x], dy_a[di[m].y], dy_a[di[m].z], dy_a[di[m].w]);
        }
    }
    return q;
}

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let layer = layer_of(wid.x);
    let shape = shape_of(layer);
    let tile = wid.x - shape.first_group;
    let k0 = (tile / shape.tiles_n) * T;
    let j0 = (tile % shape.tiles_n) * T;
    let q = li % (TB * TB); // this invocation's block: quads bk + a TB along k (a < BQ) and
    let s = li / (TB * TB); // bj + b TB along j (b < BQ); and its slice of the batch
    let bk = q / TB;
    let bj = q % TB;
    // The split step's prologue: layer a's partial sums for the first batch, nothing else.
    let partials_only = u.split.partials_only == 1u;
    if partials_only && layer != 0u {
        return; // the whole workgroup
    }
    let adam_t = counters[COUNTER_STEP]; // Adam's step count, in flight during the rounds
    // ANCHOR: mask_step
    // The step the next step's fused dropout masks are drawn for: this one's count, written once
    // (no kernel of this dispatch reads it; the step's forward and backward are done).
    if wid.x == 0u && li == 0u {
        counters[COUNTER_MASK_STEP] = adam_t;
    }
    // ANCHOR_END: mask_step
    next_prefetch(layer, shape, k0, li); // the split step: the next batch's first rows

    // The parameters this invocation moves at the end (element e = li + m * THREADS of the
    // tile, row e / T, column e % T) and their state: loaded now, they do not depend on the
    // gradient.
    var pre: array<Param, PER_THREAD>;
    if UPD_PRE == 1u {
        pre = load_params(layer, shape, k0, j0, li);
    }

    // acc[(a * 4 + e) * BQ + b][f]: parameter (4 (bk + a TB) + e, 4 (bj + b TB) + f)
    // ANCHOR: rounds
    var acc: array<vec4<f32>, 4u * BQ * BQ>;
    let rows = select(batch.rows, 0u, partials_only);
    for (var r0 = 0u; r0 < rows; r0 += UPD_R) {
        // Stage UPD_R rows: quad i of the x half is row i / TQ, columns 4 (i % TQ).., the same
        // for dy. Every invocation loads its quads before storing any, all under one branch.
        var xi: array<vec4<u32>, QPI>;
        var di: array<vec4<u32>, QPI>;
        for (var m = 0u; m < QPI; m++) {
            let i = li + m * THREADS;
            xi[m] = x_quad_index(shape, r0 + i / TQ, k0 + 4u * (i % TQ));
            di[m] = dy_quad_index(shape, r0 + i / TQ, j0 + 4u * (i % TQ));
        }
        let loaded = load_round(layer, xi, di);
        for (var m = 0u; m < QPI; m++) {
            let i = li + m * THREADS;
            sh[i] = x_quad_value(shape, r0 + i / TQ, k0 + 4u * (i % TQ), loaded[m]);
            sh[UPD_R * TQ + i] = dy_quad_value(shape, r0 + i / TQ, j0 + 4u * (i % TQ), loaded[QPI + m]);
        }
        workgroupBarrier();
        for (var rr = s; rr < UPD_R; rr += UPDATE_BATCH_SLICES) {
            var xv: array<vec4<f32>, BQ>;
            var dv: array<vec4<f32>, BQ>;
            for (var a = 0u; a < BQ; a++) {
                xv[a] = sh[rr * TQ + bk + a * TB];
                dv[a] = sh[UPD_R * TQ + rr * TQ + bj + a * TB];
            }
            for (var a = 0u; a < BQ; a++) {
                for (var b = 0u; b < BQ; b++) {
                    acc[(a * 4u) * BQ + b] += xv[a].x * dv[b];
                    acc[(a * 4u + 1u) * BQ + b] += xv[a].y * dv[b];
                    acc[(a * 4u + 2u) * BQ + b] += xv[a].z * dv[b];
                    acc[(a * 4u + 3u) * BQ + b] += xv[a].w * dv[b];
                }
            }
        }
        workgroupBarrier();
    }
    // ANCHOR_END: rounds

    // ANCHOR: meet
    // The slices' partial sums meet in workgroup memory (the staging area is free now).
    for (var a = 0u; a < BQ; a++) {
        for (var e = 0u; e < 4u; e++) {
            for (var b = 0u; b < BQ; b++) {
                sh[(s * T + 4u * (bk + a * TB) + e) * TQ + bj + b * TB] = acc[(a * 4u + e) * BQ + b];
            }
        }
    }
    workgroupBarrier();
    if UPD_PRE == 0u {
        pre = load_params(layer, shape, k0, j0, li);
    }
    let adam = adam_scale(u.opt, adam_t);
    var moved: array<f32, PER_THREAD>; // element e = li + m * THREADS of the tile, after the step
    for (var m = 0u; m < PER_THREAD; m++) {
        let e = li + m * THREADS;
        let kk = e / T;
        let jj = e % T;
        var g = 0.0;
        for (var t = 0u; t < UPDATE_BATCH_SLICES; t++) {
            g += sh[(t * T + kk) * TQ + jj / 4u][jj % 4u];
        }
        moved[m] = pre[m].value;
        if !partials_only {
            moved[m] = step(layer, shape, k0 + kk, j0 + jj, pre[m], g, adam);
        }
    }
    next_partials(layer, shape, k0, j0, li, moved);
    // ANCHOR_END: meet
}
