#!/usr/bin/env bash
# Fuzz one target for a while: fuzz/run.sh TARGET SECONDS [libFuzzer flags...]
#
# Builds the targets (cargo-fuzz, no sanitizer, optimized with debug assertions), then runs
# TARGET over a working corpus in fuzz/target/corpus/TARGET, seeded from fuzz/corpus/TARGET.
# Crashes go to fuzz/artifacts/TARGET/. Afterwards, `fuzz/run.sh TARGET minimize` merges the
# working corpus back into fuzz/corpus/TARGET: inputs that add coverage, at most KEEP (300).
set -euo pipefail
cd "$(dirname "$0")"
target=${1:?usage: run.sh TARGET SECONDS|minimize [libFuzzer flags...]}
what=${2:?usage: run.sh TARGET SECONDS|minimize [libFuzzer flags...]}
shift 2
export RUSTC_BOOTSTRAP=1 # cargo-fuzz needs nightly flags; the toolchain is stable
cargo fuzz build -s none -O --debug-assertions "$target"
bin=target/x86_64-unknown-linux-gnu/release/$target
work=target/corpus/$target
mkdir -p "$work" "artifacts/$target"
if [ "$what" = minimize ]; then
  # Coverage set cover of the repo's corpus and the working one; the repo keeps its named
  # seeds and the smallest of the rest, up to $keep files in all.
  keep=${KEEP:-300}
  fresh=$(mktemp -d)
  "$bin" -set_cover_merge=1 -use_counters=0 -max_len=131072 "$fresh" "corpus/$target" "$work"
  have=$(sha1sum "corpus/$target"/* | cut -d' ' -f1)
  room=$((keep - $(ls "corpus/$target" | wc -l)))
  for f in $(ls -Sr "$fresh"); do
    [ "$room" -gt 0 ] || break
    grep -q "$f" <<<"$have" && continue
    cp "$fresh/$f" "corpus/$target/$f"
    room=$((room - 1))
  done
  rm -rf "$fresh"
  echo "corpus/$target: $(ls "corpus/$target" | wc -l) inputs"
  exit 0
fi
# The API target starts an agent (compiling its built-in components) at its first input.
timeout=10
[ "$target" = api_query ] && timeout=120
exec "$bin" "$work" "corpus/$target" \
  -max_total_time="$what" -timeout="$timeout" -rss_limit_mb=2048 -max_len=131072 \
  -artifact_prefix="artifacts/$target/" -print_final_stats=1 "$@"
