#!/usr/bin/env bash
# Every figure of this chapter's H200 sections, in one run on the GPU machine (no Rust needed
# there: only the release binary; PyTorch for the cuBLAS rows, where it is installed). About
# four minutes.
#
#   bash 03-gpu-matmul/h200.sh [BINARY] [OUT]
#   defaults: target/release/gpu-matmul, runs/h200-matmul
#
# Writes OUT/torch_matmul.txt (cuBLAS through PyTorch: FP32, TF32, FP16 inputs), OUT/run.txt
# (the probes, every kernel at n = 2048, 4096, 8192 in the three products, the small products
# of stage 04, the runtime-checks table), OUT/matmul.csv (the run's main tables, probes and cuBLAS
# figures as CSV, for the book's generated tables), OUT/tune_08.txt (every candidate tile of kernel 08 in
# the three products at n = 4096) and OUT/steps.txt (each step's exit status and seconds).
set -uo pipefail
BIN=${1:-target/release/gpu-matmul}
OUT=${2:-runs/h200-matmul}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
start=$(date +%s)
step() {
    local name=$1
    shift
    "$@" 2>&1 | tee "$OUT/$name.txt"
    echo "$name rc=${PIPESTATUS[0]} at $(($(date +%s) - start))s" | tee -a "$OUT/steps.txt"
}
if python3 -c "import torch" 2>/dev/null; then
    step torch_matmul python3 "$HERE/../reference/pytorch_matmul.py" --sizes 2048,4096,8192 --transposes
    cublas=(--cublas "$OUT/torch_matmul.txt")
else
    echo "PyTorch not installed here: the committed cuBLAS figures are used" | tee "$OUT/torch_matmul.txt"
    cublas=()
fi
step run timeout 300 "$BIN" --sizes 2048,4096,8192 --transposes --csv "$OUT/matmul.csv" "${cublas[@]}"
step tune_08 timeout 120 "$BIN" 8 --tune --transposes --sizes 4096 --reps 10 --no-probe --no-mnist --no-checks-study "${cublas[@]}"
