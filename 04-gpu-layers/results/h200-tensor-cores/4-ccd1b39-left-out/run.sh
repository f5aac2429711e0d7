for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/b && tar xJf .dev/pack/bin3.tar.xz -C /tmp/b && tar xJf .dev/diag/diag.tar.xz -C /tmp/b
R=$OUT/r; mkdir -p $R
/tmp/b/gpu-layers --compiled plain 2>&1 > $R/compiled.txt; grep -i "coop\|linear_update  \|linear_forward_tiled " $R/compiled.txt | head -20
for m in nomma noload noepi; do echo "== $m"; /tmp/b/gl_$m --bench-only --hidden 1024 --batch 256 --steps 235 --reps 3 --matmul f16-inputs 2>&1 | tee $R/diag_$m.txt | grep "diag\|us per dispatch" | head -2; done
tar czf $OUT/r4.tgz -C $OUT r
