#!/usr/bin/env bash
# H200 run: the tiled linear_backward_input and the big tiles for 784-512-256-10, against the build before.
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p .dev/new .dev/old .dev/old2
tar xJf .dev/pack/bin3.tar.xz -C .dev/new; tar xJf .dev/pack/bin.tar.xz -C .dev/old; tar xJf .dev/pack/bin2.tar.xz -C .dev/old2
R=$OUT/r3; mkdir -p $R
cp .dev/pack/commit3.txt $R/commit_new.txt
NEW=.dev/new/bin/mnist; OLD=.dev/old/bin/mnist
$NEW train --device gpu --data-dir .dev/mnist --epochs 3 --preview 0 > $R/warmup.txt 2>&1
for r in 1 2 3; do
  for b in new old; do
    M=.dev/$b/bin/mnist
    $M train --device gpu --data-dir .dev/mnist --hidden 512,256 --preview 0 --metrics $R/h512_256_${b}_$r.jsonl > $R/h512_256_${b}_$r.txt 2>&1
  done
done
for b in new old; do
  .dev/$b/bin/mnist train --device gpu --data-dir .dev/mnist --preview 0 --metrics $R/defaults_${b}_1.jsonl > $R/defaults_${b}_1.txt 2>&1
done
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
grep -h "GPU step" $R/h512_256_new_1.txt $R/h512_256_old_1.txt
echo "== new: gpu-layers --bench-only --hidden 512,256" | tee $R/bench_new.txt
timeout 150 .dev/new/bin/gpu-layers --bench-only --hidden 512,256 2>&1 | tee -a $R/bench_new.txt | grep -E "fused |per dispatch" | head -4
echo "== old: gpu-layers --bench-only --hidden 512,256" | tee $R/bench_old.txt
timeout 150 .dev/old2/bin/gpu-layers --bench-only --hidden 512,256 2>&1 | tee -a $R/bench_old.txt | grep -E "fused |per dispatch" | head -4
tar czf $OUT/r3.tgz -C $OUT r3
