#!/usr/bin/env bash
# Puts the TensorFlow.js peer page (tfjs.html, tfjs.js and TensorFlow.js 4.22's files) into a
# built site's peer/ folder, beside the page it is measured against:
#
#   (cd 05-mnist/web/peer && npm ci) && bash 05-mnist/web/peer/build.sh target/site
#
# Then open SITE/peer/tfjs.html?backends=webgpu,webgl,wasm (served with MNIST in SITE/data/:
# MNIST_DIR=... bash 05-mnist/web/build.sh copies it there).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
site="${1:?usage: build.sh SITE_DIR}"
tf="$here/node_modules/@tensorflow"
[ -f "$tf/tfjs/dist/tf.min.js" ] || { echo "peer/build.sh: TensorFlow.js is missing: (cd $here && npm ci)" >&2; exit 1; }
mkdir -p "$site/peer/vendor"
cp "$here/tfjs.html" "$here/tfjs.js" "$site/peer/"
cp "$tf/tfjs/dist/tf.min.js" "$tf/tfjs-backend-webgpu/dist/tf-backend-webgpu.min.js" \
    "$tf/tfjs-backend-wasm/dist/tf-backend-wasm.min.js" "$tf/tfjs-backend-wasm/dist/"*.wasm "$site/peer/vendor/"
echo "peer: $site/peer/tfjs.html"
