#!/usr/bin/env bash
# Build the countdown driver component from the repo's WIT (world `driver`).
# Usage: build.sh [OUT]   (default: <repo>/target/polyglot/js-driver.wasm)
# Needs `npm ci` in this folder first (componentize-js and jco, exact versions in
# package.json and package-lock.json).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
out="$(realpath -m "${1:-$root/target/polyglot/js-driver.wasm}")"
mkdir -p "$(dirname "$out")"
# componentize-js's own CLI, which `jco componentize` wraps: jco 1.35.0's wrapper first reads
# the WIT through a sandboxed wasm-tools that has no preopened directory, and fails there.
# wasi:http is not linked by the agent and a driver has no use for fetch: both are left out.
"$here/node_modules/.bin/componentize-js" "$here/countdown.js" \
  --wit "$root/wit/0.1.1" --world-name driver \
  --disable http fetch-event \
  --out "$out"
