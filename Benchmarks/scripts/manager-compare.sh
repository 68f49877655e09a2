#!/usr/bin/env bash
# The AFNetworking layer against the engine: HTTPSessionManager.get (async, default executor)
# with the HTTP and with the JSON response serializer, side by side with the engine's Session
# (hawser load --engine session) on the same nginx, in one interleaved run; per client-CPU-second, and
# the manager ÷ Session ratio per row.
#
#   Benchmarks/scripts/manager-compare.sh                      # 3 rounds, the three rows below
#   ROUNDS=5 Benchmarks/scripts/manager-compare.sh
#   SCALE=0.1 ROUNDS=1 Benchmarks/scripts/manager-compare.sh   # a short run (a tenth of the requests)
#   BEFORE=/path/to/old/hawser-manager-load Benchmarks/scripts/manager-compare.sh   # adds that binary's rows
#   ALLOCS=1 Benchmarks/scripts/manager-compare.sh             # also mallocs per request (perf uprobe)
#
# Rows (requests scaled by SCALE):
#   c1     20,000 sequential GETs over 1 keep-alive connection, plain HTTP
#   c64    100,000 GETs over 64 connections (64 at a time), plain HTTP
#   tls    5,000 sequential GETs over one TLS connection (TLS 1.3, a CA made at start)
# Clients per row:
#   Session          hawser load --engine session --api async --executor default -c C -n N URL/hello (plain await)
#   manager http     hawser-manager-load --serializer http -c C -n N URL/hello
#   Session /json    hawser load --engine session --api async --executor default -c C -n N URL/json
#   manager json     hawser-manager-load --serializer json -c C -n N URL/json   (a 60-byte JSON body)
#   before http/json the same with $BEFORE (only when BEFORE is set and CLIENTS names no before-* client)
# More clients with CLIENTS (default "session manager-http session-json manager-json"):
#   curl / curl-json            libcurl multi (Benchmarks/peers/curl-multi -c C -n N [-C CA]) on /hello, /json
#   session-inst / session-json-inst / manager-http-inst / manager-json-inst
#                               the same clients with `--executor installed` (the event loops as the
#                               global executor: plain tasks, plain `await`)
#   session-loop / manager-http-loop   `--executor loop` (the calling tasks on the client's loop)
#   before-session / before-session-inst        $BEFORE_HAWSER's `hawser load` (another build of the
#                               tool) as session / session-inst: the engine before and after a change
#   before-http-inst / before-json-inst         $BEFORE as manager-http-inst / manager-json-inst
# An -inst client is divided by session-inst (or session-json-inst) when present; with curl
# present the summary also has a ÷ libcurl column (curl-json for the /json clients).
# The manager http row is divided by Session, the manager json row by Session /json.
#
# Placement: PIN [same] — "same" pins the nginx worker and every client to CPU $CPU (0): one core
# shared by server and client, as the issue's table; "cross" puts nginx on CPU 0 and the clients
# on CPU 1; "none" leaves placement to the scheduler. Each client run goes through /usr/bin/time
# (client CPU = user + sys of the whole process, start-up included; peak RSS).
#
# ALLOCS=1: mallocs per request, from a uprobe on libc's malloc (`perf probe -x libc --add malloc`,
# added if missing and left in place), counted with `perf stat -e probe_libc:malloc` at two request
# counts (N/10 and N/2 of the c1 row) so start-up cancels out: (count(N/2) - count(N/10)) / (N/2 - N/10).
#
# Environment [defaults]: ROUNDS [3]  SCALE [1]  PIN [same]  CPU [0]  HAWSER_LOAD / MANAGER_LOAD
#   [Benchmarks/.build/release/…, rebuilt unless SKIP_BUILD=1 or given]  BEFORE [unset]  BEFORE_HAWSER [unset]
#   ROWS ["c1 c64 tls"]  CLIENTS [above]  CURL_MULTI [Benchmarks/.build-peers/curl-multi]  OUT [a new temp dir: logs, results.tsv, summary.txt]
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
bench="$(cd "$here/.." && pwd)"
ROUNDS="${ROUNDS:-3}"
SCALE="${SCALE:-1}"
PIN="${PIN:-same}"
CPU="${CPU:-0}"
ROWS="${ROWS:-c1 c64 tls}"
ALLOCS="${ALLOCS:-0}"
BEFORE="${BEFORE:-}"
BEFORE_HAWSER="${BEFORE_HAWSER:-}"
HAWSER_LOAD_SET="${HAWSER_LOAD:-}"
MANAGER_LOAD_SET="${MANAGER_LOAD:-}"
HAWSER_LOAD="${HAWSER_LOAD:-$bench/../.build/release/hawser}"
MANAGER_LOAD="${MANAGER_LOAD:-$bench/.build/release/hawser-manager-load}"
OUT="${OUT:-$(mktemp -d /tmp/hawser-manager-compare.XXXXXX)}"
mkdir -p "$OUT/logs"

[[ -x /usr/bin/time ]] || { echo "manager-compare.sh: /usr/bin/time not found (apt-get install time)" >&2; exit 1; }
command -v openssl >/dev/null || { echo "manager-compare.sh: openssl not found" >&2; exit 1; }
if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    [[ -n "$HAWSER_LOAD_SET" ]] || swift build -c release --package-path "$bench/.." --product hawser >&2
    [[ -n "$MANAGER_LOAD_SET" ]] || swift build -c release --package-path "$bench" --product hawser-manager-load >&2
fi
[[ -x "$HAWSER_LOAD" && -x "$MANAGER_LOAD" ]] || { echo "manager-compare.sh: build the hawser tool and hawser-manager-load first" >&2; exit 1; }

n_of() { awk -v n="$1" -v s="$SCALE" 'BEGIN { v = int(n * s); print (v < 10 ? 10 : v) }'; }

# ---- certificates and nginx --------------------------------------------------------------
pki="$OUT/pki"
"$here/bench-pki.sh" "$pki" "Hawser manager bench CA"

ngx="$OUT/nginx"
stop_nginx() { "$here/nginx.sh" stop "$ngx" || true; }
trap stop_nginx EXIT
trap 'exit 130' INT TERM
unset NGINX_CPU
ports="$(NGINX_TLS_CERT="$pki/leaf.pem" NGINX_TLS_KEY="$pki/leaf.key" "$here/nginx.sh" start "$ngx")"
port="$(sed -n 1p <<<"$ports")"
tls_port="$(sed -n 2p <<<"$ports")"
master="$(cat "$ngx/nginx.pid")"
worker="$(pgrep -P "$master" | head -1)"
case "$PIN" in
    none) pin=() ;;
    same) taskset -pc "$CPU" "$worker" >/dev/null; pin=(taskset -c "$CPU") ;;
    cross) taskset -pc 0 "$worker" >/dev/null; pin=(taskset -c 1) ;;
    *) echo "manager-compare.sh: PIN takes same, cross or none" >&2; exit 2 ;;
esac

{
    echo "# manager-compare $(date -u +%FT%TZ)  host $(uname -n)  $(nproc) CPUs  load: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# hawser commit $(git -C "$bench/.." rev-parse --short HEAD)$(git -C "$bench/.." diff --quiet HEAD -- Sources Benchmarks/Sources 2>/dev/null || echo ' (+ uncommitted changes)')"
    echo "# ROUNDS=$ROUNDS SCALE=$SCALE PIN=$PIN ROWS=\"$ROWS\" BEFORE=${BEFORE:-none}; raw logs in $OUT"
} | tee "$OUT/header.txt" >&2

# row → connections, requests, base URL, extra client flags
row_conns() { case "$1" in c64) echo 64 ;; *) echo 1 ;; esac; }
row_n() { case "$1" in c1) n_of 20000 ;; c64) n_of 100000 ;; tls) n_of 5000 ;; esac; }
row_base() { case "$1" in tls) echo "https://127.0.0.1:$tls_port" ;; *) echo "http://127.0.0.1:$port" ;; esac; }
row_tls() { case "$1" in tls) echo "--cacert $pki/ca.pem" ;; *) echo "" ;; esac; }

read -r -a clients <<<"${CLIENTS:-session manager-http session-json manager-json}"
CURL_MULTI="${CURL_MULTI:-$bench/.build-peers/curl-multi}"
if [[ " ${clients[*]} " == *" curl"* && ! -x "$CURL_MULTI" ]]; then "$bench/peers/build.sh" >&2; fi
[[ -n "$BEFORE" && " ${clients[*]} " != *" before-"* ]] && clients+=(before-http before-json)

command_for() {   # row client → the command line
    local row="$1" cl="$2" c n base tls
    c="$(row_conns "$row")"; n="$(row_n "$row")"; base="$(row_base "$row")"; tls="$(row_tls "$row")"
    case "$cl" in
        session)      echo "$HAWSER_LOAD load --result-line -q --engine session --api async --executor default $tls -c $c -n $n $base/hello" ;;
        session-inst) echo "$HAWSER_LOAD load --result-line -q --engine session --api async --executor installed $tls -c $c -n $n $base/hello" ;;
        session-loop) echo "$HAWSER_LOAD load --result-line -q --engine session --api async --executor loop $tls -c $c -n $n $base/hello" ;;
        session-json-inst) echo "$HAWSER_LOAD load --result-line -q --engine session --api async --executor installed $tls -c $c -n $n $base/json" ;;
        manager-http-inst) echo "$MANAGER_LOAD --serializer http --executor installed $tls -c $c -n $n $base/hello" ;;
        manager-http-loop) echo "$MANAGER_LOAD --serializer http --executor loop $tls -c $c -n $n $base/hello" ;;
        manager-json-inst) echo "$MANAGER_LOAD --serializer json --executor installed $tls -c $c -n $n $base/json" ;;
        curl)         echo "$CURL_MULTI ${tls:+-C $pki/ca.pem} -c $c -n $n $base/hello" ;;
        curl-json)    echo "$CURL_MULTI ${tls:+-C $pki/ca.pem} -c $c -n $n $base/json" ;;
        session-json) echo "$HAWSER_LOAD load --result-line -q --engine session --api async --executor default $tls -c $c -n $n $base/json" ;;
        manager-http) echo "$MANAGER_LOAD --serializer http $tls -c $c -n $n $base/hello" ;;
        manager-json) echo "$MANAGER_LOAD --serializer json $tls -c $c -n $n $base/json" ;;
        before-http)  echo "$BEFORE --serializer http $tls -c $c -n $n $base/hello" ;;
        before-json)  echo "$BEFORE --serializer json $tls -c $c -n $n $base/json" ;;
        before-http-inst) echo "$BEFORE --serializer http --executor installed $tls -c $c -n $n $base/hello" ;;
        before-json-inst) echo "$BEFORE --serializer json --executor installed $tls -c $c -n $n $base/json" ;;
        before-session) echo "$BEFORE_HAWSER load --result-line -q --engine session --api async --executor default $tls -c $c -n $n $base/hello" ;;
        before-session-inst) echo "$BEFORE_HAWSER load --result-line -q --engine session --api async --executor installed $tls -c $c -n $n $base/hello" ;;
    esac
}

results="$OUT/results.tsv"
printf 'round\trow\tclient\trequests\terrors\tseconds\trps\tcpu_s\treq_per_cpu_s\tpeak_rss_kb\n' > "$results"

run_one() {   # round row client
    local r="$1" row="$2" cl="$3" log="$OUT/logs/r$1-$2-$3"
    local cmd; cmd="$(command_for "$row" "$cl")"
    echo "$cmd" > "$log.cmd"
    # shellcheck disable=SC2086
    /usr/bin/time -f 'TIME wall=%e user=%U sys=%S maxrss_kb=%M' -o "$log.time" \
        timeout -s INT 600 ${pin[@]+"${pin[@]}"} $cmd > "$log.out" 2>&1 || true
    local line requests seconds errors user sys rss
    line="$(grep '^RESULT ' "$log.out" | tail -1 || true)"
    requests="$(sed -n 's/.*requests=\([0-9]*\).*/\1/p' <<<"$line")"
    seconds="$(sed -n 's/.*seconds=\([0-9.]*\).*/\1/p' <<<"$line")"
    errors="$(sed -n 's/.*errors=\([0-9]*\).*/\1/p' <<<"$line")"
    if [[ -z "$requests" || -z "$seconds" ]]; then
        echo "manager-compare.sh: $cl $row round $r produced no result; see $log.out" >&2
        return
    fi
    user="$(sed -n 's/.*user=\([0-9.]*\).*/\1/p' "$log.time")"
    sys="$(sed -n 's/.*sys=\([0-9.]*\).*/\1/p' "$log.time")"
    rss="$(sed -n 's/.*maxrss_kb=\([0-9]*\).*/\1/p' "$log.time")"
    awk -v r="$r" -v row="$row" -v cl="$cl" -v n="$requests" -v e="${errors:-0}" -v s="$seconds" \
        -v u="$user" -v y="$sys" -v m="$rss" 'BEGIN {
        cpu = u + y; printf "%d\t%s\t%s\t%d\t%d\t%.3f\t%.0f\t%.2f\t%.0f\t%d\n", r, row, cl, n, e, s, n / s, cpu, (cpu > 0 ? n / cpu : 0), m
    }' | tee -a "$results" | awk -F'\t' '{ printf "  round %s  %-4s %-13s %8s req/s  %7s req/cpu-s  cpu %ss  rss %s KiB  errors %s\n", $1, $2, $3, $7, $9, $8, $10, $5 }' >&2
}

# Warm-up (not counted): nginx, page cache, the TLS session cache.
"$HAWSER_LOAD" load --result-line -q --engine session -c 1 -n 200 "http://127.0.0.1:$port/hello" >/dev/null 2>&1 || true
"$HAWSER_LOAD" load --result-line -q --engine session --cacert "$pki/ca.pem" -c 1 -n 200 "https://127.0.0.1:$tls_port/hello" >/dev/null 2>&1 || true

for r in $(seq 1 "$ROUNDS"); do
    k=$(( (r - 1) % ${#clients[@]} ))
    order=("${clients[@]:k}" "${clients[@]:0:k}")
    for row in $ROWS; do
        for cl in "${order[@]}"; do run_one "$r" "$row" "$cl"; done
    done
done
echo "# load at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/header.txt" >&2

# ---- allocations per request --------------------------------------------------------------
allocs="$OUT/allocs.tsv"
: > "$allocs"
if [[ "$ALLOCS" == 1 ]]; then
    # (awk reads to the end: an early exit would SIGPIPE ldconfig and fail the pipeline)
    libc="$(ldconfig -p | awk '/libc\.so\.6 .*x86-64/ && !found { print $NF; found = 1 }')"
    perf probe -l 2>/dev/null | grep -q 'probe_libc:malloc' || perf probe -x "$libc" --add malloc >/dev/null 2>&1
    lo="$(n_of 2000)"; hi="$(n_of 10000)"
    count() {   # command words… → malloc count of one run
        perf stat -x, -e probe_libc:malloc "$@" 2>&1 >/dev/null | awk -F, '/probe_libc:malloc/ { print $1 }'
    }
    for cl in "${clients[@]}"; do
        for row in $ROWS; do
            [[ "$row" == c64 ]] && continue   # sequential rows only: the same work per request
            cmd_lo="$(command_for "$row" "$cl" | sed "s/ -n [0-9]* / -n $lo /")"
            cmd_hi="$(command_for "$row" "$cl" | sed "s/ -n [0-9]* / -n $hi /")"
            # shellcheck disable=SC2086
            a="$(count ${pin[@]+"${pin[@]}"} $cmd_lo)"; b="$(count ${pin[@]+"${pin[@]}"} $cmd_hi)"
            awk -v row="$row" -v cl="$cl" -v a="$a" -v b="$b" -v lo="$lo" -v hi="$hi" \
                'BEGIN { printf "%s\t%s\t%.1f\n", row, cl, (b - a) / (hi - lo) }' | tee -a "$allocs" >&2
        done
    done
fi

# ---- summary --------------------------------------------------------------------------------
awk -F'\t' -v rounds="$ROUNDS" -v allocs_file="$allocs" '
function median(key, col,   n, i, j, t, a) {
    n = cnt[key]
    for (i = 1; i <= n; i++) a[i] = val[key, col, i]
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function label(c) {
    if (c == "session") return "Session (/hello)"
    if (c == "session-json") return "Session (/json)"
    if (c == "manager-http") return "manager, HTTPResponseSerializer"
    if (c == "manager-json") return "manager, JSONResponseSerializer"
    if (c == "before-http") return "before: manager, HTTP serializer"
    if (c == "before-json") return "before: manager, JSON serializer"
    if (c == "before-http-inst") return "before: manager, HTTP serializer, executor installed"
    if (c == "before-json-inst") return "before: manager, JSON serializer, executor installed"
    if (c == "before-session") return "before: Session (/hello)"
    if (c == "before-session-inst") return "before: Session (/hello), executor installed"
    if (c == "session-inst") return "Session (/hello), executor installed"
    if (c == "session-loop") return "Session (/hello), tasks on its loop"
    if (c == "session-json-inst") return "Session (/json), executor installed"
    if (c == "manager-http-inst") return "manager, HTTPResponseSerializer, executor installed"
    if (c == "manager-http-loop") return "manager, HTTPResponseSerializer, tasks on its loop"
    if (c == "manager-json-inst") return "manager, JSONResponseSerializer, executor installed"
    if (c == "curl") return "libcurl multi (/hello)"
    if (c == "curl-json") return "libcurl multi (/json)"
    return c
}
function base(c) { return (c ~ /json/) ? ((c ~ /-inst$/) ? "session-json-inst" : "session-json") : ((c ~ /-inst$/) ? "session-inst" : (c ~ /-loop$/) ? "session-loop" : "session") }
function curlbase(c) { return (c ~ /json/) ? "curl-json" : "curl" }
BEGIN { while ((getline line < allocs_file) > 0) { split(line, f, "\t"); al[f[1] SUBSEP f[2]] = f[3] } }
NR > 1 {
    key = $2 SUBSEP $3
    if (!(key in cnt)) { order[++nk] = key }
    i = ++cnt[key]
    val[key, "rps", i] = $7; val[key, "rpc", i] = $9; val[key, "rss", i] = $10
    errs[key] += $5
}
END {
    for (k = 1; k <= nk; k++) { key = order[k]; m_rpc[key] = median(key, "rpc"); m_rps[key] = median(key, "rps"); m_rss[key] = median(key, "rss") }
    rowname["c1"] = "sequential GET, 1 keep-alive connection"; rowname["c64"] = "GET over 64 connections"; rowname["tls"] = "sequential GET over one TLS connection"
    printf "\n| row | client | req/s | req / client-CPU-s | ÷ Session | ÷ libcurl | peak RSS | mallocs / req |\n|---|---|---:|---:|---:|---:|---:|---:|\n"
    for (k = 1; k <= nk; k++) {
        key = order[k]; split(key, p, SUBSEP); row = p[1]; cl = p[2]
        b = row SUBSEP base(cl)
        ratio = (cl ~ /^session/ || cl ~ /^curl/) ? "-" : (m_rpc[b] > 0 ? sprintf("**%.2f**", m_rpc[key] / m_rpc[b]) : "-")
        cb = row SUBSEP curlbase(cl)
        vscurl = (cl ~ /^curl/ || !(cb in m_rpc) || m_rpc[cb] <= 0) ? "-" : sprintf("**%.2f**", m_rpc[key] / m_rpc[cb])
        a = (key in al) ? al[key] : "-"
        printf "| %s | %s | %.0f | %.0f | %s | %s | %.1f MiB | %s |%s\n", rowname[row], label(cl), m_rps[key], m_rpc[key], ratio, vscurl, m_rss[key] / 1024, a,
            errs[key] ? " (" errs[key] " errors)" : ""
    }
    printf "\nmedians of %d interleaved rounds; req / client-CPU-s = requests / (user + sys) of the client process;\n", rounds
    printf "÷ Session: the manager with the HTTP serializer against Session on /hello, with JSON against Session on /json\n"
    printf "(the same executor: -inst against the Session -inst, -loop against session-loop); ÷ libcurl: against libcurl multi on the same path.\n"
}' "$results" | tee "$OUT/summary.txt"
