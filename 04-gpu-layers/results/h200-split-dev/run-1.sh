#!/usr/bin/env bash
# A/B on the H200: stage 05 epochs, split step (new) against 42ff3cb's kernels (prev), alternated twice.
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
tar xJf .dev/pack/s1.tar.xz -C .dev
B=.dev/s1; R=$OUT/s1; mkdir -p $R; D=.dev/mnist
start=$(date +%s)
SGD="--optimizer sgd --lr 0.1 --momentum 0 --schedule constant"
for r in 1 2; do
  for v in new prev; do
    M=$B/mnist; [ $v = prev ] && M=$B/mnist-prev
    timeout 60 $M train --device gpu --data-dir $D --hidden 128 --batch-size 64 $SGD --epochs 10 --preview 0 --metrics $R/sgd_${v}_$r.jsonl > $R/sgd_${v}_$r.txt 2>&1; echo "sgd_${v}_$r rc=$? at $(($(date +%s) - start))s"
    timeout 60 $M train --device gpu --data-dir $D --preview 0 --metrics $R/defaults_${v}_$r.jsonl > $R/defaults_${v}_$r.txt 2>&1; echo "defaults_${v}_$r rc=$? at $(($(date +%s) - start))s"
  done
done
python3 - $R > $R/summary.txt <<'PY'
import json, statistics, sys, glob
out = sys.argv[1]
for cfg in ["sgd", "defaults"]:
    for v in ["new", "prev"]:
        runs = [[json.loads(l) for l in open(f) if l.strip()] for f in sorted(glob.glob(f"{out}/{cfg}_{v}_*.jsonl"))]
        secs = [e["seconds"] for r in runs for e in r]
        if not secs: print(cfg, v, "no epochs"); continue
        print(f"{cfg:<8} {v:<5} epochs {len(secs)} median {1e3*statistics.median(secs):.2f} ms, fastest {1e3*min(secs):.2f}, slowest {1e3*max(secs):.2f}; accuracy " + " ".join(f"{100*r[-1]['test_acc']:.2f}%" for r in runs))
PY
tar czf $OUT/s1.tgz -C $OUT s1
cat $R/summary.txt
grep -h "GPU step" $R/sgd_new_1.txt $R/sgd_prev_1.txt
timeout 200 $B/gpu-layers --bench-only > $R/bench_new.txt 2>&1; echo "bench_new rc=$?"
tar czf $OUT/s1.tgz -C $OUT s1
grep "    fused |\|    split |\|each alone: forward_output [0-9]\|each alone: forward_output (split)" $R/bench_new.txt | head -8
