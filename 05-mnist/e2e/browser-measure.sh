#!/usr/bin/env bash
# The browser figures of WEB.md: the page's trainer (measure.html) and TensorFlow.js
# (peer/tfjs.html) in headless Chromium, and `mnist train` on the same machine.
#
#   bash 05-mnist/e2e/browser-measure.sh SITE_DIR MNIST_BINARY OUT_DIR
#
# On the H200 machine: Chromium unpacked in /opt/chr (../shared/notes/browser-on-h200.md says
# how it gets there), VK_DRIVER_FILES set to NVIDIA's ICD, and the defaults below. Here (no GPU):
# CHROMIUM=/usr/bin/chromium GPU_FLAGS= RUNS=cpu,cpu-threads BACKENDS=wasm THREADS=2. BACKENDS=
# (empty) skips TensorFlow.js.
#
# SITE_DIR: `MNIST_DIR=... bash 05-mnist/web/build.sh SITE_DIR` plus `bash
# 05-mnist/web/peer/build.sh SITE_DIR`. It serves the site with the cross-origin isolation
# headers (COOP, COEP), so the threaded CPU trainer runs too, and writes OUT_DIR/page.jsonl
# (measure.html: WebGPU at 100, 10 and 1 steps per submission, the CPU on one thread and on
# every core), OUT_DIR/peer.jsonl (TensorFlow.js on WebGPU, WebGL and WebAssembly) and
# OUT_DIR/native.txt (`mnist train` on the GPU and on the CPU, the same network and settings);
# on a GPU also OUT_DIR/native-limits.txt: `mnist train` held to the limits the page was granted.
set -uo pipefail
site="$(cd "${1:?SITE_DIR}" && pwd)"; bin="$(realpath "${2:?MNIST_BINARY}")"; out="${3:?OUT_DIR}"
mkdir -p "$out"
chromium="${CHROMIUM:-/opt/chr/chromium/chromium}"
gpu_flags="${GPU_FLAGS-"--enable-unsafe-webgpu --ignore-gpu-blocklist --enable-features=Vulkan --use-vulkan=native --disable-vulkan-surface --disable-gpu-sandbox --use-angle=vulkan"}"
runs="${RUNS:-gpu:100,gpu:100,gpu:10,gpu:1,cpu,cpu-threads}"
backends="${BACKENDS-webgpu,webgl,wasm}"
threads="${THREADS:-$(nproc)}"
if [ "$chromium" = /opt/chr/chromium/chromium ]; then
    export VK_ICD_FILENAMES="${VK_DRIVER_FILES:?set VK_DRIVER_FILES to the NVIDIA ICD}" LD_LIBRARY_PATH=/opt/chr/lib:/opt/chr/chromium
fi
port=8765
python3 - "$site" "$port" <<'PY' &
import functools, http.server, sys
class Isolated(http.server.SimpleHTTPRequestHandler):
    def end_headers(self):
        self.send_header("Cross-Origin-Opener-Policy", "same-origin")
        self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
        super().end_headers()
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2])), functools.partial(Isolated, directory=sys.argv[1])).serve_forever()
PY
server=$!
trap 'kill $server 2>/dev/null' EXIT
sleep 1

# browse URL NAME SECONDS: Chromium (with the flags that give WebGPU the GPU), until the page logs
# `"done":true` (or SECONDS pass); keeps the page's JSON lines in OUT_DIR/NAME.jsonl.
browse() {
    local log="$out/$2.log"
    # shellcheck disable=SC2086
    "$chromium" --headless=new --no-sandbox $gpu_flags --enable-logging=stderr --v=0 --no-first-run --disable-background-networking --user-data-dir="$(mktemp -d)" \
        "http://127.0.0.1:$port/$1" 2> "$log" &
    local pid=$!
    for _ in $(seq "$3"); do grep -q '"done":true' "$log" && break; sleep 1; done
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    grep -ao '\(measure\|peer\) {.*}' "$log" | sed 's/^[a-z]* //' > "$out/$2.jsonl"
    cat "$out/$2.jsonl"
}

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | tee "$out/gpu.txt"
"$chromium" --version | tee "$out/browser.txt"
# Warm the GPU up (it idles at a low clock), then the page, then its peer.
[ -n "$gpu_flags" ] && "$bin" train --epochs 2 --preview 0 > /dev/null 2>&1
browse "measure.html?runs=$runs&epochs=3&threads=$threads" page 400
[ -n "$backends" ] && browse "peer/tfjs.html?backends=$backends&epochs=3" peer 300
{
    [ -n "$gpu_flags" ] && "$bin" train --epochs 3 --device gpu --preview 0
    "$bin" train --epochs 3 --device cpu --threads 1 --preview 0
    "$bin" train --epochs 3 --device cpu --threads "$threads" --preview 0
} 2>&1 | grep -E '^(adapter|device|model|epoch|trained)' | tee "$out/native.txt"

# The native trainer held to the limits the page's device was granted (its `webgpu` line), and
# to WebGPU's defaults, beside its own limits: which kernels each runs, and how fast. Alternated
# so that clocks and caches drift alike; per-epoch seconds in native-limits-*.jsonl.
granted=$(python3 - "$out/page.jsonl" <<'PY'
import json, sys
keys = [("storage-buffers", "max_storage_buffers_per_shader_stage"), ("workgroup-storage", "max_compute_workgroup_storage_size"),
        ("invocations", "max_compute_invocations_per_workgroup"), ("storage-binding", "max_storage_buffer_binding_size")]
for line in open(sys.argv[1]):
    w = json.loads(line).get("webgpu")
    if w:
        print(",".join("%s=%d" % (flag, w[field]) for flag, field in keys))
        break
PY
)
if [ -n "$gpu_flags" ] && [ -n "$granted" ]; then
    echo "the page's device: $granted" | tee "$out/native-limits.txt"
    for rep in 1 2; do
        for limits in adapter "$granted" webgpu; do
            name=$(case "$limits" in adapter) echo adapter;; webgpu) echo webgpu;; *) echo browser;; esac)
            echo "== --gpu-limits $limits (run $rep)"
            "$bin" train --epochs 5 --device gpu --preview 0 --gpu-limits "$limits" --metrics "$out/native-limits-$name-$rep.jsonl" 2>&1 |
                grep -E '^(adapter|limits|GPU step|model|epoch|trained)'
        done
    done | tee -a "$out/native-limits.txt"
fi
