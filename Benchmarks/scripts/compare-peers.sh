#!/usr/bin/env bash
# Request-rate peers of issues 4 and 2: Hawser's Session API against AsyncHTTPClient and
# URLSession (and wrk / libcurl as the floor), keep-alive GETs of a 59-byte JSON document
# (nginx.sh's /json, application/json), sequential on 1 connection and 64 in flight on 64.
#
#   Benchmarks/scripts/compare-peers.sh                     # 5 rounds x {c1, c64} x 5 clients, 5 s each
#   ROUNDS=3 DURATION=3 Benchmarks/scripts/compare-peers.sh # shorter
#   CLIENTS="wrk curl session ahc ahc-async urlsession" Benchmarks/scripts/compare-peers.sh
#   AFN_LOAD=Benchmarks/.build/release/hawser-afn-load CLIENTS="wrk curl session afn ahc urlsession" \
#       Benchmarks/scripts/compare-peers.sh                 # the AFNetworking-layer slot, see below
#
# It is compare.sh (same nginx, same interleaving and rotation, /usr/bin/time for client CPU
# and peak RSS, medians of ROUNDS) with these defaults, followed by a second table: for each of
# Hawser's clients present (session = `hawser load --engine session --api async --executor default`,
# the engine's Session API from a plain await; hawser / session-loop / session-inst / afn / afn-loop /
# afn-inst when listed), its ratio to each peer present (ahc, ahc-async,
# urlsession) in req/s, in req per client-CPU-second, and in peak RSS (lower is better there).
#
# Environment: everything compare.sh takes (ROUNDS, DURATION, CONNS, CLIENTS, PIN, OUT, SKIP_BUILD,
# PEER_AHC, PEER_URLSESSION, HAWSER_LOAD, ...), with defaults
#   ROUNDS [5]  DURATION [5]  URL_PATH [/json]  CONNS ["1 64"]  CLIENTS ["wrk curl session ahc urlsession"]
#   (+ afn when AFN_LOAD is set and CLIENTS is not given)
#
# >>> AFNetworking-layer client slot: AFN_LOAD is the command of the client built on the `Hawser`
#     layer (HTTPSessionManager.get with the JSON response serializer), run as
#     `$AFN_LOAD -c N -d SECONDS URL`, last line `RESULT requests=N errors=E seconds=S ...`
#     (Benchmarks/Sources/PeerSupport prints it; reuse parsePeerOptions/peerReport).
#     It appears as "AFN-layer" in both tables. <<<
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

export ROUNDS="${ROUNDS:-5}"
export DURATION="${DURATION:-5}"
export URL_PATH="${URL_PATH:-/json}"
export CONNS="${CONNS:-1 64}"
if [[ -z "${CLIENTS:-}" ]]; then
    CLIENTS="wrk curl session ahc urlsession"
    if [[ -n "${AFN_LOAD:-}" ]]; then CLIENTS="wrk curl session afn ahc urlsession"; fi
fi
export CLIENTS
export OUT="${OUT:-$(mktemp -d /tmp/hawser-peers.XXXXXX)}"

"$here/compare.sh"

awk -F'\t' -v connlist="$CONNS" '
function median(key, col,   n, i, j, t, a) {
    n = cnt[key]
    for (i = 1; i <= n; i++) a[i] = val[key, col, i]
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function ratio(x, y) { return y > 0 ? sprintf("%.2f", x / y) : "-" }
function name(c) {
    return c == "session" ? "Session" : c == "hawser" ? "hawser-raw" : c == "session-loop" ? "Sess-loop" : c == "session-inst" ? "Sess-inst" : \
           c == "afn" ? "AFN-layer" : c == "afn-loop" ? "AFN-loop" : c == "afn-inst" ? "AFN-inst" : c == "ahc" ? "AHC" : c == "ahc-async" ? "AHC-async" : c == "urlsession" ? "URLSession" : \
           c == "curl" ? "libcurl" : c
}
NR > 1 {
    key = $2 SUBSEP $3
    if (!(key in cnt)) { nk++ }
    i = ++cnt[key]
    val[key, "rps", i] = $7; val[key, "rpc", i] = $9; val[key, "rss", i] = $10
}
END {
    nours = split("session hawser session-loop session-inst afn afn-loop afn-inst", ours, " ")
    npeer = split("ahc ahc-async urlsession", peer, " ")
    printf "\nHawser vs the peers (ratios of medians; >1 = Hawser better in req/s and req/cpu-s; RSS ratio <1 = Hawser smaller)\n"
    printf "%-5s %-11s %-11s %10s %10s %10s %10s %12s %13s %9s %9s %11s\n", "conns", "hawser", "peer", "req/s", "peer req/s", "req/cpu-s", "peer", "req/s ratio", "cpu-eff ratio", "RSS MiB", "peer MiB", "RSS ratio"
    nc = split(connlist, cs, " ")
    for (ci = 1; ci <= nc; ci++) {
        c = cs[ci]
        for (o = 1; o <= nours; o++) {
            a = c SUBSEP ours[o]; if (!(a in cnt)) continue
            for (p = 1; p <= npeer; p++) {
                b = c SUBSEP peer[p]; if (!(b in cnt)) continue
                ra = median(a, "rps"); rb = median(b, "rps"); ca = median(a, "rpc"); cb = median(b, "rpc")
                ma = median(a, "rss") / 1024; mb = median(b, "rss") / 1024
                printf "%-5s %-11s %-11s %10.0f %10.0f %10.0f %10.0f %12s %13s %9.1f %9.1f %11s\n", "c" c, name(ours[o]), name(peer[p]),
                    ra, rb, ca, cb, ratio(ra, rb), ratio(ca, cb), ma, mb, ratio(ma, mb)
            }
        }
    }
}' "$OUT/results.tsv" | tee "$OUT/peers.txt"
