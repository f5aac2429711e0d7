// peak_fma.wgsl: the f32 ceiling, not a matmul. Each invocation runs NCHAINS independent chains
// of vec4 fused multiply-adds on values in registers, ITERS times, and writes their sum so the
// compiler keeps them. Nothing is read in the loop, so this measures how many f32 FMAs per
// second the GPU issues through WGSL: what an f32 matmul kernel could reach if moving data cost
// nothing. FLOP = invocations * ITERS * NCHAINS * 4 lanes * 2.
//
// Independent chains hide the latency of each FMA (about 4 cycles on recent GPUs): with 8
// chains of vec4 an invocation always has 32 FMAs that do not wait on each other.

@group(0) @binding(0) var<storage, read_write> buf: array<vec4<f32>>;

const ITERS: u32 = 4096u;
const NCHAINS: u32 = 8u;
const THREADS: u32 = 256u;
const INPUTS: u32 = 64u; // buf[0 .. INPUTS] are read, buf[INPUTS ..] written, one per invocation

@compute @workgroup_size(THREADS)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let id = gid.x + gid.y * groups.x * THREADS;
    let y = buf[0];
    let z = buf[1];
    var x: array<vec4<f32>, NCHAINS>;
    for (var s = 0u; s < NCHAINS; s++) { x[s] = buf[2u + (id + s) % (INPUTS - 2u)]; }
    for (var i = 0u; i < ITERS; i++) {
        for (var s = 0u; s < NCHAINS; s++) { x[s] = fma(x[s], y, z); }
    }
    var sum = vec4(0.0);
    for (var s = 0u; s < NCHAINS; s++) { sum += x[s]; }
    buf[INPUTS + id] = sum;
}
