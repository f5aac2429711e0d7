for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/b && tar xJf .dev/ab/ab.tar.xz -C /tmp/b
R=$OUT/r; mkdir -p $R
for v in c16 c4 c1; do echo "== $v"; /tmp/b/gl_$v --compiled plain 2>&1 | grep "linear_update_coop" | head -1; done
for rep in 1 2; do for v in c16 c4 c1; do echo "== $v $rep"; /tmp/b/gl_$v --bench-only --hidden 1024 --batch 256 --steps 235 --matmul f16-inputs 2>&1 > $R/bench_${v}_$rep.txt; grep "f16 inputs\|fused \|us per dispatch" $R/bench_${v}_$rep.txt | head -3; done; done
tar czf $OUT/r8.tgz -C $OUT r
