#!/usr/bin/env bash
# `hawser load` (raw engine) against wrk on one nginx, interleaved: requests per second and per
# client CPU-second (user+sys from /usr/bin/time), medians over ROUNDS.
#   Benchmarks/scripts/load-vs-wrk.sh HAWSER_BINARY URL [ROUNDS [SECONDS]]
# Rows: -c1 -t1, -c64 -t1, -c64 -t2 (wrk -t2 against hawser load -t 2).
set -euo pipefail
H="$1"; URL="$2"; ROUNDS="${3:-5}"; SECS="${4:-3}"
run() {   # label cmd... → "label rps cpu"
    local label="$1"; shift
    local out; out="$( { /usr/bin/time -f 'CPU %U %S' "$@" 2>&1; } 2>&1 )"
    local rps cpu
    rps="$(echo "$out" | awk '/^Requests\/sec:/ {print $2} /^RESULT/ {for (i=1;i<=NF;i++) if ($i ~ /^rps=/) {sub("rps=","",$i); print $i}}' | tail -1)"
    cpu="$(echo "$out" | awk '/^CPU/ {print $2 + $3}' | tail -1)"
    echo "$label $rps $cpu"
}
for r in $(seq 1 "$ROUNDS"); do
    run wrk-c1 wrk -t1 -c1 -d"${SECS}s" "$URL"
    run hawser-c1 "$H" load -q --result-line -t 1 -c 1 -d "$SECS" "$URL"
    run wrk-c64 wrk -t1 -c64 -d"${SECS}s" "$URL"
    run hawser-c64 "$H" load -q --result-line -t 1 -c 64 -d "$SECS" "$URL"
    run wrk-t2-c64 wrk -t2 -c64 -d"${SECS}s" "$URL"
    run hawser-t2-c64 "$H" load -q --result-line -t 2 -c 64 -d "$SECS" "$URL"
done
