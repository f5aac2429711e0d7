#!/usr/bin/env bash
# H200 run: linear_backward_input's tile (BI_K columns, BI_R rows, BI_J chunk) in 784-512-256-10's step.
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p .dev/new; tar xJf .dev/pack/bin3.tar.xz -C .dev/new; tar xJf .dev/pack/var.tar.xz -C .dev
R=$OUT/r4; mkdir -p $R
.dev/new/bin/gpu-layers --bench-only --steps 200 --reps 1 > /dev/null 2>&1   # warm-up
for rep in 1 2; do
  for v in new/bin var/bin_32_8_64 var/bin_32_4_32 var/bin_64_4_32 var/bin_32_16_32; do
    name=$(echo $v | tr / _)
    echo "== $v (rep $rep): gpu-layers --bench-only --hidden 512,256" > $R/${name}_$rep.txt
    timeout 100 .dev/$v/gpu-layers --bench-only --hidden 512,256 >> $R/${name}_$rep.txt 2>&1
    echo "$v rep $rep: $(grep -m1 -E '^ +fused \|' $R/${name}_$rep.txt) | $(grep -m1 'each alone: linear_forward' $R/${name}_$rep.txt | sed 's/.*linear_backward_input \([0-9.]*\).*/backward_input \1/')"
  done
done | tee $R/summary.txt
tar czf $OUT/r4.tgz -C $OUT r4
