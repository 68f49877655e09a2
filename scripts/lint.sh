#!/usr/bin/env bash
# Style: swift-format with the repository's .swift-format (the swift-server configuration, with
# one rule off: OnlyOneTrailingClosureArgument, because the test helpers take a configuration
# closure and then the test's body as a trailing closure, which reads as the block it is).
#   scripts/lint.sh         fails on any finding (CI runs this)
#   scripts/lint.sh --fix   formats the files in place first
# The OpenAPI example client under Tests/HawserOpenAPIExample/Generated is the generator's output
# (scripts/generate-openapi-example.sh) and is left as generated.
set -euo pipefail
cd "$(dirname "$0")/.."
files=()
while IFS= read -r -d '' f; do files+=("$f"); done < <(
  git ls-files -z --cached --others --exclude-standard -- '*.swift' ':!:Tests/HawserOpenAPIExample/Generated/*')
if [ "${1:-}" = "--fix" ]; then
  swift format format --in-place --parallel "${files[@]}"
fi
swift format lint --strict --parallel "${files[@]}"
echo "lint: ${#files[@]} files clean"
