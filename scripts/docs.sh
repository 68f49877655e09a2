#!/usr/bin/env bash
# Builds the DocC documentation of every library target, failing on any warning (a broken
# symbol link, an undocumented parameter, a topic that names nothing).
#
#   scripts/docs.sh                    # every library target
#   scripts/docs.sh Hawser HawserCore  # some of them
#
# Archives land in .build/plugins/Swift-DocC/outputs/<Target>.doccarchive. To browse one:
#   swift package --disable-sandbox preview-documentation --target Hawser
# Each target is documented on its own, so a doc comment or article links only to symbols of
# its own module with ``double backticks``; another module's symbols go in `code voice`.
set -euo pipefail
cd "$(dirname "$0")/.."
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(HawserHTTP1 HawserPosix HawserTLS HawserBase HawserCoding HawserCookies HawserAuth HawserCache
                                     HawserProxy HawserReachability HawserCore Hawser HawserFoundation HawserXML HawserHTTPTypes HawserOpenAPI
                                     HawserTracing HawserMetrics)
for t in "${targets[@]}"; do
  log=$(mktemp)
  if swift package generate-documentation --target "$t" --warnings-as-errors >"$log" 2>&1; then
    echo "docs: $t: no warnings"
    rm -f "$log"
  else
    grep -v '^\[[0-9]*/[0-9]*\]' "$log" | tail -60
    rm -f "$log"
    echo "docs: $t: DocC reported warnings or errors (above)"
    exit 1
  fi
done
