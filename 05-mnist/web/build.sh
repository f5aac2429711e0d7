#!/usr/bin/env bash
# Builds the static site of stage 05: the page (index.html, app.js, style.css) and the trainer
# compiled to WebAssembly (pkg/mnist_web.js + pkg/mnist_web_bg.wasm), into one folder that any
# static web server can serve. `mnist serve` serves the same folder (--site, or target/site).
#
#   bash 05-mnist/web/build.sh [OUT_DIR]           # default OUT_DIR: target/site
#   MNIST_DIR=/path/to/mnist bash 05-mnist/web/build.sh   # also copy the four MNIST files to OUT_DIR/data/
#   FASHION_MNIST_DIR=/path/to/fashion-mnist bash 05-mnist/web/build.sh   # ... and Fashion-MNIST's to OUT_DIR/data/fashion/
#
# Two modules: pkg/ runs on one thread anywhere; pkg/threads/ is the same trainer with its CPU
# path on a pool of Web Workers sharing memory (the `threads` feature, wasm-bindgen-rayon),
# which the page loads in cpu_worker.js where it is cross-origin isolated. Shared memory needs
# the standard library compiled with atomics: cargo's `-Z build-std`, an unstable flag, which
# RUSTC_BOOTSTRAP=1 lets the stable toolchain use (the usual route is a nightly toolchain), and
# the standard library's source (`rustup component add rust-src`). THREADS=0 skips that module.
#
# Needs the wasm32 target and wasm-bindgen's command-line tool at the version of the
# wasm-bindgen crate in Cargo.lock (Cargo.toml pins it with `=`; the two must match):
#   rustup target add wasm32-unknown-unknown
#   rustup component add rust-src
#   cargo install wasm-bindgen-cli --version =0.2.130 --no-default-features
# WASM_OPT=1 also runs Binaryen's `wasm-opt -O3` on the .wasm (Debian: apt-get install binaryen):
# a smaller download. It is opt-in: the site is complete without it, and an old Binaryen can
# produce a module that no longer loads.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-$root/target/site}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
want_bindgen="$(awk '$0 == "name = \"wasm-bindgen\"" { getline; gsub(/version = |"/, ""); print; exit }' "$root/Cargo.lock")"

fail() { echo "build.sh: $*" >&2; exit 1; }
rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown \
    || fail "the wasm32 target is missing: rustup target add wasm32-unknown-unknown"
command -v wasm-bindgen >/dev/null 2>&1 \
    || fail "wasm-bindgen is missing: cargo install wasm-bindgen-cli --version =$want_bindgen --no-default-features"
have_bindgen="$(wasm-bindgen --version | awk '{print $2}')"
[ "$have_bindgen" = "$want_bindgen" ] \
    || fail "wasm-bindgen $have_bindgen found, Cargo.lock has $want_bindgen: cargo install wasm-bindgen-cli --version =$want_bindgen --no-default-features --force"
threads="${THREADS:-1}"
if [ "$threads" = 1 ]; then
    rustup component list --installed 2>/dev/null | grep -q '^rust-src' \
        || fail "the threaded module needs the standard library's source: rustup component add rust-src (or THREADS=0)"
fi

target_dir="${CARGO_TARGET_DIR:-$root/target}"
(cd "$root" && cargo build --locked --profile web --target wasm32-unknown-unknown -p mnist-web)
wasm="$target_dir/wasm32-unknown-unknown/web/mnist_web.wasm"

rm -rf "$out/pkg"
wasm-bindgen --target web --no-typescript --out-dir "$out/pkg" "$wasm"

if [ "$threads" = 1 ]; then
    # atomics and bulk memory for shared memory; the linker flags make the memory shared and
    # imported (the workers get the same one) and export what each thread needs to set up its
    # thread-local storage. Its own target folder: a changed standard library rebuilds everything.
    flags="-C target-feature=+atomics,+bulk-memory,+mutable-globals,+simd128"
    for a in --shared-memory --max-memory=1073741824 --import-memory --export=__wasm_init_tls \
        --export=__tls_size --export=__tls_align --export=__tls_base; do flags="$flags -C link-arg=$a"; done
    (cd "$root" && RUSTC_BOOTSTRAP=1 CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS="$flags" cargo build --locked \
        --profile web --target wasm32-unknown-unknown -p mnist-web --features threads \
        -Z build-std=panic_abort,std --target-dir "$target_dir/threads")
    wasm-bindgen --target web --no-typescript --out-dir "$out/pkg/threads" \
        "$target_dir/threads/wasm32-unknown-unknown/web/mnist_web.wasm"
fi
if [ "${WASM_OPT:-0}" = 1 ]; then
    command -v wasm-opt >/dev/null 2>&1 || fail "WASM_OPT=1 but wasm-opt is missing: apt-get install binaryen"
    wasm-opt -O3 --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
        --enable-mutable-globals --enable-reference-types --enable-multivalue \
        "$out/pkg/mnist_web_bg.wasm" -o "$out/pkg/mnist_web_bg.wasm.opt"
    mv "$out/pkg/mnist_web_bg.wasm.opt" "$out/pkg/mnist_web_bg.wasm"
fi
cp "$root/05-mnist/web/index.html" "$root/05-mnist/web/app.js" "$root/05-mnist/web/style.css" \
    "$root/05-mnist/web/cpu_worker.js" "$root/05-mnist/web/measure.html" "$root/05-mnist/web/measure.js" "$out/"

# copy_data FROM TO: the four files of a data set, gzipped, into TO (the page checks their SHA-256).
copy_data() {
    mkdir -p "$2"
    for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
        if [ -f "$1/$f.gz" ]; then cp "$1/$f.gz" "$2/"
        elif [ -f "$1/$f" ]; then gzip -c "$1/$f" > "$2/$f.gz"
        else fail "$1 has no $f(.gz)"; fi
    done
}
if [ -n "${MNIST_DIR:-}" ]; then copy_data "$MNIST_DIR" "$out/data"; fi
if [ -n "${FASHION_MNIST_DIR:-}" ]; then copy_data "$FASHION_MNIST_DIR" "$out/data/fashion"; fi
echo "site: $out ($(du -k "$out/pkg/mnist_web_bg.wasm" | cut -f1) KiB of wasm$([ "$threads" = 1 ] && echo ", $(du -k "$out/pkg/threads/mnist_web_bg.wasm" | cut -f1) KiB threaded"))"
