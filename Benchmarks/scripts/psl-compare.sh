#!/usr/bin/env bash
# Public-suffix lookups: HawserCore's compiled-in list vs libpsl (what curl uses), side by side.
#
#   Benchmarks/scripts/psl-compare.sh                 # 21 rounds of 20000 passes over 24 names
#   ROUNDS=11 ITERATIONS=5000 Benchmarks/scripts/psl-compare.sh
#
# 1. Builds psl-bench (release) unless SKIP_BUILD=1.
# 2. Agreement: every rule of the list in each spelling, and names one and two labels under
#    it (scripts/gen-public-suffixes.py --names), through both; any difference fails the run.
#    Needs the list (Debian: publicsuffix) and libpsl.so.5 (libpsl5); skipped without them.
# 3. Timing: psl-bench pinned to one CPU (taskset -c $CPU), both implementations in the same
#    process, rounds interleaved, the thread's CPU time; medians of ns per lookup and of the
#    per-round ratio. libpsl loads its list with psl_latest(NULL), as curl does.
#
# Environment [defaults]: ROUNDS [21]  ITERATIONS [20000]  CPU [0]  SKIP_BUILD [0]
#   LIST [/usr/share/publicsuffix/public_suffix_list.dat]
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
bench="$(cd "$here/.." && pwd)"
root="$(cd "$bench/.." && pwd)"
ROUNDS="${ROUNDS:-21}"
ITERATIONS="${ITERATIONS:-20000}"
CPU="${CPU:-0}"
LIST="${LIST:-/usr/share/publicsuffix/public_suffix_list.dat}"
bin="$bench/.build/release/psl-bench"

if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    swift build -c release --package-path "$bench" --product psl-bench >&2
fi
[[ -x "$bin" ]] || { echo "psl-compare.sh: build psl-bench first" >&2; exit 1; }

echo "== agreement with libpsl"
if [[ -r "$LIST" ]] && ldconfig -p 2>/dev/null | grep -q 'libpsl\.so\.5'; then
    python3 "$root/scripts/gen-public-suffixes.py" "$LIST" --names | "$bin" --check - | tail -20
else
    echo "skipped: no $LIST or no libpsl.so.5"
fi

echo "== lookups (taskset -c $CPU)"
taskset -c "$CPU" "$bin" "$ROUNDS" "$ITERATIONS"
