"""PyTorch baseline for stage 05: the same 784-128-10 MLP, SGD, batch 64, on the same GPU.

Run on a machine with PyTorch and CUDA (the H200 machine):
    python3 reference/pytorch_mnist.py --data-dir PATH/TO/mnist [--epochs 10] [--hidden 128]
On the CPU, with a given number of threads (eager mode only; pin the cores with taskset):
    taskset -c 0-1 python3 reference/pytorch_mnist.py --data-dir PATH --device cpu --threads 2

The whole data set lives on the GPU and batches are sliced from a shuffled index on the GPU,
so no DataLoader overhead is counted: this is PyTorch at its best in eager mode. The second
run captures one training step in a CUDA graph and replays it, which removes the per-kernel
launch cost of eager mode. Each epoch is timed with torch.cuda.synchronize() around it.
"""

import argparse
import gzip
import struct
import time

import numpy as np
import torch


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack(">I", data[:4])[0]
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4 : 4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(data_dir, device):
    def images(name):
        x = read_idx(f"{data_dir}/{name}-images-idx3-ubyte.gz").reshape(-1, 784)
        return torch.tensor(x, dtype=torch.float32, device=device) / 255.0

    def labels(name):
        return torch.tensor(read_idx(f"{data_dir}/{name}-labels-idx1-ubyte.gz"), dtype=torch.long, device=device)

    return images("train"), labels("train"), images("t10k"), labels("t10k")


def model_and_opt(hidden, lr, momentum, seed, device):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(784, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 10)
    ).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    return model, opt


def evaluate(model, x, y):
    with torch.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def run_eager(args, data, device):
    xtr, ytr, xte, yte = data
    model, opt = model_and_opt(args.hidden, args.lr, args.momentum, args.seed, device)
    loss_fn = torch.nn.CrossEntropyLoss()
    n = xtr.shape[0]
    for epoch in range(1, args.epochs + 1):
        sync(device)
        t0 = time.perf_counter()
        perm = torch.randperm(n, device=device)
        for i in range(0, n, args.batch_size):
            idx = perm[i : i + args.batch_size]
            loss = loss_fn(model(xtr[idx]), ytr[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        sync(device)
        dt = time.perf_counter() - t0
        print(f"eager  epoch {epoch:2d}: {dt * 1e3:8.1f} ms  test acc {evaluate(model, xte, yte) * 100:.2f}%", flush=True)


def run_graph(args, data, device):
    xtr, ytr, xte, yte = data
    model, opt = model_and_opt(args.hidden, args.lr, args.momentum, args.seed, device)
    loss_fn = torch.nn.CrossEntropyLoss()
    n = xtr.shape[0]
    b = args.batch_size
    full = n // b  # the graph has a fixed batch; the remainder batch runs eagerly
    static_x = torch.zeros(b, 784, device=device)
    static_y = torch.zeros(b, dtype=torch.long, device=device)
    # Warm up on a side stream, as the CUDA graphs documentation requires.
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            loss_fn(model(static_x), static_y).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(s)
    # Restart from the seeded initial weights so both runs train the same model.
    fresh, _ = model_and_opt(args.hidden, args.lr, args.momentum, args.seed, device)
    with torch.no_grad():
        for p, q in zip(model.parameters(), fresh.parameters()):
            p.copy_(q)
    for st in opt.state.values():
        if "momentum_buffer" in st and st["momentum_buffer"] is not None:
            st["momentum_buffer"].zero_()
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        static_loss = loss_fn(model(static_x), static_y)
        static_loss.backward()
        opt.step()
    for epoch in range(1, args.epochs + 1):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        perm = torch.randperm(n, device=device)
        for i in range(full):
            idx = perm[i * b : (i + 1) * b]
            static_x.copy_(xtr[idx])
            static_y.copy_(ytr[idx])
            graph.replay()
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        print(f"graphs epoch {epoch:2d}: {dt * 1e3:8.1f} ms  test acc {evaluate(model, xte, yte) * 100:.2f}%"
              f"  ({full} full batches; the last {n - full * b} images skipped)", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data-dir", required=True)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--momentum", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--threads", type=int, default=0, help="CPU threads (torch.set_num_threads); 0: PyTorch's default")
    p.add_argument("--modes", default="eager,graphs", help="eager, graphs (CUDA only), or both")
    args = p.parse_args()
    device = torch.device(args.device)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    if device.type == "cuda":
        print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    else:
        print(f"device: CPU, {torch.get_num_threads()} threads, torch {torch.__version__}")
    print(f"784-{args.hidden}-10, SGD lr {args.lr} momentum {args.momentum}, batch {args.batch_size}")
    data = load(args.data_dir, device)
    modes = args.modes.split(",")
    if "eager" in modes:
        run_eager(args, data, device)
    if "graphs" in modes and device.type == "cuda":
        run_graph(args, data, device)


if __name__ == "__main__":
    main()
