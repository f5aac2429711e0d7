#!/usr/bin/env bash
# Every figure the README's H200 sections need, in one run on the GPU machine (no Rust needed
# there: only the release binary and the four MNIST files). About one minute, most of it
# process start-up and loading; the training itself is a few seconds in all.
#
#   bash 05-mnist/h200.sh [BINARY] [MNIST_DIR] [OUT] [FASHION_MNIST_DIR] [GPU_LAYERS_BINARY]
#   defaults: target/release/mnist, $MNIST_DIR (else data/mnist), runs/h200-mnist,
#             $FASHION_MNIST_DIR (else /usr/share/datasets/fashion-mnist), target/release/gpu-layers
#
# Writes OUT/*.txt (the console output of each run), OUT/*.jsonl (one JSON object per epoch),
# OUT/*.safetensors (models), OUT/*.png (loss and accuracy curves).
set -euo pipefail
BIN=${1:-target/release/mnist}
DATA=${2:-${MNIST_DIR:-data/mnist}}
OUT=${3:-runs/h200-mnist}
FASHION=${4:-${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}}
GPU_LAYERS=${5:-target/release/gpu-layers}
mkdir -p "$OUT"
export COLUMNS=${COLUMNS:-124}

run() {
    local name=$1
    shift
    echo "== $name: mnist $*" | tee -a "$OUT/commands.txt"
    "$BIN" "$@" 2>&1 | tee "$OUT/$name.txt"
}

# LAYERS_ONLY=1 runs only section 7 (layer lists, dropout, Fashion-MNIST).
if [ "${LAYERS_ONLY:-0}" != 1 ]; then

# 1. PyTorch's configuration (reference/h200): 784-128-10, SGD lr 0.1 without momentum and
#    with a constant rate, batch 64, 10 epochs. The target: <= 30 ms per epoch.
run sgd_baseline train --device gpu --data-dir "$DATA" --hidden 128 --batch-size 64 \
    --optimizer sgd --lr 0.1 --momentum 0 --schedule constant --epochs 10 \
    --metrics "$OUT/sgd_baseline.jsonl" --save "$OUT/sgd_baseline.safetensors" --plot "$OUT/sgd_baseline.png"

# 2. The defaults (Adam lr 0.001, cosine schedule): the >= 98.0% target.
run defaults train --device gpu --data-dir "$DATA" \
    --metrics "$OUT/defaults.jsonl" --save "$OUT/defaults.safetensors" --plot "$OUT/defaults.png"

# 3. SGD with momentum and the cosine schedule, and a bigger network.
run sgd_momentum train --device gpu --data-dir "$DATA" --optimizer sgd --lr 0.05 --momentum 0.9 --preview 0 \
    --metrics "$OUT/sgd_momentum.jsonl"
run hidden_512_256 train --device gpu --data-dir "$DATA" --hidden 512,256 --preview 0 \
    --metrics "$OUT/hidden_512_256.jsonl"

# 4. What one submission costs: the baseline with 1, 10, 100 (default) and 1000 steps recorded
#    per submission, 3 epochs each.
for k in 1 10 100 1000; do
    run "steps_per_submit_$k" train --device gpu --data-dir "$DATA" --hidden 128 --batch-size 64 \
        --optimizer sgd --lr 0.1 --momentum 0 --schedule constant --epochs 3 --preview 0 \
        --steps-per-submit "$k" --metrics "$OUT/steps_per_submit_$k.jsonl"
done

# 5. auto must pick the H200 by itself; eval prints the accuracy and the confusion matrix.
run auto_device train --data-dir "$DATA" --epochs 1 --preview 0
run eval_defaults eval --model "$OUT/defaults.safetensors" --data-dir "$DATA"

# 6. The same defaults on that machine's CPU cores, for comparison (about 1 s per epoch).
run cpu_defaults train --device cpu --data-dir "$DATA" --preview 0 --metrics "$OUT/cpu_defaults.jsonl"

fi # LAYERS_ONLY

# ============================================================================================
# 7. Layer lists, dropout and Fashion-MNIST (`--layers`, `--dataset`; the README's "Layers,
#    losses and two data sets" table). Softmax regression, the default MLP and an MLP with
#    dropout on both data sets, 10 epochs each with the default optimizer and schedule; the
#    dropout models are saved and evaluated again from their files. Then stage 04's step
#    benchmark, whose last table times the dropout network (composed tapes) beside the fused
#    default. About two minutes in all.
# ============================================================================================
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

echo "done: $OUT"
