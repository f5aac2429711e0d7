#!/usr/bin/env bash
# H200 run A (binaries of the working tree on c16bda2): f32 ceilings (CUDA and WGSL probes, SM
# clocks beside them, machine code of both), kernel 08's tune with the `ln` tiles, and
# linear_update_coop with one slice (tests, registers, sweep at 784-1024-10 batch 256).
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export PATH=$PATH:/usr/local/cuda/bin
mkdir -p /tmp/b && tar xJf .dev/pack/binA.tar.xz -C /tmp/b; B=/tmp/b/bin
export PATH=$PATH:$B
R=$OUT/rA; mkdir -p $R; cp .dev/pack/runA.sh $R/run.sh
START=$(date +%s); t() { echo "[$(( $(date +%s) - START )) s] $*"; }
nvidia-smi > $R/nvidia-smi.txt 2>&1
(nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv -lms 200 > $R/clocks.csv 2>&1 || nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv -lms 200 > $R/clocks.csv 2>&1) &
SMI=$!
t cuda probe
which nvcc cuobjdump nvdisasm
nvcc -O3 -arch=sm_90 -o /tmp/cfp reference/cuda_fma_peak.cu > $R/nvcc.txt 2>&1 && { /tmp/cfp > $R/cuda_fma_peak.txt 2>&1; /tmp/cfp >> $R/cuda_fma_peak.txt 2>&1; cuobjdump --dump-sass /tmp/cfp > $R/cuda_fma_peak.sass 2>&1; }
cat $R/nvcc.txt $R/cuda_fma_peak.txt
t wgsl probes
export __GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_PATH=/tmp/nvcache __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1
for i in 1 2; do timeout 120 $B/gpu-matmul 1 --sizes 256 --no-mnist --no-checks-study > $R/probes_$i.txt 2>&1; grep -E "TFLOP/s" $R/probes_$i.txt | head -4; done
python3 tools/nvidia_sass.py /tmp/nvcache $R/sass > $R/sass_log.txt 2>&1; tail -3 $R/sass_log.txt; ls $R/sass | head -30
unset __GL_SHADER_DISK_CACHE __GL_SHADER_DISK_CACHE_PATH __GL_SHADER_DISK_CACHE_SKIP_CLEANUP
t compiled 08
timeout 120 $B/gpu-matmul 8 --compiled plain --tune > $R/compiled_08.txt 2>&1; grep -E " ln|s1 " $R/compiled_08.txt | head -12 | cut -c1-200
t tune 08
timeout 200 $B/gpu-matmul 8 --tune --transposes --sizes 4096 --reps 10 --no-probe --no-mnist --no-checks-study > $R/tune_08.txt 2>&1; echo "tune rc $?"
grep -E "ln|128x128x32/16x16 w64x64 g8 s1 " $R/tune_08.txt | head -40 | cut -c1-160
t layers ops
(cd 04-gpu-layers && timeout 150 $B/ops --test-threads 1 tensor_cores linear_update > $R/ops.txt 2>&1); tail -5 $R/ops.txt
timeout 120 $B/gpu-layers --compiled plain 2>&1 | grep -i "coop" | head -20 > $R/compiled_coop.txt; cut -c1-200 $R/compiled_coop.txt | grep -i update
t layers sweep
timeout 150 $B/gpu-layers --sweep --hidden 1024 --batch 256 --steps 235 --matmul f16-inputs --variants "tiled splits 2" > $R/sweep_1024_f16.txt 2>&1; echo "sweep rc $?"
grep -v "^ *$" $R/sweep_1024_f16.txt | tail -30 | cut -c1-180
t done
kill $SMI 2>/dev/null
tar czf $OUT/rA.tgz -C $OUT rA
