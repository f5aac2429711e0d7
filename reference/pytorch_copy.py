"""The bus's own limit for stage 01's transfers: host <-> GPU copies through CUDA (PyTorch).

    python3 reference/pytorch_copy.py [--mib 16,64,256,1024]

For each size: pinned (page-locked) host memory, which the GPU's copy engine reads and writes
directly, and ordinary pageable memory, which the driver stages through pinned buffers of its
own. Each way, timed with CUDA events around `copy_`: 3 warm-ups, then the median of 10.
GB/s = 10^9 bytes per second.
"""

import argparse

import torch


def gbs(dst, src):
    for _ in range(3):
        dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize()
    times = []
    for _ in range(10):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        dst.copy_(src, non_blocking=True)
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    times.sort()
    return src.numel() / times[len(times) // 2] / 1e9


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mib", default="16,64,256,1024")
    args = p.parse_args()
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    print(f"{'size':>9} {'pinned up':>10} {'pinned down':>12} {'pageable up':>12} {'pageable down':>14}   (GB/s)")
    for mib in map(int, args.mib.split(",")):
        n = mib << 20
        dev = torch.empty(n, dtype=torch.uint8, device="cuda")
        pinned = torch.randint(0, 255, (n,), dtype=torch.uint8).pin_memory()
        pageable = torch.randint(0, 255, (n,), dtype=torch.uint8)
        row = [gbs(dev, pinned), gbs(pinned, dev), gbs(dev, pageable), gbs(pageable, dev)]
        print(f"{mib:>5} MiB {row[0]:>10.1f} {row[1]:>12.1f} {row[2]:>12.1f} {row[3]:>14.1f}", flush=True)


if __name__ == "__main__":
    main()
