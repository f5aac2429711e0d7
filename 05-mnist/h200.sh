#!/usr/bin/env bash
# Every figure the README's H200 sections need, in one run on the GPU machine (no Rust needed
# there: only the release binary and the four MNIST files). About one minute, most of it
# process start-up and loading; the training itself is a few seconds in all.
#
#   bash 05-mnist/h200.sh [BINARY] [MNIST_DIR] [OUT]
#   defaults: target/release/mnist, $MNIST_DIR (else data/mnist), runs/h200-mnist
#
# Writes OUT/*.txt (the console output of each run), OUT/*.jsonl (one JSON object per epoch),
# OUT/*.safetensors (models), OUT/*.png (loss and accuracy curves).
set -euo pipefail
BIN=${1:-target/release/mnist}
DATA=${2:-${MNIST_DIR:-data/mnist}}
OUT=${3:-runs/h200-mnist}
mkdir -p "$OUT"
export COLUMNS=${COLUMNS:-124}

run() {
    local name=$1
    shift
    echo "== $name: mnist $*" | tee -a "$OUT/commands.txt"
    "$BIN" "$@" 2>&1 | tee "$OUT/$name.txt"
}

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

echo "done: $OUT"
