#!/usr/bin/env bash
# Fuzz one HawserHTTP1 target with libFuzzer + ASan (docs: /work/shared/TOOLCHAIN.md §2).
#
#   Fuzz/run.sh TARGET SECONDS      TARGET: FuzzResponseParser | FuzzRequestParser
#
# Builds with the toolchain recipe into .build-fuzz, fuzzes with the writable corpus
# Fuzz/corpus/<target> (git-ignored), the seeds and the dictionary, and exits non-zero
# when libFuzzer finds a crash (the input is left in Fuzz/artifacts/).
set -euo pipefail

target=${1:?usage: Fuzz/run.sh FuzzResponseParser|FuzzRequestParser SECONDS}
seconds=${2:?usage: Fuzz/run.sh TARGET SECONDS}
case "$target" in
  FuzzResponseParser) seeds=Fuzz/seeds/response ;;
  FuzzRequestParser) seeds=Fuzz/seeds/request ;;
  *) echo "unknown target $target" >&2; exit 2 ;;
esac

cd "$(dirname "$0")/.."
swift build -c release --product "$target" --scratch-path .build-fuzz \
  --sanitize=fuzzer \
  -Xswiftc -sanitize=fuzzer,address \
  -Xcc -fsanitize=address \
  -Xswiftc -DFUZZING

export SWIFT_BACKTRACE=enable=no
corpus="Fuzz/corpus/$target"
mkdir -p "$corpus" Fuzz/artifacts
".build-fuzz/release/$target" "$corpus" "$seeds" -dict=Fuzz/http.dict \
  -artifact_prefix=Fuzz/artifacts/ -max_total_time="$seconds" -print_final_stats=1
