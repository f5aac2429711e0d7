#!/bin/bash
# Native speed before and after: pre-browser (after11 = e3b206c), with the browser trainer
# (browser-after = 803cd12).
# Alternated twice: gpu-layers --bench and a 5-epoch MNIST SGD run on the GPU.
set -u
B=/tmp/cmp; mkdir -p $B
for v in after11 browser-after; do
  for b in gpu-layers mnist; do xz -dc .dev/$v/$b.xz > $B/$b-$v; chmod +x $B/$b-$v; done
done
export COLUMNS=124
# warm-up: the GPU idles at 345 MHz
timeout 30 $B/gpu-layers-after11 --bench > /dev/null 2>&1
for i in 1 2; do for v in after11 browser-after; do
  echo "=== run $i $v gpu-layers --bench" >> $OUT/compare-bench.txt
  timeout 60 $B/gpu-layers-$v --bench >> $OUT/compare-bench.txt 2>&1
  echo "=== run $i $v mnist train sgd" >> $OUT/compare-mnist.txt
  timeout 60 $B/mnist-$v train --device gpu --hidden 128 --batch-size 64 --optimizer sgd --lr 0.1 \
     --momentum 0 --schedule constant --epochs 5 --preview 0 --data-dir .dev/mnist >> $OUT/compare-mnist.txt 2>&1
done; done
grep -E "===|== speed|^ *fused \||^ *composed" $OUT/compare-bench.txt | head -80
grep -E "===|^epoch" $OUT/compare-mnist.txt | head -60
