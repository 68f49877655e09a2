#!/usr/bin/env python3
"""List every public or open declaration in Sources/ that has no doc comment; exit 1 if any.

    scripts/check-doc-comments.py                 # builds the symbol graphs, then checks
    scripts/check-doc-comments.py --graphs DIR    # checks symbol graphs already in DIR

It reads the compiler's symbol graphs (`swift package dump-symbol-graph`), not the source
text, so it sees what a user of the package sees: members of a `public extension`, enum cases,
protocol requirements, and declarations spread over several lines. A declaration counts as
documented when it has a `///` (or `/** */`) comment, or when it implements a protocol
requirement whose own documentation the compiler carries over (`description`, `init(from:)`,
`==`, and the requirements of Hawser's own protocols): DocC shows that inherited text.

Checked: every library module (HawserHTTP1, the engine's modules HawserPosix … HawserCore,
Hawser, HawserFoundation, HawserXML, HawserHTTPTypes, HawserOpenAPI, HawserTracing, HawserMetrics) and
HawserTestServer,
which is a product too (the Benchmarks package uses it).
Not checked: CHawser (C shims, no Swift API), the `hawser` executable (it has no importable
API) and the Fuzz targets.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys

MODULES = ["HawserHTTP1", "HawserPosix", "HawserTLS", "HawserBase", "HawserCoding", "HawserCookies", "HawserAuth",
           "HawserCache", "HawserProxy", "HawserReachability", "HawserCore", "Hawser", "HawserFoundation", "HawserXML",
           "HawserHTTPTypes", "HawserOpenAPI", "HawserTracing", "HawserMetrics", "HawserTestServer"]


def dump_symbol_graphs(root):
    # The package's test modules always fail to extract (SwiftPM asks for them but never
    # builds them for this command), so the exit status says nothing: start from an empty
    # output directory and require a fresh graph for every module checked.
    bin_path = subprocess.run(["swift", "build", "--show-bin-path"], cwd=root,
                              capture_output=True, text=True, check=True).stdout.strip()
    graphs = os.path.join(os.path.dirname(bin_path), "symbolgraph")
    shutil.rmtree(graphs, ignore_errors=True)
    out = subprocess.run(
        ["swift", "package", "dump-symbol-graph", "--skip-synthesized-members",
         "--minimum-access-level", "public"],
        cwd=root, capture_output=True, text=True)
    text = out.stdout + out.stderr
    failed = [m for m in MODULES if f"symbol graph for '{m}'" in text]
    if failed or not os.path.isdir(graphs):
        sys.stderr.write(text)
        sys.exit(f"check-doc-comments: no symbol graph for {', '.join(failed) or 'any module'}")
    return graphs


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", help="a directory of *.symbols.json (skips the build)")
    args = ap.parse_args()
    graphs = args.graphs or dump_symbol_graphs(root)

    missing = set()
    checked = 0
    for module in MODULES:
        files = glob.glob(os.path.join(graphs, module + ".symbols.json"))
        files += glob.glob(os.path.join(graphs, module + "@*.symbols.json"))
        if not files:
            sys.exit(f"check-doc-comments: no symbol graph for {module} in {graphs}")
        prefix = os.path.join(root, "Sources", module) + os.sep
        for path in files:
            with open(path) as f:
                graph = json.load(f)
            for symbol in graph["symbols"]:
                uri = symbol.get("location", {}).get("uri", "")
                file = uri[len("file://"):] if uri.startswith("file://") else uri
                if not file.startswith(prefix):
                    continue  # compiler-synthesized, or declared elsewhere
                checked += 1
                lines = symbol.get("docComment", {}).get("lines", [])
                if any(line.get("text", "").strip() for line in lines):
                    continue
                line = symbol["location"]["position"]["line"] + 1
                kind = symbol["kind"]["displayName"].lower()
                name = ".".join(symbol["pathComponents"])
                missing.add((os.path.relpath(file, root), line, kind, name))

    for file, line, kind, name in sorted(missing):
        print(f"{file}:{line}: {kind} {name} has no doc comment")
    if missing:
        print(f"check-doc-comments: {len(missing)} of {checked} public declarations have no doc comment")
        return 1
    print(f"check-doc-comments: all {checked} public declarations are documented")
    return 0


if __name__ == "__main__":
    sys.exit(main())
