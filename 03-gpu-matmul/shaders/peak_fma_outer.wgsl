// peak_fma_outer.wgsl: the f32 ceiling again, written as a matmul's inner loop. Each invocation
// holds 8 values of a column of A (a0, a1) and 8 of a row of B (b0, b1) and adds their outer
// product into 16 vec4 accumulators, ITERS times: the multiply-adds of an 8 x 8 register tile
// with every load taken away. Each value of A feeds 8 multiply-adds in a row, as in kernels 05
// and 07, so the compiler may keep it in the register file's operand-reuse cache; in
// `peak_fma.wgsl` every multiply-add reads three different registers. The 64 chains are
// independent, so their latency is hidden within the invocation. FLOP = invocations * ITERS *
// 16 accumulators * 4 lanes * 2. Built without naga's runtime checks, as the other probes.

@group(0) @binding(0) var<storage, read_write> buf: array<vec4<f32>>;

const ITERS: u32 = 4096u;
const THREADS: u32 = 256u;
const INPUTS: u32 = 64u; // buf[0 .. INPUTS] are read, buf[INPUTS ..] written, one per invocation

@compute @workgroup_size(THREADS)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let id = gid.x;
    // Per-invocation operands (values the compiler cannot treat as uniform).
    let at = id % (INPUTS - 4u);
    let a0 = buf[at];
    let a1 = buf[at + 1u];
    let b0 = buf[at + 2u];
    let b1 = buf[at + 3u];
    var c00 = b0; var c01 = b1; var c10 = b0; var c11 = b1;
    var c20 = b0; var c21 = b1; var c30 = b0; var c31 = b1;
    var c40 = b0; var c41 = b1; var c50 = b0; var c51 = b1;
    var c60 = b0; var c61 = b1; var c70 = b0; var c71 = b1;
    // ANCHOR: loop
    for (var i = 0u; i < ITERS; i++) {
        c00 = fma(vec4(a0.x), b0, c00); c01 = fma(vec4(a0.x), b1, c01);
        c10 = fma(vec4(a0.y), b0, c10); c11 = fma(vec4(a0.y), b1, c11);
        c20 = fma(vec4(a0.z), b0, c20); c21 = fma(vec4(a0.z), b1, c21);
        c30 = fma(vec4(a0.w), b0, c30); c31 = fma(vec4(a0.w), b1, c31);
        c40 = fma(vec4(a1.x), b0, c40); c41 = fma(vec4(a1.x), b1, c41);
        c50 = fma(vec4(a1.y), b0, c50); c51 = fma(vec4(a1.y), b1, c51);
        c60 = fma(vec4(a1.z), b0, c60); c61 = fma(vec4(a1.z), b1, c61);
        c70 = fma(vec4(a1.w), b0, c70); c71 = fma(vec4(a1.w), b1, c71);
    }
    // ANCHOR_END: loop
    let s0 = ((c00 + c01) + (c10 + c11)) + ((c20 + c21) + (c30 + c31));
    let s1 = ((c40 + c41) + (c50 + c51)) + ((c60 + c61) + (c70 + c71));
    buf[INPUTS + id] = s0 + s1;
}
