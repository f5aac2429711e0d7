#!/usr/bin/env bash
# H200 run B: linear_update_coop at 784-1024-10 batch 256 (f16 inputs) with parts left out
# (binaries of c223103 with one shader edit each, results wrong on purpose; not committed as
# code): whole, no parameter/state loads or stores after the rounds (noepi), no loads in the
# rounds (noload), both (skel), no gradient stores (nograds). Then the machine code of kernel 05
# and of the two f32 probes, from the driver's shader cache.
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export PATH=$PATH:/usr/local/cuda/bin
mkdir -p /tmp/b && tar xJf .dev/pack/binB.tar.xz -C /tmp/b; B=/tmp/b/bin
export PATH=$PATH:$B
R=$OUT/rB; mkdir -p $R; cp .dev/pack/runB.sh $R/run.sh
START=$(date +%s); t() { echo "[$(( $(date +%s) - START )) s] $*"; }
$B/gl_base --bench-only --hidden 1024 --batch 256 --steps 235 --reps 3 --matmul f16-inputs > /dev/null 2>&1  # warm-up
for round in 1 2; do
  for m in base noepi noload skel nograds; do
    timeout 60 $B/gl_$m --bench-only --hidden 1024 --batch 256 --steps 235 --reps 5 --matmul f16-inputs > $R/diag_${m}_$round.txt 2>&1
    echo "== $m $round: $(grep -E 'us per dispatch' $R/diag_${m}_$round.txt | head -2 | sed 's/.*alone: //' | tr '\n' ' ')"
  done
done
t sass
mkdir -p /tmp/nvcache
export __GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_PATH=/tmp/nvcache __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1
timeout 120 $B/gpu-matmul 5 --sizes 256 --no-mnist --no-checks-study > $R/probes.txt 2>&1; grep TFLOP $R/probes.txt | head -4
timeout 120 $B/gpu-matmul 5 --compiled plain > $R/compiled_05.txt 2>&1; grep -i "binary" $R/compiled_05.txt | head -3 | cut -c1-200
ls -laR /tmp/nvcache | head -20
python3 tools/nvidia_sass.py /tmp/nvcache $R/sass > $R/sass_log.txt 2>&1; tail -5 $R/sass_log.txt; ls -la $R/sass | head -30
t done
tar czf $OUT/rB.tgz -C $OUT rB
