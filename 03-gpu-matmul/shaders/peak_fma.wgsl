// peak_fma.wgsl: the f32 ceiling, not a matmul. Each invocation runs 8 independent chains of
// vec4 fused multiply-adds on values in registers, ITERS times, and writes their sum so the
// compiler keeps them. Nothing is read in the loop, so this measures how many f32 FMAs per
// second the GPU issues through WGSL: what an f32 matmul kernel could reach if moving data cost
// nothing. FLOP = invocations * ITERS * 8 chains * 4 lanes * 2.
//
// Independent chains hide the latency of each FMA (about 4 cycles on recent GPUs): with 8
// chains of vec4 an invocation always has 32 FMAs that do not wait on each other. The chains
// are separate variables, not an array, so that they live in registers whatever the compiler
// does with arrays; the runner builds this shader without naga's runtime checks.

@group(0) @binding(0) var<storage, read_write> buf: array<vec4<f32>>;

const ITERS: u32 = 4096u;
const THREADS: u32 = 256u;
const INPUTS: u32 = 64u; // buf[0 .. INPUTS] are read, buf[INPUTS ..] written, one per invocation

@compute @workgroup_size(THREADS)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let id = gid.x;
    // Per-invocation multiplier and addend (values the compiler cannot treat as uniform).
    let at = id % (INPUTS - 10u);
    let y = buf[at + 8u];
    let z = buf[at + 9u];
    var x0 = buf[at]; var x1 = buf[at + 1u]; var x2 = buf[at + 2u]; var x3 = buf[at + 3u];
    var x4 = buf[at + 4u]; var x5 = buf[at + 5u]; var x6 = buf[at + 6u]; var x7 = buf[at + 7u];
    // ANCHOR: loop
    for (var i = 0u; i < ITERS; i++) {
        x0 = fma(x0, y, z); x1 = fma(x1, y, z); x2 = fma(x2, y, z); x3 = fma(x3, y, z);
        x4 = fma(x4, y, z); x5 = fma(x5, y, z); x6 = fma(x6, y, z); x7 = fma(x7, y, z);
    }
    // ANCHOR_END: loop
    buf[INPUTS + id] = ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7));
}
