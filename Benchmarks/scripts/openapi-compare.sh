#!/usr/bin/env bash
# The OpenAPI transports side by side: the client generated from
# Tests/HawserOpenAPIExample/openapi.yaml calls getGreeting (a 27-byte JSON answer from nginx's
# /api/greeting) over HawserTransport and over AsyncHTTPClientTransport 1.5.0, with 1 and 64
# concurrent callers; runs interleaved (order rotating per round), medians of ROUNDS, and the
# ratios hawser/ahc of requests per second and per client-CPU-second.
#
#   Benchmarks/scripts/openapi-compare.sh                      # 5 rounds x {c1, c64} x 2, 5 s each
#   ROUNDS=3 DURATION=2 Benchmarks/scripts/openapi-compare.sh  # shorter
#
# openapi-load (Benchmarks/Sources/OpenAPILoad) is built first in release (SKIP_BUILD=1 to use it
# as it is): it links AsyncHTTPClient, SwiftNIO and BoringSSL, ~15 min on 2 cores the first time,
# which is why CI does not build it.
#
# Environment [defaults]: ROUNDS [5]  DURATION [5]  CONNS ["1 64"]  OUT [a new temp dir]
#   PIN [same]: "same" pins the nginx worker and the client to CPU 0 (the cost of a request is
#     then all on one vCPU, the placement fixed for every run); "cross": nginx on CPU 0, the
#     client on CPU 1; "none": no pinning.
#   CLIENTS ["hawser ahc"]: add hawser-loop for HawserTransport with its callers on the session's
#     event loop (openapi-load --executor loop: no thread hop per request; AHC's transport has no
#     counterpart, so the ratio rows compare hawser, the same configuration, with ahc), and
#     hawser-inst for Hawser's loops installed as the global executor (openapi-load --executor
#     installed: plain tasks, plain awaits, on the loops)
#   OPENAPI_LOAD [Benchmarks/.build/release/openapi-load]
# Time bound: ROUNDS x |CONNS| x |CLIENTS| x (DURATION + ~1 s), each run killed at DURATION + 30 s.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bench="$(cd "$here/.." && pwd)"
ROUNDS="${ROUNDS:-5}"
DURATION="${DURATION:-5}"
CONNS="${CONNS:-1 64}"
PIN="${PIN:-same}"
CLIENTS="${CLIENTS:-hawser ahc}"
OPENAPI_LOAD="${OPENAPI_LOAD:-$bench/.build/release/openapi-load}"
OUT="${OUT:-$(mktemp -d /tmp/hawser-openapi.XXXXXX)}"
mkdir -p "$OUT"

if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    swift build -c release --package-path "$bench" --product openapi-load >&2
fi
[[ -x "$OPENAPI_LOAD" ]] || { echo "openapi-compare.sh: $OPENAPI_LOAD not built" >&2; exit 1; }

ngx="$OUT/nginx"
stop_nginx() { "$here/nginx.sh" stop "$ngx" || true; }
trap stop_nginx EXIT
trap 'exit 130' INT TERM
unset NGINX_CPU
port="$("$here/nginx.sh" start "$ngx")"
base="http://127.0.0.1:$port/api"
master="$(cat "$ngx/nginx.pid")"
worker="$(pgrep -P "$master" | head -1)"
case "$PIN" in
    none) pin=() ;;
    cross) taskset -pc 0 "$worker" >/dev/null; pin=(taskset -c 1) ;;
    same) taskset -pc 0 "$worker" >/dev/null; pin=(taskset -c 0) ;;
    *) echo "openapi-compare.sh: PIN takes none, cross or same" >&2; exit 2 ;;
esac
curl -sS --fail -o /dev/null "$base/greeting" || { echo "openapi-compare.sh: nginx check failed" >&2; exit 1; }

{
    echo "# openapi-compare.sh $(date -u +%FT%TZ)  $(nproc) CPUs  load: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# hawser commit $(git -C "$bench/.." rev-parse --short HEAD)$(git -C "$bench/.." diff --quiet HEAD -- . 2>/dev/null || echo ' (+ uncommitted changes)')"
    echo "# $base/greeting  rounds $ROUNDS  duration ${DURATION}s  conns [$CONNS]  clients [$CLIENTS]  pin $PIN  raw logs in $OUT"
} | tee "$OUT/header.txt" >&2

results="$OUT/results.tsv"
printf 'round\tconns\ttransport\trequests\terrors\trps\tcpu_s\treq_per_cpu_s\tpeak_rss_mib\n' > "$results"
field() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p" "$2" | tail -1; }

read -r -a clients <<<"$CLIENTS"
for ((r = 1; r <= ROUNDS; r++)); do
    for c in $CONNS; do
        # Rotate the order each round, so no client always runs first.
        order=()
        for ((i = 0; i < ${#clients[@]}; i++)); do order+=("${clients[(i + r - 1) % ${#clients[@]}]}"); done
        for t in "${order[@]}"; do
            log="$OUT/r$r-c$c-$t.out"
            case "$t" in
                hawser) args=(--transport hawser) ;;
                hawser-loop) args=(--transport hawser --executor loop) ;;
                hawser-inst) args=(--transport hawser --executor installed) ;;
                ahc) args=(--transport ahc) ;;
                *) echo "openapi-compare.sh: unknown client $t" >&2; exit 2 ;;
            esac
            timeout -s INT "$(( DURATION + 30 ))" "${pin[@]}" "$OPENAPI_LOAD" "${args[@]}" -c "$c" -d "$DURATION" "$base" > "$log" 2>&1 || true
            if ! grep -q '^RESULT' "$log"; then echo "openapi-compare.sh: $t c$c round $r gave no RESULT (see $log)" >&2; continue; fi
            line="$(grep '^RESULT' "$log" | tail -1)"
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$c" "$t" \
                "$(sed -n 's/.*requests=\([0-9]*\).*/\1/p' <<<"$line")" "$(sed -n 's/.*errors=\([0-9]*\).*/\1/p' <<<"$line")" \
                "$(sed -n 's/.* rps=\([0-9.]*\).*/\1/p' <<<"$line")" "$(sed -n 's/.* cpu_s=\([0-9.]*\).*/\1/p' <<<"$line")" \
                "$(sed -n 's/.*req_per_cpu_s=\([0-9.]*\).*/\1/p' <<<"$line")" "$(sed -n 's/.*peak_rss_mib=\([0-9.]*\).*/\1/p' <<<"$line")" >> "$results"
        done
    done
done

awk -F'\t' -v connlist="$CONNS" '
function median(key, col,   n, i, j, t, a) {
    n = cnt[key]
    for (i = 1; i <= n; i++) a[i] = val[key, col, i]
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
NR > 1 {
    key = $2 SUBSEP $3
    i = ++cnt[key]
    val[key, "rps", i] = $6; val[key, "rpc", i] = $8; val[key, "rss", i] = $9; errs[key] += $5
}
END {
    printf "\n%-5s %-11s %10s %12s %9s %7s\n", "conns", "client", "req/s", "req/cpu-s", "RSS MiB", "errors"
    nc = split(connlist, cs, " ")
    for (ci = 1; ci <= nc; ci++) {
        for (t = 1; t <= 4; t++) {
            name = t == 1 ? "hawser" : t == 2 ? "hawser-loop" : t == 3 ? "hawser-inst" : "ahc"; k = cs[ci] SUBSEP name
            if (!(k in cnt)) continue
            printf "%-5s %-11s %10.0f %12.0f %9.1f %7d\n", "c" cs[ci], name, median(k, "rps"), median(k, "rpc"), median(k, "rss"), errs[k]
        }
    }
    printf "\nHawserTransport / AsyncHTTPClientTransport (ratios of medians)\n%-5s %-11s %12s %14s %10s\n", "conns", "hawser", "req/s", "req/cpu-s", "RSS"
    for (ci = 1; ci <= nc; ci++) {
        for (t = 1; t <= 3; t++) {
            name = t == 1 ? "hawser" : t == 2 ? "hawser-loop" : "hawser-inst"
            h = cs[ci] SUBSEP name; a = cs[ci] SUBSEP "ahc"
            if (!(h in cnt) || !(a in cnt)) continue
            printf "%-5s %-11s %12.2f %14.2f %10.2f\n", "c" cs[ci], name, median(h, "rps") / median(a, "rps"), median(h, "rpc") / median(a, "rpc"), median(h, "rss") / median(a, "rss")
        }
    }
}' "$results" | tee "$OUT/summary.txt"
