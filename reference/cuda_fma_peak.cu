// cuda_fma_peak.cu: the f32 ceiling of the GPU's FMA units through CUDA, beside stage 03's
// WGSL probes (`shaders/peak_fma.wgsl`, `shaders/peak_fma_outer.wgsl`), written the same ways,
// so that a gap between them is the path WGSL -> SPIR-V -> driver, not the hardware.
//
//     nvcc -O3 -arch=sm_90 -o cuda_fma_peak reference/cuda_fma_peak.cu && ./cuda_fma_peak
//
// Three kernels, each 2,112 blocks of 256 threads (16 per multiprocessor on an H200), 4,096
// rounds, operands that only the run time knows (read from memory once), the result written
// so the compiler keeps the work:
//   chains: 8 independent float4 chains x = fma(x, y, z), y and z the thread's own (as
//           peak_fma.wgsl): every FMA reads three different registers;
//   outer:  the outer product of 8 values of A and 8 of B added into 64 accumulators (as
//           peak_fma_outer.wgsl and a matmul's register tile): each A value feeds 8 FMAs in a
//           row;
//   shared: 32 scalar chains x = fma(x, y, z) with one y and one z for all of them.
// Timed with CUDA events: 3 warm-up launches, then the median of 20. TFLOP/s counts an FMA as
// 2 FLOP. The SM clock is not read here: run `nvidia-smi` beside it.

#include <algorithm>
#include <cstdio>
#include <vector>

constexpr int ITERS = 4096;
constexpr int THREADS = 256;
constexpr int BLOCKS = 2112;
constexpr int INPUTS = 64;

__global__ void chains(const float4* in, float4* out) {
    int id = blockIdx.x * blockDim.x + threadIdx.x;
    int at = id % (INPUTS - 10);
    float4 y = in[at + 8], z = in[at + 9];
    float4 x[8];
#pragma unroll
    for (int c = 0; c < 8; c++) x[c] = in[at + c];
    for (int i = 0; i < ITERS; i++) {
#pragma unroll
        for (int c = 0; c < 8; c++) {
            x[c].x = fmaf(x[c].x, y.x, z.x);
            x[c].y = fmaf(x[c].y, y.y, z.y);
            x[c].z = fmaf(x[c].z, y.z, z.z);
            x[c].w = fmaf(x[c].w, y.w, z.w);
        }
    }
    float4 s = x[0];
#pragma unroll
    for (int c = 1; c < 8; c++) s = make_float4(s.x + x[c].x, s.y + x[c].y, s.z + x[c].z, s.w + x[c].w);
    out[id] = s;
}

__global__ void outer(const float4* in, float4* out) {
    int id = blockIdx.x * blockDim.x + threadIdx.x;
    int at = id % (INPUTS - 4);
    float a[8], b[8], c[8][8];
    float4 a0 = in[at], a1 = in[at + 1], b0 = in[at + 2], b1 = in[at + 3];
    a[0] = a0.x; a[1] = a0.y; a[2] = a0.z; a[3] = a0.w; a[4] = a1.x; a[5] = a1.y; a[6] = a1.z; a[7] = a1.w;
    b[0] = b0.x; b[1] = b0.y; b[2] = b0.z; b[3] = b0.w; b[4] = b1.x; b[5] = b1.y; b[6] = b1.z; b[7] = b1.w;
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < 8; j++) c[i][j] = b[j];
    for (int r = 0; r < ITERS; r++) {
#pragma unroll
        for (int i = 0; i < 8; i++)
#pragma unroll
            for (int j = 0; j < 8; j++) c[i][j] = fmaf(a[i], b[j], c[i][j]);
    }
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < 8; j++) s += c[i][j];
    out[id] = make_float4(s, s, s, s);
}

__global__ void shared_operands(const float4* in, float4* out) {
    int id = blockIdx.x * blockDim.x + threadIdx.x;
    int at = id % (INPUTS - 10);
    float y = in[at + 8].x, z = in[at + 9].x;
    float x[32];
#pragma unroll
    for (int c = 0; c < 32; c++) x[c] = in[at + c / 4].x + c;
    for (int i = 0; i < ITERS; i++) {
#pragma unroll
        for (int c = 0; c < 32; c++) x[c] = fmaf(x[c], y, z);
    }
    float s = 0.0f;
#pragma unroll
    for (int c = 0; c < 32; c++) s += x[c];
    out[id] = make_float4(s, s, s, s);
}

template <typename K>
double tflops(K kernel, const float4* in, float4* out, double fmas_per_thread) {
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    for (int w = 0; w < 3; w++) kernel<<<BLOCKS, THREADS>>>(in, out);
    cudaDeviceSynchronize();
    std::vector<float> ms;
    for (int r = 0; r < 20; r++) {
        cudaEventRecord(start);
        kernel<<<BLOCKS, THREADS>>>(in, out);
        cudaEventRecord(stop);
        cudaEventSynchronize(stop);
        float t = 0;
        cudaEventElapsedTime(&t, start, stop);
        ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    double flop = 2.0 * fmas_per_thread * BLOCKS * THREADS;
    return flop / (ms[ms.size() / 2] * 1e-3) / 1e12;
}

int main() {
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) {
        std::fprintf(stderr, "no CUDA device\n");
        return 1;
    }
    std::printf("device: %s, %d multiprocessors\n", p.name, p.multiProcessorCount);
    // x * y + z with every input 0.5 converges to 1; the outer product grows to about 1,000.
    std::vector<float> host(4 * INPUTS, 0.5f);
    float4 *in, *out;
    cudaMalloc(&in, sizeof(float4) * INPUTS);
    cudaMalloc(&out, sizeof(float4) * BLOCKS * THREADS);
    cudaMemcpy(in, host.data(), sizeof(float4) * INPUTS, cudaMemcpyHostToDevice);
    std::printf("%-44s %8.1f TFLOP/s\n", "chains (8 float4 chains, own y and z)", tflops(chains, in, out, ITERS * 32.0));
    std::printf("%-44s %8.1f TFLOP/s\n", "outer (8 x 8 outer product)", tflops(outer, in, out, ITERS * 64.0));
    std::printf("%-44s %8.1f TFLOP/s\n", "shared (32 scalar chains, one y and z)", tflops(shared_operands, in, out, ITERS * 32.0));
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        std::fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(e));
        return 1;
    }
    return 0;
}
