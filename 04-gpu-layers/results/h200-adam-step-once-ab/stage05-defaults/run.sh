#!/usr/bin/env bash
# A/B on the H200: stage 05's defaults (Adam, cosine), 10 epochs, f9706bc against 1cae7c1, alternated three times.
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
tar xJf .dev/pack/h9.tar.xz -C .dev
B=.dev/h9; R=$OUT/def; mkdir -p $R; D=.dev/mnist
for r in 1 2 3; do
  for v in new prev; do
    M=$B/mnist; [ $v = prev ] && M=$B/mnist-prev
    timeout 60 $M train --device gpu --data-dir $D --preview 0 --metrics $R/defaults_${v}_$r.jsonl > $R/defaults_${v}_$r.txt 2>&1; echo "defaults_${v}_$r rc=$?"
  done
done
python3 - $R > $R/summary.txt <<'PY'
import json, statistics, sys, glob
out = sys.argv[1]
for v in ["new", "prev"]:
    runs = [[json.loads(l) for l in open(f) if l.strip()] for f in sorted(glob.glob(f"{out}/defaults_{v}_*.jsonl"))]
    secs = [e["seconds"] for r in runs for e in r]
    print(f"defaults {v:<5} epochs {len(secs)} median {1e3*statistics.median(secs):.2f} ms, fastest {1e3*min(secs):.2f}, slowest {1e3*max(secs):.2f}; accuracy " + " ".join(f"{100*r[-1]['test_acc']:.2f}%" for r in runs))
PY
tar czf $OUT/def.tgz -C $OUT def
cat $R/summary.txt
