for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/b && tar xJf .dev/pack/bin7.tar.xz -C /tmp/b
R=$OUT/r; mkdir -p $R
cd 04-gpu-layers && /tmp/b/ops --test-threads 1 tensor_cores linear_update forward_split 2>&1 | tee $R/ops.txt | tail -3; cd ..
/tmp/b/gpu-layers --compiled plain 2>&1 | grep -i "_coop" | head -3 | tee $R/compiled_coop.txt
/tmp/b/gpu-layers --bench-only --hidden 1024 --batch 256 --steps 235 --matmul f16-inputs 2>&1 > $R/bench_1024_b256_f16.txt; grep "f16 inputs\|fused \|us per dispatch" $R/bench_1024_b256_f16.txt | head -3
/tmp/b/gpu-layers --bench-only --hidden 1024 --batch 256 --steps 235 2>&1 > $R/bench_1024_b256_f32.txt; grep "fused \|us per dispatch" $R/bench_1024_b256_f32.txt | head -2
M="/tmp/b/mnist train --device gpu --data-dir .dev/mnist --hidden 1024 --batch-size 256 --epochs 10 --preview 0"
SGD="--optimizer sgd --lr 0.1 --momentum 0 --schedule constant"
for i in 1 2 3; do $M $SGD --matmul f16-inputs --metrics $R/wide_f16_$i.jsonl > $R/wide_f16_$i.txt 2>&1; $M $SGD --metrics $R/wide_f32_$i.jsonl > $R/wide_f32_$i.txt 2>&1; grep "trained" $R/wide_f16_$i.txt $R/wide_f32_$i.txt; done
grep "GPU step" $R/wide_f16_1.txt $R/wide_f32_1.txt
$M --matmul f16-inputs > $R/wide_f16_defaults.txt 2>&1; grep "model\|trained" $R/wide_f16_defaults.txt
/tmp/b/gpu-layers --sweep --grid --hidden 1024 --steps 235 2>&1 > $R/grid.txt; grep -v "^ *$" $R/grid.txt | tail -62
tar czf $OUT/r7.tgz -C $OUT r
