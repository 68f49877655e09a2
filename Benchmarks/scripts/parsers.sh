#!/usr/bin/env bash
# Parser comparison: picohttpparser and http-parser (C, gcc -O2) vs HawserHTTP1's
# HTTP1ResponseParser, on R1/R2/R3, in one session.
#
#   Benchmarks/scripts/parsers.sh                 # RUNS=5 timed runs, then callgrind
#   RUNS=9 CALLGRIND=0 Benchmarks/scripts/parsers.sh
#
# Timing: each run parses the message ITER_Rx times from one buffer and prints
# ns/message; runs are interleaved (run 1: pico R1, hp R1, hawser R1, pico R2, …)
# and the table shows the median over RUNS with ratios.
# Instructions: valgrind --tool=callgrind, (Ir(N) - Ir(0)) / N with N = CG_Rx,
# N=0 being the same binary that only loads the message.  Independent of load.
#
# Environment: RUNS [5]  CALLGRIND [1]  PARSERS ["pico hp hawser"]  MESSAGES [Benchmarks/messages]
#   ITER_R1 [200000] ITER_R2 [10000] ITER_R3 [50000]   CG_R1 [5000] CG_R2 [300] CG_R3 [2000]
#   PIN_CPU [unset]: run every parser under taskset -c PIN_CPU
#   NICE [unset]: run the timed parses under nice -n NICE (e.g. -10 as root, against concurrent builds)
#   PARSER_BENCH [Benchmarks/.build/release/parser-bench]  (rebuilt first unless SKIP_BUILD=1)
# Output: the table on stdout; header.txt, times.tsv, instr.tsv, summary.txt in a temp dir.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
bench="$(cd "$here/.." && pwd)"
RUNS="${RUNS:-5}"
CALLGRIND="${CALLGRIND:-1}"
PARSERS="${PARSERS:-pico hp hawser}"
MESSAGES="${MESSAGES:-$bench/messages}"
CPARSERS="$bench/.build-peers/cparsers"
PARSER_BENCH="${PARSER_BENCH:-$bench/.build/release/parser-bench}"
declare -A ITER=([R1]="${ITER_R1:-200000}" [R2]="${ITER_R2:-10000}" [R3]="${ITER_R3:-50000}")
declare -A CG=([R1]="${CG_R1:-5000}" [R2]="${CG_R2:-300}" [R3]="${CG_R3:-2000}")
pin=()
[[ -n "${PIN_CPU:-}" ]] && pin=(taskset -c "$PIN_CPU")
# NICE=-10 (root only) gives the timed runs priority over concurrent builds on a shared box.
[[ -n "${NICE:-}" ]] && pin=(nice -n "$NICE" "${pin[@]}")

[[ -x "$CPARSERS" ]] || "$bench/peers/build.sh" >&2
# Always (re)build parser-bench so it measures the current HawserHTTP1 sources
# (incremental: a no-op when nothing changed).  SKIP_BUILD=1 to measure as is.
if [[ " $PARSERS " == *" hawser "* && "${SKIP_BUILD:-0}" != 1 ]]; then
    swift build -c release --package-path "$bench" --product parser-bench >&2
fi
root="$(cd "$bench/.." && pwd)"
rev="$(git -C "$root" log -1 --format=%h -- Sources/HawserHTTP1 2>/dev/null || echo unknown)"
dirty="$(git -C "$root" status --porcelain -- Sources/HawserHTTP1 2>/dev/null | wc -l)"

cmd_for() {   # parser message n
    case "$1" in
        pico) echo "$CPARSERS pico $MESSAGES/$2.http $3" ;;
        hp) echo "$CPARSERS hp $MESSAGES/$2.http $3" ;;
        hawser) echo "$PARSER_BENCH $MESSAGES/$2.http $3" ;;
    esac
}

out="$(mktemp -d /tmp/hawser-parsers.XXXXXX)"
{
    echo "# parsers.sh $(date -u +%FT%TZ)  $(nproc) CPUs  load: $(cut -d' ' -f1-3 /proc/loadavg)  runs $RUNS  nice ${NICE:-0}  pin ${PIN_CPU:-none}  logs $out"
    echo "# HawserHTTP1 at $rev (last commit touching Sources/HawserHTTP1; HEAD $(git -C "$root" rev-parse --short HEAD 2>/dev/null); $dirty uncommitted files under Sources/HawserHTTP1)"
} | tee "$out/header.txt" >&2
export PARSER_BENCH_QUIET=1
# One validation pass (not timed): every parser must see the same message.
for m in R1 R2 R3; do
    for p in $PARSERS; do
        line="$(PARSER_BENCH_QUIET= $(cmd_for "$p" "$m" 1) 2>&1)" || { echo "parsers.sh: $p failed on $m: $line" >&2; exit 1; }
        echo "$line" | sed 's/^/  check: /' >&2
    done
done

: > "$out/times.tsv"
for r in $(seq 1 "$RUNS"); do
    for m in R1 R2 R3; do
        for p in $PARSERS; do
            ns="$("${pin[@]}" $(cmd_for "$p" "$m" "${ITER[$m]}") | sed -n 's/.*ns\/msg=\([0-9.]*\).*/\1/p')"
            printf '%s\t%s\t%s\n' "$p" "$m" "$ns" >> "$out/times.tsv"
        done
    done
    echo "  run $r/$RUNS done (load $(cut -d' ' -f1 /proc/loadavg))" >&2
done

: > "$out/instr.tsv"
if [[ "$CALLGRIND" == 1 ]]; then
    command -v valgrind >/dev/null || { echo "parsers.sh: no valgrind" >&2; exit 1; }
    ir() { valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'; }
    for m in R1 R2 R3; do
        for p in $PARSERS; do
            n="${CG[$m]}"
            i0="$(ir $(cmd_for "$p" "$m" 0))"
            i1="$(ir $(cmd_for "$p" "$m" "$n"))"
            printf '%s\t%s\t%s\t%s\t%s\n' "$p" "$m" "$i0" "$i1" "$n" >> "$out/instr.tsv"
            echo "  callgrind $p $m: Ir(0)=$i0 Ir($n)=$i1 -> $(( (i1 - i0) / n ))/msg" >&2
        done
    done
fi

awk -F'\t' -v runs="$RUNS" -v parsers="$PARSERS" '
function median(k,   n, i, j, t, a) {
    n = cnt[k]; for (i = 1; i <= n; i++) a[i] = v[k, i]
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
FILENAME ~ /times/ { k = $1 SUBSEP $2; v[k, ++cnt[k]] = $3; if ($3 < mn[k] || mn[k] == "") mn[k] = $3; if ($3 > mx[k]) mx[k] = $3 }
FILENAME ~ /instr/ { ins[$1, $2] = ($4 - $3) / $5 }
END {
    np = split(parsers, P, " ")
    name["pico"] = "picohttpparser"; name["hp"] = "http-parser 2.9"; name["hawser"] = "HawserHTTP1"
    printf "\n%-16s %-3s %10s %18s %12s %12s %12s\n", "parser", "msg", "ns/msg", "(min-max)", "instr/msg", "ns vs pico", "ns vs h-p"
    for (mi = 1; mi <= 3; mi++) {
        m = "R" mi
        for (pi = 1; pi <= np; pi++) {
            p = P[pi]; k = p SUBSEP m
            if (!(k in cnt)) continue
            med[k] = median(k)
        }
        for (pi = 1; pi <= np; pi++) {
            p = P[pi]; k = p SUBSEP m
            if (!(k in cnt)) continue
            rp = ((("pico" SUBSEP m) in med) && med["pico", m] > 0) ? sprintf("%.2fx", med[k] / med["pico", m]) : "-"
            rh = ((("hp" SUBSEP m) in med) && med["hp", m] > 0) ? sprintf("%.2fx", med[k] / med["hp", m]) : "-"
            printf "%-16s %-3s %10.1f %18s %12s %12s %12s\n", name[p], m, med[k], sprintf("(%.1f-%.1f)", mn[k], mx[k]),
                (k in ins) ? sprintf("%.0f", ins[k]) : "-", rp, rh
        }
    }
    printf "\nns/msg: median of %d interleaved runs; instr/msg: callgrind (Ir(N)-Ir(0))/N.\n", runs
}' "$out/times.tsv" "$out/instr.tsv" | tee "$out/summary.txt"
echo "# load at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/header.txt" >&2
