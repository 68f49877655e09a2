#!/usr/bin/env bash
# Before/after of issue 22 item 5 (body bytes by ownership), one interleaved run.
#   BASE=<main's Benchmarks/.build/release> NEW=<this branch's> ROUNDS=7 run.sh OUTDIR
# Per round, in an order rotated each round: stream-bench --api sequence|delegate (1 GiB) for
# base and new, stream-bench --api file (new: the delegate API writing the file on the loop), and
# hawser-manager-load --download -n 1 (1 GiB) for base and new. nginx (sendfile) on CPU 0, the
# client on CPU 1, as stream-compare.sh's PIN=cross.
set -euo pipefail
here="$(cd "$(dirname "$0")/../../scripts" && pwd)"
out="$1"; mkdir -p "$out"
ROUNDS="${ROUNDS:-7}"
ngx="$out/nginx"
stop_nginx() { "$here/nginx.sh" stop "$ngx" || true; }
trap stop_nginx EXIT
unset NGINX_CPU
export NGINX_SENDFILE=on
port="$("$here/nginx.sh" start "$ngx")"
truncate -s 1G "$ngx/www/bytes/big"
url="http://127.0.0.1:$port/bytes/big"
master="$(cat "$ngx/nginx.pid")"
worker="$(pgrep -P "$master" | head -1)"
taskset -pc 0 "$worker" >/dev/null
echo "# $(date -u +%FT%TZ) $(nproc) CPUs load: $(cut -d' ' -f1-3 /proc/loadavg) rounds $ROUNDS" | tee "$out/header.txt"
runs=(base-sequence base-delegate new-sequence new-delegate new-file base-download new-download)
printf 'round\trun\tmb_per_s\tcpu_s\tpeak_rss_mib\n' > "$out/results.tsv"
for ((r = 1; r <= ROUNDS; r++)); do
    n=${#runs[@]}
    for ((k = 0; k < n; k++)); do
        run="${runs[$(((k + r) % n))]}"
        bin="$BASE"; [[ "$run" == new-* ]] && bin="$NEW"
        log="$out/r$r-$run.out"
        case "$run" in
            *-download)
                taskset -c 1 "$bin/hawser-manager-load" --download -n 1 "$url" > "$log" 2>&1 || echo "failed: $log" >&2
                line="$(grep '^RESULT' "$log" | tail -1)"
                get() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p" <<<"$line"; }
                # cpu per GB (10^9 bytes) -> cpu seconds for the 1 GiB body, to compare with file
                printf '%s\t%s\t%s\t%s\t%s\n' "$r" "$run" "$(get mb_per_s)" "$(get cpu_s)" "$(awk -v k="$(get vmhwm_kb)" 'BEGIN{printf "%.1f", k/1024}')" >> "$out/results.tsv"
                ;;
            *)
                api="${run#*-}"
                taskset -c 1 "$bin/stream-bench" --api "$api" -n 1 "$url" > "$log" 2>&1 || echo "failed: $log" >&2
                line="$(grep '^RESULT' "$log" | tail -1)"
                get() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p" <<<"$line"; }
                printf '%s\t%s\t%s\t%s\t%s\n' "$r" "$run" "$(get mb_per_s)" "$(get cpu_s)" "$(get peak_rss_mib)" >> "$out/results.tsv"
                ;;
        esac
    done
done
awk -F'\t' '
function median(key, col,   n, i, j, t, a) {
    n = cnt[key]
    for (i = 1; i <= n; i++) a[i] = val[key, col, i]
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
NR > 1 { i = ++cnt[$2]; val[$2, 3, i] = $3; val[$2, 4, i] = $4; val[$2, 5, i] = $5 }
END {
    printf "%-16s %10s %8s %10s\n", "run", "MB/s", "CPU s", "peak MiB"
    for (k in cnt) printf "%-16s %10.1f %8.3f %10.1f\n", k, median(k, 3), median(k, 4), median(k, 5)
}' "$out/results.tsv" | tee "$out/summary.txt"
