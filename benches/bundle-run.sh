#!/usr/bin/env bash
# Runs the bundled bench on a machine without a Rust toolchain (the GPU machine). bundle.sh
# copies this script beside the executables as `run.sh`:
#
#   bash DIR/run.sh [CRITERION ARGS...]      # e.g. bash target/bench-bundle/run.sh double
#
# It runs the FULL sweep (`BENCH_FULL=1`; set BENCH_FULL=0 for the quick one) under a timeout
# (BENCH_TIMEOUT seconds, default 450), with criterion's files in a fresh folder
# (/tmp/bench-criterion), and packs into $OUT (default ./bench-out):
# - bench.tar.gz: `crossover/` (the report: crossover.md, results.json and the PNG and SVG
#   plots, as `cargo bench` writes them into target/criterion/crossover) and `bench.log`;
# - bench.log again, unpacked, to read at once;
# - criterion.tar.gz: criterion's whole folder (estimates, adapter notes), for a closer look.
# Should the bench be stopped by the timeout, the report is drawn from what finished, with
# the bundled `crossover`.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-$PWD/bench-out}"
work=/tmp/bench-run
criterion=/tmp/bench-criterion
rm -rf "$work" "$criterion"
mkdir -p "$out" "$work"
export CRITERION_HOME="$criterion" BENCH_FULL="${BENCH_FULL:-1}"

start=$(date +%s)
timeout "${BENCH_TIMEOUT:-450}" "$here/gpu_vs_cpu" --bench --noplot "$@" 2>&1 | tee "$work/bench.log"
status=${PIPESTATUS[0]}
echo "run.sh: the bench exited with status $status after $(($(date +%s) - start)) s" | tee -a "$work/bench.log"
if [ ! -f "$criterion/crossover/results.json" ] || [ "$status" -ne 0 ]; then
    echo "run.sh: drawing the report from the results that finished" | tee -a "$work/bench.log"
    # The bench writes its adapter notes only when it finishes: the titles come from its log.
    adapter=$(sed -n 's/^adapter: //p' "$work/bench.log" | head -1)
    cpu=$(sed -n 's/^bench: warm-up.*; CPU: \([^;]*\);.*/\1/p' "$work/bench.log" | head -1)
    "$here/crossover" --criterion-dir "$criterion" --adapter "${adapter:-unknown}" --cpu "${cpu:-unknown}" 2>&1 | tail -30 | tee -a "$work/bench.log"
fi

cp -r "$criterion/crossover" "$work/crossover" 2>/dev/null || echo "run.sh: no report in $criterion/crossover" | tee -a "$work/bench.log"
tar czf "$out/bench.tar.gz" -C "$work" .
cp "$work/bench.log" "$out/bench.log"
tar czf "$out/criterion.tar.gz" -C "$(dirname "$criterion")" "$(basename "$criterion")"
ls -la "$out"
exit "$status"
