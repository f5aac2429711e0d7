#!/usr/bin/env python3
"""Makes the browser table of WEB.md from what browser-measure.sh wrote (page.jsonl, peer.jsonl,
native.txt in each DIR): one row per machine, trainer and setting, its milliseconds per epoch
over epochs 2-3 (the first epoch also compiles pipelines and warms caches), and the test
accuracy after epoch 3. A folder may also hold `mnist train --gpu-limits` runs (native-limits.txt
and native-limits-*.jsonl, from browser-measure.sh on a GPU): they make the native GPU rows, one
per set of limits, in place of native.txt's.

    python3 05-mnist/e2e/browser_table.py MACHINE DIR ADAPTER [MACHINE DIR ADAPTER ...] > CSV

MACHINE names the machine in the table; ADAPTER names the native GPU row's adapter (the browser
rows carry their own; "-" where the folder has no native GPU run)."""
import glob
import json
import os
import re
import sys


def span(values, scale=1000.0, digits=1):
    lo, hi = min(values) * scale, max(values) * scale
    return f"{lo:.{digits}f}" if f"{lo:.{digits}f}" == f"{hi:.{digits}f}" else f"{lo:.{digits}f}-{hi:.{digits}f}"


def rows(folder, adapter):
    out = []
    page = [json.loads(l) for l in open(f"{folder}/page.jsonl") if '"epoch"' in l]
    # The first gpu:100 run warms the GPU and the pipeline cache: the second is the one shown.
    seen = {}
    for r in page:
        if r["epoch"] == 1:
            seen[r["run"]] = seen.get(r["run"], 0) + 1
        r["repeat"] = seen[r["run"]]
    for run in dict.fromkeys(r["run"] for r in page):
        last = max(r["repeat"] for r in page if r["run"] == run)
        rs = [r for r in page if r["run"] == run and r["repeat"] == last]
        device, _, steps = run.partition(":")
        setting = f"{steps} step{'' if steps == '1' else 's'} per submission" if steps else ""
        path = {"gpu": "WebGPU", "cpu": "CPU, WebAssembly", "cpu-threads": "CPU, WebAssembly threads"}[device]
        out.append(("this page", path, rs[0]["adapter"], setting, span([r["seconds"] for r in rs if r["epoch"] >= 2]),
                    f"{100 * rs[-1]['test_acc']:.2f}%"))
    peer = [json.loads(l) for l in open(f"{folder}/peer.jsonl") if '"epoch"' in l] if os.path.exists(f"{folder}/peer.jsonl") else []
    for backend in dict.fromkeys(r["backend"] for r in peer):
        rs = [r for r in peer if r["backend"] == backend]
        threads = rs[0].get("threads")
        out.append((f"TensorFlow.js 4.22 ({backend})", {"webgpu": "WebGPU", "webgl": "WebGL", "wasm": "WebAssembly"}[backend],
                    rs[0]["adapter"] if backend != "wasm" else f"{threads} thread{'' if threads == 1 else 's'}, SIMD", "",
                    span([r["seconds"] for r in rs if r["epoch"] >= 2]), f"{100 * rs[-1]['test_acc']:.2f}%"))
    # native.txt: three runs of `mnist train`, each a `model` line, epoch lines, a `trained` line.
    runs, cur, cur_device = [], None, None
    for line in open(f"{folder}/native.txt"):
        if line.startswith("model"):
            cur = {"device": cur_device, "epochs": []}
            runs.append(cur)
        if line.startswith(("device", "adapter")):
            cur_device = line.split(":", 1)[1].strip()
        if line.startswith("trained"):
            cur_device = None
        m = re.match(r"epoch (\d+)/\d+ .* acc +([\d.]+)%\s+([\d.]+) s", line)
        if m and cur is not None:
            cur["epochs"].append((int(m[1]), float(m[3]), m[2]))
    # Runs on the same device (repeats) make one row: the span of all their epochs 2-3.
    by_device = {}
    for run in runs:
        # A GPU run names its adapter (older builds printed no line for it: ADAPTER says it).
        cpu = (run["device"] or "").startswith("CPU")
        name = run["device"] if cpu or run["device"] else adapter
        by_device.setdefault((name, "CPU trainer" if cpu else "wgpu (Vulkan)"), []).append(run)
    limits = limits_rows(folder, adapter)
    for (name, path), same in by_device.items():
        if limits and path == "wgpu (Vulkan)":
            continue  # the rows held to limits below include the adapter's own, timed more finely
        seconds = [s for run in same for e, s, _ in run["epochs"] if e >= 2]
        out.append(("mnist train (native)", path, name, "", span(seconds), f"{same[-1]['epochs'][-1][2]}%"))
    return out + limits


def limits_rows(folder, adapter):
    """`mnist train --gpu-limits` runs (native-limits.txt and native-limits-WHICH-N.jsonl, where
    WHICH is adapter, browser or webgpu): one row per WHICH, epochs 2-3 of every run, with the
    dispatches per step the run printed."""
    if not os.path.exists(f"{folder}/native-limits.txt"):
        return []
    text = open(f"{folder}/native-limits.txt").read()
    granted = dict(kv.split("=") for kv in re.search(r"the page's device: (\S+)", text)[1].split(","))
    steps = {}
    for section in text.split("== --gpu-limits ")[1:]:
        which = section.split()[0]
        which = which if which in ("adapter", "webgpu") else "browser"
        steps[which] = re.search(r"GPU step: (\d+) dispatches", section)[1]
    what = {
        "adapter": "its own limits",
        "browser": f"the page's limits ({granted['storage-buffers']} storage buffers, "
                   f"{int(granted['workgroup-storage']) // 1024} KiB, {int(granted['invocations']):,} invocations)",
        "webgpu": "WebGPU's default limits",
    }
    out = []
    for which in ("adapter", "browser", "webgpu"):
        runs = [[json.loads(l) for l in open(f)] for f in sorted(glob.glob(f"{folder}/native-limits-{which}-*.jsonl"))]
        if runs:
            seconds = [r["seconds"] for run in runs for r in run if 2 <= r["epoch"] <= 3]
            setting = f"{what[which]}, {steps[which]} dispatches a step"
            out.append(("mnist train (native)", "wgpu (Vulkan)", adapter, setting, span(seconds), f"{100 * runs[-1][2]['test_acc']:.2f}%"))
    return out


def main():
    args = sys.argv[1:]
    if not args or len(args) % 3:
        sys.exit(__doc__)
    print("machine,trainer,path,adapter,setting,ms_per_epoch,test_accuracy")
    for i in range(0, len(args), 3):
        machine, folder, adapter = args[i:i + 3]
        for r in rows(folder, adapter):
            print(",".join(f'"{c}"' if "," in c else c for c in (machine, *r)))


main()
