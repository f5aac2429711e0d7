#!/usr/bin/env bash
# H200 run: the evaluator's batch size, then the whole of 05-mnist/h200.sh.
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
tar xJf .dev/pack/bin.tar.xz -C .dev
R=$OUT/r; mkdir -p $R
START=$(date +%s)
cp .dev/pack/commit.txt $R/commit.txt
nvidia-smi > $R/nvidia-smi.txt 2>&1; lscpu > $R/lscpu.txt; free -g >> $R/lscpu.txt
M=.dev/bin/mnist
SGD=(--optimizer sgd --lr 0.1 --momentum 0 --schedule constant)
$M train --device gpu --data-dir .dev/mnist --epochs 3 --preview 0 > $R/warmup.txt 2>&1
echo "warm-up done at $(( $(date +%s) - START )) s"; head -3 $R/warmup.txt
flag() { if [ "$1" = default ]; then echo ""; else echo "--eval-batch $1"; fi; }
# The evaluator's batch: the defaults, 5 epochs each, alternated twice.
for rep in 1 2; do
  for eb in 64 1000 default; do
    $M train --device gpu --data-dir .dev/mnist --epochs 5 --preview 0 $(flag $eb) --metrics $R/evalb_defaults_${eb}_$rep.jsonl > $R/evalb_defaults_${eb}_$rep.txt 2>&1
  done
  for eb in 256 1000 default; do
    $M train --device gpu --data-dir .dev/mnist --hidden 1024 --batch-size 256 "${SGD[@]}" --epochs 5 --preview 0 $(flag $eb) --metrics $R/evalb_wide_${eb}_$rep.jsonl > $R/evalb_wide_${eb}_$rep.txt 2>&1
  done
  for eb in 64 1000 default; do
    $M train --device gpu --data-dir .dev/mnist --hidden 512,256 --epochs 5 --preview 0 $(flag $eb) --metrics $R/evalb_512_256_${eb}_$rep.jsonl > $R/evalb_512_256_${eb}_$rep.txt 2>&1
  done
done
python3 - $R <<'PY' | tee $R/evalb_summary.txt
import json, glob, statistics, sys, re, collections
r = sys.argv[1]
groups = collections.defaultdict(list)
for f in sorted(glob.glob(f"{r}/evalb_*.jsonl")):
    m = re.match(r".*/evalb_(.+)_(\d+|default)_(\d)\.jsonl", f)
    rows = [json.loads(l) for l in open(f) if l.strip()]
    groups[(m.group(1), m.group(2))].append(rows)
print(f"{'network':<10} {'eval batch':>10} {'epochs':>6} {'median eval s':>14} {'min':>9} {'max':>9} {'median train s':>15}  test acc per run")
for (net, eb), runs in sorted(groups.items()):
    ev = [e["eval_seconds"] for run in runs for e in run]
    tr = [e["seconds"] for run in runs for e in run]
    acc = " ".join(f"{100*run[-1]['test_acc']:.2f}%" for run in runs)
    print(f"{net:<10} {eb:>10} {len(ev):>6} {statistics.median(ev):>14.6f} {min(ev):>9.6f} {max(ev):>9.6f} {statistics.median(tr):>15.5f}  {acc}")
PY
echo "eval batches done at $(( $(date +%s) - START )) s"
RUNS=3 timeout $(( 560 - ($(date +%s) - START) )) bash 05-mnist/h200.sh $M .dev/mnist $R/h200 .dev/fashion .dev/bin/gpu-layers > $R/h200_console.txt 2>&1
echo "h200.sh rc $? at $(( $(date +%s) - START )) s"
cat $R/h200/summary.txt 2>/dev/null
grep -h "epoch 10/10" $R/h200/layers_*.txt 2>/dev/null
tail -5 $R/h200/layers_bench.txt 2>/dev/null
rm -f $R/h200/*.safetensors
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
