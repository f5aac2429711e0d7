#!/usr/bin/env python3
"""The machine code (SASS) an NVIDIA driver compiled our WGSL kernels into, for reading.

wgpu hands the driver SPIR-V and never sees the result, and Vulkan offers no standard way to
get it back (`gpu-matmul --compiled` reads what the driver does report: registers, code size,
shared memory). NVIDIA's driver keeps what it compiles in its shader disk cache, though, and
the CUDA toolkit's `nvdisasm` decodes Hopper machine code. This script joins the two:

    export __GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_PATH=/tmp/nvcache \\
           __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1
    target/release/gpu-matmul 8 --compiled robust       # or any run that builds the kernels
    python3 tools/nvidia_sass.py /tmp/nvcache sass/      # needs zstd and nvdisasm on PATH

It writes one `SIZE_N.bin` (the code) and `SIZE_N.sass` (its disassembly) per compiled
pipeline; SIZE is the code size in bytes, which `--compiled` prints as `Binary Size`, so a
file can be matched with its kernel and tile (two kernels of the same size need a run with
only one of them).

The cache format is undocumented; this is what the 580 driver on an H200 wrote, and it may
change with any driver: each `.bin` file holds zstd frames; each frame decompresses to a blob
that starts with `NVDA`, whose header holds at offset 72 an entry (kind u32 = 1, size u32,
offset u64) pointing at the code, `blob[8 + offset : 8 + offset + size]`. Pass `--sm` for
another GPU generation (SM90 is Hopper).
"""

import argparse
import os
import shutil
import struct
import subprocess
import sys

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def frames(data):
    """Each zstd frame of `data`, decompressed (frames end where the next one starts, give or
    take a few bytes of the cache's own bookkeeping, which zstd refuses as trailing data)."""
    starts = []
    i = data.find(ZSTD_MAGIC)
    while i >= 0:
        starts.append(i)
        i = data.find(ZSTD_MAGIC, i + 1)
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(data)
        for length in range(end - start, max(end - start - 256, 8), -1):
            r = subprocess.run(["zstd", "-d", "-q", "-c"], input=data[start:start + length], capture_output=True)
            if r.returncode == 0:
                yield r.stdout
                break


def code_of(blob):
    """The machine code in one decompressed cache entry, or None if it is not one we know."""
    if not blob.startswith(b"NVDA") or len(blob) < 88:
        return None
    kind, size = struct.unpack("<II", blob[72:80])
    offset = struct.unpack("<Q", blob[80:88])[0]
    if kind != 1 or 8 + offset + size > len(blob):
        return None
    return blob[8 + offset:8 + offset + size]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cache", help="the folder __GL_SHADER_DISK_CACHE_PATH pointed at")
    ap.add_argument("out", help="where to write SIZE_N.bin and SIZE_N.sass")
    ap.add_argument("--sm", default="SM90", help="nvdisasm's -b architecture (default SM90, Hopper)")
    args = ap.parse_args()
    for tool in ("zstd", "nvdisasm"):
        if shutil.which(tool) is None:
            sys.exit(f"error: `{tool}` is not on PATH (zstd: the zstd package; nvdisasm: the CUDA toolkit)")
    os.makedirs(args.out, exist_ok=True)
    n = 0
    for root, _, files in os.walk(args.cache):
        for name in sorted(files):
            if not name.endswith(".bin"):
                continue
            with open(os.path.join(root, name), "rb") as f:
                data = f.read()
            for blob in frames(data):
                code = code_of(blob)
                if code is None:
                    continue
                stem = os.path.join(args.out, f"{len(code):06d}_{n:03d}")
                with open(stem + ".bin", "wb") as f:
                    f.write(code)
                r = subprocess.run(["nvdisasm", "-b", args.sm, stem + ".bin"], capture_output=True, text=True)
                with open(stem + ".sass", "w") as f:
                    f.write(r.stdout + r.stderr)
                print(f"{stem}.sass: {len(code)} bytes, {r.stdout.count(chr(10))} lines")
                n += 1
    if n == 0:
        sys.exit("error: no compiled code found: was the cache folder written by an NVIDIA driver with the variables above?")
    print(f"{n} pipelines")


if __name__ == "__main__":
    main()
