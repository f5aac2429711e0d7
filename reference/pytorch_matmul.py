"""cuBLAS reference for stage 03: square matmul TFLOP/s through PyTorch on the same GPU.

    python3 reference/pytorch_matmul.py [--sizes 1024,2048,4096] [--transposes]

FP32 (TF32 off), TF32, and FP16 inputs with FP32 accumulation (the cooperative-matrix
kernels' format). Random inputs; 3 warm-ups, then the median of 20 timed products with CUDA
events. With --transposes, also A^T * B and A * B^T (the transposed operand is stored
transposed and passed to cuBLAS as such, no copy), one line per product; stage 03's runner
reads either form (`gpu-matmul --cublas FILE`).
"""

import argparse

import torch


PRODUCTS = {"A*B": (False, False), "A^T*B": (True, False), "A*B^T": (False, True)}


def bench(n, dtype, tf32, product="A*B"):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    trans_a, trans_b = PRODUCTS[product]
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    # .t() is a view: cuBLAS gets the stored matrix and a transpose flag.
    op_a = a.t() if trans_a else a
    op_b = b.t() if trans_b else b
    for _ in range(3):
        op_a @ op_b
    times = []
    for _ in range(20):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        op_a @ op_b
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    times.sort()
    return 2 * n**3 / times[len(times) // 2] / 1e12


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="1024,2048,4096")
    p.add_argument("--transposes", action="store_true", help="also time A^T * B and A * B^T")
    args = p.parse_args()
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    if not args.transposes:
        print(f"{'n':>6} {'FP32':>10} {'TF32':>10} {'FP16->FP32':>12}   (TFLOP/s)")
        for n in map(int, args.sizes.split(",")):
            print(f"{n:>6} {bench(n, torch.float32, False):>10.1f} {bench(n, torch.float32, True):>10.1f}"
                  f" {bench(n, torch.float16, False):>12.1f}", flush=True)
        return
    print(f"{'n':>6} {'product':>8} {'FP32':>10} {'TF32':>10} {'FP16->FP32':>12}   (TFLOP/s)")
    for n in map(int, args.sizes.split(",")):
        for product in PRODUCTS:
            print(f"{n:>6} {product:>8} {bench(n, torch.float32, False, product):>10.1f}"
                  f" {bench(n, torch.float32, True, product):>10.1f}"
                  f" {bench(n, torch.float16, False, product):>12.1f}", flush=True)


if __name__ == "__main__":
    main()
