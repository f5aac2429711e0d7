#!/usr/bin/env bash
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
tar xJf .dev/pack/s1.tar.xz -C .dev
B=.dev/s1; R=$OUT/s2; mkdir -p $R; D=.dev/mnist
SGD="--optimizer sgd --lr 0.1 --momentum 0 --schedule constant"
timeout 200 $B/gpu-layers --bench-only > $R/bench_new.txt 2>&1; echo "bench_new rc=$?"
grep "    fused |\|    split |\|each alone: forward_output [0-9]\|each alone: forward_output (split)" $R/bench_new.txt | head -8
for v in new prev; do
  M=$B/mnist; [ $v = prev ] && M=$B/mnist-prev
  timeout 60 $M train --device gpu --data-dir $D --hidden 128 --batch-size 64 $SGD --epochs 10 --preview 0 --metrics $R/sgd_${v}.jsonl > $R/sgd_${v}.txt 2>&1; echo "sgd_${v} rc=$?"
  python3 -c "import json,statistics,sys; e=[json.loads(l) for l in open('$R/sgd_${v}.jsonl')]; print('$v', 'median %.2f ms' % (1e3*statistics.median([x['seconds'] for x in e])), 'acc %.2f%%' % (100*e[-1]['test_acc']))"
done
tar czf $OUT/s2.tgz -C $OUT s2
