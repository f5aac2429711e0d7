#!/usr/bin/env python3
"""Where a page's WebGPU commands go in Chromium's GPU process: reads a JSON trace that Chromium
wrote (`--trace-startup=gpu,... --trace-startup-format=json --trace-startup-file=FILE`, as
browser-measure.sh's TRACE=1 runs it) and prints each batch of Dawn wire commands the GPU
process handled (`WebGPUDecoderImpl::HandleDawnCommands` on its main thread): when, how many
bytes, how long, and the idle gap before it; then, for the largest batches (the training loop's
full submissions, which all have one size), the spread of their durations and gaps.

    python3 05-mnist/e2e/gpu_process_trace.py TRACE.json [STEPS_PER_SUBMISSION] > SUMMARY.txt

With STEPS_PER_SUBMISSION (100 by default) it also prints the time per training step that the
GPU process spent on those submissions."""
import json
import statistics
import sys


def load(path):
    text = open(path, errors="replace").read()
    try:
        trace = json.loads(text)
    except json.JSONDecodeError:
        # A trace cut off when Chromium was stopped: close the event list.
        trace = json.loads(text.rstrip().rstrip(",") + ("]}" if text.lstrip().startswith("{") else "]"))
    return trace["traceEvents"] if isinstance(trace, dict) else trace


def main():
    events = load(sys.argv[1])
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    names = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            names[e["pid"]] = e["args"]["name"]
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
    batches = sorted(
        (e for e in events
         if e.get("ph") == "X" and e.get("name") == "WebGPUDecoderImpl::HandleDawnCommands"
         and names.get(e["pid"]) == "GPU Process" and names.get((e["pid"], e["tid"])) == "CrGpuMain"),
        key=lambda e: e["ts"])
    if not batches:
        sys.exit("no WebGPUDecoderImpl::HandleDawnCommands events of the GPU process's main thread in this trace")
    print(f"{len(batches)} batches of Dawn commands handled by the GPU process's main thread")
    print(f"{'at ms':>9} {'bytes':>8} {'took ms':>8} {'idle before ms':>15}")
    t0, end = batches[0]["ts"], None
    rows = []
    for e in batches:
        gap = (e["ts"] - end) / 1000 if end is not None else 0.0
        end = e["ts"] + e["dur"]
        size = e.get("args", {}).get("bytes", 0)
        rows.append((size, e["dur"] / 1000, gap))
        print(f"{(e['ts'] - t0) / 1000:9.2f} {size:8d} {e['dur'] / 1000:8.3f} {gap:15.3f}")
    # The training loop's full submissions: the most frequent size among batches over 4 KiB
    # (polls are a few bytes; data uploads are larger but rare).
    sizes = [s for s, _, _ in rows if s > 4096]
    if not sizes:
        sys.exit("no batch over 4 KiB: did the trace cover a training run?")
    common = max(set(sizes), key=lambda s: (sizes.count(s), s))
    full = [(d, g) for s, d, g in rows if s == common]
    took = [d for d, _ in full]
    gaps = [g for _, g in full]
    print()
    print(f"batches of {common} bytes (the full submissions): {len(full)}")
    print(f"  took {min(took):.3f}-{max(took):.3f} ms, median {statistics.median(took):.3f} ms"
          f" = {1000 * statistics.median(took) / steps:.1f} us per step at {steps} steps per submission")
    print(f"  idle before each: {min(gaps):.3f}-{max(gaps):.3f} ms, median {statistics.median(gaps):.3f} ms")


if __name__ == "__main__":
    main()
