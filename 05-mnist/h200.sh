#!/usr/bin/env bash
# Every figure the README's H200 sections need, in one run on the GPU machine (no Rust needed
# there: only the release binary and the four MNIST files; PyTorch for the reference rows, where
# it is installed). About three minutes, most of it process start-up, loading and PyTorch.
#
#   bash 05-mnist/h200.sh [BINARY] [MNIST_DIR] [OUT] [FASHION_MNIST_DIR] [GPU_LAYERS_BINARY]
#   defaults: target/release/mnist, $MNIST_DIR (else data/mnist), runs/h200-mnist,
#             $FASHION_MNIST_DIR (else /usr/share/datasets/fashion-mnist), target/release/gpu-layers
#   RUNS (environment, default 3): runs of each GPU configuration of section 1.
#
# Writes OUT/*.txt (the console output of each run), OUT/*.jsonl (one JSON object per epoch),
# OUT/*.safetensors (models), OUT/*.png (loss and accuracy curves), and OUT/summary.txt: for each
# configuration, the median seconds per epoch over every epoch of its RUNS runs (first epochs
# included), the fastest and slowest epoch, the final test accuracy of each run and the median
# evaluation time.
set -euo pipefail
BIN=${1:-target/release/mnist}
DATA=${2:-${MNIST_DIR:-data/mnist}}
OUT=${3:-runs/h200-mnist}
FASHION=${4:-${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}}
GPU_LAYERS=${5:-target/release/gpu-layers}
RUNS=${RUNS:-3}
mkdir -p "$OUT"
export COLUMNS=${COLUMNS:-124}
HERE=$(cd "$(dirname "$0")" && pwd)

run() {
    local name=$1
    shift
    echo "== $name: mnist $*" | tee -a "$OUT/commands.txt"
    "$BIN" "$@" 2>&1 | tee "$OUT/$name.txt"
}

SGD=(--optimizer sgd --lr 0.1 --momentum 0 --schedule constant)

# LAYERS_ONLY=1 runs only section 7 (layer lists, dropout, Fashion-MNIST); LAYERS=0 leaves it out.
if [ "${LAYERS_ONLY:-0}" != 1 ]; then

# 1. The four configurations, RUNS times each, 10 epochs:
#    - PyTorch's (reference/): 784-128-10, batch 64, SGD lr 0.1 without momentum, constant rate;
#    - the defaults (784-128-10, batch 64, Adam lr 0.001, cosine schedule): the >= 98.0% target;
#    - a wide layer: 784-1024-10 at batch 256 (SGD lr 0.1), with f32 products and with f16
#      inputs on the tensor cores (--matmul f16-inputs);
#    - two hidden layers: 784-512-256-10 (defaults otherwise).
for r in $(seq 1 "$RUNS"); do
    keep=(--preview 0)
    if [ "$r" = 1 ]; then keep=(--save "$OUT/defaults.safetensors" --plot "$OUT/defaults.png"); fi
    run "sgd_baseline_$r" train --device gpu --data-dir "$DATA" --hidden 128 --batch-size 64 "${SGD[@]}" --epochs 10 \
        --preview 0 --metrics "$OUT/sgd_baseline_$r.jsonl"
    run "defaults_$r" train --device gpu --data-dir "$DATA" "${keep[@]}" --metrics "$OUT/defaults_$r.jsonl"
    run "wide_1024_b256_$r" train --device gpu --data-dir "$DATA" --hidden 1024 --batch-size 256 "${SGD[@]}" \
        --epochs 10 --preview 0 --metrics "$OUT/wide_1024_b256_$r.jsonl"
    run "wide_1024_b256_f16_$r" train --device gpu --data-dir "$DATA" --hidden 1024 --batch-size 256 "${SGD[@]}" \
        --epochs 10 --matmul f16-inputs --preview 0 --metrics "$OUT/wide_1024_b256_f16_$r.jsonl"
    run "hidden_512_256_$r" train --device gpu --data-dir "$DATA" --hidden 512,256 --preview 0 \
        --metrics "$OUT/hidden_512_256_$r.jsonl"
done

# 2. What one submission costs: the baseline with 1, 10, 100 (default) and 1000 steps recorded
#    per submission, 3 epochs each.
for k in 1 10 100 1000; do
    run "steps_per_submit_$k" train --device gpu --data-dir "$DATA" --hidden 128 --batch-size 64 "${SGD[@]}" \
        --epochs 3 --preview 0 --steps-per-submit "$k" --metrics "$OUT/steps_per_submit_$k.jsonl"
done

# 3. auto must pick the H200 by itself; eval prints the accuracy and the confusion matrix.
run auto_device train --data-dir "$DATA" --epochs 1 --preview 0
run eval_defaults eval --model "$OUT/defaults.safetensors" --data-dir "$DATA"

# 4. The CPU trainer on this machine's cores: the defaults on all of them, and PyTorch's
#    configuration on 2 cores (pinned) and on 16, 3 epochs each.
run cpu_defaults train --device cpu --data-dir "$DATA" --preview 0 --metrics "$OUT/cpu_defaults.jsonl"
echo "== cpu_sgd_2_threads: taskset -c 0-1 mnist train --device cpu --threads 2 (PyTorch's configuration, 3 epochs)" | tee -a "$OUT/commands.txt"
taskset -c 0-1 "$BIN" train --device cpu --threads 2 --data-dir "$DATA" --hidden 128 --batch-size 64 "${SGD[@]}" \
    --epochs 3 --preview 0 --metrics "$OUT/cpu_sgd_2_threads.jsonl" 2>&1 | tee "$OUT/cpu_sgd_2_threads.txt"
run cpu_sgd_16_threads train --device cpu --threads 16 --data-dir "$DATA" --hidden 128 --batch-size 64 "${SGD[@]}" \
    --epochs 3 --preview 0 --metrics "$OUT/cpu_sgd_16_threads.jsonl"

# 5. PyTorch beside it (reference/pytorch_mnist.py), where it is installed: eager and CUDA graphs
#    on the GPU, eager on 2 (pinned) and 16 CPU threads, and the wide layer eagerly.
PT="$HERE/../reference/pytorch_mnist.py"
if python3 -c "import torch" 2>/dev/null && [ -f "$PT" ]; then
    python3 "$PT" --data-dir "$DATA" --epochs 5 2>&1 | tee "$OUT/torch_gpu.txt"
    python3 "$PT" --data-dir "$DATA" --epochs 5 --hidden 1024 --batch-size 256 --modes eager,graphs 2>&1 \
        | tee "$OUT/torch_gpu_wide.txt"
    taskset -c 0-1 python3 "$PT" --data-dir "$DATA" --device cpu --threads 2 --epochs 3 2>&1 | tee "$OUT/torch_cpu_2_threads.txt"
    python3 "$PT" --data-dir "$DATA" --device cpu --threads 16 --epochs 3 2>&1 | tee "$OUT/torch_cpu_16_threads.txt"
else
    echo "PyTorch not installed here: no reference rows" | tee "$OUT/torch_gpu.txt"
fi

# 6. The summary the README's tables come from.
python3 - "$OUT" "$RUNS" <<'PY' | tee "$OUT/summary.txt"
import json, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
def rows(name):
    return [json.loads(l) for l in open(f"{out}/{name}.jsonl") if l.strip()]
print(f"{'configuration':<26} {'epochs':>6} {'median s/epoch':>15} {'fastest':>9} {'slowest':>9} {'eval s':>8}  test accuracy per run")
configs = [f"{c}" for c in ["sgd_baseline", "defaults", "wide_1024_b256", "wide_1024_b256_f16", "hidden_512_256"]]
for c in configs:
    per_run = [rows(f"{c}_{r}") for r in range(1, runs + 1)]
    secs = [e["seconds"] for run in per_run for e in run]
    evals = [e.get("eval_seconds", 0.0) for run in per_run for e in run]
    accs = " ".join(f"{100 * run[-1]['test_acc']:.2f}%" for run in per_run)
    print(f"{c:<26} {len(secs):>6} {statistics.median(secs):>15.4f} {min(secs):>9.4f} {max(secs):>9.4f} {statistics.median(evals):>8.4f}  {accs}")
for c in ["cpu_defaults", "cpu_sgd_2_threads", "cpu_sgd_16_threads"] + [f"steps_per_submit_{k}" for k in (1, 10, 100, 1000)]:
    r = rows(c)
    secs = [e["seconds"] for e in r]
    print(f"{c:<26} {len(secs):>6} {statistics.median(secs):>15.4f} {min(secs):>9.4f} {max(secs):>9.4f} {statistics.median(e.get('eval_seconds', 0.0) for e in r):>8.4f}  {100 * r[-1]['test_acc']:.2f}%")
PY

fi # LAYERS_ONLY

# ============================================================================================
# 7. Layer lists, dropout and Fashion-MNIST (`--layers`, `--dataset`; the README's "Layers,
#    losses and two data sets" table). Softmax regression, the default MLP and an MLP with
#    dropout on both data sets, 10 epochs each with the default optimizer and schedule; the
#    dropout models are saved and evaluated again from their files. Then stage 04's step
#    benchmark, whose last table times the dropout network (composed tapes) beside the fused
#    default. About two minutes in all.
# ============================================================================================
if [ "${LAYERS:-1}" = 1 ]; then
DROPOUT=784-512-relu-dropout0.2-256-relu-dropout0.2-10
run layers_mnist_softmax train --device gpu --data-dir "$DATA" --layers 784-10 --preview 0 \
    --metrics "$OUT/layers_mnist_softmax.jsonl"
run layers_mnist_dropout train --device gpu --data-dir "$DATA" --layers "$DROPOUT" --preview 0 \
    --metrics "$OUT/layers_mnist_dropout.jsonl" --save "$OUT/layers_mnist_dropout.safetensors"
run layers_mnist_dropout_eval eval --model "$OUT/layers_mnist_dropout.safetensors" --data-dir "$DATA"
run layers_fashion_softmax train --device gpu --dataset fashion --data-dir "$FASHION" --layers 784-10 --preview 0 \
    --metrics "$OUT/layers_fashion_softmax.jsonl"
run layers_fashion_defaults train --device gpu --dataset fashion --data-dir "$FASHION" \
    --metrics "$OUT/layers_fashion_defaults.jsonl"
run layers_fashion_dropout train --device gpu --dataset fashion --data-dir "$FASHION" --layers "$DROPOUT" --preview 0 \
    --metrics "$OUT/layers_fashion_dropout.jsonl" --save "$OUT/layers_fashion_dropout.safetensors"
run layers_fashion_dropout_eval eval --model "$OUT/layers_fashion_dropout.safetensors" --data-dir "$FASHION"
if [ -x "$GPU_LAYERS" ]; then
    echo "== layers_bench: gpu-layers --bench-only" | tee -a "$OUT/commands.txt"
    "$GPU_LAYERS" --bench-only 2>&1 | tee "$OUT/layers_bench.txt"
else
    echo "skipped layers_bench: no $GPU_LAYERS" | tee -a "$OUT/commands.txt"
fi
fi # LAYERS

echo "done: $OUT"
