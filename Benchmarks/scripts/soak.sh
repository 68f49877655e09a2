#!/usr/bin/env bash
# Soak: the engine's Session and the AFNetworking manager under steady load for a given time,
# side by side against one private nginx on loopback, with each client's RSS and open
# descriptors sampled from /proc every few seconds, and a verdict on drift.
#
#   Benchmarks/scripts/soak.sh                  # 120 s (CI's run)
#   Benchmarks/scripts/soak.sh 1800             # 30 minutes
#   SOAK_RSS_BOUND_MIB=1 Benchmarks/scripts/soak.sh 600
#
# Clients (both at once, each for SECONDS, 64 requests in flight over 64 keep-alive connections):
#   session   hawser load --engine session --api async --executor default -c 64 -d SECONDS URL/hello
#             (plain awaits of Session.response(for:) from the default executor)
#   manager   hawser-manager-load -c 64 -d SECONDS URL/json          (HTTPSessionManager.get, the
#             JSONResponseSerializer decoding a 60-byte object per request)
# Every INTERVAL seconds, per client: VmRSS and RssAnon from /proc/PID/status, the entries of
# /proc/PID/fd, and the thread count.
#
# Verdict, per client, over the second half of the run (the first half is warm-up: the pool
# fills, malloc's arenas and caches reach their working size):
#   RSS  the least-squares line through the samples, its rise over the second half must be at most
#        SOAK_RSS_BOUND_MIB (default 1 MiB). A leak of one 16-byte block per 1,000 requests at
#        ~10k requests/s is 0.6 MiB per minute; a 60-s half would show it.
#   fds  the descriptor count at the end must not exceed the count at the start of the second
#        half (64 sockets + the loop's epoll/eventfd/timerfd + stdio: constant under keep-alive).
#   errors  every request succeeded (the RESULT line's errors=0) and both clients lived to the end.
# Exit 0 when both clients pass, 1 otherwise.
#
# Output in OUT (default: a new temp dir): samples.tsv (t_s, client, rss_kib, anon_kib, fds,
# threads), the clients' logs, summary.txt (the table every SOAK_TABLE_EVERY seconds and the
# verdict), nginx's dir. Environment [defaults]: SOAK_SECONDS [120; or the first argument]
# INTERVAL [5] CONNS [64] SOAK_RSS_BOUND_MIB [1] SOAK_CLIENTS ["session manager"]
# SOAK_TABLE_EVERY [SECONDS/20, at least INTERVAL] SKIP_BUILD [0] OUT.
# Needs nginx (nginx-light) and the release builds of the hawser tool and hawser-manager-load (built
# here unless SKIP_BUILD=1).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
bench="$(cd "$here/.." && pwd)"
SOAK_SECONDS="${1:-${SOAK_SECONDS:-120}}"
INTERVAL="${INTERVAL:-5}"
CONNS="${CONNS:-64}"
SOAK_RSS_BOUND_MIB="${SOAK_RSS_BOUND_MIB:-1}"
SOAK_CLIENTS="${SOAK_CLIENTS:-session manager}"
SOAK_TABLE_EVERY="${SOAK_TABLE_EVERY:-$(( SOAK_SECONDS / 20 > INTERVAL ? SOAK_SECONDS / 20 : INTERVAL ))}"
HAWSER_LOAD="${HAWSER_LOAD:-$bench/../.build/release/hawser}"
MANAGER_LOAD="$bench/.build/release/hawser-manager-load"
OUT="${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/hawser-soak.XXXXXX")}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

[[ "$SOAK_SECONDS" =~ ^[0-9]+$ && "$SOAK_SECONDS" -ge 20 ]] || { echo "soak.sh: SECONDS must be a whole number ≥ 20" >&2; exit 2; }
# A clean machine: nginx-light as scripts/test.sh installs it (as root), or a clear message.
if [[ -z "${NGINX:-}" && ! -x /usr/sbin/nginx ]]; then
    if [[ "$(id -u)" == 0 ]]; then
        echo "soak.sh: installing nginx-light" >&2
        (DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light >/dev/null 2>&1) ||
            { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light >/dev/null; }
        (command -v systemctl >/dev/null && systemctl stop nginx 2>/dev/null) || true
    else
        echo "soak.sh: nginx is not installed; run: sudo apt-get install -y nginx-light" >&2; exit 1
    fi
fi
if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    swift build -c release --package-path "$bench/.." --product hawser 2>&1 | tail -1 >&2
    swift build -c release --package-path "$bench" --product hawser-manager-load 2>&1 | tail -1 >&2
fi
[[ -x "$HAWSER_LOAD" && -x "$MANAGER_LOAD" ]] || { echo "soak.sh: build the hawser tool and hawser-manager-load first" >&2; exit 1; }

ngx="$OUT/nginx"
pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
    "$here/nginx.sh" stop "$ngx" >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM
unset NGINX_CPU
port="$("$here/nginx.sh" start "$ngx" | head -1)"
base="http://127.0.0.1:$port"

{
    echo "# soak $(date -u +%FT%TZ)  host $(uname -n)  $(nproc) CPUs  load: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# hawser commit $(git -C "$bench/.." rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$bench/.." diff --quiet HEAD -- Sources Benchmarks/Sources 2>/dev/null || echo ' (+ uncommitted changes)')"
    echo "# SECONDS=$SOAK_SECONDS INTERVAL=$INTERVAL CONNS=$CONNS bound: RSS line rises ≤ $SOAK_RSS_BOUND_MIB MiB over the second half, fds do not grow; raw data in $OUT"
} | tee "$OUT/header.txt" >&2

declare -A pid_of
for cl in $SOAK_CLIENTS; do
    case "$cl" in
        session) cmd=("$HAWSER_LOAD" load --result-line -q --engine session --api async --executor default -c "$CONNS" -d "$SOAK_SECONDS" "$base/hello") ;;
        manager) cmd=("$MANAGER_LOAD" --serializer json -c "$CONNS" -d "$SOAK_SECONDS" "$base/json") ;;
        *) echo "soak.sh: unknown client '$cl' (session, manager)" >&2; exit 2 ;;
    esac
    echo "${cmd[*]}" > "$OUT/$cl.cmd"
    "${cmd[@]}" > "$OUT/$cl.log" 2>&1 &
    pid_of[$cl]=$!
    pids+=($!)
done

now_ms() { date +%s%3N; }
start="$(now_ms)"
samples="$OUT/samples.tsv"
printf 't_s\tclient\trss_kib\tanon_kib\tfds\tthreads\n' > "$samples"
sample() {   # t client pid
    local status fds
    status="$(cat "/proc/$3/status" 2>/dev/null)" || return 0
    fds="$(ls "/proc/$3/fd" 2>/dev/null | wc -l)"
    awk -v t="$1" -v cl="$2" -v fds="$fds" '
        /^VmRSS:/ { rss = $2 } /^RssAnon:/ { anon = $2 } /^Threads:/ { th = $2 }
        END { printf "%d\t%s\t%d\t%d\t%d\t%d\n", t, cl, rss, anon, fds, th }' <<<"$status" >> "$samples"
}
# Sample until a second before the clients' deadline: their shutdown (connections closed,
# buffers freed) is not part of the steady state.
stop_at=$(( start + (SOAK_SECONDS - 1) * 1000 ))
next="$start"
while :; do
    t_ms="$(now_ms)"
    (( t_ms < stop_at )) || break
    t=$(( (t_ms - start) / 1000 ))
    for cl in $SOAK_CLIENTS; do sample "$t" "$cl" "${pid_of[$cl]}"; done
    next=$(( next + INTERVAL * 1000 ))
    wait_ms=$(( next - $(now_ms) ))
    (( wait_ms > 0 )) && sleep "$(awk -v m="$wait_ms" 'BEGIN { printf "%.3f", m / 1000 }')"
done

declare -A rc_of
for cl in $SOAK_CLIENTS; do
    rc=0; wait "${pid_of[$cl]}" || rc=$?
    rc_of[$cl]=$rc
done
pids=()

# ---- table and verdict -----------------------------------------------------------------------
fail=0
{
    cat "$OUT/header.txt"
    echo
    awk -F'\t' -v every="$SOAK_TABLE_EVERY" -v clients="$SOAK_CLIENTS" '
        NR > 1 { k = $1 SUBSEP $2; rss[k] = $3; fds[k] = $5; if (!($1 in seen)) { seen[$1] = 1; ts[++n] = $1 } }
        END {
            nc = split(clients, c, " ")
            printf "| t (s) |"; for (i = 1; i <= nc; i++) printf " %s RSS (MiB) | %s fds |", c[i], c[i]; printf "\n|---:|"
            for (i = 1; i <= nc; i++) printf "---:|---:|"; printf "\n"
            last = -every
            for (j = 1; j <= n; j++) {
                if (ts[j] - last < every && j < n) continue
                last = ts[j]; printf "| %d |", ts[j]
                for (i = 1; i <= nc; i++) { k = ts[j] SUBSEP c[i]; printf " %.2f | %s |", rss[k] / 1024, fds[k] }
                printf "\n"
            }
        }' "$samples"
    echo
} > "$OUT/summary.txt"

for cl in $SOAK_CLIENTS; do
    result="$(grep '^RESULT ' "$OUT/$cl.log" | tail -1 || true)"
    requests="$(sed -n 's/.*requests=\([0-9]*\).*/\1/p' <<<"$result")"
    errors="$(sed -n 's/.*errors=\([0-9]*\).*/\1/p' <<<"$result")"
    verdict="$(awk -F'\t' -v cl="$cl" -v half="$(( SOAK_SECONDS / 2 ))" -v bound="$SOAK_RSS_BOUND_MIB" '
        NR > 1 && $2 == cl && $1 >= half {
            n++; t[n] = $1; r[n] = $3 / 1024; f[n] = $5
            if (n == 1 || $5 > fmax) fmax = $5
        }
        END {
            if (n < 3) { print "FAIL too few samples in the second half (" n ")"; exit }
            for (i = 1; i <= n; i++) { st += t[i]; sr += r[i] }
            mt = st / n; mr = sr / n
            for (i = 1; i <= n; i++) { sxy += (t[i] - mt) * (r[i] - mr); sxx += (t[i] - mt) ^ 2 }
            slope = sxx > 0 ? sxy / sxx : 0                # MiB per second
            rise = slope * (t[n] - t[1])
            ok = rise <= bound && f[n] <= f[1]
            printf "%s RSS %.2f -> %.2f MiB from t=%d to t=%d s, fitted rise %+.3f MiB (%+.1f KiB/min; bound %s MiB); fds %d -> %d (max %d)\n",
                ok ? "PASS" : "FAIL", r[1], r[n], t[1], t[n], rise, slope * 60 * 1024, bound, f[1], f[n], fmax
        }' "$samples")"
    if [[ -z "$requests" || "${errors:-1}" != 0 || "${rc_of[$cl]}" != 0 ]]; then
        verdict="FAIL (client: exit ${rc_of[$cl]}, requests ${requests:-none}, errors ${errors:-?}) ${verdict#* }"
    fi
    [[ "$verdict" == PASS* ]] || fail=1
    printf '%-8s %s requests  %s\n' "$cl" "${requests:-?}" "$verdict" >> "$OUT/summary.txt"
done
cat "$OUT/summary.txt"
echo "soak.sh: samples and logs in $OUT" >&2
exit "$fail"
