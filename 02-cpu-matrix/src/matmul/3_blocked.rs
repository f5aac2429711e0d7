//! Variant 3: cache blocking, packed panels and a register-blocked micro-kernel (the
//! Goto/BLIS design that `matrixmultiply`, OpenBLAS and MKL all use), on one thread.
//!
//! Three ideas, each fixing what limits variant 2:
//! 1. **Register blocking.** The micro-kernel keeps an `MR x NR` = 8 x 32 tile of C in 16
//!    AVX-512 registers for the whole `k` loop. Each step loads two vectors of B (32 floats) and
//!    broadcasts 8 values of A, then does 16 fused multiply-adds: 512 flops for 10 loads,
//!    instead of variant 2's one load and one store per 2 flops. C is read and written once per
//!    block, not once per `k`.
//! 2. **Packing.** Before the kernel runs, a `KC x NC` block of B is copied into panels of `NR`
//!    columns and an `MC x KC` block of A into panels of `MR` rows, each laid out in exactly the
//!    order the kernel reads it. The kernel then streams both with unit stride (no TLB misses, the
//!    prefetcher keeps up), and zero padding means edge tiles need no special loop. Packing is
//!    also where a transposed operand is read: after packing `A^T * B` runs the same kernel.
//! 3. **Cache blocking.** The loops are ordered so that the B micro-panel (`KC x NR`, 32 KiB)
//!    stays in L1 while the kernel sweeps down the packed A block (`MC x KC`, 192 KiB, in L2),
//!    and the packed B block (`KC x NC`) stays in L3 while every A block of the column uses it.
//!
//! Packing a row-major operand into `MR`- or `NR`-wide interleaved panels is a transpose; done
//! value by value it took a quarter of the time at the MNIST shapes, so full panels are
//! transposed 8x8 at a time in AVX registers.
//!
//! The AVX-512 kernel is selected at run time (`is_x86_feature_detected!`); elsewhere a
//! portable kernel with the same packing runs (the compiler vectorizes it for the baseline).

use super::MatRef;

// ANCHOR: block_sizes
/// Rows of the register tile (rows of A broadcast per step).
pub(crate) const MR: usize = 8;
/// Columns of the register tile: two 16-float AVX-512 vectors.
pub(crate) const NR: usize = 32;
/// Depth of a packed block. A `KC x NR` micro-panel of B is 32 KiB (the size of Zen 4's L1D)
/// and an `MR x KC` micro-panel of A 8 KiB; a longer `k` loop amortizes each load and store of
/// the C tile. Measured on this machine: 256 beat 128 by 16% at n = 2048, tied at n = 1024.
pub(crate) const KC: usize = 256;
/// Rows of a packed A block: `MC x KC` floats = 192 KiB, inside the 1 MiB L2.
const MC: usize = 192;
/// Columns of a packed B block: `KC x NC` floats = 4 MiB, in the 32 MiB L3.
const NC: usize = 4096;
// ANCHOR_END: block_sizes

/// Which micro-kernel runs. Chosen once per call by [`MicroKernel::detect`]; tests force each
/// one this CPU can run, and count the tiles each computed ([`TILES`]) to see which one ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MicroKernel {
    #[cfg(target_arch = "x86_64")]
    Avx512,
    Portable,
}

impl MicroKernel {
    pub(crate) fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f") {
            return MicroKernel::Avx512;
        }
        MicroKernel::Portable
    }
}

#[cfg(test)]
thread_local! {
    /// Tiles of C each micro-kernel has computed on this thread: `[avx512, portable]`. Test
    /// builds only; the tests read it to tell which kernel ran, not which one was asked for.
    pub(crate) static TILES: std::cell::Cell<[usize; 2]> = const { std::cell::Cell::new([0, 0]) };
}

/// Counts one tile for micro-kernel `index` (0: AVX-512, 1: portable) in [`TILES`].
#[cfg(test)]
fn count_tile(index: usize) {
    TILES.with(|t| {
        let mut v = t.get();
        v[index] += 1;
        t.set(v);
    });
}

/// `out [m, n] = a [m, k] * b [k, n]`: blocked, packed, register-tiled, one thread.
pub(crate) fn matmul_3_blocked(a: MatRef<'_>, b: MatRef<'_>, out: &mut [f32]) {
    let n = b.cols;
    gemm_blocked(a, b, out, n, MicroKernel::detect());
}

/// `c [m, n] (row stride ldc) = a [m, k] * b [k, n]`, with `m, k, n > 0`.
/// Variant 4 calls this on horizontal strips of C.
pub(crate) fn gemm_blocked(a: MatRef<'_>, b: MatRef<'_>, c: &mut [f32], ldc: usize, kernel: MicroKernel) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    debug_assert!(m > 0 && k > 0 && n > 0 && b.rows == k && ldc >= n);
    assert!(c.len() >= (m - 1) * ldc + n, "output slice too short for {m}x{n} with row stride {ldc}");
    let kc_max = KC.min(k);
    let a_len = MC.min(m.next_multiple_of(MR)) * kc_max;
    let b_len = kc_max * NC.min(n.next_multiple_of(NR));
    PACK_BUFFERS.with_borrow_mut(|(a_pack, b_pack)| {
        // Grow only: every call packs (and zero-pads) the part it reads before reading it.
        if a_pack.len() < a_len {
            a_pack.resize(a_len, 0.0);
        }
        if b_pack.len() < b_len {
            b_pack.resize(b_len, 0.0);
        }
        blocked_loops(a, b, c, ldc, kernel, a_pack, b_pack);
    });
}

thread_local! {
    /// Each thread's packed A and B blocks, kept between calls (at most `MC x KC` and
    /// `KC x NC` floats: 4.2 MiB). Allocating them per call cost more than the arithmetic of
    /// a 256^3 product here: fresh pages from the OS fault in one by one.
    static PACK_BUFFERS: std::cell::RefCell<(Vec<f32>, Vec<f32>)> = const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

// ANCHOR: blocked_loops
/// The five loops around the micro-kernel (BLIS numbering: 5 `jc`, 4 `pc`, 3 `ic`, 2 `jr`, 1 `ir`).
fn blocked_loops(
    a: MatRef<'_>,
    b: MatRef<'_>,
    c: &mut [f32],
    ldc: usize,
    kernel: MicroKernel,
    a_pack: &mut [f32],
    b_pack: &mut [f32],
) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    for jc in (0..n).step_by(NC) {
        let nc = NC.min(n - jc);
        for pc in (0..k).step_by(KC) {
            let kc = KC.min(k - pc);
            // The first depth block writes C, later ones add to it.
            let accumulate = pc > 0;
            pack_b(b, pc, kc, jc, nc, b_pack, kernel);
            for ic in (0..m).step_by(MC) {
                let mc = MC.min(m - ic);
                pack_a(a, ic, mc, pc, kc, a_pack, kernel);
                for jr in (0..nc).step_by(NR) {
                    let nr = NR.min(nc - jr);
                    let b_panel = &b_pack[jr * kc..(jr + NR) * kc];
                    for ir in (0..mc).step_by(MR) {
                        let mr = MR.min(mc - ir);
                        let a_panel = &a_pack[ir * kc..(ir + MR) * kc];
                        let c_tile = &mut c[(ic + ir) * ldc + jc + jr..];
                        micro_kernel(kernel, kc, a_panel, b_panel, c_tile, ldc, mr, nr, accumulate);
                    }
                }
            }
        }
    }
}
// ANCHOR_END: blocked_loops

/// Packs `A[ic..ic+mc, pc..pc+kc]` into panels of `MR` rows: panel `q` holds, for each `p`,
/// the `MR` values `A[ic + q*MR + i, pc + p]` side by side (zeros past row `mc`).
fn pack_a(a: MatRef<'_>, ic: usize, mc: usize, pc: usize, kc: usize, pack: &mut [f32], kernel: MicroKernel) {
    for (q, panel) in pack.chunks_exact_mut(MR * kc).take(mc.div_ceil(MR)).enumerate() {
        let r0 = ic + q * MR;
        let rows = MR.min(ic + mc - r0);
        pack_panel::<MR>(a, r0, rows, pc, kc, panel, kernel);
    }
}

/// Packs `B[pc..pc+kc, jc..jc+nc]` into panels of `NR` columns: panel `q` holds, for each `p`,
/// the `NR` values `B[pc + p, jc + q*NR + j]` side by side (zeros past column `nc`).
fn pack_b(b: MatRef<'_>, pc: usize, kc: usize, jc: usize, nc: usize, pack: &mut [f32], kernel: MicroKernel) {
    let bt = b.t(); // columns of B are rows of B^T: the same packing as A's
    for (q, panel) in pack.chunks_exact_mut(NR * kc).take(nc.div_ceil(NR)).enumerate() {
        let c0 = jc + q * NR;
        let cols = NR.min(jc + nc - c0);
        pack_panel::<NR>(bt, c0, cols, pc, kc, panel, kernel);
    }
}

/// Packs `count <= W` rows `r0..` of `x`, columns `pc..pc+kc`, "interleaved": `panel[p*W + i] =
/// x[r0 + i, pc + p]`, zero for `i >= count`. Two layouts, each read in memory order:
/// - `x` transposed (`x.rs == 1`): the `W` values for one `p` are contiguous: copy them.
/// - `x` as stored (`x.cs == 1`): this is a transpose of a `W x kc` block. Element by element
///   it costs a few cycles per value (a quarter of the time at the MNIST shapes), so full
///   panels go through 8x8 register transposes ([`transpose_rows_avx`]) where AVX exists.
fn pack_panel<const W: usize>(
    x: MatRef<'_>,
    r0: usize,
    count: usize,
    pc: usize,
    kc: usize,
    panel: &mut [f32],
    kernel: MicroKernel,
) {
    let panel = &mut panel[..W * kc];
    if x.rs == 1 {
        for (p, dst) in panel.chunks_exact_mut(W).enumerate() {
            let start = r0 + (pc + p) * x.cs;
            if count == W {
                // A fixed-size copy compiles to a few vector moves instead of a memcpy call.
                let src: &[f32; W] = x.data[start..start + W].try_into().expect("W values");
                dst.copy_from_slice(src);
            } else {
                dst[..count].copy_from_slice(&x.data[start..start + count]);
                dst[count..].fill(0.0);
            }
        }
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if kernel == MicroKernel::Avx512 && x.cs == 1 && count == W && W.is_multiple_of(8) {
        let last = (r0 + W - 1) * x.rs + pc + kc;
        assert!(last <= x.data.len(), "panel outside the matrix");
        // SAFETY: AVX is part of AVX-512F, which `kernel` was detected with; the assert bounds
        // every read (rows r0..r0+W, columns pc..pc+kc) and `panel` holds W * kc floats.
        unsafe { transpose_rows_avx::<W>(x.data.as_ptr().add(r0 * x.rs + pc), x.rs, kc, panel.as_mut_ptr()) };
        return;
    }
    let _ = kernel; // only the x86-64 fast path above looks at it
    for i in 0..W {
        if i < count {
            let start = (r0 + i) * x.rs + pc * x.cs;
            let row = &x.data[start..start + (kc - 1) * x.cs + 1];
            for (dst, &v) in panel[i..].iter_mut().step_by(W).zip(row.iter().step_by(x.cs)) {
                *dst = v;
            }
        } else {
            panel[i..].iter_mut().step_by(W).for_each(|d| *d = 0.0);
        }
    }
}

/// `dst[p*W + i] = src[i*ld + p]` for `i < W`, `p < kc`: `W` rows of `kc` contiguous floats,
/// transposed 8x8 blocks at a time in AVX registers (unpack, shuffle, permute: 24 shuffles per
/// 64 values), the last `kc % 8` columns one by one.
///
/// # Safety
/// AVX must be available; `src` must be readable at `i*ld + p` and `dst` writable at `p*W + i`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn transpose_rows_avx<const W: usize>(src: *const f32, ld: usize, kc: usize, dst: *mut f32) {
    use std::arch::x86_64::*;
    let full = kc / 8 * 8;
    for g in (0..W).step_by(8) {
        for p0 in (0..full).step_by(8) {
            // SAFETY (loads and stores): rows g..g+8 < W, columns p0..p0+8 <= kc.
            let r: [__m256; 8] = std::array::from_fn(|i| unsafe { _mm256_loadu_ps(src.add((g + i) * ld + p0)) });
            let t0 = _mm256_unpacklo_ps(r[0], r[1]);
            let t1 = _mm256_unpackhi_ps(r[0], r[1]);
            let t2 = _mm256_unpacklo_ps(r[2], r[3]);
            let t3 = _mm256_unpackhi_ps(r[2], r[3]);
            let t4 = _mm256_unpacklo_ps(r[4], r[5]);
            let t5 = _mm256_unpackhi_ps(r[4], r[5]);
            let t6 = _mm256_unpacklo_ps(r[6], r[7]);
            let t7 = _mm256_unpackhi_ps(r[6], r[7]);
            let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
            let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
            let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
            let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
            let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
            let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
            let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
            let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
            // Column p0 + j of the 8 rows, in row order.
            let cols = [
                _mm256_permute2f128_ps::<0x20>(u0, u4),
                _mm256_permute2f128_ps::<0x20>(u1, u5),
                _mm256_permute2f128_ps::<0x20>(u2, u6),
                _mm256_permute2f128_ps::<0x20>(u3, u7),
                _mm256_permute2f128_ps::<0x31>(u0, u4),
                _mm256_permute2f128_ps::<0x31>(u1, u5),
                _mm256_permute2f128_ps::<0x31>(u2, u6),
                _mm256_permute2f128_ps::<0x31>(u3, u7),
            ];
            for (j, c) in cols.into_iter().enumerate() {
                unsafe { _mm256_storeu_ps(dst.add((p0 + j) * W + g), c) };
            }
        }
        for p in full..kc {
            for i in g..g + 8 {
                unsafe { *dst.add(p * W + i) = *src.add(i * ld + p) };
            }
        }
    }
}

/// `C[0..mr, 0..nr] (=|+=) a_panel * b_panel` over depth `kc`; the panels are packed and padded
/// to `MR` / `NR`, `c` starts at the tile's top-left corner with row stride `ldc`.
#[allow(clippy::too_many_arguments)] // the classic micro-kernel argument list
#[inline]
fn micro_kernel(
    kernel: MicroKernel,
    kc: usize,
    a_panel: &[f32],
    b_panel: &[f32],
    c: &mut [f32],
    ldc: usize,
    mr: usize,
    nr: usize,
    accumulate: bool,
) {
    assert!(a_panel.len() >= kc * MR && b_panel.len() >= kc * NR);
    assert!(mr <= MR && nr <= NR && mr > 0 && nr > 0 && c.len() >= (mr - 1) * ldc + nr);
    match kernel {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Avx512` is only chosen after `is_x86_feature_detected!("avx512f")`, and the
        // asserts above bound every access the kernel makes.
        MicroKernel::Avx512 => unsafe {
            kernel_avx512(kc, a_panel.as_ptr(), b_panel.as_ptr(), c.as_mut_ptr(), ldc, mr, nr, accumulate)
        },
        MicroKernel::Portable => kernel_portable(kc, a_panel, b_panel, c, ldc, mr, nr, accumulate),
    }
}

/// The AVX-512 micro-kernel: an 8x32 tile of C in 16 zmm registers. Per step of `p`: two
/// vector loads of B, eight broadcasts of A (folded into the FMAs as `{1to16}` memory operands),
/// sixteen FMAs. Edge tiles (`mr < 8` or `nr < 32`) use masked loads and stores.
///
/// # Safety
/// AVX-512F must be available; `a` must hold `kc * MR` floats, `b` `kc * NR`, and `c` must be
/// writable at `c[i * ldc + j]` for `i < mr`, `j < nr`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_avx512(
    kc: usize,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
    mr: usize,
    nr: usize,
    accumulate: bool,
) {
    use std::arch::x86_64::*;
    #[cfg(test)]
    count_tile(0);
    // ANCHOR: avx512_k_loop
    let mut acc = [[_mm512_setzero_ps(); 2]; MR];
    for p in 0..kc {
        // SAFETY (all pointer reads below): p < kc, so the offsets stay inside the panels.
        let (b0, b1) = unsafe { (_mm512_loadu_ps(b.add(p * NR)), _mm512_loadu_ps(b.add(p * NR + 16))) };
        for (i, row) in acc.iter_mut().enumerate() {
            let ai = _mm512_set1_ps(unsafe { *a.add(p * MR + i) });
            row[0] = _mm512_fmadd_ps(ai, b0, row[0]);
            row[1] = _mm512_fmadd_ps(ai, b1, row[1]);
        }
    }
    // ANCHOR_END: avx512_k_loop
    // Lane masks for the two vectors of a row: all 16 lanes unless the tile is cut at `nr`.
    let mask = |lo: usize| -> __mmask16 {
        let lanes = nr.saturating_sub(lo).min(16);
        ((1u32 << lanes) - 1) as __mmask16
    };
    let (m0, m1) = (mask(0), mask(16));
    for (i, row) in acc.iter().enumerate().take(mr) {
        // SAFETY: lanes past `nr` are masked off, so only `c[i * ldc + j]`, `j < nr`, is touched;
        // `wrapping_add` because the second half's address may lie past the slice when m1 == 0.
        unsafe {
            let p0 = c.add(i * ldc);
            let p1 = p0.wrapping_add(16);
            let (mut v0, mut v1) = (row[0], row[1]);
            if accumulate {
                v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, p0));
                v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, p1));
            }
            _mm512_mask_storeu_ps(p0, m0, v0);
            _mm512_mask_storeu_ps(p1, m1, v1);
        }
    }
}

/// The portable micro-kernel: the same tile as plain Rust arrays. The compiler vectorizes the
/// `j` loop for whatever the target offers (SSE2 on baseline x86-64); the tile no longer fits in
/// 16 SSE registers, so this is slower than the AVX-512 kernel but still blocked and packed.
#[allow(clippy::too_many_arguments)]
fn kernel_portable(
    kc: usize,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    ldc: usize,
    mr: usize,
    nr: usize,
    accumulate: bool,
) {
    #[cfg(test)]
    count_tile(1);
    let mut acc = [[0.0f32; NR]; MR];
    for (a_p, b_p) in a.chunks_exact(MR).zip(b.chunks_exact(NR)).take(kc) {
        for (row, &x) in acc.iter_mut().zip(a_p) {
            for (s, &y) in row.iter_mut().zip(b_p) {
                *s += x * y;
            }
        }
    }
    for (i, row) in acc.iter().enumerate().take(mr) {
        let c_row = &mut c[i * ldc..i * ldc + nr];
        if accumulate {
            c_row.iter_mut().zip(row).for_each(|(o, &s)| *o += s);
        } else {
            c_row.copy_from_slice(&row[..nr]);
        }
    }
}
