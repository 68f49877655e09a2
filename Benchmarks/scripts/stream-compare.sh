#!/usr/bin/env bash
# Streaming a large download through the async API's AsyncSequence body against the delegate
# API, side by side: stream-bench --api delegate|sequence downloads SIZE (default 1 GiB) from a
# private nginx, one process per run (so each has its own peak RSS), interleaved with the order
# rotating per round; medians of ROUNDS of MB/s, client CPU seconds and peak RSS, then the
# sequence/delegate MB/s ratio and the peak-RSS difference.
#
#   Benchmarks/scripts/stream-compare.sh                  # 5 rounds x 2 APIs x 1 GiB
#   ROUNDS=3 Benchmarks/scripts/stream-compare.sh
#
# Environment [defaults]: ROUNDS [5]  SIZE [1G] (a size truncate(1) takes)  OUT [a new temp dir]
#   PIN [cross]: "cross" pins the nginx worker to CPU 0 and the client to CPU 1 (the client's loop
#     thread and the task reading the body share that one vCPU); "same" pins both to CPU 0;
#     "none": no pinning.
#   STREAM_BENCH [Benchmarks/.build/release/stream-bench] (built first unless SKIP_BUILD=1)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bench="$(cd "$here/.." && pwd)"
ROUNDS="${ROUNDS:-5}"
SIZE="${SIZE:-1G}"
PIN="${PIN:-cross}"
STREAM_BENCH="${STREAM_BENCH:-$bench/.build/release/stream-bench}"
OUT="${OUT:-$(mktemp -d /tmp/hawser-stream.XXXXXX)}"
mkdir -p "$OUT"

if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    swift build -c release --package-path "$bench" --product stream-bench >&2
fi
[[ -x "$STREAM_BENCH" ]] || { echo "stream-compare.sh: $STREAM_BENCH not built" >&2; exit 1; }

ngx="$OUT/nginx"
stop_nginx() { "$here/nginx.sh" stop "$ngx" || true; }
trap stop_nginx EXIT
trap 'exit 130' INT TERM
unset NGINX_CPU
export NGINX_SENDFILE=on
port="$("$here/nginx.sh" start "$ngx")"
# A sparse file, sent with sendfile(2): nginx serves it from the page cache at little cost, and
# disk speed never enters the numbers.
truncate -s "$SIZE" "$ngx/www/bytes/big"
url="http://127.0.0.1:$port/bytes/big"
master="$(cat "$ngx/nginx.pid")"
worker="$(pgrep -P "$master" | head -1)"
case "$PIN" in
    none) pin=() ;;
    cross) taskset -pc 0 "$worker" >/dev/null; pin=(taskset -c 1) ;;
    same) taskset -pc 0 "$worker" >/dev/null; pin=(taskset -c 0) ;;
    *) echo "stream-compare.sh: PIN takes none, cross or same" >&2; exit 2 ;;
esac
curl -sS --fail -o /dev/null "$url" || { echo "stream-compare.sh: nginx check failed" >&2; exit 1; }

{
    echo "# stream-compare.sh $(date -u +%FT%TZ)  $(nproc) CPUs  load: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# hawser commit $(git -C "$bench/.." rev-parse --short HEAD)$(git -C "$bench/.." diff --quiet HEAD -- . 2>/dev/null || echo ' (+ uncommitted changes)')"
    echo "# $url ($SIZE)  rounds $ROUNDS  pin $PIN  raw logs in $OUT"
} | tee "$OUT/header.txt" >&2

results="$OUT/results.tsv"
printf 'round\tapi\tbytes\tseconds\tmb_per_s\tcpu_s\tpeak_rss_mib\n' > "$results"
for ((r = 1; r <= ROUNDS; r++)); do
    if (( r % 2 )); then order=(delegate sequence); else order=(sequence delegate); fi
    for api in "${order[@]}"; do
        log="$OUT/r$r-$api.out"
        if ! timeout 300 "${pin[@]}" "$STREAM_BENCH" --api "$api" -n 1 "$url" > "$log" 2>&1; then
            echo "stream-compare.sh: $api round $r failed (see $log)" >&2; continue
        fi
        line="$(grep '^RESULT' "$log" | tail -1)"
        get() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p" <<<"$line"; }
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$api" "$(get bytes)" "$(get seconds)" "$(get mb_per_s)" "$(get cpu_s)" "$(get peak_rss_mib)" >> "$results"
    done
done

awk -F'\t' '
function median(key, col,   n, i, j, t, a) {
    n = cnt[key]
    for (i = 1; i <= n; i++) a[i] = val[key, col, i]
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
NR > 1 { i = ++cnt[$2]; val[$2, "mbps", i] = $5; val[$2, "cpu", i] = $6; val[$2, "rss", i] = $7 }
END {
    printf "\n%-9s %8s %8s %9s %6s\n", "api", "MB/s", "cpu s", "RSS MiB", "runs"
    for (k = 1; k <= 2; k++) {
        a = k == 1 ? "delegate" : "sequence"
        if (a in cnt) printf "%-9s %8.0f %8.2f %9.1f %6d\n", a, median(a, "mbps"), median(a, "cpu"), median(a, "rss"), cnt[a]
    }
    if (("delegate" in cnt) && ("sequence" in cnt))
        printf "\nsequence / delegate MB/s: %.2f   peak RSS difference: %+.1f MiB\n", median("sequence", "mbps") / median("delegate", "mbps"), median("sequence", "rss") - median("delegate", "rss")
}' "$results" | tee "$OUT/summary.txt"
