#!/usr/bin/env bash
# Builds the bench executable and the crossover report, and copies them, stripped, with stable
# names into one folder to carry to a machine without a Rust toolchain (the GPU machine):
#
#   bash benches/bundle.sh [DIR]        # default DIR: target/bench-bundle
#
# DIR then holds `gpu_vs_cpu` (the criterion bench executable: run it with `--bench`, plus any
# criterion option or filter; it ends with the crossover report), `crossover` (redraws the
# report) and `run.sh` (bundle-run.sh: runs the full sweep there and packs the report). See
# benches/README.md, "On the H200 machine (no Rust toolchain there)", for how to run them
# there and bring the results back.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-target/bench-bundle}"
mkdir -p "$dir"

# `cargo bench --no-run` prints "Executable benches/gpu_vs_cpu/main.rs (target/release/deps/gpu_vs_cpu-HASH)".
cargo bench -p benches --no-run 2>&1 | tee /dev/stderr | sed -n 's/^ *Executable benches\/\([a-z_]*\)\/main\.rs (\(.*\))$/\1 \2/p' >"$dir/.list"
cargo build --release -p benches --bin crossover
echo "crossover target/release/crossover" >>"$dir/.list"

count=0
while read -r name path; do
    cp "$path" "$dir/$name"
    strip "$dir/$name"
    count=$((count + 1))
done <"$dir/.list"
rm "$dir/.list"
if [ "$count" -ne 2 ]; then
    echo "bundle: expected 2 executables (gpu_vs_cpu, crossover), got $count" >&2
    exit 1
fi
cp benches/bundle-run.sh "$dir/run.sh"
ls -la "$dir"
du -sh "$dir"
