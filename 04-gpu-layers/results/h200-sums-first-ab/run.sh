#!/usr/bin/env bash
# H200 run D: the release binaries of 237a3a7 (new: forward_output's bias and, in the split
# step, its partial sums asked for before the first barrier; the split update's last-phase
# uniforms read at its start) against those of 4045d78 (old), alternated: gpu-layers
# --bench-only (784-128-10, batch 64; SGD and Adam) three times each, then stage 05's
# 784-128-10 SGD baseline (h200.sh's) and the defaults, 10 epochs, twice each.
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/b && tar xJf .dev/pack/binD.tar.xz -C /tmp/b; B=/tmp/b/bin
R=$OUT/rD; mkdir -p $R; cp .dev/pack/runD.sh $R/run.sh
$B/gl_new --bench-only --reps 3 > /dev/null 2>&1  # warm-up
for round in 1 2 3; do
  for v in old new; do
    timeout 60 $B/gl_$v --bench-only --reps 5 > $R/bench_${v}_$round.txt 2>&1
    echo "== $v $round: $(grep -E '^ +(fused|split) \||each alone' $R/bench_${v}_$round.txt | sed 's/  */ /g' | grep -v chk | tr '\n' ' ' | cut -c1-700)"
  done
done
SGD=(--optimizer sgd --lr 0.1 --momentum 0 --schedule constant)
for round in 1 2; do
  for v in old new; do
    timeout 60 $B/mnist_$v train --device gpu --data-dir .dev/mnist --hidden 128 --batch-size 64 "${SGD[@]}" --epochs 10 --preview 0 --metrics $R/sgd_${v}_$round.jsonl > $R/sgd_${v}_$round.txt 2>&1
    timeout 60 $B/mnist_$v train --device gpu --data-dir .dev/mnist --epochs 10 --preview 0 --metrics $R/defaults_${v}_$round.jsonl > $R/defaults_${v}_$round.txt 2>&1
    echo "== mnist $v $round: $(grep -h trained $R/sgd_${v}_$round.txt $R/defaults_${v}_$round.txt | tr '\n' ' ')"
  done
done
tar czf $OUT/rD.tgz -C $OUT rD
