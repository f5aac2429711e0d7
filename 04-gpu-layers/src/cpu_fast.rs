//! The CPU trainer's fused ops, written for speed: the same math as the fused twins in `cpu.rs`
//! (which stay the plain reference, compositions of the primitive twins), in one pass each, with
//! no allocation per step, register-tiled products and threads only where they pay.
//!
//! A training step of 784-128-10 at batch 64 is two products of 6.4 M multiply-adds
//! (`x W₁` and `xᵀ dh`) and a few small ones: about 26 MFLOP, a quarter of a millisecond for one
//! core running AVX-512 at half its peak. The twins spend more than that around the arithmetic:
//! they copy both operands into new matrices for stage 02's `matmul`, pack them into panels, and
//! then walk the result again for the bias, again for the activation, again for the column sums
//! and again for the optimizer. Here:
//!
//! - **No packing.** Every operand of a batch-64 step fits in the 1-2 MiB L2 cache of one core
//!   (`W₁` is 400 KB, a batch 200 KB), so the micro-kernel reads `W` and `dy` where they lie, one
//!   row of `NR` floats per step of `k`, and the rows of `x` (or, for `xᵀ dy`, eight consecutive
//!   floats of one row of `x`) broadcast from memory. Stage 02 packs because its operands are
//!   bigger than the caches; at these sizes packing would be a third of the work.
//! - **Fused epilogues.** The forward product starts its accumulators at the bias and applies
//!   the activation on the way out; the weight-gradient product writes the gradient and moves
//!   the parameter and its optimizer state while the tile is still in registers.
//! - **Register tiles.** An `MR x NR` tile of the result stays in vector registers for the whole
//!   `k` loop: 8 x 32 (16 AVX-512 registers) where the CPU has AVX-512, 6 x 16 with AVX2 + FMA,
//!   4 x 8 otherwise. The kernels are plain Rust over fixed-size arrays, compiled three times
//!   with `#[target_feature]` and chosen at run time, so the binary runs on any x86-64 and on
//!   other architectures (the portable version).
//! - **Threads where they pay.** A product is split over the rayon pool (rows of the result, a
//!   whole number of tiles per thread) only above [`PARALLEL_MIN_FLOPS`]; the small products of
//!   the output layer stay on the calling thread, where waking a second core would cost more
//!   than it saves. The pool is the caller's: `mnist train --threads N` builds it.

use std::cell::RefCell;
use std::sync::OnceLock;

use rayon::prelude::*;

use crate::cpu::{self, LossStats, activate_grad, activate_value};
use crate::tape::Mode;
use crate::{Activation, Optimizer};

/// Products below this many flops (`2 m n k`) run on the calling thread. Measured on a 2-core
/// VM: waking the second rayon worker and joining it costs 5-15 µs; the MNIST layer products
/// (12.8 MFLOP, ~80 µs on one core) gain from it, the output layer's (0.16 MFLOP) lose.
pub const PARALLEL_MIN_FLOPS: usize = 4 << 20;

// ---- instruction sets ---------------------------------------------------------------------

/// The instruction set the tiles run with, detected once per process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Isa {
    #[cfg(target_arch = "x86_64")]
    Avx512,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    Portable,
}

fn isa() -> Isa {
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
        Isa::Portable
    })
}

impl Isa {
    /// Rows of the `A B` register tile.
    fn mr(self) -> usize {
        match self {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => <x86::Avx512 as Tiles>::MR,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => <x86::Avx2 as Tiles>::MR,
            Isa::Portable => <Portable as Tiles>::MR,
        }
    }
}

/// The vector instructions the CPU trainer uses on this machine, for reports: "avx512",
/// "avx2+fma" or "portable".
pub fn instruction_set() -> &'static str {
    match isa() {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => "avx512",
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => "avx2+fma",
        Isa::Portable => "portable",
    }
}

/// The register tiles of one instruction set. Every result is written to `out`, a row-major
/// `MR x NR` tile (`MR * NR <= TILE`), from which the caller's epilogue reads.
///
/// # Safety
/// The CPU must support the instruction set (`isa()` detected it).
trait Tiles {
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
const TILE: usize = 256;

/// Plain Rust, for CPUs without AVX2: a 4 x 8 tile the compiler vectorizes for the baseline.
struct Portable;

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
mod x86 {
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

/// `fn $name(args)` runs `$generic::<Tiles of this CPU>(args)`: the x86-64 versions are
/// `#[target_feature]` functions into which the `#[inline(always)]` strip is inlined, so its
/// epilogue loops (bias, activation, the optimizer) are vectorized for that set too.
macro_rules! for_each_isa {
    ($(#[$meta:meta])* fn $name:ident = $generic:ident($($arg:ident: $ty:ty),* $(,)?)) => {
        $(#[$meta])*
        fn $name($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx512f,avx2,fma")]
            #[allow(clippy::too_many_arguments)]
            unsafe fn avx512($($arg: $ty),*) {
                // SAFETY: only called after `isa()` detected AVX-512F.
                unsafe { $generic::<x86::Avx512>($($arg),*) }
            }
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2,fma")]
            #[allow(clippy::too_many_arguments)]
            unsafe fn avx2($($arg: $ty),*) {
                // SAFETY: only called after `isa()` detected AVX2 and FMA.
                unsafe { $generic::<x86::Avx2>($($arg),*) }
            }
            match isa() {
                // SAFETY: `isa()` detected AVX-512F (with AVX2 and FMA) on this CPU.
                #[cfg(target_arch = "x86_64")]
                Isa::Avx512 => unsafe { avx512($($arg),*) },
                // SAFETY: `isa()` detected AVX2 and FMA on this CPU.
                #[cfg(target_arch = "x86_64")]
                Isa::Avx2 => unsafe { avx2($($arg),*) },
                // SAFETY: plain Rust, no instruction-set requirement.
                Isa::Portable => unsafe { $generic::<Portable>($($arg),*) },
            }
        }
    };
}

/// Rows of the result per thread: a whole number of `mr`-row tiles, `threads` strips at most,
/// all `m` rows on one thread below [`PARALLEL_MIN_FLOPS`].
fn strip_rows(m: usize, n: usize, k: usize, mr: usize) -> usize {
    let flops = 2usize.saturating_mul(m).saturating_mul(n).saturating_mul(k);
    let threads = rayon::current_num_threads();
    if flops < PARALLEL_MIN_FLOPS || threads <= 1 || m <= mr {
        return m.max(1);
    }
    let tiles = m.div_ceil(mr);
    tiles.div_ceil(threads.min(tiles)) * mr
}

thread_local! {
    /// Each thread's zero-padded copies of edge panels (the last, narrower-than-`NR` columns of
    /// `B`; the last, shorter-than-`MR` rows of `Aᵀ`), the output layer's logits and a
    /// transposed copy of a narrow `W`: grown once, reused by every step.
    static PANEL: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    static A_EDGE: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    static LOGITS: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    static TRANSPOSED: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Takes this thread's buffer out of `slot` (put it back with [`put`]), so that the kernels run
/// in the caller's function and not in a closure, which would not get its target features.
fn take(slot: &'static std::thread::LocalKey<RefCell<Vec<f32>>>) -> Vec<f32> {
    slot.with_borrow_mut(std::mem::take)
}

fn put(slot: &'static std::thread::LocalKey<RefCell<Vec<f32>>>, v: Vec<f32>) {
    slot.with_borrow_mut(|s| *s = v);
}

// ---- strips: one thread's share of a product, with its epilogue ----------------------------

/// What an `A B` strip does with each result on the way out.
#[derive(Clone, Copy)]
enum Post<'a> {
    /// `y = act(acc + bias[j])`: the forward of a layer.
    Forward { bias: &'a [f32], act: Option<Activation> },
    /// `y = acc * act'(h[i, j])`, `h` shaped like `y`: the backward into the layer below.
    TimesGrad { h: &'a [f32], act: Activation },
}

/// `y = post(a b)` for `rows` rows: a `[rows, k]`, b `[k, n]` (both row-major) -> y `[rows, n]`.
///
/// # Safety
/// The CPU must support `T`'s instruction set.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn ab_strip<T: Tiles>(a: &[f32], rows: usize, k: usize, b: &[f32], n: usize, post: Post<'_>, y: &mut [f32]) {
    let (mr_max, nr_max) = (T::MR, T::NR);
    let mut panel = take(&PANEL);
    let mut tile = [0.0f32; TILE];
    let mut init = [0.0f32; TILE];
    let mut a_rows: [&[f32]; 8] = [&[]; 8];
    for j0 in (0..n).step_by(nr_max) {
        let nr = nr_max.min(n - j0);
        let (bp, ldb) = if nr == nr_max { (&b[j0..], n) } else { edge_panel(b, n, k, j0, nr, nr_max, &mut panel) };
        if let Post::Forward { bias, .. } = post {
            init[..nr].copy_from_slice(&bias[j0..j0 + nr]);
        }
        for i0 in (0..rows).step_by(mr_max) {
            let mr = mr_max.min(rows - i0);
            // Rows past the batch repeat its last row: read, never stored.
            for (i, row) in a_rows.iter_mut().enumerate().take(mr_max) {
                let r = i0 + i.min(mr - 1);
                *row = &a[r * k..(r + 1) * k];
            }
            // SAFETY: `T`'s instruction set is available (this function's contract).
            unsafe { T::ab(&a_rows[..mr_max], bp, ldb, k, &init[..nr_max], &mut tile) };
            for i in 0..mr {
                let at = (i0 + i) * n + j0;
                let (out, acc) = (&mut y[at..at + nr], &tile[i * nr_max..i * nr_max + nr]);
                match post {
                    Post::Forward { act: None, .. } => out.copy_from_slice(acc),
                    Post::Forward { act: Some(act), .. } => {
                        out.iter_mut().zip(acc).for_each(|(o, &v)| *o = activate_value(v, Some(act)));
                    }
                    Post::TimesGrad { h, act } => {
                        let h = &h[at..at + nr];
                        out.iter_mut().zip(acc).zip(h).for_each(|((o, &g), &hv)| *o = g * activate_grad(hv, Some(act)));
                    }
                }
            }
        }
    }
    put(&PANEL, panel);
}

/// Columns `j0..j0 + nr` of `b` (`[k, ld]` row-major), copied into `panel` as `[k, nr_max]`
/// with zeros after column `nr`: the last, narrower panel of a product. Returns it and its stride.
fn edge_panel<'a>(b: &[f32], ld: usize, k: usize, j0: usize, nr: usize, nr_max: usize, panel: &'a mut Vec<f32>) -> (&'a [f32], usize) {
    panel.resize(k * nr_max, 0.0);
    for (dst, src) in panel.chunks_exact_mut(nr_max).zip(b.chunks_exact(ld)) {
        dst[..nr].copy_from_slice(&src[j0..j0 + nr]);
        dst[nr..].fill(0.0);
    }
    (&panel[..], nr_max)
}

/// `out[r, i] = (Σ_j a[r, j] * w[i, j]) * act'(h[r, i])` for `rows` rows: a `[rows, k]`,
/// w `[n, k]` (both row-major, so `a wᵀ`), h `[rows, n]` -> out `[rows, n]`.
///
/// # Safety
/// The CPU must support `T`'s instruction set.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn backward_strip<T: Tiles>(a: &[f32], rows: usize, k: usize, w: &[f32], n: usize, h: &[f32], act: Activation, out: &mut [f32]) {
    let mut ar: [&[f32]; 4] = [&[]; 4];
    let mut br: [&[f32]; 4] = [&[]; 4];
    for r0 in (0..rows).step_by(4) {
        for (t, row) in ar.iter_mut().enumerate() {
            let r = (r0 + t).min(rows - 1);
            *row = &a[r * k..(r + 1) * k];
        }
        for i0 in (0..n).step_by(4) {
            for (t, row) in br.iter_mut().enumerate() {
                let i = (i0 + t).min(n - 1);
                *row = &w[i * k..(i + 1) * k];
            }
            // SAFETY: `T`'s instruction set is available (this function's contract).
            let acc = unsafe { T::abt(&ar, &br, k) };
            for (t, row) in acc.iter().enumerate().take(rows - r0) {
                let r = r0 + t;
                for (u, &g) in row.iter().enumerate().take(n - i0) {
                    let i = i0 + u;
                    out[r * n + i] = g * activate_grad(h[r * n + i], Some(act));
                }
            }
        }
    }
}

/// The optimizer's per-parameter rule, with the per-step constants worked out once. SGD is
/// `cpu::sgd` expression for expression. Adam is `cpu::adam` rearranged the way PyTorch writes
/// it, `p -= (lr / c1) m / (sqrt(v) / sqrt(c2) + eps)` with `c = 1 - beta^t`: the same number up
/// to rounding, with one division and one square root per parameter instead of three divisions
/// and a square root (divisions are the slowest vector instructions; this halved the update).
#[derive(Debug, Clone, Copy)]
enum Rule {
    Sgd { lr: f32, momentum: f32 },
    /// `step = lr / (1 - beta1^t)`, `s2 = 1 / sqrt(1 - beta2^t)`.
    Adam { beta1: f32, beta2: f32, eps: f32, step: f32, s2: f32 },
}

impl Rule {
    fn new(opt: Optimizer, step: u32) -> Self {
        match opt {
            Optimizer::Sgd { lr, momentum } => Rule::Sgd { lr, momentum },
            Optimizer::Adam { lr, beta1, beta2, eps } => {
                let tf = step.max(1) as f32;
                let (c1, c2) = (1.0 - beta1.powf(tf), 1.0 - beta2.powf(tf));
                Rule::Adam { beta1, beta2, eps, step: lr / c1, s2: 1.0 / c2.sqrt() }
            }
        }
    }

    /// Moves `p` (with state `s0`, and `s1` for Adam) by gradients `g`, element by element.
    #[inline(always)]
    fn apply(self, p: &mut [f32], g: &[f32], s0: &mut [f32], s1: &mut [f32]) {
        match self {
            Rule::Sgd { lr, momentum } => {
                for ((p, &g), v) in p.iter_mut().zip(g).zip(s0.iter_mut()) {
                    *v = momentum * *v + g;
                    *p -= lr * *v;
                }
            }
            Rule::Adam { beta1, beta2, eps, step, s2 } => {
                for (((p, &g), m), v) in p.iter_mut().zip(g).zip(s0.iter_mut()).zip(s1.iter_mut()) {
                    *m = beta1 * *m + (1.0 - beta1) * g;
                    *v = beta2 * *v + (1.0 - beta2) * g * g;
                    *p -= step * *m / (v.sqrt() * s2 + eps);
                }
            }
        }
    }
}

/// Rows `i_start..` of one layer's `[(in + 1), out]` parameters (only rows of `W` here; the
/// bias row is done apart), with their gradient and state rows. `s1` is empty for SGD.
struct ParamRows<'a> {
    i_start: usize,
    params: &'a mut [f32],
    grads: &'a mut [f32],
    s0: &'a mut [f32],
    s1: &'a mut [f32],
}

/// `grads[i, j] = Σ_r x[r, i] * dy[r, j]` for the rows of `W` in `dst`, then the optimizer step
/// on them, tile by tile while the tile is in cache.
///
/// # Safety
/// The CPU must support `T`'s instruction set.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn update_strip<T: Tiles>(x: &[f32], rows: usize, inputs: usize, dy: &[f32], outputs: usize, rule: Rule, dst: ParamRows<'_>) {
    let ParamRows { i_start, params, grads, s0, s1 } = dst;
    let (mr_max, nr_max) = (T::MR, T::NR);
    let m = params.len() / outputs;
    let adam = !s1.is_empty();
    let mut panel = take(&PANEL);
    let mut a_edge = take(&A_EDGE);
    let mut tile = [0.0f32; TILE];
    // The last, narrower column panel of dy, copied once (every row tile reads it).
    let full = outputs / nr_max * nr_max;
    if full < outputs {
        edge_panel(dy, outputs, rows, full, outputs - full, nr_max, &mut panel);
    }
    // Row tiles outside, column panels inside: a tile's columns of x (rows x MR floats) stay in
    // L1 for all of its panels, and its parameter rows are updated front to back.
    for i0 in (0..m).step_by(mr_max) {
        let mr = mr_max.min(m - i0);
        let first = i_start + i0;
        // The last rows of W (fewer than MR) read a zero-padded copy of their columns of x.
        let (a, lda) = if first + mr_max <= inputs {
            (&x[first..], inputs)
        } else {
            edge_panel(x, inputs, rows, first, mr, mr_max, &mut a_edge)
        };
        for j0 in (0..outputs).step_by(nr_max) {
            let nr = nr_max.min(outputs - j0);
            let (b, ldb) = if nr == nr_max { (&dy[j0..], outputs) } else { (&panel[..], nr_max) };
            // SAFETY: `T`'s instruction set is available (this function's contract).
            unsafe { T::atb(a, lda, b, ldb, rows, &mut tile) };
            for i in 0..mr {
                let at = (i0 + i) * outputs + j0;
                let range = at..at + nr;
                let g = &tile[i * nr_max..i * nr_max + nr];
                grads[range.clone()].copy_from_slice(g);
                let s1 = if adam { &mut s1[range.clone()] } else { &mut [][..] };
                rule.apply(&mut params[range.clone()], g, &mut s0[range], s1);
            }
        }
    }
    put(&PANEL, panel);
    put(&A_EDGE, a_edge);
}

for_each_isa! {
    /// [`ab_strip`] for this CPU, on the calling thread.
    fn ab_any = ab_strip(a: &[f32], rows: usize, k: usize, b: &[f32], n: usize, post: Post<'_>, y: &mut [f32])
}

for_each_isa! {
    /// [`backward_strip`] for this CPU, on the calling thread.
    #[allow(clippy::too_many_arguments)]
    fn backward_any = backward_strip(a: &[f32], rows: usize, k: usize, w: &[f32], n: usize, h: &[f32], act: Activation, out: &mut [f32])
}

for_each_isa! {
    /// [`update_strip`] for this CPU, on the calling thread.
    #[allow(clippy::too_many_arguments)]
    fn update_any = update_strip(
        x: &[f32], rows: usize, inputs: usize, dy: &[f32], outputs: usize, rule: Rule, dst: ParamRows<'_>,
    )
}

// ---- the fused ops ------------------------------------------------------------------------

/// `y = post(a b)`, a `[rows, k]`, b `[k, n]`, the rows of `y` split over threads when the
/// product is big enough.
fn ab_rows(a: &[f32], rows: usize, k: usize, b: &[f32], n: usize, post: Post<'_>, y: &mut [f32]) {
    let strip = strip_rows(rows, n, k, isa().mr());
    if strip >= rows {
        return ab_any(a, rows, k, b, n, post, y);
    }
    y.par_chunks_mut(strip * n).zip(a.par_chunks(strip * k)).enumerate().for_each(|(t, (y, a))| {
        // Each strip's rows of h, for the backward epilogue.
        let post = match post {
            Post::TimesGrad { h, act } => Post::TimesGrad { h: &h[t * strip * n..], act },
            forward => forward,
        };
        ab_any(a, y.len() / n, k, b, n, post, y)
    });
}

/// Products `dy Wᵀ` with at most this many columns in `dy` (the output layer's classes) go
/// through a transposed copy of `W` and the `A B` tiles: the copy is cheap, and a dot product
/// of ten terms would spend more on its final reduction than on the multiply-adds.
const TRANSPOSE_MAX_OUTPUTS: usize = 32;

/// `linear_forward.wgsl`, fast: `y = act(x W + b)`; x `[rows, inputs]`, params
/// `[(inputs + 1), outputs]` (W, then b) -> y `[rows, outputs]` (its first `rows * outputs`
/// values are written).
pub fn linear_forward(
    x: &[f32],
    rows: usize,
    inputs: usize,
    params: &[f32],
    outputs: usize,
    act: Option<Activation>,
    y: &mut [f32],
) {
    let (w, bias) = params[..(inputs + 1) * outputs].split_at(inputs * outputs);
    let x = &x[..rows * inputs];
    let y = &mut y[..rows * outputs];
    ab_rows(x, rows, inputs, w, outputs, Post::Forward { bias, act }, y);
}

/// `linear_backward_input.wgsl`, fast: `dx = (dy Wᵀ) * act'(h)`; dy `[rows, outputs]`,
/// params `[(inputs + 1), outputs]`, h `[rows, inputs]` -> dx `[rows, inputs]`.
#[allow(clippy::too_many_arguments)]
pub fn linear_backward_input(
    dy: &[f32],
    rows: usize,
    outputs: usize,
    params: &[f32],
    inputs: usize,
    h: &[f32],
    act: Activation,
    dx: &mut [f32],
) {
    let w = &params[..inputs * outputs];
    let dy = &dy[..rows * outputs];
    let h = &h[..rows * inputs];
    let dx = &mut dx[..rows * inputs];
    if outputs <= TRANSPOSE_MAX_OUTPUTS {
        // wt = Wᵀ: [outputs, inputs], so dx = dy wt is an `A B` product.
        let mut wt = take(&TRANSPOSED);
        wt.resize(outputs * inputs, 0.0);
        for (i, w_row) in w.chunks_exact(outputs).enumerate() {
            for (o, &v) in w_row.iter().enumerate() {
                wt[o * inputs + i] = v;
            }
        }
        ab_rows(dy, rows, outputs, &wt, inputs, Post::TimesGrad { h, act }, dx);
        return put(&TRANSPOSED, wt);
    }
    let strip = strip_rows(rows, inputs, outputs, 4);
    if strip >= rows {
        backward_any(dy, rows, outputs, w, inputs, h, act, dx);
    } else {
        dx.par_chunks_mut(strip * inputs)
            .zip(dy.par_chunks(strip * outputs))
            .zip(h.par_chunks(strip * inputs))
            .for_each(|((dx, dy), h)| backward_any(dy, dx.len() / inputs, outputs, w, inputs, h, act, dx));
    }
}

/// `output_layer.wgsl`, fast: logits `= h W + b`, softmax cross-entropy into `out` (the
/// reference's own `cpu::softmax_cross_entropy`, so the same bits and the same statistics), and
/// in training `dh = (dL/dz Wᵀ) * act'(h)`.
/// h `[rows, inputs]`, params `[(inputs + 1), classes]`, labels `[rows]` -> out
/// `[rows, classes]`, dh `[rows, inputs]`.
#[allow(clippy::too_many_arguments)]
pub fn output_layer(
    h: &[f32],
    rows: usize,
    inputs: usize,
    params: &[f32],
    classes: usize,
    labels: &[u32],
    mode: Mode,
    inv_rows: f32,
    out: &mut [f32],
    dh: Option<(&mut [f32], Activation)>,
) -> LossStats {
    let h = &h[..rows * inputs];
    let out = &mut out[..rows * classes];
    let mut logits = take(&LOGITS);
    logits.resize(rows * classes, 0.0);
    linear_forward(h, rows, inputs, params, classes, None, &mut logits);
    let stats = cpu::softmax_cross_entropy(&logits, classes, labels, mode, inv_rows, out);
    put(&LOGITS, logits);
    if let (Mode::Train, Some((dh, act))) = (mode, dh) {
        linear_backward_input(out, rows, classes, params, inputs, h, act, dh);
    }
    stats
}

/// `linear_update.wgsl` for one layer, fast: `grads = [x | 1]ᵀ dy` (`[(inputs + 1), outputs]`)
/// and the optimizer step on `params` and `state` (`[k * (inputs + 1) * outputs]`, k values per
/// parameter as in `cpu::update`); x `[rows, inputs]`, dy `[rows, outputs]`.
#[allow(clippy::too_many_arguments)]
pub fn linear_update(
    x: &[f32],
    rows: usize,
    inputs: usize,
    dy: &[f32],
    outputs: usize,
    params: &mut [f32],
    grads: &mut [f32],
    state: &mut [f32],
    opt: Optimizer,
    step: u32,
) {
    let count = (inputs + 1) * outputs;
    let rule = Rule::new(opt, step);
    let x = &x[..rows * inputs];
    let dy = &dy[..rows * outputs];
    let (params, grads) = (&mut params[..count], &mut grads[..count]);
    let (s0, s1): (&mut [f32], &mut [f32]) = match opt {
        Optimizer::Sgd { .. } => (&mut state[..count], &mut []),
        Optimizer::Adam { .. } => state[..2 * count].split_at_mut(count),
    };
    let wlen = inputs * outputs;
    let (p_w, p_b) = params.split_at_mut(wlen);
    let (g_w, g_b) = grads.split_at_mut(wlen);
    let (s0_w, s0_b) = s0.split_at_mut(wlen);
    let (s1_w, s1_b) = if s1.is_empty() { (&mut [][..], &mut [][..]) } else { s1.split_at_mut(wlen) };

    // The rows of W, in strips of whole tiles, over threads when the product is big enough.
    if inputs > 0 {
        let strip = strip_rows(inputs, outputs, rows, isa().mr()) * outputs;
        let mut s1_chunks = s1_w.chunks_mut(strip);
        let jobs: Vec<ParamRows<'_>> = p_w
            .chunks_mut(strip)
            .zip(g_w.chunks_mut(strip))
            .zip(s0_w.chunks_mut(strip))
            .enumerate()
            .map(|(t, ((params, grads), s0))| {
                let s1 = s1_chunks.next().unwrap_or(&mut []);
                ParamRows { i_start: t * strip / outputs, params, grads, s0, s1 }
            })
            .collect();
        let run = |dst: ParamRows<'_>| update_any(x, rows, inputs, dy, outputs, rule, dst);
        if jobs.len() == 1 {
            jobs.into_iter().for_each(run);
        } else {
            jobs.into_par_iter().for_each(run);
        }
    }

    // The bias row: the column sums of dy, then the same step.
    g_b.fill(0.0);
    for row in dy.chunks_exact(outputs) {
        for (s, &v) in g_b.iter_mut().zip(row) {
            *s += v;
        }
    }
    rule.apply(p_b, g_b, s0_b, s1_b);
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::assert_close;
    use rand::{Rng, SeedableRng};

    fn random(n: usize, lo: f32, seed: u64) -> Vec<f32> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        (0..n).map(|_| rng.random_range(lo..1.0)).collect()
    }

    /// Sums of `k` terms of size ~1 in another order than the twins: f32 rounding, about
    /// k * 2^-24 at worst; a missing or doubled term (~1e-2) fails.
    fn tol(k: usize) -> (f64, f64) {
        (1e-4, 2e-6 * k.max(1) as f64)
    }

    const SHAPES: [(usize, usize, usize); 8] =
        [(1, 1, 1), (17, 63, 65), (64, 784, 128), (3, 129, 257), (65, 17, 10), (63, 1, 33), (8, 32, 32), (129, 40, 7)];

    #[test]
    fn forward_matches_the_twin() {
        for (s, &(rows, inputs, outputs)) in SHAPES.iter().enumerate() {
            for act in [None, Some(Activation::Relu), Some(Activation::Tanh), Some(Activation::Sigmoid)] {
                let x = random(rows * inputs, -1.0, s as u64);
                let params = random((inputs + 1) * outputs, -1.0, 100 + s as u64);
                let want = cpu::linear_forward(&x, rows, inputs, &params, outputs, act).unwrap();
                let mut y = vec![f32::NAN; rows * outputs + 3];
                linear_forward(&x, rows, inputs, &params, outputs, act, &mut y);
                let (rel, abs) = tol(inputs);
                assert_close(&y[..rows * outputs], &want, rel, abs);
                assert!(y[rows * outputs..].iter().all(|v| v.is_nan()), "wrote past the live rows");
            }
        }
    }

    #[test]
    fn backward_input_matches_the_twin() {
        for (s, &(rows, inputs, outputs)) in SHAPES.iter().enumerate() {
            for act in [Activation::Relu, Activation::Tanh, Activation::Sigmoid] {
                let dy = random(rows * outputs, -1.0, s as u64);
                let params = random((inputs + 1) * outputs, -1.0, 200 + s as u64);
                let h = random(rows * inputs, 0.0, 300 + s as u64);
                let want = cpu::linear_backward_input(&dy, rows, outputs, &params, inputs, &h, act).unwrap();
                let mut dx = vec![f32::NAN; rows * inputs];
                linear_backward_input(&dy, rows, outputs, &params, inputs, &h, act, &mut dx);
                let (rel, abs) = tol(outputs);
                assert_close(&dx, &want, rel, abs);
            }
        }
    }

    #[test]
    fn update_matches_the_twins_for_sgd_and_adam() {
        for (s, &(rows, inputs, outputs)) in SHAPES.iter().enumerate() {
            for opt in [Optimizer::sgd(0.1, 0.9), Optimizer::adam(0.01)] {
                let count = (inputs + 1) * outputs;
                let k = opt.state_per_parameter();
                let x = random(rows * inputs, -1.0, s as u64);
                let dy = random(rows * outputs, -1.0, 400 + s as u64);
                let p0 = random(count, -1.0, 500 + s as u64);
                let st0 = random(k * count, 0.0, 600 + s as u64);
                let g_want = cpu::linear_grads(&x, rows, inputs, &dy, outputs).unwrap();
                let (mut p_want, mut st_want) = (p0.clone(), st0.clone());
                cpu::update(&mut p_want, &g_want, &mut st_want, opt, 3);
                let (mut p, mut g, mut st) = (p0.clone(), vec![f32::NAN; count], st0.clone());
                linear_update(&x, rows, inputs, &dy, outputs, &mut p, &mut g, &mut st, opt, 3);
                let (rel, abs) = tol(rows);
                assert_close(&g, &g_want, rel, abs);
                // Adam divides by sqrt(v): a gradient a rounding apart moves the parameter
                // by a little more than it, relative to lr.
                assert_close(&p, &p_want, rel, abs);
                assert_close(&st, &st_want, rel, abs);
            }
        }
    }

    #[test]
    fn output_layer_matches_the_twin_in_every_mode() {
        for (s, &(rows, inputs, classes)) in SHAPES.iter().enumerate() {
            for mode in [Mode::Train, Mode::Eval, Mode::Predict] {
                let h = random(rows * inputs, 0.0, s as u64);
                let params = random((inputs + 1) * classes, -1.0, 700 + s as u64);
                let labels: Vec<u32> = (0..rows).map(|r| ((r * 7 + s) % classes) as u32).collect();
                let inv = 1.0 / rows as f32;
                let (mut out_want, mut dh_want) = (vec![0.0; rows * classes], vec![0.0; rows * inputs]);
                let want = cpu::output_layer(
                    &h,
                    rows,
                    inputs,
                    &params,
                    classes,
                    &labels,
                    mode,
                    inv,
                    &mut out_want,
                    Some((&mut dh_want, Activation::Relu)),
                )
                .unwrap();
                let (mut out, mut dh) = (vec![f32::NAN; rows * classes], vec![0.0; rows * inputs]);
                let got =
                    output_layer(&h, rows, inputs, &params, classes, &labels, mode, inv, &mut out, Some((&mut dh, Activation::Relu)));
                let (rel, abs) = tol(inputs);
                assert_close(&out, &out_want, rel, abs);
                assert_close(&dh, &dh_want, rel, abs);
                assert_eq!((got.rows, got.correct, got.bad_labels), (want.rows, want.correct, want.bad_labels), "{mode:?}");
                let (gl, wl) = (got.loss_fixed as f64 / cpu::LOSS_UNITS_PER_ONE, want.loss_fixed as f64 / cpu::LOSS_UNITS_PER_ONE);
                assert!((gl - wl).abs() <= 1e-4 * wl.abs() + 1e-4 * rows as f64, "{mode:?}: loss {gl} vs {wl}");
            }
        }
    }

    #[test]
    fn threads_split_only_big_products() {
        assert_eq!(strip_rows(64, 10, 128, 8), 64, "the output layer stays on one thread");
        let strip = strip_rows(784, 128, 64, 8);
        assert!(strip.is_multiple_of(8) && strip <= 784, "{strip}");
    }
}
