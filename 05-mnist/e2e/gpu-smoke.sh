#!/usr/bin/env bash
# `mnist serve` on a machine with a GPU and no browser: starts the server, asks for a run
# through the HTTP API exactly as the page does, prints the event stream's start, epoch and
# done events, then stops the server with Ctrl-C (SIGINT) and checks that it exits with 0.
#
#   bash 05-mnist/e2e/gpu-smoke.sh target/release/mnist ['{"device": "auto", "epochs": 5}']
#
# Needs curl. MNIST_DIR (or --data-dir's default) must hold the data set. The JSON is the body
# of POST /api/train (default: the page's defaults on `auto`, 5 epochs, all images).
set -euo pipefail
bin=${1:?usage: gpu-smoke.sh PATH/TO/mnist [TRAIN_JSON]}
body=${2:-'{"device": "auto", "epochs": 5}'}
out=$(mktemp -d)
trap 'kill -9 $server 2>/dev/null || true; rm -rf "$out"' EXIT

"$bin" serve --port 0 >"$out/stdout" 2>"$out/stderr" &
server=$!
for _ in $(seq 1 300); do
    url=$(grep -o 'http://[^ ]*' "$out/stdout" || true)
    [ -n "$url" ] && break
    kill -0 $server 2>/dev/null || { cat "$out/stderr"; echo "smoke: the server exited"; exit 1; }
    sleep 0.1
done
[ -n "$url" ] || { echo "smoke: no URL after 30 s"; exit 1; }
url=${url%/}
echo "smoke: server at $url"

# Listen first, then start the run; stop listening at `done` or `error`.
curl -sN "$url/api/events" >"$out/events" &
events=$!
sleep 0.5
curl -sf -X POST "$url/api/train" -H 'Content-Type: application/json' -d "$body"
echo
for _ in $(seq 1 1200); do
    grep -q '^event: \(done\|error\)' "$out/events" && break
    sleep 0.25
done
kill $events 2>/dev/null || true
# The start, epoch, done and error events, one JSON line each.
awk '/^event: (start|epoch|done|error)$/ { name = $2; next }
     name != "" && /^data: / { print name ": " substr($0, 7); name = "" }' "$out/events"

kill -INT $server
for _ in $(seq 1 100); do kill -0 $server 2>/dev/null || break; sleep 0.1; done
if kill -0 $server 2>/dev/null; then echo "smoke: FAIL, the server is still up 10 s after Ctrl-C"; exit 1; fi
wait $server && code=0 || code=$?
echo "smoke: server exited with $code after Ctrl-C"
grep -q '^event: done' "$out/events" && [ "$code" -eq 0 ] && echo "smoke: PASS" || { echo "smoke: FAIL"; exit 1; }
