#!/usr/bin/env bash
# Build the C peers (cparsers, curl-multi) with gcc -O2 into Benchmarks/.build-peers/.
# Not built by SwiftPM on purpose: plain gcc -O2, the flags C programs are usually measured
# with, so the peers' numbers are the ones their users would see.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${PEERS_OUT:-$here/../.build-peers}"
mkdir -p "$out"
CC="${CC:-gcc}"
CFLAGS="${CFLAGS:--O2 -g -Wall -Wextra}"
# picohttpparser comes from libh2o-evloop (no header; prototypes are in cparsers.c). Without it
# cparsers is skipped (said on stderr) and curl-multi is still built.
pico_lib=
if ls /usr/lib/*/libh2o-evloop.so >/dev/null 2>&1; then
    pico_lib=-lh2o-evloop
else
    pico_lib=$(ls /usr/lib/*/libh2o-evloop.so.* 2>/dev/null | head -1 || true)
fi
set -x
$CC $CFLAGS -o "$out/curl-multi" "$here/curl-multi.c" $(curl-config --libs 2>/dev/null || echo -lcurl)
if [[ -n "$pico_lib" ]]; then
    $CC $CFLAGS -o "$out/cparsers" "$here/cparsers.c" $pico_lib -lhttp_parser
else
    { set +x; } 2>/dev/null
    echo "peers/build.sh: libh2o-evloop not found (apt-get install libh2o-evloop0.13): cparsers not built" >&2
fi
