#!/usr/bin/env python3
"""Makes step.csv, the chapter's table, from the raw outputs of `gpu-layers --bench-only`.

Every row of the table is one `tape` row of one `== speed:` block of a file listed in RUNS,
with the file's build (`composed dropout`: 44fbb70, before dropout was fused; `fused dropout`:
39fe4a4; `GELU beside fused`: 6117916, on an H100; `three-layer update`: 98d0de4, on an H100,
its networks of two hidden layers only; `32 forward slices`: 4f2a631, the same; `update loads under one branch`: 22a89df, the
same; `inputs staged transposed`: 809350e's forward, the four-row backward and 16 forward slices,
the same; `gradients kept when asked, gathered transposed`: dbfb134, the same, with its `gathered`
rows, the steps `mnist train` runs) and its matmul
precision, and
the GPU named by the block's adapter line. `us/step` is the
`µs per step` column; `GPU ms/pass` is `ms per epoch`, because every run recorded one epoch of
steps into its pass (938 at batch 64, 235 at batch 256). The rows of h200-step-twins.csv come
last: the CUDA twin of the split step (`reference/cuda_mnist_split.cu`), copied from
`reference/h200/twins/run2-summary.txt` (whole steps, and empty kernels on the same grids).
Remake the table:

    python3 04-gpu-layers/results/step_table.py > 04-gpu-layers/results/step.csv
    cargo run -p tables
"""
import csv
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# (file relative to this folder, build, precision, optimizers kept, tape rows left out, and the
# networks kept: those whose name contains the word, or all). The later runs keep their Adam rows
# (the dropout networks are timed with Adam) and leave out the bounds-checked ones, which the
# first run already shows.
ALL = {"SGD", "Adam"}
RUNS = [
    ("../../05-mnist/results/h200-44fbb70/bench_128_b64.txt", "composed dropout", "f32", ALL, set(), ""),
    ("../../05-mnist/results/h200-44fbb70/bench_1024_b256_f32.txt", "composed dropout", "f32", ALL, set(), ""),
    # Its bounds-checked rows run the f32 kernels (the checked kernels have no tensor cores).
    ("../../05-mnist/results/h200-44fbb70/bench_1024_b256_f16.txt", "composed dropout", "f16 inputs", ALL, {"fused+chk"}, ""),
    ("h200-fused-dropout/bench_b64.txt", "fused dropout", "f32", {"Adam"}, {"fused+chk"}, ""),
    ("h200-fused-dropout/bench_1024_b256_f32.txt", "fused dropout", "f32", {"Adam"}, {"fused+chk"}, ""),
    ("h200-fused-dropout/bench_1024_b256_f16.txt", "fused dropout", "f16 inputs", {"Adam"}, {"fused+chk"}, ""),
    ("h100-gelu/bench.txt", "GELU beside fused", "f32", {"Adam"}, {"fused+chk"}, ""),
    # Only the fused step of these networks changed (ab-*.txt: the A/B runs beside the build
    # before it).
    ("h100-update-triple/bench.txt", "three-layer update", "f32", {"Adam"}, {"fused+chk", "composed"}, "-256-"),
    ("h100-forward-slices/bench.txt", "32 forward slices", "f32", {"Adam"}, {"fused+chk", "composed"}, "-256-"),
    ("h100-update-branches/bench.txt", "update loads under one branch", "f32", {"Adam"}, {"fused+chk", "composed"}, "-256-"),
    ("h100-staged-rows/2-final/deep-k16-2.txt", "inputs staged transposed", "f32", {"Adam"}, {"fused+chk", "composed"}, "-256-"),
    ("h100-gathered-transposed/3-final-again/deep.txt", "gradients kept when asked, gathered transposed", "f32", {"Adam"}, {"fused+chk", "composed"}, "-256-"),
]

PATHS = {"fused": "fused", "fused+chk": "fused with bounds checks", "composed": "composed", "split": "split step", "gathered": "gathered (mnist train's steps)"}
HEADER = ["network", "batch", "optimizer", "precision", "path", "dispatches per step", "µs per step", "ms per epoch", "build", "adapter"]


def gpu(adapter):
    """`H200` for "NVIDIA H200 (Vulkan, ...)": the table's short name of the adapter."""
    m = re.match(r"NVIDIA (\S+)", adapter)
    return m.group(1) if m else adapter


def rows(path, run, precision, optimizers, skip, networks):
    block = None
    with open(os.path.join(HERE, path), encoding="utf-8") as f:
        for line in f:
            m = re.match(r"== speed: (\S+), batch (\d+), (SGD|Adam) ", line)
            if m:
                block = {"network": m.group(1), "batch": m.group(2), "optimizer": m.group(3)}
                continue
            m = re.match(r"\s+adapter: (.*?); GPU time from", line)
            if m and block is not None:
                block["adapter"] = m.group(1)
                continue
            m = re.match(r"\s*(fused\+chk|fused|composed|split|gathered) \|\s+(\d+) \|\s+([\d.]+)\s+([\d.]+) \|", line)
            kept = block is not None and networks in block["network"] and block["optimizer"] in optimizers
            if m and kept and m.group(1) not in skip:
                tape, dispatches, ms, us = m.groups()
                yield [block["network"], block["batch"], block["optimizer"], precision, PATHS[tape], dispatches, us, ms, run, block["adapter"]]


def main():
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(HEADER + ["GPU"])
    for path, run, precision, optimizers, skip, networks in RUNS:
        if not os.path.exists(os.path.join(HERE, path)):
            sys.exit(f"step_table.py: {path} is missing")
        for row in rows(path, run, precision, optimizers, skip, networks):
            out.writerow(row + [gpu(row[-1])])
    with open(os.path.join(HERE, "h200-step-twins.csv"), encoding="utf-8", newline="") as f:
        twins = csv.reader(f)
        if next(twins) != HEADER:
            sys.exit("step_table.py: h200-step-twins.csv has other columns than the table")
        out.writerows(row + [gpu(row[-1])] for row in twins)


if __name__ == "__main__":
    main()
