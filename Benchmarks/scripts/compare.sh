#!/usr/bin/env bash
# Peer comparison of HTTP/1.1 load clients against one local nginx worker.
#
#   Benchmarks/scripts/compare.sh                 # 3 rounds, 5 s per run, -c1 and -c64
#   ROUNDS=5 DURATION=10 Benchmarks/scripts/compare.sh
#   PIN=1 Benchmarks/scripts/compare.sh           # nginx on CPU 0, clients on CPU 1 (taskset)
#
# Clients: wrk (-t1), curl-multi (Benchmarks/.build-peers/curl-multi, built by
# Benchmarks/peers/build.sh if missing) and, when the binary exists, `hawser load`.
# Runs are interleaved: every round runs every client at every connection count,
# client order rotating per round.  Each client runs under /usr/bin/time, which
# gives its CPU time (user+sys, all threads) and peak RSS.  The table shows
# medians over the rounds and the ratios of those medians vs wrk and vs libcurl.
#
# Environment (defaults in brackets):
#   ROUNDS [3]  DURATION seconds per run [5]  CONNS ["1 64"]  URL_PATH [/hello]
#   CLIENTS ["wrk curl hawser session"]  (hawser: `hawser load --engine raw`, the engine's floor;
#       session: `hawser load --engine session --api async --executor default`, plain awaits of
#       Session.response(for:) from the default executor; session-loop: the same with the calling tasks
#       on the session's event loop, --executor loop; session-inst: the event loops installed as the
#       global executor, --executor installed; session-cb: Session.execute completion chains)  WRK_THREADS [1]
#       peers (Benchmarks/scripts/compare-peers.sh runs them on /json):
#       ahc: peer-ahc (AsyncHTTPClient 1.37, futures chained on its event loops: its best configuration)
#       ahc-async: peer-ahc --api async (async/await from the global executor)
#       urlsession: peer-urlsession (Foundation's URLSession, libcurl underneath)
#       afn: the AFNetworking layer's client, $AFN_LOAD (slot: skipped while AFN_LOAD is empty)
#       afn-loop: the same with `--executor loop` (its calling tasks on the manager's event loop)
#       afn-inst: the same with `--executor installed` (the event loops as the global executor)
#   CURL_MULTI_ARGS [""]  e.g. "-e": curl-multi's socket_action + epoll loop
#   PEER_AHC [Benchmarks/.build/release/peer-ahc]  PEER_URLSESSION [Benchmarks/.build/release/peer-urlsession]
#       the same RESULT line contract; rebuilt like it when Package.swift declares them
#   AFN_LOAD [""]  command for the `afn` client (words split on spaces), run as
#       `$AFN_LOAD -c CONNECTIONS -d SECONDS URL`; same contract (last line `RESULT requests=N ...`)
#   PIN [0]  NGINX_CPU [0]  CLIENT_CPU [1]   (PIN=1 pins with taskset -c)
#   HAWSER_LOAD [.build/release/hawser, the tool]
#       run as `hawser load --result-line -q --engine raw|session -c CONNECTIONS -d SECONDS URL`,
#       whose last line is `RESULT requests=N errors=E seconds=S ...` (same as curl-multi);
#       rebuilt first (swift build -c release --product hawser in the repository's root) unless
#       SKIP_BUILD=1 or HAWSER_LOAD is given
#   OUT [a new temp dir]  raw logs and results.tsv are kept there
# Time bound: ROUNDS x |CONNS| x |CLIENTS| x (DURATION + ~1 s), each run killed
# by `timeout` at DURATION+30 s.  nginx is stopped by its pid on exit: Ctrl-C stops the
# running client and nginx at once; a TERM sent to this script alone takes effect when
# the current client run ends.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
bench="$(cd "$here/.." && pwd)"
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-5}"
CONNS="${CONNS:-1 64}"
URL_PATH="${URL_PATH:-/hello}"
CLIENTS="${CLIENTS:-wrk curl hawser session}"
WRK_THREADS="${WRK_THREADS:-1}"
PIN="${PIN:-0}"
NGINX_CPU="${NGINX_CPU:-0}"
CLIENT_CPU="${CLIENT_CPU:-1}"
HAWSER_LOAD_SET="${HAWSER_LOAD:-}"
HAWSER_LOAD="${HAWSER_LOAD:-$bench/../.build/release/hawser}"
CURL_MULTI="${CURL_MULTI:-$bench/.build-peers/curl-multi}"
CURL_MULTI_ARGS="${CURL_MULTI_ARGS:-}"
PEER_AHC_SET="${PEER_AHC:-}"
PEER_AHC="${PEER_AHC:-$bench/.build/release/peer-ahc}"
PEER_URLSESSION_SET="${PEER_URLSESSION:-}"
PEER_URLSESSION="${PEER_URLSESSION:-$bench/.build/release/peer-urlsession}"
# >>> AFNetworking-layer client slot (for the lead): set AFN_LOAD to its command, e.g.
#     AFN_LOAD="$bench/.build/release/hawser-afn-load", and add `afn` to CLIENTS.  It must take
#     `-c N -d SECONDS URL`, GET the URL through HTTPSessionManager.get with the JSON response
#     serializer, and print the RESULT line as PeerSupport does.
AFN_LOAD="${AFN_LOAD:-}"
# <<<
OUT="${OUT:-$(mktemp -d /tmp/hawser-compare.XXXXXX)}"
mkdir -p "$OUT"

[[ -x "$CURL_MULTI" ]] || "$bench/peers/build.sh" >&2
command -v wrk >/dev/null || { echo "compare.sh: wrk not found" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "compare.sh: /usr/bin/time not found (apt-get install time)" >&2; exit 1; }

# Rebuild the peers when this package has them, so a stale binary is never measured
# (incremental; SKIP_BUILD=1 to measure as is).
build_product() {   # product, "set" flag: rebuild (incremental) unless given by path or SKIP_BUILD=1
    if [[ -z "$2" && "${SKIP_BUILD:-0}" != 1 ]] && grep -q "\"$1\"" "$bench/Package.swift"; then
        swift build -c release --package-path "$bench" --product "$1" >&2
    fi
}
if [[ " $CLIENTS " == *" hawser"* || " $CLIENTS " == *" session"* ]] && [[ -z "$HAWSER_LOAD_SET" && "${SKIP_BUILD:-0}" != 1 ]]; then
    swift build -c release --package-path "$bench/.." --product hawser >&2
fi
if [[ " $CLIENTS " == *" ahc"* ]]; then build_product peer-ahc "$PEER_AHC_SET"; fi
if [[ " $CLIENTS " == *" urlsession "* ]]; then build_product peer-urlsession "$PEER_URLSESSION_SET"; fi

clients=()
for c in $CLIENTS; do
    case "$c" in
        wrk|curl) clients+=("$c") ;;
        hawser) if [[ -x "$HAWSER_LOAD" ]]; then clients+=(hawser); else echo "compare.sh: $HAWSER_LOAD not built: hawser-load column pending" >&2; fi ;;
        session|session-loop|session-inst|session-cb) if [[ -x "$HAWSER_LOAD" ]]; then clients+=("$c"); else echo "compare.sh: $HAWSER_LOAD not built: $c column pending" >&2; fi ;;
        ahc|ahc-async) if [[ -x "$PEER_AHC" ]]; then clients+=("$c"); else echo "compare.sh: $PEER_AHC not built: $c column pending" >&2; fi ;;
        urlsession) if [[ -x "$PEER_URLSESSION" ]]; then clients+=("$c"); else echo "compare.sh: $PEER_URLSESSION not built: $c column pending" >&2; fi ;;
        afn|afn-loop|afn-inst) if [[ -n "$AFN_LOAD" ]]; then clients+=("$c"); else echo "compare.sh: AFN_LOAD not set: AFNetworking-layer column pending" >&2; fi ;;
        *) echo "compare.sh: unknown client $c" >&2; exit 2 ;;
    esac
done

ngx="$OUT/nginx"
stop_nginx() { "$here/nginx.sh" stop "$ngx" || true; }
trap stop_nginx EXIT
trap 'exit 130' INT TERM
if [[ "$PIN" == 1 ]]; then export NGINX_CPU; else unset NGINX_CPU; fi
port="$("$here/nginx.sh" start "$ngx")"
url="http://127.0.0.1:$port$URL_PATH"
master="$(cat "$ngx/nginx.pid")"
worker="$(pgrep -P "$master" | head -1)"

pin=()
if [[ "$PIN" == 1 ]]; then pin=(taskset -c "$CLIENT_CPU"); fi

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }   # utime+stime of a pid, in clock ticks
hz="$(getconf CLK_TCK)"

n_runs=$(( ROUNDS * $(wc -w <<<"$CONNS") * ${#clients[@]} ))
{
    echo "# compare.sh $(date -u +%FT%TZ)  host $(uname -n)  $(nproc) CPUs  load: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# url $url  rounds $ROUNDS  duration ${DURATION}s  conns [$CONNS]  clients [${clients[*]}]  pin $PIN  wrk -t$WRK_THREADS  curl-multi ${CURL_MULTI_ARGS:-(perform+poll)}"
    echo "# $n_runs runs, about $(( n_runs * (DURATION + 1) + 2 )) s; raw logs in $OUT"
} | tee "$OUT/header.txt" >&2

# Warm-up (not counted): nginx worker, page cache, CPU frequency.
wrk -t1 -c1 -d1s "$url" >/dev/null 2>&1 || true

results="$OUT/results.tsv"
printf 'round\tconns\tclient\trequests\terrors\tseconds\trps\tcpu_s\treq_per_cpu_s\tpeak_rss_kb\tnginx_cpu_pct\n' > "$results"

run_one() {   # round conns client
    local r="$1" c="$2" cl="$3" log="$OUT/r$1-c$2-$3"
    local cmd=()
    case "$cl" in
        wrk)    cmd=(wrk "-t$WRK_THREADS" "-c$c" "-d${DURATION}s" "$url") ;;
        curl)   cmd=("$CURL_MULTI" $CURL_MULTI_ARGS -c "$c" -d "$DURATION" "$url") ;;
        hawser) cmd=("$HAWSER_LOAD" load --result-line -q --engine raw -c "$c" -d "$DURATION" "$url") ;;
        session) cmd=("$HAWSER_LOAD" load --result-line -q --engine session --api async --executor default -c "$c" -d "$DURATION" "$url") ;;
        session-loop) cmd=("$HAWSER_LOAD" load --result-line -q --engine session --api async --executor loop -c "$c" -d "$DURATION" "$url") ;;
        session-inst) cmd=("$HAWSER_LOAD" load --result-line -q --engine session --api async --executor installed -c "$c" -d "$DURATION" "$url") ;;
        session-cb) cmd=("$HAWSER_LOAD" load --result-line -q --engine session --api completion -c "$c" -d "$DURATION" "$url") ;;
        ahc)    cmd=("$PEER_AHC" --api future -c "$c" -d "$DURATION" "$url") ;;
        ahc-async) cmd=("$PEER_AHC" --api async -c "$c" -d "$DURATION" "$url") ;;
        urlsession) cmd=("$PEER_URLSESSION" -c "$c" -d "$DURATION" "$url") ;;
        afn)    cmd=($AFN_LOAD -c "$c" -d "$DURATION" "$url") ;;
        afn-loop) cmd=($AFN_LOAD --executor loop -c "$c" -d "$DURATION" "$url") ;;
        afn-inst) cmd=($AFN_LOAD --executor installed -c "$c" -d "$DURATION" "$url") ;;
    esac
    local t0 t1
    t0="$(cpu_ticks "$worker")"
    /usr/bin/time -f 'TIME wall=%e user=%U sys=%S maxrss_kb=%M' -o "$log.time" \
        timeout -s INT "$(( DURATION + 30 ))" "${pin[@]}" "${cmd[@]}" > "$log.out" 2>&1 || true
    t1="$(cpu_ticks "$worker")"
    local requests="" seconds="" errors=0
    case "$cl" in
        wrk)
            # "  123456 requests in 5.00s, 17.54MB read"
            read -r requests seconds < <(awk '/ requests in /{ v=$4; sub(/,$/,"",v);
                if (v ~ /ms$/) { sub(/ms$/,"",v); v/=1000 } else if (v ~ /m$/) { sub(/m$/,"",v); v*=60 } else sub(/s$/,"",v);
                print $1, v }' "$log.out")
            errors="$(awk '/Non-2xx or 3xx responses:/{e+=$NF} /Socket errors:/{gsub(/[^0-9 ]/," "); for(i=1;i<=NF;i++) e+=$i} END{print e+0}' "$log.out")"
            ;;
        *)
            local line
            line="$(grep '^RESULT ' "$log.out" | tail -1 || true)"
            requests="$(sed -n 's/.*requests=\([0-9]*\).*/\1/p' <<<"$line")"
            seconds="$(sed -n 's/.*seconds=\([0-9.]*\).*/\1/p' <<<"$line")"
            errors="$(sed -n 's/.*errors=\([0-9]*\).*/\1/p' <<<"$line")"
            ;;
    esac
    if [[ -z "$requests" || -z "$seconds" ]]; then
        echo "compare.sh: $cl -c$c round $r produced no result; see $log.out" >&2
        return
    fi
    local user sys rss
    user="$(sed -n 's/.*user=\([0-9.]*\).*/\1/p' "$log.time")"
    sys="$(sed -n 's/.*sys=\([0-9.]*\).*/\1/p' "$log.time")"
    rss="$(sed -n 's/.*maxrss_kb=\([0-9]*\).*/\1/p' "$log.time")"
    awk -v r="$r" -v c="$c" -v cl="$cl" -v n="$requests" -v e="${errors:-0}" -v s="$seconds" \
        -v u="$user" -v y="$sys" -v m="$rss" -v t0="$t0" -v t1="$t1" -v hz="$hz" 'BEGIN {
        cpu = u + y; rps = n / s; rpc = cpu > 0 ? n / cpu : 0
        printf "%d\t%d\t%s\t%d\t%d\t%.3f\t%.0f\t%.2f\t%.0f\t%d\t%.0f\n", r, c, cl, n, e, s, rps, cpu, rpc, m, 100 * (t1 - t0) / hz / s
    }' | tee -a "$results" | awk -F'\t' '{ printf "  round %s  -c%-3s %-12s %8s req/s  %6s req/cpu-s  cpu %ss  rss %s KiB  errors %s  nginx %s%%\n", $1, $2, $3, $7, $9, $8, $10, $5, $11 }' >&2
}

for r in $(seq 1 "$ROUNDS"); do
    # rotate the client order each round so no client always runs first
    k=$(( (r - 1) % ${#clients[@]} ))
    order=("${clients[@]:k}" "${clients[@]:0:k}")
    for c in $CONNS; do
        for cl in "${order[@]}"; do run_one "$r" "$c" "$cl"; done
    done
done

echo "# load at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/header.txt" >&2

# Summary: medians over rounds per (conns, client), ratios of medians.
awk -F'\t' -v rounds="$ROUNDS" '
function median(key, col,   n, i, j, t, a) {
    n = cnt[key]
    for (i = 1; i <= n; i++) a[i] = val[key, col, i]
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function ratio(x, y) { return y > 0 ? sprintf("%.2f", x / y) : "-" }
NR > 1 {
    key = $2 SUBSEP $3
    if (!(key in cnt)) { order[++nk] = key }
    i = ++cnt[key]
    val[key, "rps", i] = $7; val[key, "rpc", i] = $9; val[key, "rss", i] = $10; val[key, "cpu", i] = $8; val[key, "ngx", i] = $11
    errs[key] += $5
}
END {
    for (k = 1; k <= nk; k++) {
        key = order[k]; split(key, p, SUBSEP)
        m_rps[key] = median(key, "rps"); m_rpc[key] = median(key, "rpc"); m_rss[key] = median(key, "rss")
        m_cpu[key] = median(key, "cpu"); m_ngx[key] = median(key, "ngx")
        conns[p[1]] = 1
    }
    printf "\n%-5s %-11s %4s %10s %12s %10s %12s %12s %10s %10s %8s %7s\n", "conns", "client", "runs", "req/s", "req/cpu-s", "client cpu", "peak RSS KiB", "req/s /wrk", "/libcurl", "cpu-eff /wrk", "/libcurl", "nginx%"
    for (k = 1; k <= nk; k++) {
        key = order[k]; split(key, p, SUBSEP); c = p[1]
        w = c SUBSEP "wrk"; u = c SUBSEP "curl"
        printf "%-5s %-11s %4d %10.0f %12.0f %9.2fs %12.0f %12s %10s %10s %8s %6.0f%%%s\n", "c" c, (p[2] == "curl" ? "libcurl" : p[2] == "hawser" ? "hawser-raw" : p[2] == "session" ? "Session" : p[2] == "session-loop" ? "Sess-loop" : p[2] == "session-inst" ? "Sess-inst" : p[2] == "session-cb" ? "Sess-cb" : p[2] == "ahc" ? "AHC" : p[2] == "ahc-async" ? "AHC-async" : p[2] == "urlsession" ? "URLSession" : p[2] == "afn" ? "AFN-layer" : p[2] == "afn-loop" ? "AFN-loop" : p[2] == "afn-inst" ? "AFN-inst" : p[2]), cnt[key],
            m_rps[key], m_rpc[key], m_cpu[key], m_rss[key],
            ratio(m_rps[key], m_rps[w]), ratio(m_rps[key], m_rps[u]),
            ratio(m_rpc[key], m_rpc[w]), ratio(m_rpc[key], m_rpc[u]), m_ngx[key],
            errs[key] ? "  (" errs[key] " errors)" : ""
    }
    printf "\nmedians of %d rounds; ratios are ratios of medians; req/cpu-s = requests / client (user+sys) CPU seconds;\n", rounds
    printf "peak RSS from /usr/bin/time %%M; nginx%% = nginx worker CPU over the run (100%% = one core).\n"
}' "$results" | tee "$OUT/summary.txt"
