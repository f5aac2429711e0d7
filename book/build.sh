#!/usr/bin/env bash
# Builds the static site into one folder: the in-browser trainer of stage 05 at its root
# (index.html, app.js, pkg/) and the book (mdBook) under book/. Any static web server can serve
# the folder; so can `mnist serve`, which serves the trainer and its API at / and the book at
# /book/ (`cargo run --release -p mnist -- serve --site target/site`).
#
#   bash book/build.sh [OUT_DIR]        # default OUT_DIR: target/site
#   BOOK_ONLY=1 bash book/build.sh      # the book alone, into OUT_DIR/book (no wasm toolchain)
#
# Needs mdbook 0.5 (`cargo install mdbook --version 0.5.4 --locked --no-default-features
# --features search`; .ci/run installs it), python3 (book/preprocess.py checks every link and
# include), and for the trainer what 05-mnist/web/build.sh says (the wasm32 target and
# wasm-bindgen-cli).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/target/site}"
command -v mdbook >/dev/null 2>&1 \
    || { echo "build.sh: mdbook is missing: cargo install mdbook --version 0.5.4 --locked --no-default-features --features search" >&2; exit 1; }
mkdir -p "$out"
out="$(cd "$out" && pwd)"
if [ "${BOOK_ONLY:-0}" != 1 ]; then
    bash "$root/05-mnist/web/build.sh" "$out"
fi
rm -f "$root/target/book-repo-files.txt"
mdbook build "$root/book" --dest-dir "$out/book"
# The repository files the chapters link to (source, results), where the links point: book/repo/.
while IFS= read -r f; do
    mkdir -p "$out/book/repo/$(dirname "$f")"
    cp "$root/$f" "$out/book/repo/$f"
done < "$root/target/book-repo-files.txt"
echo "site: $out (the trainer: index.html; the book: book/index.html)"
