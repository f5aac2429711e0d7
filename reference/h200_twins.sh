#!/usr/bin/env bash
# The CUDA twins beside the WGSL kernels they copy, in one run on the H200 machine: builds the
# twins with nvcc (the compiler's resource report kept), checks and times each beside its WGSL
# kernel (kernel 05 and 08 at n = 4096 through `gpu-matmul`; the split MNIST step through
# `gpu-layers --bench-only` and an `mnist train` epoch), profiles the twins with Nsight Compute
# (speed of light, warp stalls, memory and shared-memory bank conflicts, occupancy) and writes
# the SASS of the twins (cuobjdump) and of the WGSL (tools/nvidia_sass.py on the driver's shader
# cache). No Rust needed there: release binaries, xz-compressed.
#
#   bash reference/h200_twins.sh BIN_DIR OUT [MNIST_DIR] [PHASES]
#   BIN_DIR: gpu-matmul.xz, gpu-layers.xz, mnist.xz (and gpu-matmul-old.xz, gpu-layers-old.xz
#            to time a change beside the build before it); OUT: where everything goes;
#   MNIST_DIR: the four MNIST .gz files (the epoch rows are skipped without it);
#   PHASES (default "twins matmul layers epochs ncu sass"): which parts to run (the timing
#   parts twice each, interleaved; "lsass": the SASS of gpu-layers' kernels without timing them).
#
# Writes OUT/summary.txt (the lines the chapters quote) and OUT/twins.tar.xz (every log, the
# ncu reports as text, the SASS).
set -uo pipefail
BIN=$1
OUT=$2
MNIST=${3:-}
PHASES=${4:-twins matmul layers epochs ncu sass}
REF=$(cd "$(dirname "$0")" && pwd)
TOOLS=$REF/../tools
W=$(mktemp -d)
mkdir -p "$W/log" "$W/sass" "$W/ncu" "$OUT"
S=$W/log/summary.txt
start=$(date +%s)
note() { echo "[$(($(date +%s) - start))s] $*" | tee -a "$S"; }

for f in "$BIN"/*.xz; do
    xz -dc "$f" >"$W/$(basename "$f" .xz)" && chmod +x "$W/$(basename "$f" .xz)"
done
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee -a "$S"
nvcc --version | tail -2 | tee -a "$S"

# Build the twins in parallel (-lineinfo so that ncu can place stalls on source lines).
for t in cuda_matmul_05 cuda_matmul_08 cuda_mnist_split; do
    nvcc -O3 -arch=sm_90 -lineinfo -Xptxas -v -o "$W/$t" "$REF/$t.cu" >"$W/log/ptxas_$t.txt" 2>&1 &
done
wait
for t in cuda_matmul_05 cuda_matmul_08 cuda_mnist_split; do
    [ -x "$W/$t" ] || { note "BUILD FAILED: $t"; cat "$W/log/ptxas_$t.txt"; }
    grep -E "registers|spill|smem" "$W/log/ptxas_$t.txt" | sed "s/^/$t: /" >>"$S"
done

export __GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1
run() { # name, command...: its output into log/name.txt, the lines kept in the summary
    local name=$1
    shift
    note "== $name: $*"
    "$@" >"$W/log/$name.txt" 2>&1
    note "$name rc=$?"
}

# Warm-up: the GPU idles at 345 MHz; the WGSL runners warm up themselves, the twins do not.
"$W/cuda_matmul_05" 2048 >/dev/null 2>&1
for round in 1 2; do
    if [[ $PHASES == *twins* ]]; then
        run "twin05_$round" "$W/cuda_matmul_05" 4096
        run "twin08_$round" "$W/cuda_matmul_08" 4096
    fi
    if [[ $PHASES == *matmul* ]]; then
        for v in "" -old; do
            [ -x "$W/gpu-matmul$v" ] || continue
            run "wgsl_matmul${v}_$round" "$W/gpu-matmul$v" 5 8 --sizes 4096 \
                --no-probe --no-mnist --no-checks-study --no-cpu --reps 10 --csv "$W/log/wgsl_matmul${v}_$round.csv"
        done
    fi
    [[ $PHASES == *twins* ]] && run "twin_mnist_$round" "$W/cuda_mnist_split"
    if [[ $PHASES == *layers* ]]; then
        for v in "" -old; do
            [ -x "$W/gpu-layers$v" ] || continue
            run "wgsl_layers${v}_$round" "$W/gpu-layers$v" --bench-only
        done
    fi
done
if [[ $PHASES == *epochs* ]] && [ -n "$MNIST" ] && [ -x "$W/mnist" ]; then
    run mnist_epochs "$W/mnist" train --device gpu --data-dir "$MNIST" --hidden 128 --batch-size 64 --optimizer sgd \
        --lr 0.1 --momentum 0 --schedule constant --epochs 3 --preview 0
fi
grep -hE "twin |check" "$W"/log/twin*.txt >>"$S" 2>/dev/null
grep -hE "^ +0[58] |product only" "$W"/log/wgsl_matmul*.txt >>"$S" 2>/dev/null
grep -hE "^ +(split|fused) \||us per dispatch" "$W"/log/wgsl_layers*.txt 2>/dev/null | head -16 >>"$S"
grep -hiE "epoch" "$W"/log/mnist_epochs.txt 2>/dev/null | tail -4 >>"$S"

if [[ $PHASES == *ncu* ]]; then
    SECTIONS=(--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis_Tables
        --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis --section SourceCounters)
    ncu_run() { # name, kernel regex, launches to skip, count, command...
        local name=$1 k=$2 skip=$3 count=$4
        shift 4
        note "== ncu $name"
        ncu --clock-control none "${SECTIONS[@]}" --import-source no -k "regex:$k" -s "$skip" -c "$count" \
            -o "$W/ncu/$name" "$@" >"$W/log/ncu_$name.txt" 2>&1
        ncu --import "$W/ncu/$name.ncu-rep" --page details --print-details all >"$W/ncu/$name.txt" 2>&1
        ncu --import "$W/ncu/$name.ncu-rep" --page source --csv --print-source sass >"$W/ncu/${name}_sass_stalls.csv" 2>/dev/null
        note "ncu $name rc=$?"
    }
    ncu_run twin05 matmul_kernel05 3 1 "$W/cuda_matmul_05" 4096
    ncu_run twin08 "coop_f16_kernel08|to_f16" 3 3 "$W/cuda_matmul_08" 4096
    ncu_run twin_mnist "forward_output_kernel|linear_update_kernel" 3 2 "$W/cuda_mnist_split"
    for f in "$W"/ncu/*.txt; do
        grep -hE "^  [a-z_0-9]+\(|Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Stall|Bank|Warp Cycles Per Issued|Issue Slots|Eligible" "$f" >>"$W/log/ncu_key.txt"
    done
fi

if [[ $PHASES == *sass* ]]; then
    for t in cuda_matmul_05 cuda_matmul_08 cuda_mnist_split; do
        cuobjdump -sass "$W/$t" >"$W/sass/$t.sass" 2>&1
    done
    # The driver writes its cache only into a folder that exists; `--compiled` builds every
    # pipeline of the ladders (and prints their code sizes, which name the files).
    sass_of() { # name, binary, arguments...
        local name=$1 bin=$2
        shift 2
        [ -x "$bin" ] || return
        mkdir -p "$W/cache_$name"
        __GL_SHADER_DISK_CACHE_PATH=$W/cache_$name timeout 90 "$bin" "$@" --compiled >"$W/log/compiled_$name.txt" 2>&1
        timeout 90 python3 "$TOOLS/nvidia_sass.py" "$W/cache_$name" "$W/sass/wgsl_$name" >"$W/log/sass_$name.txt" 2>&1
        note "sass $name rc=$?"
    }
    sass_of matmul "$W/gpu-matmul" 5 8 --sizes 4096
    sass_of matmul-old "$W/gpu-matmul-old" 5 8 --sizes 4096
    [[ $PHASES == *layers* || $PHASES == *lsass* ]] && sass_of layers "$W/gpu-layers"
    note "sass done"
fi

cp "$S" "$OUT/summary.txt"
[ -f "$W/log/ncu_key.txt" ] && cp "$W/log/ncu_key.txt" "$OUT/ncu_key.txt"
# The shader caches travel too: where the machine has no zstd, tools/nvidia_sass.py runs on them
# elsewhere (it needs zstd and nvdisasm, which the CUDA toolkit's wheels carry).
tar -C "$W" --exclude='*.ncu-rep' --exclude='sass/*.bin' -cJf "$OUT/twins.tar.xz" log sass ncu $(cd "$W" && ls -d cache_* 2>/dev/null)
note "done"
cat "$S"
