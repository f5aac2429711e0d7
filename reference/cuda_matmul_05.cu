// cuda_matmul_05.cu: the CUDA twin of stage 03's kernel 05 (shaders/05_double_buffered.wgsl),
// the same work done the same way, so that Nsight Compute can read the counters that no
// profiler reads for Vulkan compute, and so that its SASS can be set beside what the driver
// made of the WGSL.
//
//     nvcc -O3 -arch=sm_90 -lineinfo -o cuda_matmul_05 reference/cuda_matmul_05.cu
//     ./cuda_matmul_05 [n]            (default n = 4096; n a multiple of 128)
//
// Same as the WGSL ladder tile 128x128x8/16x8 (A * B, row-major f32): 128 threads per block,
// each owning 16 x 8 outputs in strided ownership (rows ((r / 4) * TY + ty) * 4 + r % 4,
// columns (g * TX + tx) * 4 ..); the A tile stored transposed in shared memory ([BK][BM], four
// scalar stores per float4 loaded), the B tile as loaded ([BK][BN]); two halves of each tile,
// the next tile's global loads (2 float4 of A and 2 of B per thread) issued into registers
// before the current tile's FMAs, stored into the other half after them, one barrier per
// k-step. Two instances: `matmul_kernel05<false>` loads without tests (n divides the tile
// here), `matmul_kernel05<true>` with the WGSL's shape tests (`load_a4`/`load_b4`: zeros for
// a row past the edge, the columns past it masked), to measure what the tests cost.
//
// Checked against an f64 CPU product on 48 sampled rows (first, last, spread), as the Rust
// runner checks the WGSL; timed with CUDA events: 3 warm-up launches, then the median of 20
// samples of 5 back-to-back launches.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                        \
    do {                                                                                \
        cudaError_t e_ = (x);                                                           \
        if (e_ != cudaSuccess) {                                                        \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                    \
        }                                                                               \
    } while (0)

constexpr int BM = 128, BN = 128, BK = 8, TM = 16, TN = 8;
constexpr int TX = BN / TN;  // threads along n: 16
constexpr int TY = BM / TM;  // threads along m: 8
constexpr int THREADS = TX * TY;
constexpr int A_TILE = BK * BM / 4;  // float4 per A tile
constexpr int B_TILE = BK * BN / 4;
constexpr int LA = A_TILE / THREADS;  // 2
constexpr int LB = B_TILE / THREADS;  // 2
static_assert(A_TILE % THREADS == 0 && B_TILE % THREADS == 0, "whole rounds of loads");

// Four consecutive elements of row `row` of a rows x cols matrix (row stride ld), from column
// col (a multiple of 4); with GUARDED, zeros past the rows or columns, as the WGSL's load_a4.
template <bool GUARDED>
__device__ float4 load4(const float4* __restrict__ m, int rows, int cols, int ld, int row, int col) {
    if (!GUARDED) return m[(row * ld + col) / 4];
    if (row >= rows || col >= cols) return make_float4(0.f, 0.f, 0.f, 0.f);
    float4 v = m[(row * ld + col) / 4];
    v.x = col < cols ? v.x : 0.f;
    v.y = col + 1 < cols ? v.y : 0.f;
    v.z = col + 2 < cols ? v.z : 0.f;
    v.w = col + 3 < cols ? v.w : 0.f;
    return v;
}

// C = A B, all n x n row-major. grid (n / BN, n / BM).
template <bool GUARDED>
__global__ void __launch_bounds__(THREADS) matmul_kernel05(const float4* __restrict__ a, const float4* __restrict__ b,
                                                           float4* __restrict__ c, int n) {
    __shared__ float4 a_tile[2 * A_TILE];  // two halves, each [BK][BM / 4]: A transposed
    __shared__ float4 b_tile[2 * B_TILE];  // two halves, each [BK][BN / 4]
    const int tid = threadIdx.x;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int tx = tid % TX, ty = tid / TX;
    float4 acc[TM * TN / 4];
#pragma unroll
    for (int i = 0; i < TM * TN / 4; i++) acc[i] = make_float4(0.f, 0.f, 0.f, 0.f);
    float4 a_next[LA], b_next[LB];

    auto fetch = [&](int p0) {
#pragma unroll
        for (int l = 0; l < LA; l++) {
            int e = tid + l * THREADS;
            int r = e / (BK / 4), q4 = e % (BK / 4);
            a_next[l] = load4<GUARDED>(a, n, n, n, row0 + r, p0 + q4 * 4);
        }
#pragma unroll
        for (int l = 0; l < LB; l++) {
            int e = tid + l * THREADS;
            int q = e / (BN / 4), j4 = e % (BN / 4);
            b_next[l] = load4<GUARDED>(b, n, n, n, p0 + q, col0 + j4 * 4);
        }
    };
    auto stash = [&](int h) {
#pragma unroll
        for (int l = 0; l < LA; l++) {
            int e = tid + l * THREADS;
            int r = e / (BK / 4), q4 = e % (BK / 4);
            float* t = reinterpret_cast<float*>(a_tile);
            const float v[4] = {a_next[l].x, a_next[l].y, a_next[l].z, a_next[l].w};
#pragma unroll
            for (int s = 0; s < 4; s++) t[4 * (h * A_TILE + (q4 * 4 + s) * (BM / 4) + r / 4) + r % 4] = v[s];
        }
#pragma unroll
        for (int l = 0; l < LB; l++) b_tile[h * B_TILE + tid + l * THREADS] = b_next[l];
    };

    const int steps = n / BK;
    fetch(0);
    stash(0);
    __syncthreads();
    for (int t = 0; t < steps; t++) {
        const int h = t % 2;
        const bool more = t + 1 < steps;
        if (more) fetch((t + 1) * BK);
        const float4* at = a_tile + h * A_TILE;
        const float4* bt = b_tile + h * B_TILE;
#pragma unroll
        for (int q = 0; q < BK; q++) {
            float4 a_reg[TM / 4], b_reg[TN / 4];
#pragma unroll
            for (int g = 0; g < TM / 4; g++) a_reg[g] = at[q * (BM / 4) + g * TY + ty];
#pragma unroll
            for (int g = 0; g < TN / 4; g++) b_reg[g] = bt[q * (BN / 4) + g * TX + tx];
#pragma unroll
            for (int r = 0; r < TM; r++) {
                const float4 av = a_reg[r / 4];
                const float x = (r % 4 == 0) ? av.x : (r % 4 == 1) ? av.y : (r % 4 == 2) ? av.z : av.w;
#pragma unroll
                for (int g = 0; g < TN / 4; g++) {
                    float4& o = acc[r * (TN / 4) + g];
                    o.x = fmaf(x, b_reg[g].x, o.x);
                    o.y = fmaf(x, b_reg[g].y, o.y);
                    o.z = fmaf(x, b_reg[g].z, o.z);
                    o.w = fmaf(x, b_reg[g].w, o.w);
                }
            }
        }
        if (more) stash(1 - h);
        __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < TM; r++) {
        const int i = row0 + ((r / 4) * TY + ty) * 4 + r % 4;
#pragma unroll
        for (int g = 0; g < TN / 4; g++) {
            const int j = col0 + (g * TX + tx) * 4;
            c[(i * n + j) / 4] = acc[r * (TN / 4) + g];
        }
    }
}

static float median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main(int argc, char** argv) {
    const int n = argc > 1 ? atoi(argv[1]) : 4096;
    if (n <= 0 || n % BM != 0) {
        fprintf(stderr, "n must be a positive multiple of %d\n", BM);
        return 1;
    }
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    const size_t count = size_t(n) * n;
    std::vector<float> ha(count), hb(count), hc(count);
    srand(5);
    for (auto& v : ha) v = 2.f * rand() / RAND_MAX - 1.f;
    for (auto& v : hb) v = 2.f * rand() / RAND_MAX - 1.f;
    float *da, *db, *dc;
    CHECK(cudaMalloc(&da, count * 4));
    CHECK(cudaMalloc(&db, count * 4));
    CHECK(cudaMalloc(&dc, count * 4));
    CHECK(cudaMemcpy(da, ha.data(), count * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(db, hb.data(), count * 4, cudaMemcpyHostToDevice));
    const dim3 grid(n / BN, n / BM);
    const double flop = 2.0 * n * double(n) * n;
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    for (int guarded = 0; guarded < 2; guarded++) {
        auto launch = [&] {
            if (guarded) matmul_kernel05<true><<<grid, THREADS>>>((const float4*)da, (const float4*)db, (float4*)dc, n);
            else matmul_kernel05<false><<<grid, THREADS>>>((const float4*)da, (const float4*)db, (float4*)dc, n);
        };
        CHECK(cudaMemset(dc, 0xff, count * 4));  // poison: NaN wherever nothing was written
        launch();
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        CHECK(cudaMemcpy(hc.data(), dc, count * 4, cudaMemcpyDeviceToHost));

        // 48 sampled rows against an f64 CPU product.
        double max_err = 0;
        int bad = 0;
        std::vector<double> ref(n);
        for (int s = 0; s < 48; s++) {
            const int i = s == 47 ? n - 1 : int(int64_t(s) * n / 47);
            std::fill(ref.begin(), ref.end(), 0.0);
            for (int k = 0; k < n; k++) {
                const double x = ha[size_t(i) * n + k];
                const float* br = &hb[size_t(k) * n];
                for (int j = 0; j < n; j++) ref[j] += x * br[j];
            }
            for (int j = 0; j < n; j++) {
                const double got = hc[size_t(i) * n + j];
                const double err = std::fabs(got - ref[j]);
                if (!(err <= 1e-3 + 1e-4 * std::fabs(ref[j]))) {
                    if (bad++ < 10) fprintf(stderr, "mismatch at (%d, %d): %g, expected %g\n", i, j, got, ref[j]);
                }
                if (!(err <= max_err)) max_err = std::isnan(err) ? INFINITY : err;
            }
        }
        printf("check: 48 sampled rows against the f64 CPU product: %s (max abs err %.1e)\n", bad ? "FAILED" : "ok", max_err);
        if (bad) return 1;

        for (int w = 0; w < 3; w++) launch();
        std::vector<float> ms;
        const int per = 5;
        for (int s = 0; s < 20; s++) {
            CHECK(cudaEventRecord(e0));
            for (int r = 0; r < per; r++) launch();
            CHECK(cudaEventRecord(e1));
            CHECK(cudaEventSynchronize(e1));
            float t;
            CHECK(cudaEventElapsedTime(&t, e0, e1));
            ms.push_back(t / per);
        }
        CHECK(cudaGetLastError());
        const float t = median(ms);
        printf("twin 05 double_buffered 128x128x8/16x8%s, %s, n = %d: %.3f ms, %.1f TFLOP/s (median of 20 x %d launches)\n",
               guarded ? " with the WGSL's shape tests" : "", prop.name, n, t, flop / (t * 1e-3) / 1e12, per);
    }
    return 0;
}
