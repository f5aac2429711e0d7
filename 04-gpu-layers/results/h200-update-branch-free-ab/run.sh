#!/usr/bin/env bash
# A/B on the H200: binaries of 1cae7c1 (new: the branch-free update staging) and 68496b0 (v1),
# alternated: gpu-layers --bench-only, then stage 05 epochs (SGD baseline, defaults, 784-1024-10 b256).
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
tar xJf .dev/pack/f7.tar.xz -C .dev
B=.dev/f7; R=$OUT/ab; mkdir -p $R; D=.dev/mnist
start=$(date +%s)
step() { local name=$1; shift; timeout "$@" > $R/$name.txt 2>&1; echo "$name rc=$? at $(($(date +%s) - start))s" | tee -a $R/steps.txt; }
(lscpu; nvidia-smi; free -g) > $R/host.txt 2>&1
SGD="--optimizer sgd --lr 0.1 --momentum 0 --schedule constant"
step bench_new 120 $B/gpu-layers --bench-only
step bench_v1 120 $B/gpu-layers-v1 --bench-only
for r in 1 2; do
  for v in new v1; do
    M=$B/mnist; [ $v = v1 ] && M=$B/mnist-v1
    step sgd_${v}_$r 60 $M train --device gpu --data-dir $D --hidden 128 --batch-size 64 $SGD --epochs 10 --preview 0 --metrics $R/sgd_${v}_$r.jsonl
    step defaults_${v}_$r 60 $M train --device gpu --data-dir $D --preview 0 --metrics $R/defaults_${v}_$r.jsonl
    step wide_${v}_$r 60 $M train --device gpu --data-dir $D --hidden 1024 --batch-size 256 $SGD --epochs 10 --preview 0 --metrics $R/wide_${v}_$r.jsonl
  done
done
python3 - $R > $R/summary.txt <<'PY'
import json, statistics, sys, glob
out = sys.argv[1]
print(f"{'configuration':<14} {'binary':<4} {'epochs':>6} {'median ms/epoch':>16} {'fastest':>8} {'slowest':>8} {'eval ms':>8}  accuracy per run")
for c in ["sgd", "defaults", "wide"]:
    for v in ["new", "v1"]:
        runs = [[json.loads(l) for l in open(f) if l.strip()] for f in sorted(glob.glob(f"{out}/{c}_{v}_*.jsonl"))]
        secs = [e["seconds"] for r in runs for e in r]
        ev = [e.get("eval_seconds", 0.0) for r in runs for e in r]
        print(f"{c:<14} {v:<4} {len(secs):>6} {1e3*statistics.median(secs):>16.2f} {1e3*min(secs):>8.2f} {1e3*max(secs):>8.2f} {1e3*statistics.median(ev):>8.2f}  " + " ".join(f"{100*r[-1]['test_acc']:.2f}%" for r in runs))
PY
tar czf $OUT/ab.tgz -C $OUT ab
cat $R/steps.txt | tail -3; grep -A2 "tape | dispatches" $R/bench_new.txt $R/bench_v1.txt | grep "fused \|fused |" ; grep "each alone" $R/bench_new.txt $R/bench_v1.txt | head -4; cat $R/summary.txt
