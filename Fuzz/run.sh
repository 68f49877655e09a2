#!/usr/bin/env bash
# Fuzz one HawserHTTP1 target with libFuzzer + ASan (docs: /work/shared/TOOLCHAIN.md §2).
#
#   Fuzz/run.sh TARGET SECONDS      TARGET: any Fuzz/Fuzz* directory but FuzzSupport
#
# Builds with the toolchain recipe into .build-fuzz, fuzzes with the writable corpus
# Fuzz/corpus/<target> (git-ignored), the seeds (Fuzz/seeds/<name>, where <name> is the
# target without its Fuzz prefix, lower-cased for the two parser targets) and the
# dictionary Fuzz/<target>.dict if there is one, and exits non-zero when libFuzzer finds
# a crash (the input is left in Fuzz/artifacts/). FUZZ_SEED=N fixes libFuzzer's seed.
set -euo pipefail

target=${1:?usage: Fuzz/run.sh TARGET SECONDS}
seconds=${2:?usage: Fuzz/run.sh TARGET SECONDS}
cd "$(dirname "$0")/.."
case "$target" in
  FuzzResponseParser) seeds=Fuzz/seeds/response; dict=Fuzz/http.dict ;;
  FuzzRequestParser) seeds=Fuzz/seeds/request; dict=Fuzz/http.dict ;;
  *) seeds="Fuzz/seeds/${target#Fuzz}"; dict="Fuzz/$target.dict" ;;
esac
if [ ! -d "Fuzz/$target" ] || [ "$target" = FuzzSupport ]; then
  echo "unknown target $target" >&2; exit 2
fi
dictflag=()
[ -f "$dict" ] && dictflag=(-dict="$dict")
mkdir -p "$seeds"
swift build -c release --product "$target" --scratch-path .build-fuzz \
  --sanitize=fuzzer \
  -Xswiftc -sanitize=fuzzer,address \
  -Xcc -fsanitize=address \
  -Xswiftc -DFUZZING

export SWIFT_BACKTRACE=enable=no
corpus="Fuzz/corpus/$target"
mkdir -p "$corpus" Fuzz/artifacts
# FUZZ_SEED fixes libFuzzer's random seed (CI sets it, so that a clean clone explores the same
# inputs every time); unset, every run explores new ones.
seedflag=()
[ -n "${FUZZ_SEED:-}" ] && seedflag=(-seed="$FUZZ_SEED")
".build-fuzz/release/$target" "$corpus" "$seeds" "${dictflag[@]}" "${seedflag[@]}" \
  -artifact_prefix=Fuzz/artifacts/ -max_total_time="$seconds" -print_final_stats=1
