// cuda_mnist_split.cu: the CUDA twin of stage 04's split training step of 784-128-relu-10 at
// batch 64 with SGD (momentum 0.9): its two dependent dispatches, the same work done the same
// way, so that Nsight Compute can read the counters that no profiler reads for Vulkan compute.
//
//     nvcc -O3 -arch=sm_90 -lineinfo -o cuda_mnist_split reference/cuda_mnist_split.cu
//     ./cuda_mnist_split
//
// forward_output_kernel (shaders/forward_output.wgsl with forward_split_sums.wgsl and
//   output_rows.wgsl; 64 blocks of 32 x 32 threads, one batch row each): the row's label from
//   the label bytes; [W2; b2] staged in shared memory; h = relu(sum of the 25 k-tiles' partial
//   sums + b1), the sums in 8 slices of 128 columns; the logits split 16 ways over k; every
//   thread of the row that has work finds max, argmax and the sum of exponentials itself; the
//   row's last thread adds the loss to the counters (64-bit fixed point); dL/dz and
//   dh = (dL/dz W2^T) relu'(h) written out.
// linear_update_kernel (shaders/linear_update.wgsl with linear_update_rows.wgsl and
//   linear_update_next.wgsl; 100 blocks for the 25 x 4 tiles of 32 x 32 of [W1; b1], 5 for
//   [W2; b2], 512 threads each): the next batch's first pixel words asked for at the start; the
//   tile's parameters and velocities loaded; the batch's 64 rows of x and dy staged (one float4
//   of each per thread), 8 slices of the batch each summing 8 rows into 4 x 4 blocks; the slices
//   meet in shared memory; SGD; then, for W1's tiles, the next batch's k-slice (normalized
//   pixels, rows kept for the next update by the first column of tiles) times the moved tile,
//   written as that tile's partial sums for the next forward.
// A step is forward_output then linear_update; a run starts with a prologue (linear_update with
// partials_only) that writes the first batch's partial sums. As `gpu-layers --bench`'s split
// row: 16 batches of random bytes in a shuffled order, batch s of a run is batch s % 16.
//
// Checked against a CPU step (the same formulas, f32) after 3 steps: W1, b1, W2, b2 and the
// loss; then timed: a CUDA graph of 938 steps (the steps per pass of `gpu-layers --bench`), each kernel
// alone, and empty kernels on the same grids (the launch floor), as median of 10 replays after 3
// warm-ups.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#define CHECK(x)                                                                        \
    do {                                                                                \
        cudaError_t e_ = (x);                                                           \
        if (e_ != cudaSuccess) {                                                        \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                    \
        }                                                                               \
    } while (0)

constexpr int IN = 784, HID = 128, CLS = 10, BATCH = 64, WORDS = IN / 4;
constexpr int T = 32, TQ = T / 4, UPD_B = 4, TB = T / UPD_B, SLICES = 8;
constexpr int UTHREADS = TB * TB * SLICES;   // 512
constexpr int PER_THREAD = T * T / UTHREADS; // 2
constexpr int UPD_R = 64;
constexpr int KT_A = (IN + 1 + T - 1) / T;   // 25 k-tiles of [W1; b1]
constexpr int TILES_A = KT_A * (HID / T);    // 100
constexpr int KT_B = (HID + 1 + T - 1) / T;  // 5
constexpr int GROUPS = TILES_A + KT_B;       // 105
constexpr int NEXT_R = 64;
constexpr int NEXT_Q = NEXT_R * T / UTHREADS;    // 4 outputs per thread
constexpr int NEXT_ROW_STEP = UTHREADS / T;      // 16
constexpr int FTN = 32, FKS = 32, FCB = 4, FTHREADS = FTN * FKS;  // forward_output: 1024 threads
constexpr int OUT_SLICES = 16;
constexpr float LR = 0.01f, MOMENTUM = 0.9f, SCALE = 1.f / 255.f, SHIFT = 0.f;
enum { C_LOSS_LO, C_LOSS_HI, C_ROWS, C_CORRECT, C_BAD, C_NONFINITE, C_STEP, C_COUNT = 8 };

struct Net {
    float *w1, *v1, *g1, *w2, *v2, *g2;  // [IN + 1][HID], [HID + 1][CLS]: W then the bias row
    float *x[2];                          // the batch rows, [BATCH][IN], swapped every step
    float *h, *dz, *dh, *partials;        // [BATCH][HID], [BATCH][CLS], [BATCH][HID], [KT_A][BATCH][HID]
    uint32_t *images, *labels, *order, *counters;
};

__device__ void add_loss(uint32_t* counters, float loss) {
    if ((__float_as_uint(loss) & 0x7f800000u) == 0x7f800000u || loss > 1e12f) {
        atomicAdd(&counters[C_NONFINITE], 1u);
        return;
    }
    const float v = fmaxf(loss, 0.f);
    const float hi = floorf(v * 0.000244140625f);
    const uint32_t lo = uint32_t((v - hi * 4096.f) * 1048576.f);
    const uint32_t old = atomicAdd(&counters[C_LOSS_LO], lo);
    const uint32_t high = uint32_t(hi) + (old > 0xffffffffu - lo ? 1u : 0u);
    if (high != 0u) atomicAdd(&counters[C_LOSS_HI], high);
}

// ---- forward_output: h, logits, softmax cross-entropy, dL/dz, dh; one row per block ----

__global__ void __launch_bounds__(FTHREADS) forward_output_kernel(Net net, int first) {
    __shared__ float scratch[FKS * FTN * FCB];
    __shared__ float h_sh[HID];
    __shared__ float w_sh[(HID + 1) * CLS];
    __shared__ float z_sh[CLS];
    const int li = threadIdx.y * FTN + threadIdx.x;
    const int row = blockIdx.x;
    const int cw = FTN * FCB;                   // 128 columns
    const uint32_t image = net.order[first + row];
    const uint32_t label = (net.labels[image / 4] >> (8 * (image % 4))) & 0xffu;  // issued now
    for (int i = li; i < (HID + 1) * CLS; i += FTHREADS) w_sh[i] = net.w2[i];
    const float bias = net.w1[IN * HID + li % cw];
    // The partial sums: 8 slices of the 25 k-tiles.
    {
        const int slices = FTN * FKS / cw;
        const int c = li % cw, s = li / cw;
        float z = 0.f;
        for (int kt = s; kt < KT_A; kt += slices) z += net.partials[(kt * BATCH + row) * HID + c];
        scratch[s * cw + c] = z;
    }
    __syncthreads();
    if (li < cw) {
        float z = 0.f;
        for (int s = 0; s < FTN * FKS / cw; s++) z += scratch[s * cw + li];
        z += bias;
        const float v = z < 0.f ? 0.f : z;
        h_sh[li] = v;
        net.h[row * HID + li] = v;
    }
    __syncthreads();
    // Logits: 16 slices of k for each class.
    const int t = li;
    {
        const int c = t % CLS, s = t / CLS;
        float acc = 0.f;
        if (s < OUT_SLICES)
            for (int k = s; k < HID; k += OUT_SLICES) acc += h_sh[k] * w_sh[k * CLS + c];
        scratch[t] = acc;
    }
    __syncthreads();
    if (t < CLS) {
        float z = w_sh[HID * CLS + t];
        for (int s = 0; s < OUT_SLICES; s++) z += scratch[s * CLS + t];
        z_sh[t] = z;
    }
    __syncthreads();
    const bool counts = t == FTHREADS - 1;
    if (t < CLS || counts || t < HID) {
        float m = z_sh[0];
        uint32_t arg = 0;
        for (int c = 1; c < CLS; c++) {
            if (z_sh[c] > m) {
                m = z_sh[c];
                arg = c;
            }
        }
        float total = 0.f;
        for (int c = 0; c < CLS; c++) total += expf(z_sh[c] - m);
        const bool label_ok = label < CLS;
        const float inv_rows = 1.f / BATCH;
        if (counts) {
            atomicAdd(&net.counters[C_ROWS], 1u);
            if (label_ok) {
                add_loss(net.counters, logf(total) + m - z_sh[min(label, uint32_t(CLS - 1))]);
                if (arg == label) atomicAdd(&net.counters[C_CORRECT], 1u);
            } else {
                atomicAdd(&net.counters[C_BAD], 1u);
            }
            if (row == 0) atomicAdd(&net.counters[C_STEP], 1u);
        }
        if (t < CLS) {
            const float p = expf(z_sh[t] - m) / total;
            net.dz[row * CLS + t] = label_ok ? (p - (uint32_t(t) == label ? 1.f : 0.f)) * inv_rows : 0.f;
        }
        if (t < HID) {
            float g = 0.f;
            for (int c = 0; c < CLS; c++) {
                const float p = expf(z_sh[c] - m) / total;
                const float dz = label_ok ? (p - (uint32_t(c) == label ? 1.f : 0.f)) * inv_rows : 0.f;
                g += dz * w_sh[t * CLS + c];
            }
            net.dh[row * HID + t] = g * (h_sh[t] > 0.f ? 1.f : 0.f);
        }
    }
}

// ---- linear_update: gradients and SGD of both layers, and the next batch's partial sums ----

struct Shape {
    int inputs, outputs, tiles_n, first_group;
};

__device__ float4 quad(const float* m, int cols, int row, int k, bool bias_col) {
    // Four values of row `row` from column k; 0 past the row's end, except the constant 1 of
    // the bias at column `cols` (x's augmented column). Branch-free, clamped loads.
    float v[4];
#pragma unroll
    for (int e = 0; e < 4; e++) {
        const int kk = k + e;
        const float value = m[row * cols + min(kk, cols - 1)];
        v[e] = kk < cols ? value : (bias_col && kk == cols ? 1.f : 0.f);
    }
    return make_float4(v[0], v[1], v[2], v[3]);
}

__global__ void __launch_bounds__(UTHREADS) linear_update_kernel(Net net, int parity, int next_first, int partials_only) {
    __shared__ float4 sh[SLICES * TQ * TQ * 4];  // the staged rows, then the slices' sums
    __shared__ float4 next_x[NEXT_R * TQ];
    __shared__ float next_w[T * T];
    const int li = threadIdx.x;
    const bool is_b = blockIdx.x >= TILES_A;
    const Shape shape = is_b ? Shape{HID, CLS, 1, TILES_A} : Shape{IN, HID, HID / T, 0};
    const int tile = blockIdx.x - shape.first_group;
    const int k0 = (tile / shape.tiles_n) * T, j0 = (tile % shape.tiles_n) * T;
    const int q = li % (TB * TB), s = li / (TB * TB), bk = q / TB, bj = q % TB;
    if (partials_only && is_b) return;
    const float* x = is_b ? net.h : parity ? net.x[1] : net.x[0];  // (net.x[parity] put net on the stack)
    const float* dy = is_b ? net.dz : net.dh;
    float* params = is_b ? net.w2 : net.w1;
    float* grads = is_b ? net.g2 : net.g1;
    float* state = is_b ? net.v2 : net.v1;
    uint32_t next_word = 0;
    if (!is_b) {  // the next batch's first rows, in flight during the rounds
        const int i = li;
        const int row = min(i / TQ, BATCH - 1);
        next_word = net.images[net.order[next_first + row] * WORDS + min(k0 / 4 + i % TQ, WORDS - 1)];
    }
    float pv[PER_THREAD], ps[PER_THREAD];
#pragma unroll
    for (int m = 0; m < PER_THREAD; m++) {
        const int e = li + m * UTHREADS, k = k0 + e / T, j = j0 + e % T;
        pv[m] = 0.f;
        ps[m] = 0.f;
        if (k <= shape.inputs && j < shape.outputs) {
            pv[m] = params[k * shape.outputs + j];
            ps[m] = state[k * shape.outputs + j];
        }
    }
    float4 acc[4];
#pragma unroll
    for (int e = 0; e < 4; e++) acc[e] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (!partials_only) {
        const int row = li / TQ;  // one round: all 64 rows, one float4 of x and of dy per thread
        const float4 xq = quad(x, shape.inputs, row, k0 + 4 * (li % TQ), true);
        const float4 dq = quad(dy, shape.outputs, row, j0 + 4 * (li % TQ), false);
        sh[li] = xq;
        sh[UPD_R * TQ + li] = dq;
        __syncthreads();
        for (int rr = s; rr < UPD_R; rr += SLICES) {
            const float4 xv = sh[rr * TQ + bk];
            const float4 dv = sh[UPD_R * TQ + rr * TQ + bj];
            const float xs[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
            for (int e = 0; e < 4; e++) {
                acc[e].x += xs[e] * dv.x;
                acc[e].y += xs[e] * dv.y;
                acc[e].z += xs[e] * dv.z;
                acc[e].w += xs[e] * dv.w;
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int e = 0; e < 4; e++) sh[(s * T + 4 * bk + e) * TQ + bj] = acc[e];
    __syncthreads();
    float moved[PER_THREAD];
#pragma unroll
    for (int m = 0; m < PER_THREAD; m++) {
        const int e = li + m * UTHREADS, kk = e / T, jj = e % T;
        float g = 0.f;
        for (int t = 0; t < SLICES; t++) {
            const float4 v = sh[(t * T + kk) * TQ + jj / 4];
            g += (jj % 4 == 0) ? v.x : (jj % 4 == 1) ? v.y : (jj % 4 == 2) ? v.z : v.w;
        }
        moved[m] = pv[m];
        const int k = k0 + kk, j = j0 + jj;
        if (!partials_only && k <= shape.inputs && j < shape.outputs) {
            const int i = k * shape.outputs + j;
            const float v = MOMENTUM * ps[m] + g;
            moved[m] = pv[m] - LR * v;
            grads[i] = g;
            params[i] = moved[m];
            state[i] = v;
        }
    }
    if (is_b) return;
    // The next batch's partial sums for this tile of W1 (bias row left out).
#pragma unroll
    for (int m = 0; m < PER_THREAD; m++) {
        const int e = li + m * UTHREADS;
        next_w[e] = k0 + e / T < IN ? moved[m] : 0.f;
    }
    {
        const int i = li, k = k0 + 4 * (i % TQ), row = i / TQ;
        float v[4];
        float* keep = parity ? net.x[0] : net.x[1];
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const float pixel = float((next_word >> (8 * e)) & 0xffu) * SCALE + SHIFT;
            v[e] = k + e < IN ? pixel : 0.f;
            if (j0 == 0 && row < BATCH && k + e < IN) keep[row * IN + k + e] = pixel;
        }
        next_x[i] = make_float4(v[0], v[1], v[2], v[3]);
    }
    __syncthreads();
    const int kt = k0 / T, j = li % T, first_row = li / T;
    float out[NEXT_Q] = {};
#pragma unroll
    for (int kq = 0; kq < TQ; kq++) {
        const int k = 4 * kq;
        const float4 w = make_float4(next_w[k * T + j], next_w[(k + 1) * T + j], next_w[(k + 2) * T + j], next_w[(k + 3) * T + j]);
#pragma unroll
        for (int r = 0; r < NEXT_Q; r++) {
            const float4 xv = next_x[(first_row + r * NEXT_ROW_STEP) * TQ + kq];
            out[r] += xv.x * w.x + xv.y * w.y + xv.z * w.z + xv.w * w.w;
        }
    }
#pragma unroll
    for (int r = 0; r < NEXT_Q; r++) {
        const int row = first_row + r * NEXT_ROW_STEP;
        net.partials[(kt * BATCH + row) * HID + j0 + j] = out[r];
    }
}

// The launch floor: a kernel that does nothing, launched with each kernel's grid.
__global__ void empty_kernel() {}

// ---- the CPU step, for the check ----

struct CpuNet {
    std::vector<float> w1, v1, w2, v2;
    double loss = 0;
};

static void cpu_step(CpuNet& n, const std::vector<float>& x, const std::vector<uint32_t>& labels) {
    std::vector<float> h(BATCH * HID), dz(BATCH * CLS), dh(BATCH * HID);
    for (int r = 0; r < BATCH; r++) {
        for (int j = 0; j < HID; j++) {
            float z = 0;
            for (int k = 0; k < IN; k++) z += x[r * IN + k] * n.w1[k * HID + j];
            z += n.w1[IN * HID + j];
            h[r * HID + j] = z < 0 ? 0 : z;
        }
        float zs[CLS], m = -INFINITY, total = 0;
        for (int c = 0; c < CLS; c++) {
            float z = n.w2[HID * CLS + c];
            for (int k = 0; k < HID; k++) z += h[r * HID + k] * n.w2[k * CLS + c];
            zs[c] = z;
            m = std::max(m, z);
        }
        for (int c = 0; c < CLS; c++) total += std::exp(zs[c] - m);
        n.loss += std::log(total) + m - zs[labels[r]];
        for (int c = 0; c < CLS; c++) dz[r * CLS + c] = (std::exp(zs[c] - m) / total - (c == int(labels[r]) ? 1.f : 0.f)) / BATCH;
        for (int k = 0; k < HID; k++) {
            float g = 0;
            for (int c = 0; c < CLS; c++) g += dz[r * CLS + c] * n.w2[k * CLS + c];
            dh[r * HID + k] = h[r * HID + k] > 0 ? g : 0;
        }
    }
    auto update = [](std::vector<float>& w, std::vector<float>& v, const std::vector<float>& xin, int in,
                     const std::vector<float>& d, int out) {
        for (int k = 0; k <= in; k++)
            for (int j = 0; j < out; j++) {
                float g = 0;
                for (int r = 0; r < BATCH; r++) g += (k < in ? xin[r * in + k] : 1.f) * d[r * out + j];
                const int i = k * out + j;
                v[i] = MOMENTUM * v[i] + g;
                w[i] -= LR * v[i];
            }
    };
    update(n.w1, n.v1, x, IN, dh, HID);
    update(n.w2, n.v2, h, HID, dz, CLS);
}

static float median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main() {
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    constexpr int BATCHES = 16, IMAGES = BATCH * BATCHES, EPOCH = 938;
    std::mt19937 rng(3);
    std::vector<uint8_t> pixels(size_t(IMAGES) * IN), label_bytes(IMAGES);
    for (auto& p : pixels) p = uint8_t(rng() & 0xff);
    for (int i = 0; i < IMAGES; i++) label_bytes[i] = uint8_t(i % 10);
    std::vector<uint32_t> order(IMAGES);
    for (int i = 0; i < IMAGES; i++) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    CpuNet cpu;
    cpu.w1.resize((IN + 1) * HID);
    cpu.w2.resize((HID + 1) * CLS);
    std::uniform_real_distribution<float> u1(-1.f / std::sqrt(float(IN)), 1.f / std::sqrt(float(IN)));
    std::uniform_real_distribution<float> u2(-1.f / std::sqrt(float(HID)), 1.f / std::sqrt(float(HID)));
    for (auto& w : cpu.w1) w = u1(rng);
    for (auto& w : cpu.w2) w = u2(rng);
    cpu.v1.assign(cpu.w1.size(), 0.f);
    cpu.v2.assign(cpu.w2.size(), 0.f);

    Net net;
    auto alloc = [](auto** p, size_t bytes) { CHECK(cudaMalloc((void**)p, bytes)); CHECK(cudaMemset(*p, 0, bytes)); };
    alloc(&net.w1, cpu.w1.size() * 4);
    alloc(&net.v1, cpu.w1.size() * 4);
    alloc(&net.g1, cpu.w1.size() * 4);
    alloc(&net.w2, cpu.w2.size() * 4);
    alloc(&net.v2, cpu.w2.size() * 4);
    alloc(&net.g2, cpu.w2.size() * 4);
    alloc(&net.x[0], BATCH * IN * 4);
    alloc(&net.x[1], BATCH * IN * 4);
    alloc(&net.h, BATCH * HID * 4);
    alloc(&net.dz, BATCH * CLS * 4);
    alloc(&net.dh, BATCH * HID * 4);
    alloc(&net.partials, KT_A * BATCH * HID * 4);
    alloc(&net.images, pixels.size());
    alloc(&net.labels, (label_bytes.size() + 3) / 4 * 4);
    alloc(&net.order, order.size() * 4);
    alloc(&net.counters, C_COUNT * 4);
    CHECK(cudaMemcpy(net.w1, cpu.w1.data(), cpu.w1.size() * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(net.w2, cpu.w2.data(), cpu.w2.size() * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(net.images, pixels.data(), pixels.size(), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(net.labels, label_bytes.data(), label_bytes.size(), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(net.order, order.data(), order.size() * 4, cudaMemcpyHostToDevice));
    // Poison what the kernels must write before anything reads it.
    CHECK(cudaMemset(net.partials, 0xff, KT_A * BATCH * HID * 4));
    CHECK(cudaMemset(net.x[0], 0xff, BATCH * IN * 4));

    cudaStream_t stream;
    CHECK(cudaStreamCreate(&stream));
    auto first = [&](int s) { return (s % BATCHES) * BATCH; };
    auto prologue = [&](int s0) { linear_update_kernel<<<GROUPS, UTHREADS, 0, stream>>>(net, 1, first(s0), 1); };
    // Step s reads x[s % 2] (written by the prologue or the last update) and writes x[(s + 1) % 2].
    auto step = [&](int s) {
        forward_output_kernel<<<BATCH, dim3(FTN, FKS), 0, stream>>>(net, first(s));
        linear_update_kernel<<<GROUPS, UTHREADS, 0, stream>>>(net, s % 2, first(s + 1), 0);
    };
    // The prologue writes x[0] (it runs with parity 1: keep = x[1 - 1]).
    prologue(0);
    const int check_steps = 3;
    for (int s = 0; s < check_steps; s++) step(s);
    CHECK(cudaGetLastError());
    CHECK(cudaStreamSynchronize(stream));
    for (int s = 0; s < check_steps; s++) {
        std::vector<float> x(BATCH * IN);
        std::vector<uint32_t> labels(BATCH);
        for (int r = 0; r < BATCH; r++) {
            const uint32_t img = order[first(s) + r];
            for (int k = 0; k < IN; k++) x[r * IN + k] = pixels[size_t(img) * IN + k] * SCALE + SHIFT;
            labels[r] = label_bytes[img];
        }
        cpu_step(cpu, x, labels);
    }
    std::vector<float> w1(cpu.w1.size()), w2(cpu.w2.size());
    uint32_t counters[C_COUNT];
    CHECK(cudaMemcpy(w1.data(), net.w1, w1.size() * 4, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(w2.data(), net.w2, w2.size() * 4, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(counters, net.counters, sizeof counters, cudaMemcpyDeviceToHost));
    double e1 = 0, e2 = 0;
    for (size_t i = 0; i < w1.size(); i++) e1 = std::max(e1, std::isnan(w1[i]) ? INFINITY : std::fabs(double(w1[i]) - cpu.w1[i]));
    for (size_t i = 0; i < w2.size(); i++) e2 = std::max(e2, std::isnan(w2[i]) ? INFINITY : std::fabs(double(w2[i]) - cpu.w2[i]));
    const double gpu_loss = (double(counters[C_LOSS_HI]) * 4294967296.0 + counters[C_LOSS_LO]) / 1048576.0;
    const bool ok = e1 < 1e-4 && e2 < 1e-4 && std::fabs(gpu_loss - cpu.loss) < 1e-3 * cpu.loss && counters[C_ROWS] == BATCH * check_steps;
    printf("check after %d steps against the CPU: %s (max abs diff W1 %.1e, W2 %.1e; loss sum %.5f, CPU %.5f; rows %u, steps %u)\n",
           check_steps, ok ? "ok" : "FAILED", e1, e2, gpu_loss, cpu.loss, counters[C_ROWS], counters[C_STEP]);
    if (!ok) return 1;

    // Timing: graphs of an epoch of steps, of the forward alone and of the update alone.
    cudaEvent_t t0, t1;
    CHECK(cudaEventCreate(&t0));
    CHECK(cudaEventCreate(&t1));
    auto time_graph = [&](const char* what, auto body) {
        cudaGraph_t g;
        cudaGraphExec_t ge;
        CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
        body();
        CHECK(cudaStreamEndCapture(stream, &g));
        CHECK(cudaGraphInstantiate(&ge, g, 0));
        for (int w = 0; w < 3; w++) CHECK(cudaGraphLaunch(ge, stream));
        std::vector<float> ms;
        for (int r = 0; r < 10; r++) {
            CHECK(cudaEventRecord(t0, stream));
            CHECK(cudaGraphLaunch(ge, stream));
            CHECK(cudaEventRecord(t1, stream));
            CHECK(cudaEventSynchronize(t1));
            float t;
            CHECK(cudaEventElapsedTime(&t, t0, t1));
            ms.push_back(t);
        }
        CHECK(cudaGetLastError());
        const float t = median(ms);
        printf("twin split step, %s, %s: %.3f ms per %d, %.2f us each (CUDA graph, median of 10)\n", prop.name, what, t, EPOCH,
               t * 1e3 / EPOCH);
        CHECK(cudaGraphExecDestroy(ge));
        CHECK(cudaGraphDestroy(g));
    };
    time_graph("whole steps (forward_output + linear_update)", [&] {
        prologue(0);
        for (int s = 0; s < EPOCH - 1; s++) step(s);
        forward_output_kernel<<<BATCH, dim3(FTN, FKS), 0, stream>>>(net, first(EPOCH - 1));
        linear_update_kernel<<<GROUPS, UTHREADS, 0, stream>>>(net, (EPOCH - 1) % 2, first(EPOCH), 0);
    });
    time_graph("forward_output alone", [&] {
        for (int s = 0; s < EPOCH; s++) forward_output_kernel<<<BATCH, dim3(FTN, FKS), 0, stream>>>(net, first(s));
    });
    time_graph("linear_update alone", [&] {
        for (int s = 0; s < EPOCH; s++) linear_update_kernel<<<GROUPS, UTHREADS, 0, stream>>>(net, s % 2, first(s + 1), 0);
    });
    time_graph("empty kernels on the same grids (the launch floor of a step)", [&] {
        for (int s = 0; s < EPOCH; s++) {
            empty_kernel<<<BATCH, dim3(FTN, FKS), 0, stream>>>();
            empty_kernel<<<GROUPS, UTHREADS, 0, stream>>>();
        }
    });
    // Without a graph: plain launches on a stream, as a baseline for the launch cost.
    for (int w = 0; w < 100; w++) step(w);
    CHECK(cudaEventRecord(t0, stream));
    for (int s = 0; s < EPOCH; s++) step(s);
    CHECK(cudaEventRecord(t1, stream));
    CHECK(cudaEventSynchronize(t1));
    float t;
    CHECK(cudaEventElapsedTime(&t, t0, t1));
    printf("twin split step, %s, stream launches (no graph): %.3f ms per %d steps, %.2f us each\n", prop.name, t, EPOCH, t * 1e3 / EPOCH);
    return 0;
}
