#!/usr/bin/env python3
"""Prints the library's module graph as Package.swift declares it, for docs/ARCHITECTURE.md.

  scripts/module-graph.py            a mermaid `graph BT` (each arrow: module -> what it imports)
  scripts/module-graph.py --list     one line per module and its dependencies, bottom up

Library modules only: test, fuzz, tool, example and test-server targets are left out. A
dependency under a trait is labelled with the trait; package products are shown by name.
Reads Package.swift as text (no `swift` needed); CI does not run it.
"""
import pathlib
import re
import sys

LEFT_OUT = re.compile(r"^(Fuzz|HawserTest|HawserTool|HawserExecutorProbe|HawserOpenAPIExample)|Tests$")


def calls(text, kinds):
    """(kind, argument text) of every `.kind(` call, with balanced parentheses."""
    for m in re.finditer(r"\.(%s)\(" % "|".join(kinds), text):
        depth, i = 1, m.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        yield m.group(1), text[m.end() : i - 1]


def dependencies(args):
    m = re.search(r"dependencies:\s*\[", args)
    if not m:
        return []
    depth, i = 1, m.end()
    while depth:
        depth += {"[": 1, "]": -1}.get(args[i], 0)
        i += 1
    body = args[m.end() : i - 1]
    out = []
    for kind, inner in calls(body, ["target", "product"]):
        name = re.search(r'name:\s*"([^"]+)"', inner).group(1)
        trait = re.search(r'traits:\s*\["([^"]+)"', inner)
        out.append((name, trait.group(1) if trait else None, kind == "product"))
    body = re.sub(r"\.(target|product)\((?:[^()]|\([^()]*(?:\([^()]*\))?[^()]*\))*\)", "", body)
    out += [(n, None, False) for n in re.findall(r'"([^"]+)"', body)]
    return out


def main():
    text = (pathlib.Path(__file__).resolve().parent.parent / "Package.swift").read_text()
    text = re.sub(r"//[^\n]*", "", text)
    graph = {}
    for _, args in calls(text, ["target", "systemLibrary"]):
        name = re.match(r'\s*name:\s*"([^"]+)"', args)
        if name and not LEFT_OUT.search(name.group(1)):
            graph[name.group(1)] = dependencies(args)
    order, seen = [], set()

    def visit(n):
        if n in seen or n not in graph:
            return
        seen.add(n)
        for d, _, _ in graph[n]:
            visit(d)
        order.append(n)

    for n in graph:
        visit(n)
    if "--list" in sys.argv:
        for n in order:
            deps = [d + (" (trait %s)" % t if t else "") for d, t, _ in graph[n]]
            print("%-19s %s" % (n, ", ".join(deps) or "(nothing)"))
        return
    print("graph BT")
    for n in order:
        for d, trait, product in graph[n]:
            target = '%s(["%s"])' % (d, d) if product else d
            print("    %s -->%s %s" % (n, "|%s|" % trait if trait else "", target))


if __name__ == "__main__":
    main()
