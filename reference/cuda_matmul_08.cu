// cuda_matmul_08.cu: the CUDA twin of stage 03's kernel 08 (shaders/08_coop_f16.wgsl), its
// ladder tile at n = 4096 (128x128x32/16x16 w64x64 g8 s1, A * B), the same work done the same
// way, so that Nsight Compute can read the counters that no profiler reads for Vulkan compute,
// and so that its SASS can be set beside what the driver made of the WGSL.
//
//     nvcc -O3 -arch=sm_90 -lineinfo -o cuda_matmul_08 reference/cuda_matmul_08.cu
//     ./cuda_matmul_08 [n]            (default n = 4096; n a multiple of 256)
//
// Three kernels, as the WGSL's three entry points:
//   to_f16_a_kernel08, to_f16_b_kernel08: the conversion passes, 256 threads per 64 x 64 tile
//     staged in shared memory (rows padded by one float), written as half2 along the copy's
//     rows: A ([m][k]) transposed into [k][m], B ([k][n]) copied.
//   coop_f16_kernel08: 4 warps (the WGSL's subgroups) of 32, each a 64 x 64 block of C as 4 x 4
//     wmma 16x16x16 fragments (f16 inputs, f32 accumulators: the cooperative matrices); one
//     shared buffer of the tiles A [32][128 + 8] and B [32][128 + 8] halves; per 32-deep k-step:
//     store the registers fetched during the last step, barrier, fetch the next step's tile
//     (4 rounds of two 8-byte loads per thread and operand, as the driver issues the WGSL's
//     pairs of vec4<f16>), two 16-deep sub-steps of 8 fragment loads and 16 multiply-adds,
//     barrier; the workgroup order swizzled in bands of 8 rows of blocks; C stored straight
//     from the fragments.
//
// Checked on 48 sampled rows against f64 CPU products of the f16-rounded inputs (tight) and of
// the f32 inputs (the Rust runner's reference for the WGSL); timed with CUDA events: 3
// warm-ups, then the median of 20 samples of 5 back-to-back runs, with and without the
// conversions.

#include <cuda_fp16.h>
#include <mma.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

using namespace nvcuda;

#define CHECK(x)                                                                        \
    do {                                                                                \
        cudaError_t e_ = (x);                                                           \
        if (e_ != cudaSuccess) {                                                        \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                    \
        }                                                                               \
    } while (0)

// ---- conversion passes: f32 operand -> f16 copy, [k][m] or [k][n] ----

constexpr int CT = 64;

// Rows p0.. (along k) and columns i0.. (along m) of the copy of A (stored [m][k]: transposed).
__global__ void __launch_bounds__(256) to_f16_a_kernel08(const float* __restrict__ a, __half2* __restrict__ a16, int m, int k) {
    __shared__ float ct[CT * (CT + 1)];
    const int tid = threadIdx.x;
    const int p0 = blockIdx.y * CT, i0 = blockIdx.x * CT;
    for (int l = 0; l < CT * CT / 256; l++) {
        int e = tid + l * 256;
        int r = i0 + e / CT, col = p0 + e % CT;
        ct[(e / CT) * (CT + 1) + e % CT] = (r < m && col < k) ? a[size_t(r) * k + col] : 0.f;
    }
    __syncthreads();
    for (int l = 0; l < CT * CT / 512; l++) {
        int e = tid + l * 256;
        int dr = e / (CT / 2), dc = (e % (CT / 2)) * 2;
        a16[(size_t(p0 + dr) * m + i0 + dc) / 2] = __floats2half2_rn(ct[dc * (CT + 1) + dr], ct[(dc + 1) * (CT + 1) + dr]);
    }
}

// Rows p0.. (along k) and columns j0.. (along n) of the copy of B (stored [k][n]: copied).
__global__ void __launch_bounds__(256) to_f16_b_kernel08(const float* __restrict__ b, __half2* __restrict__ b16, int k, int n) {
    __shared__ float ct[CT * (CT + 1)];
    const int tid = threadIdx.x;
    const int p0 = blockIdx.y * CT, j0 = blockIdx.x * CT;
    for (int l = 0; l < CT * CT / 256; l++) {
        int e = tid + l * 256;
        int r = p0 + e / CT, col = j0 + e % CT;
        ct[(e / CT) * (CT + 1) + e % CT] = (r < k && col < n) ? b[size_t(r) * n + col] : 0.f;
    }
    __syncthreads();
    for (int l = 0; l < CT * CT / 512; l++) {
        int e = tid + l * 256;
        int dr = e / (CT / 2), dc = (e % (CT / 2)) * 2;
        b16[(size_t(p0 + dr) * n + j0 + dc) / 2] = __floats2half2_rn(ct[dr * (CT + 1) + dc], ct[dr * (CT + 1) + dc + 1]);
    }
}

// ---- the product ----

constexpr int BM = 128, BN = 128, BK = 32, WM = 64, WN = 64, GM = 8;
constexpr int FM = WM / 16, FN = WN / 16;
constexpr int SG_N = BN / WN;
constexpr int THREADS = (BM / WM) * SG_N * 32;  // 128
constexpr int LDA_S = BM + 8;                   // halves per tile row (padded by 8)
constexpr int LDB_S = BN + 8;
constexpr int A_V8 = BK * BM / 8;  // 16-byte pieces per A tile
constexpr int B_V8 = BK * BN / 8;
constexpr int LA = A_V8 / THREADS;  // 4
constexpr int LB = B_V8 / THREADS;
static_assert(A_V8 % THREADS == 0 && B_V8 % THREADS == 0, "whole rounds of loads");

// C [m][n] = op(A) op(B) from the copies a16 [k][m] and b16 [k][n] (halves). grid (n / BN, m / BM).
__global__ void __launch_bounds__(THREADS) coop_f16_kernel08(const __half* __restrict__ a16, const __half* __restrict__ b16,
                                                              float* __restrict__ c, int m, int k, int n) {
    __shared__ __align__(32) __half tiles[BK * LDA_S + BK * LDB_S];
    __half* const ta = tiles;
    __half* const tb = tiles + BK * LDA_S;
    const int tid = threadIdx.x, sg = tid / 32;
    // The swizzle of kernel 07: GM row bands walked column by column.
    const int id = blockIdx.y * gridDim.x + blockIdx.x;
    const int per_group = GM * gridDim.x;
    const int first = (id / per_group) * GM;
    const int rows = min(int(gridDim.y) - first, GM);
    const int in_group = id % per_group;
    const int row0 = (first + in_group % rows) * BM;
    const int col0 = (in_group / rows) * BN;
    const int wi = (sg / SG_N) * WM, wj = (sg % SG_N) * WN;

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FM][FN];
#pragma unroll
    for (int x = 0; x < FM; x++)
#pragma unroll
        for (int y = 0; y < FN; y++) wmma::fill_fragment(acc[x][y], 0.f);
    uint2 a_next[2 * LA], b_next[2 * LB];

    auto fetch = [&](int p0) {
#pragma unroll
        for (int l = 0; l < LA; l++) {
            int e = tid + l * THREADS;
            const uint2* src = reinterpret_cast<const uint2*>(a16 + size_t(p0 + e / (BM / 8)) * m + row0 + (e % (BM / 8)) * 8);
            a_next[2 * l] = src[0];
            a_next[2 * l + 1] = src[1];
        }
#pragma unroll
        for (int l = 0; l < LB; l++) {
            int e = tid + l * THREADS;
            const uint2* src = reinterpret_cast<const uint2*>(b16 + size_t(p0 + e / (BN / 8)) * n + col0 + (e % (BN / 8)) * 8);
            b_next[2 * l] = src[0];
            b_next[2 * l + 1] = src[1];
        }
    };
    auto stash = [&] {
#pragma unroll
        for (int l = 0; l < LA; l++) {
            int e = tid + l * THREADS;
            uint2* dst = reinterpret_cast<uint2*>(ta + (e / (BM / 8)) * LDA_S + (e % (BM / 8)) * 8);
            dst[0] = a_next[2 * l];
            dst[1] = a_next[2 * l + 1];
        }
#pragma unroll
        for (int l = 0; l < LB; l++) {
            int e = tid + l * THREADS;
            uint2* dst = reinterpret_cast<uint2*>(tb + (e / (BN / 8)) * LDB_S + (e % (BN / 8)) * 8);
            dst[0] = b_next[2 * l];
            dst[1] = b_next[2 * l + 1];
        }
    };

    const int steps = k / BK;
    fetch(0);
    for (int t = 0; t < steps; t++) {
        stash();  // tile t, fetched during the last step
        __syncthreads();
        if (t + 1 < steps) fetch((t + 1) * BK);  // in flight during the multiply-adds
#pragma unroll
        for (int q = 0; q < BK; q += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::col_major> fa[FM];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb[FN];
#pragma unroll
            for (int x = 0; x < FM; x++) wmma::load_matrix_sync(fa[x], ta + q * LDA_S + wi + 16 * x, LDA_S);
#pragma unroll
            for (int y = 0; y < FN; y++) wmma::load_matrix_sync(fb[y], tb + q * LDB_S + wj + 16 * y, LDB_S);
#pragma unroll
            for (int x = 0; x < FM; x++)
#pragma unroll
                for (int y = 0; y < FN; y++) wmma::mma_sync(acc[x][y], fa[x], fb[y], acc[x][y]);
        }
        __syncthreads();  // everyone is done reading before the next stash
    }
#pragma unroll
    for (int x = 0; x < FM; x++)
#pragma unroll
        for (int y = 0; y < FN; y++)
            wmma::store_matrix_sync(c + size_t(row0 + wi + 16 * x) * n + col0 + wj + 16 * y, acc[x][y], n, wmma::mem_row_major);
}

static float median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main(int argc, char** argv) {
    const int n = argc > 1 ? atoi(argv[1]) : 4096;
    if (n <= 0 || n % 256 != 0) {
        fprintf(stderr, "n must be a positive multiple of 256\n");
        return 1;
    }
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    const size_t count = size_t(n) * n;
    std::vector<float> ha(count), hb(count), hc(count);
    srand(8);
    for (auto& v : ha) v = 2.f * rand() / RAND_MAX - 1.f;
    for (auto& v : hb) v = 2.f * rand() / RAND_MAX - 1.f;
    float *da, *db, *dc;
    __half *da16, *db16;
    CHECK(cudaMalloc(&da, count * 4));
    CHECK(cudaMalloc(&db, count * 4));
    CHECK(cudaMalloc(&dc, count * 4));
    CHECK(cudaMalloc(&da16, count * 2));
    CHECK(cudaMalloc(&db16, count * 2));
    CHECK(cudaMemcpy(da, ha.data(), count * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(db, hb.data(), count * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(dc, 0xff, count * 4));  // poison: NaN wherever nothing was written
    CHECK(cudaMemset(da16, 0xff, count * 2));
    CHECK(cudaMemset(db16, 0xff, count * 2));
    const dim3 cgrid(n / CT, n / CT), pgrid(n / BN, n / BM);
    auto convert = [&] {
        to_f16_a_kernel08<<<cgrid, 256>>>(da, (__half2*)da16, n, n);
        to_f16_b_kernel08<<<cgrid, 256>>>(db, (__half2*)db16, n, n);
    };
    auto product = [&] { coop_f16_kernel08<<<pgrid, THREADS>>>(da16, db16, dc, n, n, n); };
    convert();
    product();
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(hc.data(), dc, count * 4, cudaMemcpyDeviceToHost));

    // 48 sampled rows against f64 CPU products: of the f16-rounded inputs, and of the inputs.
    std::vector<float> ra(count), rb(count);
    for (size_t i = 0; i < count; i++) {
        ra[i] = __half2float(__float2half_rn(ha[i]));
        rb[i] = __half2float(__float2half_rn(hb[i]));
    }
    double err16 = 0, err32 = 0;
    int bad = 0;
    std::vector<double> ref16(n), ref32(n);
    for (int s = 0; s < 48; s++) {
        const int i = s == 47 ? n - 1 : int(int64_t(s) * n / 47);
        std::fill(ref16.begin(), ref16.end(), 0.0);
        std::fill(ref32.begin(), ref32.end(), 0.0);
        for (int kk = 0; kk < n; kk++) {
            const double x16 = ra[size_t(i) * n + kk], x32 = ha[size_t(i) * n + kk];
            const float* b16r = &rb[size_t(kk) * n];
            const float* b32r = &hb[size_t(kk) * n];
            for (int j = 0; j < n; j++) {
                ref16[j] += x16 * b16r[j];
                ref32[j] += x32 * b32r[j];
            }
        }
        for (int j = 0; j < n; j++) {
            const double got = hc[size_t(i) * n + j];
            const double e16 = std::fabs(got - ref16[j]), e32 = std::fabs(got - ref32[j]);
            if (!(e16 <= 1e-3 + 1e-4 * std::fabs(ref16[j]))) {
                if (bad++ < 10) fprintf(stderr, "mismatch at (%d, %d): %g, expected %g\n", i, j, got, ref16[j]);
            }
            if (!(e16 <= err16)) err16 = std::isnan(e16) ? INFINITY : e16;
            if (!(e32 <= err32)) err32 = std::isnan(e32) ? INFINITY : e32;
        }
    }
    printf("check: 48 sampled rows: %s (max abs err %.1e against the f16-rounded inputs' f64 product, %.1e against the f32 inputs')\n",
           bad ? "FAILED" : "ok", err16, err32);
    if (bad) return 1;

    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    const double flop = 2.0 * n * double(n) * n;
    const int per = 5;
    for (int with_conv = 1; with_conv >= 0; with_conv--) {
        for (int w = 0; w < 3; w++) {
            if (with_conv) convert();
            product();
        }
        std::vector<float> ms;
        for (int s = 0; s < 20; s++) {
            CHECK(cudaEventRecord(e0));
            for (int r = 0; r < per; r++) {
                if (with_conv) convert();
                product();
            }
            CHECK(cudaEventRecord(e1));
            CHECK(cudaEventSynchronize(e1));
            float t;
            CHECK(cudaEventElapsedTime(&t, e0, e1));
            ms.push_back(t / per);
        }
        CHECK(cudaGetLastError());
        const float t = median(ms);
        printf("twin 08 coop_f16 128x128x32/16x16 w64x64 g8 s1%s, %s, n = %d: %.3f ms, %.1f TFLOP/s (median of 20 x %d runs)\n",
               with_conv ? "" : " product only", prop.name, n, t, flop / (t * 1e-3) / 1e12, per);
    }
    return 0;
}
