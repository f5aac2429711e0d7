#!/usr/bin/env bash
# H200 run 3: sweep variants for 784-1024-10 at batch 256 (the forward split over k, the update in
# 8 x 8 blocks, valid sizes only); stage 05's 784-1024-10 epochs with build A (wide layers: k split 4
# ways) and build B (A + the update in 8 x 8 blocks, tiles of 64, 2 slices) against 9e4872f.
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p .dev/A .dev/B .dev/old
tar xJf .dev/pack/binA.tar.xz -C .dev/A; tar xJf .dev/pack/binB.tar.xz -C .dev/B; tar xJf .dev/pack/bin5.tar.xz -C .dev/old
R=$OUT/r9; mkdir -p $R; cp .dev/pack/run9.sh $R/run.sh
T0=$(date +%s)
.dev/A/bin/gpu-layers --bench-only --steps 200 --reps 1 > /dev/null 2>&1   # warm-up
timeout 150 .dev/A/bin/gpu-layers --sweep --hidden 1024 --batch 256 --steps 235 --variants "tiled splits,update B" > $R/sweep_1024_b256.txt 2>&1
echo "sweep rc $? at $(( $(date +%s) - T0 )) s"
grep -E "^ *[a-z(][^|]*\|" $R/sweep_1024_b256.txt | cut -c1-150
SGD="--optimizer sgd --lr 0.1 --momentum 0 --schedule constant"
for rep in 1 2; do
  for b in A B old; do
    timeout 60 .dev/$b/bin/mnist train --device gpu --data-dir .dev/mnist --hidden 1024 --batch-size 256 $SGD --preview 0 --metrics $R/wide_${b}_$rep.jsonl > $R/wide_${b}_$rep.txt 2>&1
  done
done
echo "stage 05 done at $(( $(date +%s) - T0 )) s"
for b in A B; do
  timeout 60 .dev/$b/bin/gpu-layers --bench-only --hidden 1024 --batch 256 --steps 235 > $R/bench_1024_$b.txt 2>&1
  grep -E "^ +fused \||per dispatch" $R/bench_1024_$b.txt | head -2 | cut -c1-160
done
echo "benches done at $(( $(date +%s) - T0 )) s"
python3 - $R <<'PY' | tee $R/summary.txt
import json, glob, statistics, sys, re, collections
r = sys.argv[1]
g = collections.defaultdict(list)
for f in sorted(glob.glob(f"{r}/*.jsonl")):
    m = re.match(r".*/(.+)_(A|B|old)_(\d)\.jsonl", f)
    g[(m.group(1), m.group(2))].append([json.loads(l) for l in open(f) if l.strip()])
print(f"{'network':<10} {'build':>5} {'epochs':>6} {'median s':>9} {'fastest':>8} {'slowest':>8} {'eval s':>8}  accuracy per run")
for (net, b), runs in sorted(g.items()):
    s = [e["seconds"] for run in runs for e in run]; ev = [e["eval_seconds"] for run in runs for e in run]
    print(f"{net:<10} {b:>5} {len(s):>6} {statistics.median(s):>9.4f} {min(s):>8.4f} {max(s):>8.4f} {statistics.median(ev):>8.4f}  " + " ".join(f"{100*run[-1]['test_acc']:.2f}%" for run in runs))
PY
grep "GPU step" $R/wide_A_1.txt $R/wide_B_1.txt
tar czf $OUT/r9.tgz -C $OUT r9
