#!/usr/bin/env bash
# Build the py-guard hook component from the repo's WIT (world `hook`).
# Usage: build.sh [OUT]   (default: <repo>/target/polyglot/py-hook.wasm)
# Needs componentize-py (requirements.txt) importable by python3: installed, or in a folder
# named by PYTHONPATH.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
out="$(realpath -m "${1:-$root/target/polyglot/py-hook.wasm}")"
mkdir -p "$(dirname "$out")"
# componentize-py's own interpreter imports app.py at build time and leaves a __pycache__
# beside it: it builds from a throwaway copy, so neither the source folder nor the output's
# (which an agent may watch as a components folder) gets one.
src="$(mktemp -d)"
trap 'rm -rf "$src"' EXIT
cp "$here/app.py" "$src/"
# Through python3 rather than the `componentize-py` script, which a `pip install --target`
# leaves off PATH.
"${PYTHON:-python3}" -c 'import sys; from componentize_py import script; sys.argv[0] = "componentize-py"; sys.exit(script())' \
  --wit-path "$root/wit/0.1.1" --world hook \
  componentize --python-path "$src" app --output "$out"
