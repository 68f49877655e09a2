#!/usr/bin/env bash
# Replay the committed corpus and the seeds of every target (or those named) through the
# libFuzzer + ASan build, without fuzzing: the regression check CI runs (docs/FUZZING.md).
#
#   Fuzz/replay.sh [TARGET…]
#
# Each input runs once; a crash, a sanitizer report, a broken invariant, or an input slower
# than 60 s fails the target. Prints the inputs and the coverage (libFuzzer's cov/ft) per
# target, and exits non-zero when any target failed (its log's tail is printed).
set -euo pipefail
cd "$(dirname "$0")/.."
. Fuzz/common.sh

if [ $# -gt 0 ]; then targets=("$@"); else mapfile -t targets < <(fuzz_targets); fi
for t in "${targets[@]}"; do fuzz_check_target "$t"; done
mkdir -p .build-fuzz/replay Fuzz/artifacts
if ! fuzz_build "${targets[@]}" > .build-fuzz/replay/build.log 2>&1; then
  tail -30 .build-fuzz/replay/build.log
  echo "the fuzz build failed"
  exit 1
fi
failed=()
for t in "${targets[@]}"; do
  corpus="Fuzz/corpus/$t" seeds=$(fuzz_seeds "$t")
  mkdir -p "$corpus" "$seeds"
  log=".build-fuzz/replay/$t.log"
  # A directory given to libFuzzer with -runs=0 is read and every input in it run once.
  if "$(fuzz_binary "$t")" -runs=0 -timeout=60 -artifact_prefix="Fuzz/artifacts/$t-" "$corpus" "$seeds" > "$log" 2>&1; then
    inited=$(grep -oE 'INITED cov: [0-9]+ ft: [0-9]+' "$log" | tail -1)
    printf '%-20s clean: %5d corpus + %3d seed inputs; %s\n' "$t" \
      "$(find "$corpus" -type f | wc -l)" "$(find "$seeds" -type f | wc -l)" "${inited#INITED }"
  else
    tail -40 "$log"
    echo "$t: FAILED (log $log; the input is in Fuzz/artifacts/)"
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "replay failed: ${failed[*]}"
  exit 1
fi
