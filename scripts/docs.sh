#!/usr/bin/env bash
# Builds the DocC documentation of every library target as one combined archive, failing on any
# warning (a broken symbol link, an undocumented parameter, a topic that names nothing).
#
#   scripts/docs.sh                    # every library target, one combined archive
#   scripts/docs.sh Hawser HawserCore  # some of them (with what they link to)
#
# The archive lands in .build/plugins/Swift-DocC/outputs/Hawser.doccarchive, one page per
# module, the engine's beside the manager's. To browse it:
#   swift package --disable-sandbox preview-documentation --target Hawser
# In a doc comment or article, ``double backticks`` link to a symbol of the same module; a
# symbol of a module this one depends on is linked with its module first and a leading slash
# (``/HawserCore/Session``), which resolves because the archive is built combined.
set -euo pipefail
cd "$(dirname "$0")/.."
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(HawserHTTP1 HawserPosix HawserTLS HawserBase HawserCoding HawserCookies HawserAuth HawserCache
                                     HawserProxy HawserReachability HawserCore Hawser HawserFoundation HawserXML HawserHTTPTypes HawserOpenAPI
                                     HawserTracing HawserMetrics HawserTestServer)
args=()
for t in "${targets[@]}"; do args+=(--target "$t"); done
log=$(mktemp)
if swift package generate-documentation --enable-experimental-combined-documentation --warnings-as-errors "${args[@]}" >"$log" 2>&1; then
  echo "docs: ${targets[*]}: no warnings"
  rm -f "$log"
else
  grep -v '^\[[0-9]*/[0-9]*\]' "$log" | tail -60
  rm -f "$log"
  echo "docs: DocC reported warnings or errors (above)"
  exit 1
fi
