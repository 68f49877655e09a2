#!/usr/bin/env bash
# Instructions per request of two builds of the `hawser` tool (`hawser load --engine session`),
# counted by callgrind: a before/after check of a hot-path change that the machine's load does
# not move (CPU-second ratios on a shared 2-core machine vary by ±30 % a round; instruction
# counts by about 1 %). It does not see cache misses, system-call cost or waiting, so it
# complements manager-compare.sh (requests per CPU-second), it does not replace it.
#
#   Benchmarks/scripts/instructions-compare.sh BEFORE_HAWSER AFTER_HAWSER
#
# Each row runs each binary under `valgrind --tool=callgrind` at two request counts and reports
# (Ir(N2) − Ir(N1)) / (N2 − N1), so start-up, the TLS handshake and the connections' opening
# cancel out. The tool's own per-second work (merging the interval's latency histogram, tens of
# thousands of slots, once a second of wall time) depends on how long a run takes, which the
# machine's load changes: the functions matching EXCLUDE are subtracted from each count. That
# needs the binaries' symbols: give `strip --strip-debug` copies of .build-static/release/hawser
# (valgrind 3.19 gives up on the unstripped static build's debug info). KEEP=1 leaves the
# callgrind files in OUT for `callgrind_annotate`. What still moves with timing (how many times
# a loop wakes up) leaves a few per cent of noise: run it twice.
#
# Environment [defaults]: ROWS ["c1 c64 tls"]  EXECUTORS ["installed default"]  OUT [a new temp
#   dir: logs, results.tsv, summary.txt]  KEEP [0]  EXCLUDE [LatencyHistogram] (an awk regex)
#   c1: 1 connection, N 1000 → 3000; c64: 64 connections, 5000 → 15000; tls: 1 TLS connection,
#   300 → 900 (nginx from nginx.sh, a throw-away P-256 PKI).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
before="${1:-}"
after="${2:-}"
[[ -x "$before" && -x "$after" ]] || { echo "usage: $0 BEFORE_HAWSER AFTER_HAWSER" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "instructions-compare.sh: valgrind not found (apt-get install valgrind)" >&2; exit 1; }
command -v openssl >/dev/null || { echo "instructions-compare.sh: openssl not found" >&2; exit 1; }
ROWS="${ROWS:-c1 c64 tls}"
EXECUTORS="${EXECUTORS:-installed default}"
KEEP="${KEEP:-0}"
EXCLUDE="${EXCLUDE:-LatencyHistogram}"
command -v callgrind_annotate >/dev/null || { echo "instructions-compare.sh: callgrind_annotate not found" >&2; exit 1; }
for bin in "$before" "$after"; do
    nm "$bin" >/dev/null 2>&1 || echo "instructions-compare.sh: $bin has no symbols: EXCLUDE cannot apply" >&2
done
OUT="${OUT:-$(mktemp -d /tmp/hawser-instructions.XXXXXX)}"
mkdir -p "$OUT/logs"

pki="$OUT/pki"
"$here/bench-pki.sh" "$pki" "Hawser instructions bench CA"

ngx="$OUT/nginx"
stop_nginx() { "$here/nginx.sh" stop "$ngx" || true; }
trap stop_nginx EXIT
trap 'exit 130' INT TERM
ports="$(NGINX_TLS_CERT="$pki/leaf.pem" NGINX_TLS_KEY="$pki/leaf.key" "$here/nginx.sh" start "$ngx")"
port="$(sed -n 1p <<<"$ports")"
tls_port="$(sed -n 2p <<<"$ports")"

row_counts() { case "$1" in c1) echo "1 1000 3000" ;; c64) echo "64 5000 15000" ;; tls) echo "1 300 900" ;; esac; }
row_url() { case "$1" in tls) echo "https://127.0.0.1:$tls_port/hello" ;; *) echo "http://127.0.0.1:$port/hello" ;; esac; }

# One callgrind run → its total instruction count, less the functions matching EXCLUDE.
instructions() {   # label binary executor connections n url
    local label="$1" bin="$2" exec="$3" c="$4" n="$5" url="$6" file tls=()
    [[ "$url" == https:* ]] && tls=(--cacert "$pki/ca.pem")
    file="$OUT/callgrind.$label.$n.out"
    valgrind --tool=callgrind --callgrind-out-file="$file" "$bin" load --result-line -q --engine session \
        --api async --executor "$exec" ${tls[@]+"${tls[@]}"} -c "$c" -n "$n" "$url" > "$OUT/logs/$label.$n.log" 2>&1 ||
        { tail -5 "$OUT/logs/$label.$n.log" >&2; echo "instructions-compare.sh: $label failed" >&2; exit 1; }
    grep -q "errors=0" "$OUT/logs/$label.$n.log" || { echo "instructions-compare.sh: $label had errors" >&2; exit 1; }
    local total excluded
    total="$(awk '/^(summary|totals):/ { print $2; exit }' "$file")"
    excluded="$(callgrind_annotate --threshold=100 "$file" 2>/dev/null |
        awk -v re="$EXCLUDE" '$0 ~ re { gsub(",", "", $1); s += $1 } END { print s + 0 }')"
    echo $(( total - excluded ))
    [[ "$KEEP" == 1 ]] || rm -f "$file"
}

{
    echo "# instructions-compare $(date -u +%FT%TZ)  host $(uname -n)  $(valgrind --version)"
    echo "# before: $before"
    echo "# after:  $after"
} | tee "$OUT/header.txt" >&2
printf 'row\texecutor\tbefore\tafter\tratio\n' > "$OUT/results.tsv"
for row in $ROWS; do
    read -r c n1 n2 <<<"$(row_counts "$row")"
    url="$(row_url "$row")"
    for exec in $EXECUTORS; do
        declare -A per=()
        for side in before after; do
            bin="$before"
            [[ "$side" == after ]] && bin="$after"
            i1="$(instructions "$side.$row.$exec" "$bin" "$exec" "$c" "$n1" "$url")"
            i2="$(instructions "$side.$row.$exec" "$bin" "$exec" "$c" "$n2" "$url")"
            per[$side]=$(( (i2 - i1) / (n2 - n1) ))
        done
        ratio="$(awk -v a="${per[after]}" -v b="${per[before]}" 'BEGIN { printf "%.3f", a / b }')"
        printf '%s\t%s\t%s\t%s\t%s\n' "$row" "$exec" "${per[before]}" "${per[after]}" "$ratio" | tee -a "$OUT/results.tsv" >&2
    done
done

{
    echo
    echo "| row | executor | before, instructions / request | after | after ÷ before |"
    echo "|---|---|---:|---:|---:|"
    tail -n +2 "$OUT/results.tsv" | awk -F'\t' '{ printf "| %s | %s | %d | %d | **%s** |\n", $1, $2, $3, $4, $5 }'
    echo
    echo "callgrind, (Ir at N2 − Ir at N1) / (N2 − N1) per row, less the functions matching"
    echo "\"$EXCLUDE\" (the tool's per-second histogram work); lower is better."
} | tee "$OUT/summary.txt"
echo "raw: $OUT" >&2
