#!/usr/bin/env bash
# A/B on the H200: gpu-layers --bench-only, f9706bc (Adam's step count read once) against 1cae7c1, alternated twice.
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
tar xJf .dev/pack/g8.tar.xz -C .dev
B=.dev/g8; R=$OUT/adam; mkdir -p $R
start=$(date +%s)
step() { local name=$1; shift; timeout "$@" > $R/$name.txt 2>&1; echo "$name rc=$? at $(($(date +%s) - start))s" | tee -a $R/steps.txt; }
for r in 1 2; do
  step bench_new_$r 100 $B/gpu-layers --bench-only
  step bench_prev_$r 100 $B/gpu-layers-prev --bench-only
done
tar czf $OUT/adam.tgz -C $OUT adam
for f in $R/bench_*.txt; do echo "== $f"; grep "    fused |\|each alone: forward_output [0-9]*\.[0-9]*, linear_update [0-9]\.[0-9]*$" $f | head -4; done
