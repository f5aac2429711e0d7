"""cuBLAS reference for stage 03: square matmul TFLOP/s through PyTorch on the same GPU.

    python3 reference/pytorch_matmul.py [--sizes 1024,2048,4096]

FP32 (TF32 off), TF32, and FP16 inputs with FP32 accumulation (the cooperative-matrix
kernel's format). Random inputs; 3 warm-ups, then the median of 20 timed products with CUDA
events.
"""

import argparse

import torch


def bench(n, dtype, tf32):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    for _ in range(3):
        a @ b
    times = []
    for _ in range(20):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        a @ b
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    times.sort()
    return 2 * n**3 / times[len(times) // 2] / 1e12


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="1024,2048,4096")
    args = p.parse_args()
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    print(f"{'n':>6} {'FP32':>10} {'TF32':>10} {'FP16->FP32':>12}   (TFLOP/s)")
    for n in map(int, args.sizes.split(",")):
        print(f"{n:>6} {bench(n, torch.float32, False):>10.1f} {bench(n, torch.float32, True):>10.1f}"
              f" {bench(n, torch.float16, False):>12.1f}", flush=True)


if __name__ == "__main__":
    main()
