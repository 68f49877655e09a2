#!/usr/bin/env bash
# One Session over several event loops against the same session on one loop: `hawser load
# --engine session --api async` at -c CONNS, -t 1 and -t LOOPS, against one private nginx with
# NGINX_WORKERS workers, nothing pinned, ROUNDS interleaved rounds of DURATION seconds each (the order
# alternates per round). Prints each run's RESULT line and the medians of requests/s and
# requests per client CPU-second, and the ratio of the -t LOOPS session to the -t 1 one.
#
#   Benchmarks/scripts/group-compare.sh [HAWSER]     # default .build/release/hawser (built here)
#
# Environment [defaults]: ROUNDS [5] DURATION [3] CONNS [64] LOOPS [2] NGINX_WORKERS [2]
#   EXECUTOR [installed] (--executor: installed, default or loop) OUT [a new temp dir]
#   PEER_AHC [unset]: a peer-ahc binary (swift build -c release --package-path Benchmarks --product
#     peer-ahc); adds AsyncHTTPClient on LOOPS loops, its async/await API with NIO's loops installed
#     as the global executor (--api async-nio), and the -t LOOPS session's ratio to it per CPU-second
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
HAWSER="${1:-$root/.build/release/hawser}"
ROUNDS="${ROUNDS:-5}" SECONDS_EACH="${DURATION:-3}" CONNS="${CONNS:-64}" LOOPS="${LOOPS:-2}"
EXECUTOR="${EXECUTOR:-installed}"
export NGINX_WORKERS="${NGINX_WORKERS:-2}"
OUT="${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/hawser-group.XXXXXX")}"
if [[ $# -eq 0 && "${SKIP_BUILD:-0}" != 1 ]]; then swift build -c release --package-path "$root" --product hawser >&2; fi
port=$("$here/nginx.sh" start "$OUT/nginx" | head -1)
trap '"$here/nginx.sh" stop "$OUT/nginx"' EXIT
url="http://127.0.0.1:$port/hello"
echo "# $(date -u +%FT%TZ) $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); nginx workers $NGINX_WORKERS; -c $CONNS, ${SECONDS_EACH}s, --executor $EXECUTOR" | tee "$OUT/results.txt"
for ((r = 1; r <= ROUNDS; r++)); do
  order="1 $LOOPS"; (( r % 2 == 0 )) && order="$LOOPS 1"
  if [[ -n "${PEER_AHC:-}" ]]; then
    if (( r % 2 == 0 )); then order="ahc $order"; else order="$order ahc"; fi
  fi
  for t in $order; do
    if [[ "$t" == ahc ]]; then
      line=$("$PEER_AHC" --api async-nio -t "$LOOPS" -c "$CONNS" -d "$SECONDS_EACH" "$url" | grep '^RESULT')
    else
      line=$("$HAWSER" load --result-line -q --engine session --api async --executor "$EXECUTOR" -t "$t" -c "$CONNS" -d "$SECONDS_EACH" "$url" | grep '^RESULT')
    fi
    echo "round=$r t=$t $line" | tee -a "$OUT/results.txt"
  done
done
awk -v L="$LOOPS" '
  /^round=/ {
    for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
    t = v["t"]; n[t]++; rps[t, n[t]] = v["rps"]; rpc[t, n[t]] = v["requests"] / (v["cpu_user"] + v["cpu_sys"])
  }
  function med(a, t,   k, i, j, x, m) {
    m = n[t]; for (i = 1; i <= m; i++) x[i] = a[t, i]
    for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (x[j] < x[i]) { k = x[i]; x[i] = x[j]; x[j] = k }
    return m % 2 ? x[(m + 1) / 2] : (x[m / 2] + x[m / 2 + 1]) / 2
  }
  END {
    printf "%-6s %12s %16s\n", "loops", "req/s", "req/CPU-s"
    printf "%-6s %12.0f %16.0f\n", 1, med(rps, 1), med(rpc, 1)
    printf "%-6s %12.0f %16.0f\n", L, med(rps, L), med(rpc, L)
    printf "ratio -t %s / -t 1: %.2f req/s, %.2f req/CPU-s\n", L, med(rps, L) / med(rps, 1), med(rpc, L) / med(rpc, 1)
    if (n["ahc"] > 0) {
      printf "%-6s %12.0f %16.0f\n", "AHC", med(rps, "ahc"), med(rpc, "ahc")
      printf "ratio -t %s / AHC (%s loops, NIO as the executor): %.2f req/s, %.2f req/CPU-s\n", L, L, med(rps, L) / med(rps, "ahc"), med(rpc, L) / med(rpc, "ahc")
    }
  }' "$OUT/results.txt" | tee -a "$OUT/results.txt"
echo "raw results in $OUT" >&2
