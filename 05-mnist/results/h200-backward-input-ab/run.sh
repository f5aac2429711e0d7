#!/usr/bin/env bash
# H200 run: 784-512-256-10 with the final build (9e4872f) against 968a4ab and 60ec3f3, alternated.
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p .dev/final .dev/mid .dev/old
tar xJf .dev/pack/bin5.tar.xz -C .dev/final; tar xJf .dev/pack/bin3.tar.xz -C .dev/mid; tar xJf .dev/pack/bin.tar.xz -C .dev/old
R=$OUT/r5; mkdir -p $R
cp .dev/pack/commit5.txt $R/commit_final.txt; cp .dev/pack/commit3.txt $R/commit_mid.txt; cp .dev/pack/commit.txt $R/commit_old.txt
.dev/final/bin/mnist train --device gpu --data-dir .dev/mnist --epochs 3 --preview 0 > $R/warmup.txt 2>&1
for r in 1 2 3; do
  for b in final mid old; do
    .dev/$b/bin/mnist train --device gpu --data-dir .dev/mnist --hidden 512,256 --preview 0 --metrics $R/h512_256_${b}_$r.jsonl > $R/h512_256_${b}_$r.txt 2>&1
  done
done
for b in final old; do
  .dev/$b/bin/mnist train --device gpu --data-dir .dev/mnist --preview 0 --metrics $R/defaults_${b}_1.jsonl > $R/defaults_${b}_1.txt 2>&1
  .dev/$b/bin/mnist train --device gpu --data-dir .dev/mnist --hidden 1024 --batch-size 256 --optimizer sgd --lr 0.1 --momentum 0 --schedule constant --preview 0 --metrics $R/wide_${b}_1.jsonl > $R/wide_${b}_1.txt 2>&1
done
python3 - $R <<'PY' | tee $R/summary.txt
import json, glob, statistics, sys, re, collections
r = sys.argv[1]
g = collections.defaultdict(list)
for f in sorted(glob.glob(f"{r}/*.jsonl")):
    m = re.match(r".*/(.+)_(final|mid|old)_(\d)\.jsonl", f)
    g[(m.group(1), m.group(2))].append([json.loads(l) for l in open(f) if l.strip()])
print(f"{'network':<10} {'build':>5} {'epochs':>6} {'median s':>9} {'fastest':>8} {'slowest':>8} {'eval s':>8}  accuracy per run")
for (net, b), runs in sorted(g.items()):
    s = [e["seconds"] for run in runs for e in run]; ev = [e["eval_seconds"] for run in runs for e in run]
    print(f"{net:<10} {b:>5} {len(s):>6} {statistics.median(s):>9.4f} {min(s):>8.4f} {max(s):>8.4f} {statistics.median(ev):>8.4f}  " + " ".join(f"{100*run[-1]['test_acc']:.2f}%" for run in runs))
PY
head -6 $R/h512_256_final_1.txt
tar czf $OUT/r5.tgz -C $OUT r5
