#!/usr/bin/env bash
# The split step on the H200: gpu-layers --bench-only (new and prev), then stage 05's SGD baseline and defaults,
# 10 epochs each, new (split) and prev (42ff3cb's kernels) alternated three times; then gpu-layers --sweep (new), cut off after 170 s (its MNIST-shape variants come first).
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
tar xJf .dev/pack/s1.tar.xz -C .dev
B=.dev/s1; R=$OUT/split; mkdir -p $R; D=.dev/mnist
start=$(date +%s)
cp .dev/pack/s3.sh $R/run.sh
(nvidia-smi; lscpu | head -20) > $R/host.txt 2>&1
SGD="--optimizer sgd --lr 0.1 --momentum 0 --schedule constant"
timeout 200 $B/gpu-layers --bench-only > $R/bench_new.txt 2>&1; echo "bench_new rc=$? at $(($(date +%s) - start))s"
timeout 200 $B/gpu-layers-prev --bench-only > $R/bench_prev.txt 2>&1; echo "bench_prev rc=$? at $(($(date +%s) - start))s"
for r in 1 2 3; do
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
        evals = [e["eval_seconds"] for r in runs for e in r if "eval_seconds" in e]
        if not secs: print(cfg, v, "no epochs"); continue
        ev = f", eval median {1e3*statistics.median(evals):.2f} ms" if evals else ""
        print(f"{cfg:<8} {v:<5} epochs {len(secs)} median {1e3*statistics.median(secs):.2f} ms, fastest {1e3*min(secs):.2f}, slowest {1e3*max(secs):.2f}{ev}; accuracy " + " ".join(f"{100*r[-1]['test_acc']:.2f}%" for r in runs))
PY
timeout 170 $B/gpu-layers --sweep > $R/sweep.txt 2>&1; echo "sweep rc=$? at $(($(date +%s) - start))s"
tar czf $OUT/split.tgz -C $OUT split
cat $R/summary.txt
for v in new prev; do grep "    fused |\|    split |\|each alone: forward_output [0-9]\|each alone: forward_output (split)" $R/bench_$v.txt | head -8; done
grep -A1 "^ *default |" $R/sweep.txt | head -3; grep "(split)" $R/sweep.txt | sort -t"|" -k2 -n | head -5
