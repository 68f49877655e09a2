#!/usr/bin/env bash
# The whole test suite: parser, engine, TLS, integration against the test server, scripted
# broken peers, nginx, httpbin, tinyproxy and Dante (each started by the tests on a free
# loopback port), and reachability in a network namespace the tests create.
# On a machine without those servers it installs Debian's packages first (needs root).
set -euo pipefail
cd "$(dirname "$0")/.."
# package → a file it installs
need=(
  "nginx-light:/usr/sbin/nginx"
  "python3-httpbin:/usr/lib/python3/dist-packages/httpbin/__init__.py"
  "tinyproxy:/usr/bin/tinyproxy"
  "dante-server:/usr/sbin/danted"
  "iproute2:/usr/sbin/ip"
  "curl:/usr/bin/curl"
  # Not servers: the default build's br and zstd decoders (traits Brotli and Zstd).
  "libbrotli-dev:/usr/include/brotli/decode.h"
  "libzstd-dev:/usr/include/zstd.h"
)
missing=()
for entry in "${need[@]}"; do
  [ -e "${entry#*:}" ] || missing+=("${entry%%:*}")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "test.sh: installing ${missing[*]} (the tests start their own servers)"
    export DEBIAN_FRONTEND=noninteractive
    (apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1) || { apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null; }
    # Debian starts these as services on install; the tests run their own instances.
    for svc in tinyproxy danted nginx; do
      (command -v systemctl >/dev/null && systemctl stop "$svc" 2>/dev/null) || true
    done
  else
    echo "test.sh: missing ${missing[*]}; run: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi
# Serial: the network suites count this process's descriptors before and after each test,
# which only means something when no other test is opening sockets at the same time.
# The import check fails the build when a module imports one it does not declare (the module
# graph stays one-way: Package.swift).
exec swift test --no-parallel --explicit-target-dependency-import-check error "$@"
