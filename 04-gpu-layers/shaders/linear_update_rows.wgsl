// linear_update_rows.wgsl: what linear_update.wgsl and linear_update_coop.wgsl share: the
// `Update` uniform, layer a's buffers and the common ones (layer b's, bindings 5-9, are in
// linear_update_b.wgsl or linear_update_b_unbound.wgsl; layer c's, bindings 18-22, in
// linear_update_c.wgsl or linear_update_c_unbound.wgsl), which layer a workgroup moves, the
// reads and writes of that layer's parameters, and the loads of the rows of x and dy that both
// stage in workgroup memory, four values at a time.

struct LayerShape {
    inputs: u32,
    outputs: u32,
    tiles_n: u32,     // tiles along the outputs
    first_group: u32, // first workgroup of this layer
}

// The split step (linear_update_next.wgsl): `partials_only` 1 for the prologue that only writes
// the first step's partial sums (no update), `partial_rows` the rows per k-tile of them.
struct Split {
    partials_only: u32,
    partial_rows: u32,
    _pad0: u32,
    _pad1: u32,
}

struct Update {
    opt: Opt,
    a: LayerShape,
    b: LayerShape,
    c: LayerShape, // first_group: the grid's size where there is no layer c (nor b: both)
    split: Split,
}

@group(0) @binding(0) var<storage, read> x_a: array<f32>;
@group(0) @binding(1) var<storage, read> dy_a: array<f32>;
@group(0) @binding(2) var<storage, read_write> params_a: array<f32>;
@group(0) @binding(3) var<storage, read_write> grads_a: array<f32>;
@group(0) @binding(4) var<storage, read_write> state_a: array<f32>;
// Bindings 5-9, layer b's x_b, dy_b, params_b, grads_b and state_b, are in
// linear_update_b.wgsl, or, on devices that allow fewer than 11 storage buffers per shader stage
// (WebGPU's default is 8), stand-ins in linear_update_b_unbound.wgsl: one layer per dispatch.
// Read for Adam's step; the updates also copy it to COUNTER_MASK_STEP (common.wgsl, DropoutMask).
@group(0) @binding(10) var<storage, read_write> counters: array<u32>;
@group(0) @binding(11) var<uniform> batch: Batch;
@group(0) @binding(12) var<uniform> u: Update;

// UPD_LAYERS (the most layers this kernel moves: 1, 2 or 3) comes from the prelude: a constant,
// so a kernel of fewer layers compiles without the branches for the others. (Read from the
// uniform instead, the third layer's branches took the update of 784-128-10 from 4.75 to 5.78
// us alone on the H100; with the constant, and each layer's three loads under one branch
// (load_moved), 4.78.)

// The layer workgroup `group` moves: 0 (a), 1 (b) or 2 (c), each layer's tiles after the
// one before's.
fn layer_of(group: u32) -> u32 {
    var layer = 0u;
    if UPD_LAYERS >= 2u && group >= u.b.first_group {
        layer = 1u;
    }
    if UPD_LAYERS == 3u && group >= u.c.first_group {
        layer = 2u;
    }
    return layer;
}

fn shape_of(layer: u32) -> LayerShape {
    if UPD_LAYERS == 3u && layer == 2u {
        return u.c;
    }
    if UPD_LAYERS >= 2u && layer == 1u {
        return u.b;
    }
    return u.a;
}

// WGSL cannot pass a buffer to a function, so the layers' buffers are picked here, four
// values under one branch: `layer` is the same for the whole workgroup, so these branches never
// diverge, yet loads each under a branch of their own took a memory round trip each, one after
// another (linear_update.wgsl loads a whole round under one branch: load_round).
fn load_x4(layer: u32, i: vec4<u32>) -> vec4<f32> {
    if UPD_LAYERS == 3u && layer == 2u {
        return vec4<f32>(x_c[i.x], x_c[i.y], x_c[i.z], x_c[i.w]);
    }
    if UPD_LAYERS >= 2u && layer == 1u {
        return vec4<f32>(x_b[i.x], x_b[i.y], x_b[i.z], x_b[i.w]);
    }
    return vec4<f32>(x_a[i.x], x_a[i.y], x_a[i.z], x_a[i.w]);
}

fn load_dy4(layer: u32, i: vec4<u32>) -> vec4<f32> {
    if UPD_LAYERS == 3u && layer == 2u {
        return vec4<f32>(dy_c[i.x], dy_c[i.y], dy_c[i.z], dy_c[i.w]);
    }
    if UPD_LAYERS >= 2u && layer == 1u {
        return vec4<f32>(dy_b[i.x], dy_b[i.y], dy_b[i.z], dy_b[i.w]);
    }
    return vec4<f32>(dy_a[i.x], dy_a[i.y], dy_a[i.z], dy_a[i.w]);
}

// Element i of the layer's parameters and its optimizer state (Adam's second moment at
// `count + i`, `count` the parameters' count), all three loads under one branch.
fn load_moved(layer: u32, i: u32, count: u32) -> Moved {
    var m = Moved(0.0, 0.0, 0.0);
    let adam = u.opt.kind == OPT_ADAM;
    if UPD_LAYERS == 3u && layer == 2u {
        m.param = params_c[i];
        m.s0 = state_c[i];
        if adam {
            m.s1 = state_c[count + i];
        }
    } else if UPD_LAYERS >= 2u && layer == 1u {
        m.param = params_b[i];
        m.s0 = state_b[i];
        if adam {
            m.s1 = state_b[count + i];
        }
    } else {
        m.param = params_a[i];
        m.s0 = state_a[i];
        if adam {
            m.s1 = state_a[count + i];
        }
    }
    return m;
}

// Element i's gradient `g`, and the parameter and its state after the optimizer's step.
fn store_moved(layer: u32, i: u32, count: u32, g: f32, moved: Moved) {
    let adam = u.opt.kind == OPT_ADAM;
    let keep = u.opt.keep_grads == 1u;
    if UPD_LAYERS == 3u && layer == 2u {
        if keep {
            grads_c[i] = g;
        }
        params_c[i] = moved.param;
        state_c[i] = moved.s0;
        if adam {
            state_c[count + i] = moved.s1;
        }
    } else if UPD_LAYERS >= 2u && layer == 1u {
        if keep {
            grads_b[i] = g;
        }
        params_b[i] = moved.param;
        state_b[i] = moved.s0;
        if adam {
            state_b[count + i] = moved.s1;
        }
    } else {
        if keep {
            grads_a[i] = g;
        }
        params_a[i] = moved.param;
        state_a[i] = moved.s0;
        if adam {
            state_a[count + i] = moved.s1;
        }
    }
}

// Four consecutive values of the augmented input row `row` ([x | 1]: column `inputs` is the
// constant 1 that multiplies the bias), from column k; 0 past the batch and past the input.
// There is no branch around each load: every load is issued, at an index clamped into the
// tensor (x_quad_index), and `select` zeroes what lies outside (x_quad_value), so the compiler
// can issue a round's loads back to back. (Written as `if k + e < inputs { load }`, the H200's
// driver compiled each load into a block of its own, with branches between them; this form
// took the update from 4.79 to 4.56 us alone at batch 64, and from 35.77 to 33.80 at 784-1024,
// batch 256: README.)
// ANCHOR: x_quad
const QUAD_OFFSETS: vec4<u32> = vec4<u32>(0u, 1u, 2u, 3u); // a quad's offsets from its first column

fn x_quad_index(shape: LayerShape, row: u32, k: u32) -> vec4<u32> {
    let r = min(row, max(batch.rows, 1u) - 1u);
    return r * shape.inputs + min(k + QUAD_OFFSETS, vec4<u32>(shape.inputs - 1u));
}

fn x_quad_value(shape: LayerShape, row: u32, k: u32, loaded: vec4<f32>) -> vec4<f32> {
    let kk = k + QUAD_OFFSETS;
    let bias = select(vec4<f32>(0.0), vec4<f32>(1.0), kk == vec4<u32>(shape.inputs));
    let v = select(bias, loaded, kk < vec4<u32>(shape.inputs));
    return select(vec4<f32>(0.0), v, row < batch.rows);
}

fn x_quad(layer: u32, shape: LayerShape, row: u32, k: u32) -> vec4<f32> {
    return x_quad_value(shape, row, k, load_x4(layer, x_quad_index(shape, row, k)));
}
// ANCHOR_END: x_quad

// Four consecutive values of dy's row `row` from column j; 0 past the batch and the outputs
// (branch-free, as x_quad).
fn dy_quad_index(shape: LayerShape, row: u32, j: u32) -> vec4<u32> {
    let r = min(row, max(batch.rows, 1u) - 1u);
    return r * shape.outputs + min(j + QUAD_OFFSETS, vec4<u32>(shape.outputs - 1u));
}

fn dy_quad_value(shape: LayerShape, row: u32, j: u32, loaded: vec4<f32>) -> vec4<f32> {
    let v = select(vec4<f32>(0.0), loaded, j + QUAD_OFFSETS < vec4<u32>(shape.outputs));
    return select(vec4<f32>(0.0), v, row < batch.rows);
}

fn dy_quad(layer: u32, shape: LayerShape, row: u32, j: u32) -> vec4<f32> {
    return dy_quad_value(shape, row, j, load_dy4(layer, dy_quad_index(shape, row, j)));
}
