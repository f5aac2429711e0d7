// linear_update_coop.wgsl: the parameter gradients of up to THREE layers on the tensor cores
// (f16 inputs, f32 sums) AND their optimizer step, in one dispatch.
//
// For each layer: x: [batch, in] (its input), dy: [batch, out] (dL/d its pre-activation) ->
// grads: [(in + 1), out] = [x | 1]^T dy (dW, then db as the last row); params and the optimizer
// state move by SGD or Adam (common.wgsl). Bindings, uniform and workgroup order are
// linear_update.wgsl's (layer a's tiles, then layer b's, then layer c's; linear_update_b.wgsl
// and linear_update_c.wgsl declare layer b's and c's buffers).
//
// linear_update.wgsl gives each invocation a 4 x 4 block of parameters and sums the batch with
// f32 multiply-adds: at 784-1024 in a batch of 256, 32 us on the H200. Here the batch sum is a
// matmul whose reduction dimension is the batch, on the tensor cores (stage 03's kernel 08;
// linear_forward_coop.wgsl is the forward's counterpart):
//
//   workgroup: UC_T x UC_T = 64 x 64 parameters      per round of UC_R = 32 rows of the batch:
//   8 subgroups: 2 slices of the batch (rows 0-15    all 256 invocations copy x [32][64] and
//   and 16-31 of each round) x 4 blocks of 32 x 32   dy [32][64] (2 quads of each), rounded to
//   (2 x 2 fragments each)                           f16, into workgroup memory; each subgroup
//                                                    loads 2 + 2 fragments of its 16 rows and
//   A = x^T: fragments loaded column-major from      issues 4 multiply-adds
//   the staged [row][k] tile; B = dy, row-major
//
// The next round's copies are in flight in registers while this round multiplies (one buffer,
// two barriers per round). After the last round each slice stores its fragments into its own
// f32 tile in workgroup memory, and every invocation takes 16 parameters (neighbouring
// invocations, neighbouring columns): the two slices' sums, SGD or Adam, stores. Those
// parameters and their optimizer state are loaded after the rounds, UC_CHUNK = 4 at a time, all
// four's loads before any of their stores. On the H200 at 784-1024 in a batch of 256 (README,
// "Wide layers on the tensor cores"): loaded one by one between the stores (each parameter's
// loads then wait for the previous one's stores: the compiler cannot tell that they never
// overlap), 55 us with 128 invocations of 32 parameters each; loaded before the rounds, so
// that they overlap them, 47 us (512 bytes spilled per invocation), and 38 us with two slices
// (16 each, 256 spilled); after the rounds, 16 at a time 29.8 us, 4 at a time 27.5, one at a
// time 31.4.
//
// UC_S = 1 (FusedTiles::coop_update_batch_slices, a sweep variant) halves the workgroup: 4
// subgroups, each taking both 16-row halves of every round, 128 invocations of 32 parameters
// each, one f32 gradient tile. The grid is the same. On the H200 at 784-1024 in a batch of 256
// it took 40.4 us against 26.5 with two slices: 183 registers per invocation against 126, so
// two workgroups share a multiprocessor either way (README, "Wide layers on the tensor cores").
//
// Precision: x and dy are rounded to f16 (a relative 2^-11 each; gradients below f16's
// subnormal range, 6e-8, become 0, and an input beyond 65504 an infinity, which the trainer's
// NaN check reports); sums, parameters and optimizer state stay f32. Needs cooperative matrices
// (16 x 16 x 16, f16 inputs, f32 results) and subgroups of 32 (the host checks:
// gpu_matmul::coop_support); src/gpu/kernels.rs prepends the `enable` lines. UC_T comes from the
// prelude (src/wgsl.rs: the host sizes the grid by it).

// The uniform, layer a's buffers and the loads of the rows: linear_update_rows.wgsl; layer
// b's buffers: linear_update_b.wgsl.

const UC_R: u32 = 32u;                     // rows of the batch per round
const SLICES: u32 = UC_S;                  // slices of each round (UC_R / SLICES rows each): 1 or 2
const THREADS: u32 = SLICES * 128u;        // subgroups of 32: SLICES x 4 blocks
const HALVES: u32 = UC_R / 16u / SLICES;   // 16-row halves of a round each subgroup multiplies
const SUB: u32 = 32u;                      // each subgroup's block side (2 fragments)
const TQ: u32 = UC_T / 4u;                 // quads along a tile side
const LDS: u32 = (UC_T + 8u) / 4u;         // vec4<f16> per staged row (padded by 8 halves)
const LDC: u32 = UC_T + 4u;                // f32 per row of a gradient tile (padded)
const RQ: u32 = UC_R * TQ / THREADS;       // quads of x (and of dy) each invocation copies per round
const PER_THREAD: u32 = UC_T * UC_T / THREADS;
const UC_CHUNK: u32 = 4u;                  // parameters whose loads are issued together (README)

var<workgroup> xs: array<vec4<f16>, UC_R * LDS>;       // x rows [row][k]
var<workgroup> ds: array<vec4<f16>, UC_R * LDS>;       // dy rows [row][j]
var<workgroup> cs: array<f32, SLICES * UC_T * LDC>;    // each slice's gradient tile, after the rounds

// UC_CHUNK parameters an invocation moves, from its m0-th (element e = tid + m * THREADS of the
// tile: row e / UC_T, column e % UC_T), and their optimizer state (p2: Adam's second moments).
fn load_params(
    layer: u32,
    shape: LayerShape,
    k0: u32,
    j0: u32,
    tid: u32,
    m0: u32,
    p0: ptr<function, array<f32, UC_CHUNK>>,
    p1: ptr<function, array<f32, UC_CHUNK>>,
    p2: ptr<function, array<f32, UC_CHUNK>>,
) {
    let count = (shape.inputs + 1u) * shape.outputs;
    for (var c = 0u; c < UC_CHUNK; c++) {
        let e = tid + (m0 + c) * THREADS;
        let i = min(k0 + e / UC_T, shape.inputs) * shape.outputs + min(j0 + e % UC_T, shape.outputs - 1u);
        let m = load_moved(layer, i, count);
        (*p0)[c] = m.param;
        (*p1)[c] = m.s0;
        (*p2)[c] = m.s1;
    }
}

@compute @workgroup_size(THREADS)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
    @builtin(subgroup_id) sg: u32,
) {
    let layer = layer_of(wid.x);
    let shape = shape_of(layer);
    let tile = wid.x - shape.first_group;
    let k0 = (tile / shape.tiles_n) * UC_T;
    let j0 = (tile % shape.tiles_n) * UC_T;
    let adam_t = counters[COUNTER_STEP]; // Adam's step count, in flight during the rounds
    // The step the next step's fused dropout masks are drawn for: this one's count, written once
    // (no kernel of this dispatch reads it; the step's forward and backward are done).
    if wid.x == 0u && tid == 0u {
        counters[COUNTER_MASK_STEP] = adam_t;
    }
    let rounds = (batch.rows + UC_R - 1u) / UC_R;


    // This invocation's quads of each round: quad q is row q / TQ, column 4 (q % TQ) of both
    // staged tiles.
    var xn: array<vec4<f32>, RQ>;
    var dn: array<vec4<f32>, RQ>;
    for (var l = 0u; l < RQ; l++) {
        let q = tid + l * THREADS;
        xn[l] = x_quad(layer, shape, q / TQ, k0 + 4u * (q % TQ));
        dn[l] = dy_quad(layer, shape, q / TQ, j0 + 4u * (q % TQ));
    }

    let slice = sg / 4u;            // rows slice * 16 .. + 16 of each round
    let wk = ((sg % 4u) / 2u) * SUB; // this subgroup's block: parameters k0 + wk.., j0 + wj..
    let wj = (sg % 2u) * SUB;
    let rr = slice * (UC_R / SLICES); // (with one slice, each subgroup takes both halves)
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
                xn[l] = x_quad(layer, shape, r0 + q / TQ, k0 + 4u * (q % TQ));
                dn[l] = dy_quad(layer, shape, r0 + q / TQ, j0 + 4u * (q % TQ));
            }
        }
        // A = x^T (k x rows): column-major from the [row][k] tile; B = dy (rows x j): row-major.
        for (var hh = 0u; hh < HALVES; hh++) {
            let r = rr + 16u * hh;
            let a0 = coopLoad<coop_mat16x16<f16, A>>(&xs[r * LDS + wk / 4u], LDS);
            let a1 = coopLoad<coop_mat16x16<f16, A>>(&xs[r * LDS + (wk + 16u) / 4u], LDS);
            let b0 = coopLoadT<coop_mat16x16<f16, B>>(&ds[r * LDS + wj / 4u], LDS);
            let b1 = coopLoadT<coop_mat16x16<f16, B>>(&ds[r * LDS + (wj + 16u) / 4u], LDS);
            c00 = coopMultiplyAdd(a0, b0, c00);
            c01 = coopMultiplyAdd(a0, b1, c01);
            c10 = coopMultiplyAdd(a1, b0, c10);
            c11 = coopMultiplyAdd(a1, b1, c11);
        }
        workgroupBarrier();
    }

    // Each slice's fragments into its own tile (naga wants a coopStore's matrix and index in
    // `let`s).
    let s00 = c00;
    let s01 = c01;
    let s10 = c10;
    let s11 = c11;
    let base = slice * UC_T * LDC;
    let i00 = base + wk * LDC + wj;
    let i01 = base + wk * LDC + wj + 16u;
    let i10 = base + (wk + 16u) * LDC + wj;
    let i11 = base + (wk + 16u) * LDC + wj + 16u;
    coopStoreT(s00, &cs[i00], LDC);
    coopStoreT(s01, &cs[i01], LDC);
    coopStoreT(s10, &cs[i10], LDC);
    coopStoreT(s11, &cs[i11], LDC);
    workgroupBarrier();

    // The parameters this invocation moves, UC_CHUNK at a time: their values and optimizer state
    // all loaded before any of their stores, then the two slices' sums, the step, the stores.
    let count = (shape.inputs + 1u) * shape.outputs;
    let adam = u.opt.kind == OPT_ADAM;
    let scale = adam_scale(u.opt, adam_t);
    for (var m0 = 0u; m0 < PER_THREAD; m0 += UC_CHUNK) {
        var p0: array<f32, UC_CHUNK>;
        var p1: array<f32, UC_CHUNK>;
        var p2: array<f32, UC_CHUNK>;
        load_params(layer, shape, k0, j0, tid, m0, &p0, &p1, &p2);
        for (var c = 0u; c < UC_CHUNK; c++) {
            let e = tid + (m0 + c) * THREADS;
            let k = k0 + e / UC_T;
            let j = j0 + e % UC_T;
            if k > shape.inputs || j >= shape.outputs {
                continue;
            }
            let i = k * shape.outputs + j;
            let at = (e / UC_T) * LDC + e % UC_T;
            var g = cs[at];
            if SLICES == 2u {
                g += cs[UC_T * LDC + at];
            }
            var moved: Moved;
            if adam {
                moved = adam_step(u.opt, scale, p0[c], g, p1[c], p2[c]);
            } else {
                moved = sgd_step(u.opt, p0[c], g, p1[c]);
            }
            store_moved(layer, i, count, g, moved);
        }
    }
}
