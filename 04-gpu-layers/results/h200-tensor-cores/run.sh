#!/usr/bin/env bash
# H200 final run of this change: the whole 05-mnist/h200.sh with the release binaries of the
# commit in commit.txt, then gpu-layers --bench-only at 784-1024-10 batch 256 with f32 and with
# f16 inputs (tensor cores), the tensor-core tests, and the wide-layer grid.
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p .dev/final; tar xJf .dev/pack/binF.tar.xz -C .dev/final
R=$OUT/rF; mkdir -p $R
cp .dev/pack/commitF.txt $R/commit.txt; cp .dev/pack/runF.sh $R/run.sh
nvidia-smi > $R/nvidia-smi.txt 2>&1
M=.dev/final/bin/mnist; G=.dev/final/bin/gpu-layers
(cd 04-gpu-layers && ../.dev/final/bin/ops --test-threads 1 tensor_cores > $R/ops_tensor_cores.txt 2>&1); tail -3 $R/ops_tensor_cores.txt
$M train --device gpu --data-dir .dev/mnist --epochs 3 --preview 0 > $R/warmup.txt 2>&1
START=$(date +%s)
RUNS=3 timeout 330 bash 05-mnist/h200.sh $M .dev/mnist $R/h200 .dev/fashion $G > $R/h200_console.txt 2>&1
echo "h200.sh rc $? in $(( $(date +%s) - START )) s"
cat $R/h200/summary.txt
rm -f $R/h200/*.safetensors
timeout 60 $G --bench-only --hidden 1024 --batch 256 --steps 235 > $R/bench_1024_b256_f32.txt 2>&1
timeout 60 $G --bench-only --hidden 1024 --batch 256 --steps 235 --matmul f16-inputs > $R/bench_1024_b256_f16.txt 2>&1
for f in $R/bench_*.txt; do echo "## $f"; grep -E "^ +(fused|split) \||per dispatch|f16 inputs" $f | head -3 | cut -c1-170; done
timeout 120 $G --sweep --grid --hidden 1024 --steps 235 > $R/grid.txt 2>&1; echo "grid rc $?"
grep -E "^ +[0-9]+ +[0-9]+ \|" $R/grid.txt | head -25
echo "all done in $(( $(date +%s) - START )) s"
tar czf $OUT/rF.tgz -C $OUT rF
