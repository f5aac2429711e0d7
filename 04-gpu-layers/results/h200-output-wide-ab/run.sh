#!/usr/bin/env bash
# H200 run 1: output_wide, the update in 8 x 8 blocks and the forward split over k, as --sweep
# variants at 784-1024-10 batch 256 and 784-512-10 batch 64; --bench-only and stage 05 epochs,
# new build (b9d10c9, defaults: output_wide from 256 inputs, nothing else changed for these
# shapes) against the last build (9e4872f), alternated.
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p .dev/new .dev/old; tar xJf .dev/pack/bin7.tar.xz -C .dev/new; tar xJf .dev/pack/bin5.tar.xz -C .dev/old
R=$OUT/r7; mkdir -p $R
cp .dev/pack/commit7.txt $R/commit_new.txt; cp .dev/pack/commit5.txt $R/commit_old.txt
cp .dev/pack/run7.sh $R/run.sh
T0=$(date +%s)
.dev/new/bin/mnist train --device gpu --data-dir .dev/mnist --epochs 3 --preview 0 > $R/warmup.txt 2>&1
echo "warm-up done $(( $(date +%s) - T0 )) s"
timeout 200 .dev/new/bin/gpu-layers --sweep --hidden 1024 --batch 256 --steps 235 > $R/sweep_1024_b256.txt 2>&1
echo "sweep 1024 rc $? at $(( $(date +%s) - T0 )) s"
grep -E "^ +(default|never wide|output wide|tiled splits|update B 8|tiled\b|never tiled)" $R/sweep_1024_b256.txt | cut -c1-200
for rep in 1 2; do
  for b in new old; do
    for h in "--hidden 1024 --batch 256 --steps 235" "--hidden 512,256" ""; do
      tag=$(echo "$h" | tr -d ' -' | cut -c1-20); tag=${tag:-default}
      timeout 120 .dev/$b/bin/gpu-layers --bench-only $h > $R/bench_${tag}_${b}_$rep.txt 2>&1
    done
  done
done
echo "benches done at $(( $(date +%s) - T0 )) s"
for f in $R/bench_*_1.txt $R/bench_*_2.txt; do echo "## $f"; grep -E "^ +(fused|split) \||per dispatch" $f | head -4 | cut -c1-180; done
SGD="--optimizer sgd --lr 0.1 --momentum 0 --schedule constant"
for rep in 1 2; do
  for b in new old; do
    .dev/$b/bin/mnist train --device gpu --data-dir .dev/mnist --hidden 1024 --batch-size 256 $SGD --preview 0 --metrics $R/wide_${b}_$rep.jsonl > $R/wide_${b}_$rep.txt 2>&1
    .dev/$b/bin/mnist train --device gpu --data-dir .dev/mnist --hidden 512,256 --preview 0 --metrics $R/h512_256_${b}_$rep.jsonl > $R/h512_256_${b}_$rep.txt 2>&1
  done
done
echo "stage 05 done at $(( $(date +%s) - T0 )) s"
timeout 150 .dev/new/bin/gpu-layers --sweep --hidden 512 --batch 64 > $R/sweep_512_b64.txt 2>&1
echo "sweep 512 rc $? at $(( $(date +%s) - T0 )) s"
grep -E "^ +(default|never wide|output wide|update B 8)" $R/sweep_512_b64.txt | cut -c1-200
python3 - $R <<'PY' | tee $R/summary.txt
import json, glob, statistics, sys, re, collections
r = sys.argv[1]
g = collections.defaultdict(list)
for f in sorted(glob.glob(f"{r}/*.jsonl")):
    m = re.match(r".*/(.+)_(new|old)_(\d)\.jsonl", f)
    g[(m.group(1), m.group(2))].append([json.loads(l) for l in open(f) if l.strip()])
print(f"{'network':<10} {'build':>5} {'epochs':>6} {'median s':>9} {'fastest':>8} {'slowest':>8} {'eval s':>8}  accuracy per run")
for (net, b), runs in sorted(g.items()):
    s = [e["seconds"] for run in runs for e in run]; ev = [e["eval_seconds"] for run in runs for e in run]
    print(f"{net:<10} {b:>5} {len(s):>6} {statistics.median(s):>9.4f} {min(s):>8.4f} {max(s):>8.4f} {statistics.median(ev):>8.4f}  " + " ".join(f"{100*run[-1]['test_acc']:.2f}%" for run in runs))
PY
head -12 $R/wide_new_1.txt
tar czf $OUT/r7.tgz -C $OUT r7
