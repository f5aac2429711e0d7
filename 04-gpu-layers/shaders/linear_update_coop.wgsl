// linear_update_coop.wgsl: a wide layer's parameter gradient on the tensor cores (f16 inputs,
// f32 sums) AND its optimizer step, in one dispatch.
//
// x: [batch, in] (the layer's input), dy: [batch, out] (dL/d its pre-activation) ->
// grads: [(in + 1), out] = [x | 1]^T dy (dW, then db as the last row); params and the optimizer
// state move by SGD or Adam (common.wgsl), as in linear_update.wgsl, whose one-layer bindings
// and `Update` uniform this kernel shares (layer a only).
//
// linear_update.wgsl gives each invocation a 4 x 4 block of parameters and sums the batch with
// f32 multiply-adds. At 784-1024 in a batch of 256 that is 0.2 G multiply-adds behind a few
// thousand workgroups' worth of staging, and it took 32 us on the H200. Here the product is a
// matmul with the batch as its reduction dimension, and the tensor cores do it (stage 03's
// kernel 08; linear_forward_coop.wgsl is the forward's twin):
//
//   workgroup: UC_T x UC_T = 64 x 64 parameters      per round of UC_R = 32 rows of the batch:
//   (4 subgroups of 32 x 32: 2 x 2 fragments)        all 128 invocations copy x [32][64] and
//                                                    dy [32][64] (4 quads of each), rounded to
//   A = x^T: fragments loaded column-major from      f16, into workgroup memory; each subgroup
//   the staged [row][k] tile; B = dy, row-major      loads 2 + 2 fragments per 16 rows and
//                                                    issues 4 multiply-adds
//
// The next round's copies are in flight in registers while this round multiplies (one buffer,
// two barriers per round). After the last round each subgroup stores its fragments into an f32
// tile in workgroup memory, and every invocation takes 32 parameters of it (neighbouring
// invocations, neighbouring columns): gradient, SGD or Adam, stores. Those parameters and their
// state are loaded at the start, so the loads overlap the rounds.
//
// Precision: x and dy are rounded to f16 (a relative 2^-11 each; gradients below f16's
// subnormal range, 6e-8, become 0, and an input beyond 65504 an infinity, which the trainer's
// NaN check reports); sums, parameters and optimizer state stay f32. Needs cooperative matrices
// (16 x 16 x 16, f16 inputs, f32 results) and subgroups of 32 (the host checks:
// gpu_matmul::coop_support); src/kernels.rs prepends the `enable` lines. UC_T and COOP_VEC4
// come from the prelude (src/wgsl.rs: the host sizes the grid by UC_T; `FusedTiles::coop_vec4`).

struct LayerShape {
    inputs: u32,
    outputs: u32,
    tiles_n: u32,     // tiles along the outputs
    first_group: u32, // first workgroup of this layer
}

struct Split {
    partials_only: u32,
    partial_rows: u32,
    _pad0: u32,
    _pad1: u32,
}

struct Update {
    opt: Opt,
    a: LayerShape,
    b: LayerShape, // not used here: one layer per dispatch
    split: Split,  // not used here
}

// x and dy as vec4 (every tensor's buffer is a whole number of 16-byte quads): with COOP_VEC4 = 1,
// one 16-byte load per quad where the rows are whole quads; else four 4-byte loads.
@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> dy: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> params: array<f32>;
@group(0) @binding(3) var<storage, read_write> grads: array<f32>;
@group(0) @binding(4) var<storage, read_write> state: array<f32>;
@group(0) @binding(10) var<storage, read> counters: array<u32>;
@group(0) @binding(11) var<uniform> batch: Batch;
@group(0) @binding(12) var<uniform> u: Update;

const UC_R: u32 = 32u;                     // rows of the batch per round
const THREADS: u32 = 128u;                 // 4 subgroups of 32
const SUB: u32 = 32u;                      // each subgroup's block side (2 fragments)
const TQ: u32 = UC_T / 4u;                 // quads along a tile side
const LDS: u32 = (UC_T + 8u) / 4u;         // vec4<f16> per staged row (padded by 8 halves)
const LDC: u32 = UC_T + 4u;                // f32 per row of the gradient tile (padded)
const RQ: u32 = UC_R * TQ / THREADS;       // quads of x (and of dy) each invocation copies per round
const PER_THREAD: u32 = UC_T * UC_T / THREADS;

var<workgroup> xs: array<vec4<f16>, UC_R * LDS>; // x rows [row][k]
var<workgroup> ds: array<vec4<f16>, UC_R * LDS>; // dy rows [row][j]
var<workgroup> cs: array<f32, UC_T * LDC>;       // the tile's gradient, after the rounds

// Four values of the augmented input row `row` ([x | 1]: column `inputs` is the constant 1 that
// multiplies the bias) from column k; zeros past it and past the live batch. Every load is
// issued, at an index clamped into the tensor, and `select` zeroes what lies outside (as in
// linear_update.wgsl, so the compiler can issue a round's loads back to back).
fn x_quad(row: u32, k: u32) -> vec4<f32> {
    let inputs = u.a.inputs;
    let r = min(row, max(batch.rows, 1u) - 1u);
    var v: vec4<f32>;
    if COOP_VEC4 == 1u && inputs % 4u == 0u {
        // Whole quads: inside the input, or the bias column's quad, or past both.
        v = select(select(vec4<f32>(0.0), vec4<f32>(1.0, 0.0, 0.0, 0.0), k == inputs), x[(r * inputs + min(k, inputs - 4u)) / 4u], k < inputs);
        return select(vec4<f32>(0.0), v, row < batch.rows);
    }
    for (var e = 0u; e < 4u; e++) {
        let kk = k + e;
        let i = r * inputs + min(kk, inputs - 1u);
        let value = x[i / 4u][i % 4u];
        v[e] = select(select(0.0, 1.0, kk == inputs), value, kk < inputs);
    }
    return select(vec4<f32>(0.0), v, row < batch.rows);
}

// Four values of dy's row `row` from column j; zeros past the outputs and past the live batch.
fn dy_quad(row: u32, j: u32) -> vec4<f32> {
    let outputs = u.a.outputs;
    let r = min(row, max(batch.rows, 1u) - 1u);
    var v: vec4<f32>;
    if COOP_VEC4 == 1u && outputs % 4u == 0u {
        v = select(vec4<f32>(0.0), dy[(r * outputs + min(j, outputs - 4u)) / 4u], j < outputs);
        return select(vec4<f32>(0.0), v, row < batch.rows);
    }
    for (var e = 0u; e < 4u; e++) {
        let i = r * outputs + min(j + e, outputs - 1u);
        v[e] = select(0.0, dy[i / 4u][i % 4u], j + e < outputs);
    }
    return select(vec4<f32>(0.0), v, row < batch.rows);
}

@compute @workgroup_size(THREADS)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
    @builtin(subgroup_id) sg: u32,
) {
    let shape = u.a;
    let k0 = (wid.x / shape.tiles_n) * UC_T;
    let j0 = (wid.x % shape.tiles_n) * UC_T;
    let adam_t = counters[COUNTER_STEP]; // Adam's step count, in flight during the rounds
    let rounds = (batch.rows + UC_R - 1u) / UC_R;

    // The parameters this invocation moves at the end (element e = tid + m * THREADS of the
    // tile: row e / UC_T, column e % UC_T) and their optimizer state, loaded now: they do not
    // depend on the gradient, and loaded after it, each parameter's loads would wait for the
    // previous one's stores (the compiler cannot tell that they never overlap).
    let count = (shape.inputs + 1u) * shape.outputs;
    let adam = u.opt.kind == OPT_ADAM;
    var p0: array<f32, PER_THREAD>;
    var p1: array<f32, PER_THREAD>;
    var p2: array<f32, PER_THREAD>;
    for (var m = 0u; m < PER_THREAD; m++) {
        let e = tid + m * THREADS;
        let i = min(k0 + e / UC_T, shape.inputs) * shape.outputs + min(j0 + e % UC_T, shape.outputs - 1u);
        p0[m] = params[i];
        p1[m] = state[i];
        if adam {
            p2[m] = state[count + i];
        }
    }

    // This invocation's quads of each round: quad q is row q / TQ, column 4 (q % TQ) of both
    // staged tiles.
    var xn: array<vec4<f32>, RQ>;
    var dn: array<vec4<f32>, RQ>;
    for (var l = 0u; l < RQ; l++) {
        let q = tid + l * THREADS;
        xn[l] = x_quad(q / TQ, k0 + 4u * (q % TQ));
        dn[l] = dy_quad(q / TQ, j0 + 4u * (q % TQ));
    }

    let wk = (sg / 2u) * SUB; // this subgroup's block: parameters k0 + wk.., j0 + wj..
    let wj = (sg % 2u) * SUB;
    var c00 = coop_mat16x16<f32, C>();
    var c01 = coop_mat16x16<f32, C>();
    var c10 = coop_mat16x16<f32, C>();
    var c11 = coop_mat16x16<f32, C>();
    for (var t = 0u; t < rounds; t++) {
        for (var l = 0u; l < RQ; l++) {
            let q = tid + l * THREADS;
            xs[(q / TQ) * LDS + q % TQ] = vec4<f16>(xn[l]);
            ds[(q / TQ) * LDS + q % TQ] = vec4<f16>(dn[l]);
        }
        workgroupBarrier();
        if t + 1u < rounds {
            let r0 = (t + 1u) * UC_R;
            for (var l = 0u; l < RQ; l++) {
                let q = tid + l * THREADS;
                xn[l] = x_quad(r0 + q / TQ, k0 + 4u * (q % TQ));
                dn[l] = dy_quad(r0 + q / TQ, j0 + 4u * (q % TQ));
            }
        }
        for (var rr = 0u; rr < UC_R; rr += 16u) {
            // A = x^T (k x rows): column-major from the [row][k] tile; B = dy (rows x j): row-major.
            let a0 = coopLoad<coop_mat16x16<f16, A>>(&xs[rr * LDS + wk / 4u], LDS);
            let a1 = coopLoad<coop_mat16x16<f16, A>>(&xs[rr * LDS + (wk + 16u) / 4u], LDS);
            let b0 = coopLoadT<coop_mat16x16<f16, B>>(&ds[rr * LDS + wj / 4u], LDS);
            let b1 = coopLoadT<coop_mat16x16<f16, B>>(&ds[rr * LDS + (wj + 16u) / 4u], LDS);
            c00 = coopMultiplyAdd(a0, b0, c00);
            c01 = coopMultiplyAdd(a0, b1, c01);
            c10 = coopMultiplyAdd(a1, b0, c10);
            c11 = coopMultiplyAdd(a1, b1, c11);
        }
        workgroupBarrier();
    }

    let s00 = c00;
    let s01 = c01;
    let s10 = c10;
    let s11 = c11;
    let i00 = wk * LDC + wj;
    let i01 = wk * LDC + wj + 16u;
    let i10 = (wk + 16u) * LDC + wj;
    let i11 = (wk + 16u) * LDC + wj + 16u;
    coopStoreT(s00, &cs[i00], LDC);
    coopStoreT(s01, &cs[i01], LDC);
    coopStoreT(s10, &cs[i10], LDC);
    coopStoreT(s11, &cs[i11], LDC);
    workgroupBarrier();

    // Each parameter of the tile: gradient, step, stores.
    for (var m = 0u; m < PER_THREAD; m++) {
        let e = tid + m * THREADS;
        let k = k0 + e / UC_T;
        let j = j0 + e % UC_T;
        if k > shape.inputs || j >= shape.outputs {
            continue;
        }
        let i = k * shape.outputs + j;
        let g = cs[(e / UC_T) * LDC + e % UC_T];
        var moved: Moved;
        if adam {
            moved = adam_step(u.opt, adam_t, p0[m], g, p1[m], p2[m]);
        } else {
            moved = sgd_step(u.opt, p0[m], g, p1[m]);
        }
        grads[i] = g;
        params[i] = moved.param;
        state[i] = moved.s0;
        if adam {
            state[count + i] = moved.s1;
        }
    }
}
