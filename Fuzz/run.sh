#!/usr/bin/env bash
# Fuzz one target for SECONDS of wall time with libFuzzer + ASan (docs/FUZZING.md).
#
#   Fuzz/run.sh TARGET SECONDS      TARGET: any Fuzz/Fuzz* directory but FuzzSupport
#
# Builds the target into .build-fuzz, fuzzes from the committed corpus Fuzz/corpus/TARGET and
# the seeds (both read only) with the target's dictionary, writes new inputs to the working
# corpus Fuzz/scratch/TARGET (git-ignored; Fuzz/campaign.sh merges it into the committed corpus),
# and exits non-zero when libFuzzer finds a crash (the input is left in Fuzz/artifacts/).
# FUZZ_SEED=N fixes libFuzzer's seed.
set -euo pipefail

target=${1:?usage: Fuzz/run.sh TARGET SECONDS}
seconds=${2:?usage: Fuzz/run.sh TARGET SECONDS}
cd "$(dirname "$0")/.."
. Fuzz/common.sh
fuzz_check_target "$target"
fuzz_build "$target"
fuzz_prepare "$target"

# FUZZ_SEED fixes libFuzzer's random seed (CI sets it, so that a clean clone explores the same
# inputs every time); unset, every run explores new ones.
flags=(-max_len="$FUZZ_MAX_LEN" -artifact_prefix="Fuzz/artifacts/$target-" -max_total_time="$seconds" -print_final_stats=1)
dict=$(fuzz_dict_flag "$target")
[ -n "$dict" ] && flags+=("$dict")
[ -n "${FUZZ_SEED:-}" ] && flags+=(-seed="$FUZZ_SEED")
"$(fuzz_binary "$target")" "${flags[@]}" "Fuzz/scratch/$target" "Fuzz/corpus/$target" "$(fuzz_seeds "$target")"
