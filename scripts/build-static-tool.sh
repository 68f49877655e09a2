#!/usr/bin/env bash
# The statically linked `hawser` (README, "A static tool"): a release build with the Swift
# runtime, FoundationEssentials and Dispatch linked in, stripped into $SCRATCH/hawser
# (default .build-static/hawser), then checked: at most $MAX_BYTES bytes (15,000,000), and the
# only shared libraries it loads are glibc's (libc, libm), libstdc++, libgcc_s, OpenSSL (libssl,
# libcrypto), zlib, and the decoders of the default traits Brotli (libbrotlidec, libbrotlicommon)
# and Zstd (libzstd).
#   scripts/build-static-tool.sh            build, strip, check
#   scripts/build-static-tool.sh --demo     and run its demo (the README's first command)
#   PORTABLE=1 scripts/build-static-tool.sh for glibc 2.35 (Ubuntu 22.04):
#                                           no packed relocations, at most 15 MiB (15,728,640)
# The link flags (what each saves: Benchmarks/results/2026-11-28-static-tool/README.md):
#   lld with packed relative relocations (-z pack-relative-relocs, DT_RELR: the 1 MB of
#   .rela.dyn a position-independent executable of this size carries becomes 9 KB; glibc 2.36
#   or later reads them), no dynamic symbol table of the program's own functions
#   (--no-export-dynamic: nothing loads code from the tool by name), and no call-frame tables
#   (--no-eh-frame-hdr and scripts/static-tool.ld, which says why nothing needs them).
set -euo pipefail
cd "$(dirname "$0")/.."
scratch="${SCRATCH:-.build-static}"
relr=(-Xlinker -z -Xlinker pack-relative-relocs)
max="${MAX_BYTES:-15000000}"
if [ -n "${PORTABLE:-}" ]; then
  relr=()
  max="${MAX_BYTES:-15728640}"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The compile is the same either way (the link flags differ): switching relinks only.
swift build -c release --static-swift-stdlib --product hawser --scratch-path "$scratch" \
  -Xswiftc -use-ld=lld \
  ${relr[@]+"${relr[@]}"} \
  -Xlinker --no-export-dynamic \
  -Xlinker --no-eh-frame-hdr -Xlinker "$PWD/scripts/static-tool.ld" > "$tmp/build.log" 2>&1 ||
  { tail -40 "$tmp/build.log"; echo "the static build failed"; exit 1; }
tail -1 "$tmp/build.log"
bin="$scratch/hawser"
strip -o "$bin" "$scratch/release/hawser"

bytes=$(stat -c %s "$bin")
echo "$bin: $bytes bytes stripped (at most $max)"
if [ "$bytes" -gt "$max" ]; then
  echo "the static hawser is $bytes bytes, over $max"; exit 1
fi

allowed='^(linux-vdso\.so\.1|libc\.so\.6|libm\.so\.6|libstdc\+\+\.so\.6|libgcc_s\.so\.1|libssl\.so\.3|libcrypto\.so\.3|libz\.so\.1|libbrotlidec\.so\.1|libbrotlicommon\.so\.1|libzstd\.so\.1|/lib(64)?/ld-linux[-a-z0-9_.]*\.so\.[0-9]+)$'
libs=$(ldd "$bin" | awk '{print $1}')
echo "loads: $(echo "$libs" | tr '\n' ' ')"
if echo "$libs" | grep -Ev "$allowed" | grep .; then
  echo "the static hawser loads the libraries above (allowed: libc, libm, libstdc++, libgcc_s, OpenSSL, zlib, brotli, zstd)"; exit 1
fi

if [ "${1:-}" = "--demo" ]; then
  "$bin" demo > "$tmp/demo.log" 2>&1 || { cat "$tmp/demo.log"; echo "the static hawser's demo failed"; exit 1; }
  tail -1 "$tmp/demo.log"
fi
