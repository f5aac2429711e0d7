// peak_coop.wgsl: the tensor-core ceiling through WGSL, not a matmul. Each subgroup loads
// NACC pairs of 16x16 f16 fragments and NACC f32 accumulators once, runs ITERS rounds of NACC
// independent coopMultiplyAdds on them, and stores the accumulators so the compiler keeps
// them. Nothing moves in the loop, so this measures how many multiply-adds per second the
// tensor cores do when fed from registers: what a cooperative-matrix matmul could reach if
// moving data cost nothing. FLOP = workgroups * SUBGROUPS * ITERS * NACC * 2 * 16^3.
//
// Independent accumulators let one multiply-add start before the previous one finishes; each
// starts from different data, so no compiler can merge them.

enable f16;
enable wgpu_cooperative_matrix;

@group(0) @binding(0) var<storage, read> src: array<f16>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;

const ITERS: u32 = 4096u;
const SUBGROUPS: u32 = 4u;
const THREADS: u32 = SUBGROUPS * 32u;

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(subgroup_id) sg: u32) {
    let x0 = coopLoadT<coop_mat16x16<f16, A>>(&src[0], 16u);
    let x1 = coopLoadT<coop_mat16x16<f16, A>>(&src[256], 16u);
    let x2 = coopLoadT<coop_mat16x16<f16, A>>(&src[512], 16u);
    let x3 = coopLoadT<coop_mat16x16<f16, A>>(&src[768], 16u);
    let y = coopLoadT<coop_mat16x16<f16, B>>(&src[1024], 16u);
    // Every subgroup's accumulators start from its own 4 x 256 floats of dst and end there.
    let base = (wg.x * SUBGROUPS + sg) * 1024u;
    var c0 = coopLoadT<coop_mat16x16<f32, C>>(&dst[base], 16u);
    var c1 = coopLoadT<coop_mat16x16<f32, C>>(&dst[base + 256u], 16u);
    var c2 = coopLoadT<coop_mat16x16<f32, C>>(&dst[base + 512u], 16u);
    var c3 = coopLoadT<coop_mat16x16<f32, C>>(&dst[base + 768u], 16u);
    // ANCHOR: loop
    for (var i = 0u; i < ITERS; i++) {
        c0 = coopMultiplyAdd(x0, y, c0);
        c1 = coopMultiplyAdd(x1, y, c1);
        c2 = coopMultiplyAdd(x2, y, c2);
        c3 = coopMultiplyAdd(x3, y, c3);
    }
    // ANCHOR_END: loop
    // naga 30 wants a coopStore's matrix, index and stride bound to `let`s.
    let s0 = c0; let s1 = c1; let s2 = c2; let s3 = c3;
    let o0 = base; let o1 = base + 256u; let o2 = base + 512u; let o3 = base + 768u;
    let stride = 16u;
    coopStoreT(s0, &dst[o0], stride);
    coopStoreT(s1, &dst[o1], stride);
    coopStoreT(s2, &dst[o2], stride);
    coopStoreT(s3, &dst[o3], stride);
}
