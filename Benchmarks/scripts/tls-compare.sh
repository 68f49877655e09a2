#!/usr/bin/env bash
# HTTPS comparison (issue 3's targets): Hawser vs libcurl vs wrk against one local nginx
# worker serving TLS, in one interleaved run, medians and same-round ratios.
#
#   Benchmarks/scripts/tls-compare.sh                  # 5 rounds, 3 s per run
#   ROUNDS=3 DURATION=2 Benchmarks/scripts/tls-compare.sh
#   KEY=rsa Benchmarks/scripts/tls-compare.sh          # RSA-2048 instead of ECDSA P-256
#
# What runs, every round, client order rotating per group:
#   new-full     one GET per TLS connection, no session resumption (full handshake every time)
#                  curl-multi -C CA -F -R -c N     vs  hawser load --engine session --cacert CA --new-connection --no-resumption -c N
#   new-resumed  one GET per TLS connection, resumption on (both clients' default)
#                  curl-multi -C CA -F -c N        vs  hawser load --engine session --cacert CA --new-connection -c N
#   keepalive    GETs over one kept-alive TLS connection
#                  wrk -t1 -c1 (does NOT verify the certificate)  vs  hawser load --engine session -c 1
#                  (async on the global executor, async with --executor loop, and --api
#                  completion: completion handlers on the session's loop) and curl-multi -c 1;
#                  hawser load's raw engine speaks plain HTTP only, so the Session API is measured
# for N in NEW_CONNS. Every client verifies against the generated CA (and the host, 127.0.0.1,
# an IP SAN) except wrk. Each run goes through /usr/bin/time (client CPU = user+sys of the
# whole process, start-up included; peak RSS); the nginx worker's CPU comes from /proc.
#
# Certificates are made at start in OUT/pki: a self-signed CA and a leaf for localhost with
# SANs DNS:localhost, IP:127.0.0.1 (ECDSA P-256 by default, KEY=rsa for RSA-2048); nginx
# presents the leaf only. nginx: Benchmarks/scripts/nginx.sh with NGINX_TLS_CERT/KEY (TLS 1.2
# and 1.3, ssl_session_cache shared:SSL:10m, ssl_session_tickets on; TLS 1.3 is negotiated).
#
# Environment [defaults]: ROUNDS [5]  DURATION [3]  NEW_CONNS ["1 4"]  URL_PATH [/hello]  KEY [ec]
#   TLS_GROUPS ["new-full new-resumed keepalive"]  HAWSER_LOAD [.build/release/hawser, run as 'hawser load']
#   SKIP_BUILD [0] (1: measure the binaries as they are)  OUT [a new temp dir: raw logs, results.tsv]
#   PIN [none]: "cross" pins the nginx worker to CPU 0 and every client to CPU 1; "same" pins
#     both to CPU 0. At c1 the rate is bound by wake-ups between the two processes, and on a
#     VM where those cross vCPUs (IPIs, halted vCPUs) the scheduler's placement moves every
#     client's rate by 10-30 % from run to run; pinning holds the placement fixed, and the
#     same for every client.
# Time bound: ROUNDS x (4 x |NEW_CONNS| + 5) x (DURATION + ~1 s).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
bench="$(cd "$here/.." && pwd)"
ROUNDS="${ROUNDS:-5}"
DURATION="${DURATION:-3}"
NEW_CONNS="${NEW_CONNS:-1 4}"
URL_PATH="${URL_PATH:-/hello}"
KEY="${KEY:-ec}"
GROUPS_RUN="${TLS_GROUPS:-new-full new-resumed keepalive}"
HAWSER_LOAD_SET="${HAWSER_LOAD:-}"
HAWSER_LOAD="${HAWSER_LOAD:-$bench/../.build/release/hawser}"
CURL_MULTI="$bench/.build-peers/curl-multi"
OUT="${OUT:-$(mktemp -d /tmp/hawser-tls-compare.XXXXXX)}"
mkdir -p "$OUT/logs"

command -v wrk >/dev/null || { echo "tls-compare.sh: wrk not found" >&2; exit 1; }
command -v openssl >/dev/null || { echo "tls-compare.sh: openssl not found" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "tls-compare.sh: /usr/bin/time not found (apt-get install time)" >&2; exit 1; }

if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    "$bench/peers/build.sh" >/dev/null 2>&1 || "$bench/peers/build.sh" >&2
    [[ -n "$HAWSER_LOAD_SET" ]] || swift build -c release --package-path "$bench/.." --product hawser >&2
fi
[[ -x "$CURL_MULTI" && -x "$HAWSER_LOAD" ]] || { echo "tls-compare.sh: build curl-multi and the hawser tool first" >&2; exit 1; }

# ---- certificates -----------------------------------------------------------------------
pki="$OUT/pki"
mkdir -p "$pki"
newkey() {
    if [[ "$KEY" == rsa ]]; then openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$1" 2>/dev/null
    else openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; fi
}
newkey "$pki/ca.key"
openssl req -x509 -new -key "$pki/ca.key" -sha256 -days 2 -subj "/CN=Hawser TLS bench CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out "$pki/ca.pem" 2>/dev/null
newkey "$pki/leaf.key"
openssl req -new -key "$pki/leaf.key" -subj "/CN=localhost" -out "$pki/leaf.csr" 2>/dev/null
printf '%s\n' "subjectAltName=DNS:localhost,IP:127.0.0.1" "basicConstraints=critical,CA:FALSE" \
    "keyUsage=critical,digitalSignature" "extendedKeyUsage=serverAuth" > "$pki/leaf.ext"
openssl x509 -req -in "$pki/leaf.csr" -CA "$pki/ca.pem" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 2 -sha256 -extfile "$pki/leaf.ext" -out "$pki/leaf.pem" 2>/dev/null
openssl verify -CAfile "$pki/ca.pem" "$pki/leaf.pem" >/dev/null

# ---- nginx --------------------------------------------------------------------------------
ngx="$OUT/nginx"
stop_nginx() { "$here/nginx.sh" stop "$ngx" || true; }
trap stop_nginx EXIT
trap 'exit 130' INT TERM
unset NGINX_CPU
ports="$(NGINX_TLS_CERT="$pki/leaf.pem" NGINX_TLS_KEY="$pki/leaf.key" "$here/nginx.sh" start "$ngx")"
tls_port="$(sed -n 2p <<<"$ports")"
url="https://127.0.0.1:$tls_port$URL_PATH"
master="$(cat "$ngx/nginx.pid")"
worker="$(pgrep -P "$master" | head -1)"
PIN="${PIN:-none}"
case "$PIN" in
    none) pin=() ;;
    cross) taskset -pc 0 "$worker" >/dev/null; pin=(taskset -c 1) ;;
    same) taskset -pc 0 "$worker" >/dev/null; pin=(taskset -c 0) ;;
    *) echo "tls-compare.sh: PIN takes none, cross or same" >&2; exit 2 ;;
esac
ca="$pki/ca.pem"
curl -sS --fail --cacert "$ca" -o /dev/null "$url" || { echo "tls-compare.sh: nginx TLS check failed" >&2; exit 1; }
proto="$(openssl s_client -connect "127.0.0.1:$tls_port" -CAfile "$ca" </dev/null 2>/dev/null | awk '/^New, /{sub(/,$/, "", $2); print $2; exit}')"

hz="$(getconf CLK_TCK)"
worker_ticks() { awk '{print $14 + $15}' "/proc/$worker/stat"; }

{
    echo "# tls-compare $(date -u +%FT%TZ)  host $(hostname)  nproc $(nproc)"
    echo "# hawser commit $(git -C "$bench/.." rev-parse --short HEAD)$(git -C "$bench/.." diff --quiet HEAD -- . 2>/dev/null || echo ' (+ uncommitted changes)')"
    echo "# $(nginx -v 2>&1), $(wrk -v 2>&1 | head -1 | awk '{print $1, $2}'), $(curl-config --version), $(openssl version | awk '{print $1, $2}')"
    echo "# key $KEY ($([[ $KEY == rsa ]] && echo RSA-2048 || echo 'ECDSA P-256')), protocol ${proto:-?}, url $url"
    echo "# ROUNDS=$ROUNDS DURATION=$DURATION NEW_CONNS=\"$NEW_CONNS\" TLS_GROUPS=\"$GROUPS_RUN\" PIN=$PIN"
    echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT/header.txt" >&2

tsv="$OUT/results.tsv"
printf 'round\tgroup\tconns\tclient\trequests\terrors\tseconds\trps\tcpu\treq_per_cpu_s\tmaxrss_kb\tnginx_cpu_pct\thandshakes\tresumed\tfull_us\tresumed_us\n' > "$tsv"

# run ROUND GROUP CONNS CLIENT -- command...
run() {
    local round="$1" group="$2" conns="$3" client="$4"; shift 5
    local log="$OUT/logs/r$round-$group-c$conns-$client.log" tf="$OUT/logs/r$round-$group-c$conns-$client.time"
    local w0 w1 t0 t1
    w0="$(worker_ticks)"; t0="$(date +%s.%N)"
    timeout $((DURATION + 30)) /usr/bin/time -f '%e %U %S %M' -o "$tf" ${pin[@]+"${pin[@]}"} "$@" > "$log" 2>&1 || true
    t1="$(date +%s.%N)"; w1="$(worker_ticks)"
    local wall user sys rss requests errors seconds rps hs=0 res=0 full_us="" res_us=""
    read -r wall user sys rss < "$tf" || true
    if [[ "$client" == wrk ]]; then
        requests="$(awk '/requests in/{print $1}' "$log")"
        seconds="$(awk '/requests in/{gsub(/s,/, "", $4); print $4}' "$log")"
        errors="$(awk '/Non-2xx|Socket errors/{n++} END{print n+0}' "$log")"
        rps="$(awk '/Requests\/sec:/{print $2}' "$log")"
    else
        local line; line="$(grep '^RESULT ' "$log" | tail -1)"
        requests="$(sed -n 's/.*requests=\([0-9]*\).*/\1/p' <<<"$line")"
        errors="$(sed -n 's/.*errors=\([0-9]*\).*/\1/p' <<<"$line")"
        seconds="$(sed -n 's/.*seconds=\([0-9.]*\).*/\1/p' <<<"$line")"
        rps="$(sed -n 's/.*rps=\([0-9.]*\).*/\1/p' <<<"$line")"
        local tls; tls="$(grep '^TLS ' "$log" | tail -1 || true)"
        if [[ -n "$tls" ]]; then
            hs="$(sed -n 's/.*handshakes=\([0-9]*\).*/\1/p' <<<"$tls")"
            res="$(sed -n 's/.* resumed=\([0-9]*\).*/\1/p' <<<"$tls")"
            full_us="$(sed -n 's/.*full_us=\([0-9.]*\).*/\1/p' <<<"$tls")"
            res_us="$(sed -n 's/.*resumed_us=\([0-9.]*\).*/\1/p' <<<"$tls")"
        fi
    fi
    requests="${requests:-0}"; rps="${rps:-0}"; errors="${errors:-0}"; seconds="${seconds:-0}"
    local cpu rpc ngx_pct
    cpu="$(awk -v u="${user:-0}" -v s="${sys:-0}" 'BEGIN{printf "%.3f", u + s}')"
    rpc="$(awk -v r="$requests" -v c="$cpu" 'BEGIN{printf "%.0f", (c > 0 ? r / c : 0)}')"
    ngx_pct="$(awk -v a="$w0" -v b="$w1" -v hz="$hz" -v t0="$t0" -v t1="$t1" 'BEGIN{printf "%.0f", (b - a) / hz / (t1 - t0) * 100}')"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$group" "$conns" "$client" \
        "$requests" "$errors" "$seconds" "$rps" "$cpu" "$rpc" "${rss:-0}" "$ngx_pct" "$hs" "$res" "$full_us" "$res_us" >> "$tsv"
    printf '  r%s %-11s c%-2s %-12s %8s req/s %7s req/cpu-s  cpu %6ss  nginx %3s%%  errors %s%s\n' "$round" "$group" "$conns" "$client" \
        "$rps" "$rpc" "$cpu" "$ngx_pct" "$errors" "$([[ $hs != 0 ]] && echo "  handshakes $hs resumed $res (full ${full_us}us, resumed ${res_us}us)")" >&2
}

rotate() { local k="$1"; shift; local a=("$@") n=$#; for ((i = 0; i < n; i++)); do echo "${a[$(((i + k) % n))]}"; done; }

H="$HAWSER_LOAD"
for ((r = 1; r <= ROUNDS; r++)); do
    echo "round $r/$ROUNDS (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    for group in $GROUPS_RUN; do
        case "$group" in
            new-full|new-resumed)
                extra_c=(); extra_h=()
                [[ "$group" == new-full ]] && { extra_c=(-R); extra_h=(--no-resumption); }
                for n in $NEW_CONNS; do
                    for client in $(rotate "$r" curl hawser); do
                        case "$client" in
                            curl) run "$r" "$group" "$n" curl -- "$CURL_MULTI" -C "$ca" -F "${extra_c[@]}" -c "$n" -d "$DURATION" "$url" ;;
                            hawser) run "$r" "$group" "$n" hawser -- "$H" load --result-line -q --engine session --api async --executor default --cacert "$ca" --new-connection "${extra_h[@]}" -c "$n" -d "$DURATION" "$url" ;;
                        esac
                    done
                done ;;
            keepalive)
                for client in $(rotate "$r" wrk curl hawser hawser-loop hawser-completion); do
                    case "$client" in
                        wrk) run "$r" keepalive 1 wrk -- wrk -t1 -c1 -d"${DURATION}s" "$url" ;;
                        curl) run "$r" keepalive 1 curl -- "$CURL_MULTI" -C "$ca" -c 1 -d "$DURATION" "$url" ;;
                        hawser) run "$r" keepalive 1 hawser -- "$H" load --result-line -q --engine session --api async --executor default --cacert "$ca" -c 1 -d "$DURATION" "$url" ;;
                        hawser-loop) run "$r" keepalive 1 hawser-loop -- "$H" load --result-line -q --engine session --api async --executor loop --cacert "$ca" -c 1 -d "$DURATION" "$url" ;;
                        hawser-completion) run "$r" keepalive 1 hawser-completion -- "$H" load --result-line -q --engine session --api completion --cacert "$ca" -c 1 -d "$DURATION" "$url" ;;
                    esac
                done ;;
            *) echo "tls-compare.sh: unknown group $group" >&2; exit 2 ;;
        esac
    done
done
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/header.txt" >&2

python3 "$here/tls-summary.py" "$tsv" | tee "$OUT/summary.md"
echo "raw logs and results.tsv in $OUT" >&2
