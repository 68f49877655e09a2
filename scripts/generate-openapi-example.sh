#!/usr/bin/env bash
# Regenerates the OpenAPI example client (Tests/HawserOpenAPIExample/Generated) from
# Tests/HawserOpenAPIExample/openapi.yaml with swift-openapi-generator's command-line tool.
#
# The generator is not a dependency of the Hawser package (no plugin runs in a build): this
# script builds it in a scratch package under .build-openapi-generator/ (git-ignored) and the
# generated Swift is committed. Run it after editing openapi.yaml or the generator config.
set -euo pipefail
cd "$(dirname "$0")/.."
GENERATOR_VERSION=1.14.3
scratch=.build-openapi-generator
example=Tests/HawserOpenAPIExample
mkdir -p "$scratch/Sources/Placeholder"
cat > "$scratch/Package.swift" <<MANIFEST
// swift-tools-version: 6.1
// Scratch package: only here to build swift-openapi-generator's CLI (scripts/generate-openapi-example.sh).
import PackageDescription
let package = Package(
    name: "openapi-generator-scratch",
    dependencies: [.package(url: "https://github.com/apple/swift-openapi-generator", exact: "$GENERATOR_VERSION")],
    targets: [.target(name: "Placeholder", path: "Sources/Placeholder")]
)
MANIFEST
echo "// empty" > "$scratch/Sources/Placeholder/Placeholder.swift"
swift build --package-path "$scratch" --product swift-openapi-generator 2>&1 | tail -1
generator="$(swift build --package-path "$scratch" --product swift-openapi-generator --show-bin-path)/swift-openapi-generator"
[ "${1:-}" = "--build-only" ] && exit 0
rm -rf "$example/Generated"
mkdir -p "$example/Generated"
"$generator" generate \
  --config "$example/openapi-generator-config.yaml" \
  --output-directory "$example/Generated" \
  "$example/openapi.yaml"
ls -l "$example/Generated"
