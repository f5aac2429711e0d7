#!/usr/bin/env bash
# H200 check after moving linear_update's shared parts into linear_update_rows.wgsl: the
# tensor-core and update tests, and the 784-1024-10 step with f16 inputs and with f32.
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p .dev/v; tar xJf .dev/pack/binV.tar.xz -C .dev/v
R=$OUT/rV; mkdir -p $R; cp .dev/pack/commitV.txt $R/commit.txt; cp .dev/pack/runV.sh $R/run.sh
(cd 04-gpu-layers && ../.dev/v/bin/ops --test-threads 1 tensor_cores linear_update > $R/ops.txt 2>&1); tail -7 $R/ops.txt
.dev/v/bin/gpu-layers --bench-only --hidden 1024 --batch 256 --steps 235 --matmul f16-inputs > $R/bench_1024_b256_f16.txt 2>&1
.dev/v/bin/gpu-layers --bench-only --hidden 1024 --batch 256 --steps 235 > $R/bench_1024_b256_f32.txt 2>&1
for f in $R/bench_*.txt; do echo "## $f"; grep -E "^ +fused \||per dispatch|f16 inputs" $f | head -3 | cut -c1-170; done
