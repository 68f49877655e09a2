#!/usr/bin/env bash
# Hawser builds on Linux only. On any other platform a build must stop with the one error that
# says so (from CHawser.h), not with a wall of missing <sys/epoll.h> and undeclared symbols.
# This checks it without a Mac: the C shim and a Swift import of CHawser, type-checked for an
# arm64 macOS target with this toolchain's clang and swiftc (no SDK needed: on that target the
# headers include nothing).
set -euo pipefail
cd "$(dirname "$0")/.."
target=arm64-apple-macos14
want='Hawser runs on Linux only'
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() { echo "check-linux-only: $1"; sed 's/^/    /' "$2"; exit 1; }

# The C target, as SwiftPM compiles it.
if clang --target=$target -fsyntax-only -D_GNU_SOURCE -ISources/CHawser/include Sources/CHawser/shims.c >"$tmp/c.log" 2>&1; then
  fail "shims.c compiled for $target: the Linux-only #error is gone" "$tmp/c.log"
fi
[ "$(grep -c 'error:' "$tmp/c.log")" = 1 ] && grep -q "error: \"$want" "$tmp/c.log" \
  || fail "compiling shims.c for $target should give exactly one error, the Linux-only one; it gave:" "$tmp/c.log"

# A Swift module importing CHawser (HawserCore does), with SwiftPM's umbrella-header module map.
printf 'module CHawser {\n    umbrella header "%s"\n    export *\n}\n' "$PWD/Sources/CHawser/include/CHawser.h" >"$tmp/module.modulemap"
printf 'import CHawser\n' >"$tmp/a.swift"
if swiftc -frontend -typecheck -parse-stdlib -target $target -module-cache-path "$tmp/mc" \
     -Xcc -fmodule-map-file="$tmp/module.modulemap" "$tmp/a.swift" Sources/HawserCore/Version.swift >"$tmp/s.log" 2>&1; then
  fail "a Swift import of CHawser type-checked for $target" "$tmp/s.log"
fi
others=$(grep -E '(error|warning):' "$tmp/s.log" | grep -v '^ ' | grep -v "$want" | grep -v "could not build .*module 'CHawser'" || true)
grep -q "$want" "$tmp/s.log" && [ -z "$others" ] \
  || fail "importing CHawser for $target should report only the Linux-only error; it reported:" "$tmp/s.log"
echo "check-linux-only: a build for $target stops with the one Linux-only error"
