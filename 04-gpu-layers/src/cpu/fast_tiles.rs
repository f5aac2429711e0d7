//! The fast CPU path's register tiles: the instruction set detected at run time ([`Isa`]) and,
//! for each, an `MR x NR` tile of `A B` and `Aᵀ B` kept in vector registers for the whole k loop
//! ([`Tiles`]): AVX-512 (8 x 32), AVX2 + FMA (6 x 16), WebAssembly SIMD (`simd128`, 6 x 8, in
//! a browser build compiled with it), or portable Rust (4 x 8).

use std::sync::OnceLock;

/// The instruction set the tiles run with, detected once per process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Isa {
    #[cfg(target_arch = "x86_64")]
    Avx512,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    Simd128,
    #[cfg_attr(all(target_arch = "wasm32", target_feature = "simd128"), allow(dead_code))]
    Portable,
}

/// The set every build can run. WebAssembly has no run-time detection: a module either has SIMD
/// instructions or not, and an engine without them refuses the whole module. The workspace's
/// `.cargo/config.toml` builds the browser's module with `simd128` (every current browser runs it).
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
const BASELINE: Isa = Isa::Simd128;
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
const BASELINE: Isa = Isa::Portable;

pub(super) fn isa() -> Isa {
    static ISA: OnceLock<Isa> = OnceLock::new();
    *ISA.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                return Isa::Avx512;
            }
            if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                return Isa::Avx2;
            }
        }
        BASELINE
    })
}

impl Isa {
    /// Rows of the `A B` register tile.
    pub(super) fn mr(self) -> usize {
        match self {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => <x86::Avx512 as Tiles>::MR,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => <x86::Avx2 as Tiles>::MR,
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Isa::Simd128 => <wasm::Simd128 as Tiles>::MR,
            Isa::Portable => <Portable as Tiles>::MR,
        }
    }
}

/// The register tiles of one instruction set. Every result is written to `out`, a row-major
/// `MR x NR` tile (`MR * NR <= TILE`), from which the caller's epilogue reads.
///
/// # Safety
/// The CPU must support the instruction set (`isa()` detected it).
pub(super) trait Tiles {
    /// Rows and columns of the `A B` register tile.
    const MR: usize;
    const NR: usize;

    /// `out[i, j] = init[j] + Σ_{p < k} rows[i][p] * b[p * ldb + j]`, `i < MR`, `j < NR`: a tile
    /// of `A B` with `A` row-major (`rows`: `MR` rows of at least `k` values; `b` holds at least
    /// `(k - 1) * ldb + NR` values; `k >= 1`).
    unsafe fn ab(rows: &[&[f32]], b: &[f32], ldb: usize, k: usize, init: &[f32], out: &mut [f32; TILE]);

    /// `out[i, j] = Σ_{p < k} a[p * lda + i] * b[p * ldb + j]`: a tile of `Aᵀ B` with `A` stored
    /// `[k, m]` row-major (`a` holds at least `(k - 1) * lda + MR` values).
    unsafe fn atb(a: &[f32], lda: usize, b: &[f32], ldb: usize, k: usize, out: &mut [f32; TILE]);

    /// The 4 x 4 dot products `Σ_{j < k} a[t][j] * b[u][j]` (a tile of `A Bᵀ`, both operands
    /// contiguous along `k`; every row holds at least `k` values).
    unsafe fn abt(a: &[&[f32]; 4], b: &[&[f32]; 4], k: usize) -> [[f32; 4]; 4];
}

/// The largest `MR * NR` of the instruction sets (AVX-512's 8 x 32).
pub(super) const TILE: usize = 256;

/// Plain Rust, for CPUs without AVX2: a 4 x 8 tile the compiler vectorizes for the baseline.
pub(super) struct Portable;

impl Tiles for Portable {
    const MR: usize = 4;
    const NR: usize = 8;

    unsafe fn ab(rows: &[&[f32]], b: &[f32], ldb: usize, k: usize, init: &[f32], out: &mut [f32; TILE]) {
        let mut acc = [[0.0f32; 8]; 4];
        acc.iter_mut().for_each(|r| r.copy_from_slice(&init[..8]));
        for p in 0..k {
            let bp = &b[p * ldb..p * ldb + 8];
            for (r, row) in acc.iter_mut().zip(rows) {
                let a = row[p];
                r.iter_mut().zip(bp).for_each(|(c, &v)| *c += a * v);
            }
        }
        acc.iter().enumerate().for_each(|(i, r)| out[i * 8..i * 8 + 8].copy_from_slice(r));
    }

    unsafe fn atb(a: &[f32], lda: usize, b: &[f32], ldb: usize, k: usize, out: &mut [f32; TILE]) {
        let mut acc = [[0.0f32; 8]; 4];
        for p in 0..k {
            let bp = &b[p * ldb..p * ldb + 8];
            for (r, &av) in acc.iter_mut().zip(&a[p * lda..p * lda + 4]) {
                r.iter_mut().zip(bp).for_each(|(c, &v)| *c += av * v);
            }
        }
        acc.iter().enumerate().for_each(|(i, r)| out[i * 8..i * 8 + 8].copy_from_slice(r));
    }

    unsafe fn abt(a: &[&[f32]; 4], b: &[&[f32]; 4], k: usize) -> [[f32; 4]; 4] {
        let mut out = [[0.0f32; 4]; 4];
        for (o, ar) in out.iter_mut().zip(a) {
            for (o, br) in o.iter_mut().zip(b) {
                *o = ar[..k].iter().zip(&br[..k]).map(|(x, y)| x * y).sum();
            }
        }
        out
    }
}

#[cfg(target_arch = "x86_64")]
pub(super) mod x86 {
    //! The AVX-512 and AVX2 tiles, with `std::arch` intrinsics (the compiler does not keep a
    //! tile of arrays in registers by itself). Each reads only what its asserts bound.
    use std::arch::x86_64::*;

    use super::{TILE, Tiles};

    fn ptrs(rows: &[&[f32]; 4]) -> [*const f32; 4] {
        [rows[0].as_ptr(), rows[1].as_ptr(), rows[2].as_ptr(), rows[3].as_ptr()]
    }

    /// 8 x 32: sixteen 16-float accumulators (of 32 zmm registers); per step of `k` two loads of
    /// B, eight broadcasts of A, sixteen fused multiply-adds.
    pub struct Avx512;
    /// 6 x 16: twelve 8-float accumulators (of 16 ymm registers).
    pub struct Avx2;

    impl Tiles for Avx512 {
        const MR: usize = 8;
        const NR: usize = 32;

        unsafe fn ab(rows: &[&[f32]], b: &[f32], ldb: usize, k: usize, init: &[f32], out: &mut [f32; TILE]) {
            assert!(k >= 1 && rows.len() >= 8 && rows.iter().all(|r| r.len() >= k) && init.len() >= 32);
            assert!(b.len() >= (k - 1) * ldb + 32);
            // SAFETY: AVX-512F per the trait's contract; the asserts bound every read.
            unsafe { ab_avx512(rows.as_ptr(), b.as_ptr(), ldb, k, init.as_ptr(), out) }
        }

        unsafe fn atb(a: &[f32], lda: usize, b: &[f32], ldb: usize, k: usize, out: &mut [f32; TILE]) {
            assert!(k >= 1 && a.len() >= (k - 1) * lda + 8 && b.len() >= (k - 1) * ldb + 32);
            // SAFETY: as above.
            unsafe { atb_avx512(a.as_ptr(), lda, b.as_ptr(), ldb, k, out) }
        }

        unsafe fn abt(a: &[&[f32]; 4], b: &[&[f32]; 4], k: usize) -> [[f32; 4]; 4] {
            assert!(a.iter().chain(b).all(|r| r.len() >= k));
            // SAFETY: as above.
            unsafe { abt_avx512(ptrs(a), ptrs(b), k) }
        }
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn ab_avx512(rows: *const &[f32], b: *const f32, ldb: usize, k: usize, init: *const f32, out: &mut [f32; TILE]) {
        // SAFETY (every pointer access below): bounded by the asserts in `Avx512::ab`.
        unsafe {
            let mut a = [std::ptr::null::<f32>(); 8];
            for (i, p) in a.iter_mut().enumerate() {
                *p = (*rows.add(i)).as_ptr();
            }
            let (i0, i1) = (_mm512_loadu_ps(init), _mm512_loadu_ps(init.add(16)));
            let mut acc = [[i0, i1]; 8];
            for p in 0..k {
                let b0 = _mm512_loadu_ps(b.add(p * ldb));
                let b1 = _mm512_loadu_ps(b.add(p * ldb + 16));
                for i in 0..8 {
                    let av = _mm512_set1_ps(*a[i].add(p));
                    acc[i][0] = _mm512_fmadd_ps(av, b0, acc[i][0]);
                    acc[i][1] = _mm512_fmadd_ps(av, b1, acc[i][1]);
                }
            }
            for (i, r) in acc.iter().enumerate() {
                _mm512_storeu_ps(out.as_mut_ptr().add(i * 32), r[0]);
                _mm512_storeu_ps(out.as_mut_ptr().add(i * 32 + 16), r[1]);
            }
        }
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn atb_avx512(a: *const f32, lda: usize, b: *const f32, ldb: usize, k: usize, out: &mut [f32; TILE]) {
        // SAFETY (every pointer access below): bounded by the asserts in `Avx512::atb`.
        unsafe {
            let mut acc = [[_mm512_setzero_ps(); 2]; 8];
            for p in 0..k {
                let b0 = _mm512_loadu_ps(b.add(p * ldb));
                let b1 = _mm512_loadu_ps(b.add(p * ldb + 16));
                let ap = a.add(p * lda);
                for (i, r) in acc.iter_mut().enumerate() {
                    let av = _mm512_set1_ps(*ap.add(i));
                    r[0] = _mm512_fmadd_ps(av, b0, r[0]);
                    r[1] = _mm512_fmadd_ps(av, b1, r[1]);
                }
            }
            for (i, r) in acc.iter().enumerate() {
                _mm512_storeu_ps(out.as_mut_ptr().add(i * 32), r[0]);
                _mm512_storeu_ps(out.as_mut_ptr().add(i * 32 + 16), r[1]);
            }
        }
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn abt_avx512(a: [*const f32; 4], b: [*const f32; 4], k: usize) -> [[f32; 4]; 4] {
        // SAFETY (every pointer access below): rows hold >= k values (`Avx512::abt`); the last,
        // partial chunk is read with a mask, so nothing past k is touched.
        unsafe {
            let mut acc = [[_mm512_setzero_ps(); 4]; 4];
            let mut av = [_mm512_setzero_ps(); 4];
            let mut bv = [_mm512_setzero_ps(); 4];
            let mut j = 0;
            while j < k {
                let mask: __mmask16 = if k - j >= 16 { 0xffff } else { ((1u32 << (k - j)) - 1) as __mmask16 };
                for t in 0..4 {
                    av[t] = _mm512_maskz_loadu_ps(mask, a[t].add(j));
                    bv[t] = _mm512_maskz_loadu_ps(mask, b[t].add(j));
                }
                for t in 0..4 {
                    for u in 0..4 {
                        acc[t][u] = _mm512_fmadd_ps(av[t], bv[u], acc[t][u]);
                    }
                }
                j += 16;
            }
            let mut out = [[0.0f32; 4]; 4];
            for t in 0..4 {
                for u in 0..4 {
                    out[t][u] = _mm512_reduce_add_ps(acc[t][u]);
                }
            }
            out
        }
    }

    impl Tiles for Avx2 {
        const MR: usize = 6;
        const NR: usize = 16;

        unsafe fn ab(rows: &[&[f32]], b: &[f32], ldb: usize, k: usize, init: &[f32], out: &mut [f32; TILE]) {
            assert!(k >= 1 && rows.len() >= 6 && rows.iter().all(|r| r.len() >= k) && init.len() >= 16);
            assert!(b.len() >= (k - 1) * ldb + 16);
            // SAFETY: AVX2 and FMA per the trait's contract; the asserts bound every read.
            unsafe { ab_avx2(rows.as_ptr(), b.as_ptr(), ldb, k, init.as_ptr(), out) }
        }

        unsafe fn atb(a: &[f32], lda: usize, b: &[f32], ldb: usize, k: usize, out: &mut [f32; TILE]) {
            assert!(k >= 1 && a.len() >= (k - 1) * lda + 6 && b.len() >= (k - 1) * ldb + 16);
            // SAFETY: as above.
            unsafe { atb_avx2(a.as_ptr(), lda, b.as_ptr(), ldb, k, out) }
        }

        unsafe fn abt(a: &[&[f32]; 4], b: &[&[f32]; 4], k: usize) -> [[f32; 4]; 4] {
            assert!(a.iter().chain(b).all(|r| r.len() >= k));
            // SAFETY: as above.
            unsafe { abt_avx2(ptrs(a), ptrs(b), k) }
        }
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn ab_avx2(rows: *const &[f32], b: *const f32, ldb: usize, k: usize, init: *const f32, out: &mut [f32; TILE]) {
        // SAFETY (every pointer access below): bounded by the asserts in `Avx2::ab`.
        unsafe {
            let mut a = [std::ptr::null::<f32>(); 6];
            for (i, p) in a.iter_mut().enumerate() {
                *p = (*rows.add(i)).as_ptr();
            }
            let (i0, i1) = (_mm256_loadu_ps(init), _mm256_loadu_ps(init.add(8)));
            let mut acc = [[i0, i1]; 6];
            for p in 0..k {
                let b0 = _mm256_loadu_ps(b.add(p * ldb));
                let b1 = _mm256_loadu_ps(b.add(p * ldb + 8));
                for i in 0..6 {
                    let av = _mm256_broadcast_ss(&*a[i].add(p));
                    acc[i][0] = _mm256_fmadd_ps(av, b0, acc[i][0]);
                    acc[i][1] = _mm256_fmadd_ps(av, b1, acc[i][1]);
                }
            }
            for (i, r) in acc.iter().enumerate() {
                _mm256_storeu_ps(out.as_mut_ptr().add(i * 16), r[0]);
                _mm256_storeu_ps(out.as_mut_ptr().add(i * 16 + 8), r[1]);
            }
        }
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn atb_avx2(a: *const f32, lda: usize, b: *const f32, ldb: usize, k: usize, out: &mut [f32; TILE]) {
        // SAFETY (every pointer access below): bounded by the asserts in `Avx2::atb`.
        unsafe {
            let mut acc = [[_mm256_setzero_ps(); 2]; 6];
            for p in 0..k {
                let b0 = _mm256_loadu_ps(b.add(p * ldb));
                let b1 = _mm256_loadu_ps(b.add(p * ldb + 8));
                let ap = a.add(p * lda);
                for (i, r) in acc.iter_mut().enumerate() {
                    let av = _mm256_broadcast_ss(&*ap.add(i));
                    r[0] = _mm256_fmadd_ps(av, b0, r[0]);
                    r[1] = _mm256_fmadd_ps(av, b1, r[1]);
                }
            }
            for (i, r) in acc.iter().enumerate() {
                _mm256_storeu_ps(out.as_mut_ptr().add(i * 16), r[0]);
                _mm256_storeu_ps(out.as_mut_ptr().add(i * 16 + 8), r[1]);
            }
        }
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn abt_avx2(a: [*const f32; 4], b: [*const f32; 4], k: usize) -> [[f32; 4]; 4] {
        // SAFETY (every pointer access below): rows hold >= k values (`Avx2::abt`); the last,
        // partial chunk is read with a mask.
        unsafe {
            let mut acc = [[_mm256_setzero_ps(); 4]; 4];
            let mut av = [_mm256_setzero_ps(); 4];
            let mut bv = [_mm256_setzero_ps(); 4];
            let mut j = 0;
            while j < k {
                let left = (k - j).min(8) as i32;
                let mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(left), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
                for t in 0..4 {
                    av[t] = _mm256_maskload_ps(a[t].add(j), mask);
                    bv[t] = _mm256_maskload_ps(b[t].add(j), mask);
                }
                for t in 0..4 {
                    for u in 0..4 {
                        acc[t][u] = _mm256_fmadd_ps(av[t], bv[u], acc[t][u]);
                    }
                }
                j += 8;
            }
            let mut out = [[0.0f32; 4]; 4];
            for t in 0..4 {
                for u in 0..4 {
                    let v = acc[t][u];
                    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
                    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
                    let s = _mm_add_ss(s, _mm_shuffle_ps::<0x55>(s, s));
                    out[t][u] = _mm_cvtss_f32(s);
                }
            }
            out
        }
    }
}

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
pub(super) mod wasm {
    //! The WebAssembly SIMD tile: 128-bit vectors of four floats, with a separate multiply and
    //! add (fused multiply-add is in the newer relaxed-SIMD set, which not every browser runs).
    //! A browser's engine maps each `v128` to one x86 xmm (or Arm q) register, so the tile is
    //! sized for 16 of them: 6 x 8 is twelve accumulators, two loads of B and one broadcast.
    use std::arch::wasm32::*;

    use super::{TILE, Tiles};

    pub struct Simd128;

    /// Four floats from `p` (no alignment needed: WebAssembly loads take any address).
    ///
    /// # Safety
    /// `p..p + 4` must be readable.
    #[inline(always)]
    unsafe fn load(p: *const f32) -> v128 {
        // SAFETY: per the contract.
        unsafe { v128_load(p.cast()) }
    }

    #[inline(always)]
    fn madd(acc: v128, a: v128, b: v128) -> v128 {
        f32x4_add(acc, f32x4_mul(a, b))
    }

    impl Tiles for Simd128 {
        const MR: usize = 6;
        const NR: usize = 8;

        unsafe fn ab(rows: &[&[f32]], b: &[f32], ldb: usize, k: usize, init: &[f32], out: &mut [f32; TILE]) {
            assert!(k >= 1 && rows.len() >= 6 && rows.iter().all(|r| r.len() >= k) && init.len() >= 8);
            assert!(b.len() >= (k - 1) * ldb + 8);
            // SAFETY (every pointer access below): bounded by the asserts above.
            unsafe {
                let a: [*const f32; 6] = std::array::from_fn(|i| rows[i].as_ptr());
                let (i0, i1) = (load(init.as_ptr()), load(init.as_ptr().add(4)));
                let mut acc = [[i0, i1]; 6];
                for p in 0..k {
                    let bp = b.as_ptr().add(p * ldb);
                    let (b0, b1) = (load(bp), load(bp.add(4)));
                    for i in 0..6 {
                        let av = f32x4_splat(*a[i].add(p));
                        acc[i][0] = madd(acc[i][0], av, b0);
                        acc[i][1] = madd(acc[i][1], av, b1);
                    }
                }
                for (i, r) in acc.iter().enumerate() {
                    v128_store(out.as_mut_ptr().add(i * 8).cast(), r[0]);
                    v128_store(out.as_mut_ptr().add(i * 8 + 4).cast(), r[1]);
                }
            }
        }

        unsafe fn atb(a: &[f32], lda: usize, b: &[f32], ldb: usize, k: usize, out: &mut [f32; TILE]) {
            assert!(k >= 1 && a.len() >= (k - 1) * lda + 6 && b.len() >= (k - 1) * ldb + 8);
            // SAFETY (every pointer access below): bounded by the assert above.
            unsafe {
                let mut acc = [[f32x4_splat(0.0); 2]; 6];
                for p in 0..k {
                    let bp = b.as_ptr().add(p * ldb);
                    let (b0, b1) = (load(bp), load(bp.add(4)));
                    let ap = a.as_ptr().add(p * lda);
                    for (i, r) in acc.iter_mut().enumerate() {
                        let av = f32x4_splat(*ap.add(i));
                        r[0] = madd(r[0], av, b0);
                        r[1] = madd(r[1], av, b1);
                    }
                }
                for (i, r) in acc.iter().enumerate() {
                    v128_store(out.as_mut_ptr().add(i * 8).cast(), r[0]);
                    v128_store(out.as_mut_ptr().add(i * 8 + 4).cast(), r[1]);
                }
            }
        }

        unsafe fn abt(a: &[&[f32]; 4], b: &[&[f32]; 4], k: usize) -> [[f32; 4]; 4] {
            assert!(a.iter().chain(b).all(|r| r.len() >= k));
            let whole = k / 4 * 4;
            let mut acc = [[f32x4_splat(0.0); 4]; 4];
            // SAFETY: every row holds at least k >= whole values (the assert above).
            unsafe {
                for j in (0..whole).step_by(4) {
                    let av: [v128; 4] = std::array::from_fn(|t| load(a[t].as_ptr().add(j)));
                    let bv: [v128; 4] = std::array::from_fn(|u| load(b[u].as_ptr().add(j)));
                    for t in 0..4 {
                        for u in 0..4 {
                            acc[t][u] = madd(acc[t][u], av[t], bv[u]);
                        }
                    }
                }
            }
            let mut out = [[0.0f32; 4]; 4];
            for t in 0..4 {
                for u in 0..4 {
                    let v = acc[t][u];
                    let lanes = f32x4_extract_lane::<0>(v) + f32x4_extract_lane::<1>(v) + f32x4_extract_lane::<2>(v) + f32x4_extract_lane::<3>(v);
                    let tail: f32 = a[t][whole..k].iter().zip(&b[u][whole..k]).map(|(x, y)| x * y).sum();
                    out[t][u] = lanes + tail;
                }
            }
            out
        }
    }
}
