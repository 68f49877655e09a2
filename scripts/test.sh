#!/usr/bin/env bash
# The whole test suite: parser, engine, integration against the test server, scripted
# broken peers and nginx (started by the tests on a free loopback port).
# On a machine without nginx it installs Debian's nginx-light first (needs root).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! [ -x /usr/sbin/nginx ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "test.sh: installing nginx-light (the integration tests start their own nginx)"
    (apt-get install -y -qq nginx-light >/dev/null 2>&1) || { apt-get update -qq && apt-get install -y -qq nginx-light >/dev/null; }
  else
    echo "test.sh: nginx is missing; run: sudo apt-get install -y nginx-light" >&2
    exit 1
  fi
fi
# Serial: the network suites count this process's descriptors before and after each test,
# which only means something when no other test is opening sockets at the same time.
exec swift test --no-parallel "$@"
