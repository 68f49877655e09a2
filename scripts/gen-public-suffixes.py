#!/usr/bin/env python3
"""Generate Sources/HawserCookies/PublicSuffixData.swift from the Public Suffix List.

    scripts/gen-public-suffixes.py [LIST] [-o OUTPUT] [--version TEXT]
    scripts/gen-public-suffixes.py [LIST] --names     names to check a lookup with, to stdout

LIST defaults to /usr/share/publicsuffix/public_suffix_list.dat (Debian's `publicsuffix`
package; https://publicsuffix.org/list/public_suffix_list.dat is the same file). The list's
version is its `// VERSION:` line when it has one, else the Debian package's version when
dpkg owns the file, else --version (required then). Python 3 standard library only; the
`idna` module, when installed, cross-checks the A-labels.

Every rule of both sections (ICANN and PRIVATE) goes in, as it is in the list (U-labels) and,
when it has a non-ASCII label, also in A-label form (`xn--` + RFC 3492 Punycode of each
non-ASCII label): hosts reach the cookie jar as URLs spell them, which can be either.

The output is a label trie in two string literals (compiled as static read-only bytes: no
code, no start-up work, fast to compile):

- `labels`: every distinct label once, laid end to end in UTF-8; a label that occurs inside
  another label's bytes (or at the seam of two) is not stored again.
- `records`: one fixed-width record per trie node, in breadth-first order so that the children
  of one node are adjacent, sorted by their label's bytes (binary search), and the children
  of node i start right after those of node i-1. Each record is 7 characters from '0'...'o'
  (6 bits each, the character minus 0x30), 42 bits, least significant first:
      bits  0-16  offset of the node's label in `labels`
      bits 17-22  length of the label in bytes (1...63)
      bits 23-25  flags: 1 the node is a rule, 2 it is an exception rule (!label...),
                  4 its wildcard child is a rule (*.label...); the lookup takes the
                  node itself as listed then too, as browsers and libpsl do
      bits 26-41  index of the node's first child; its last child is just before the next
                  record's first child (a sentinel record ends the table)
  The first `rootCount` records are the top-level labels.
"""

import argparse
import hashlib
import os
import signal
import subprocess
import sys
import unicodedata

DEFAULT_LIST = "/usr/share/publicsuffix/public_suffix_list.dat"
DEFAULT_OUT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                            "Sources", "HawserCookies", "PublicSuffixData.swift"))

RULE, EXCEPTION, WILDCARD = 1, 2, 4
OFFSET_BITS, LENGTH_BITS, FLAG_BITS, CHILD_BITS = 17, 6, 3, 16
RECORD_CHARS = 7
ALPHABET_BASE = 0x30  # '0'; 64 characters up to 'o': no '"', '#' or newline, so a raw literal holds them


def fail(message):
    sys.stderr.write("gen-public-suffixes: %s\n" % message)
    sys.exit(1)


def read_rules(path):
    """[(rule, section, line number)] in list order; section is 'ICANN' or 'PRIVATE'."""
    rules, section = [], None
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            line = raw.strip()
            if line.startswith("// ===BEGIN ICANN DOMAINS==="):
                section = "ICANN"
            elif line.startswith("// ===BEGIN PRIVATE DOMAINS==="):
                section = "PRIVATE"
            elif line.startswith("// ===END "):
                section = None
            if not line or line.startswith("//"):
                continue
            # "Each line is only read up to the first whitespace."
            rule = unicodedata.normalize("NFC", line.split()[0].lower())
            if section is None:
                fail("%s:%d: rule %r outside the ICANN and PRIVATE sections" % (path, number, rule))
            rules.append((rule, section, number))
    return rules


def a_label(label):
    if label.isascii():
        return label
    return "xn--" + label.encode("punycode").decode("ascii")


def u_label(label):
    if label.startswith("xn--"):
        return label[4:].encode("ascii").decode("punycode")
    return label


def list_version(path, text, override):
    if override:
        return override
    for line in text.splitlines():
        if line.startswith("// VERSION:"):
            commit = [l for l in text.splitlines() if l.startswith("// COMMIT:")]
            return line[len("// VERSION:"):].strip() + (" (commit %s)" % commit[0][len("// COMMIT:"):].strip() if commit else "")
    try:
        owner = subprocess.run(["dpkg-query", "-S", os.path.realpath(path)], capture_output=True, text=True, check=True)
        package = owner.stdout.split(":")[0].strip()
        version = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True, check=True)
        return "%s (Debian package %s %s)" % (version.stdout.split("-")[0], package, version.stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        fail("%s has no '// VERSION:' line and no Debian package owns it: pass --version" % path)


class Node:
    __slots__ = ("label", "flags", "children", "index")

    def __init__(self, label):
        self.label, self.flags, self.children, self.index = label, 0, {}, None


def build_trie(rules):
    root = Node("")
    count = 0

    def add(labels, flag, where):
        node = root
        for label in reversed(labels):
            if not label or "*" in label or "!" in label:
                fail("%s: label %r is empty or has '*' or '!' where the format allows none" % (where, label))
            node = node.children.setdefault(label, Node(label))
        if node.flags & flag:
            return False
        node.flags |= flag
        if node.flags & RULE and node.flags & EXCEPTION:
            fail("%s: %s is both a rule and an exception" % (where, ".".join(labels)))
        return True

    for rule, section, number in rules:
        where = "line %d (%s)" % (number, section)
        if rule.startswith("!"):
            labels, flag = rule[1:].split("."), EXCEPTION
            if len(labels) < 2:
                fail("%s: exception %r has one label" % (where, rule))
        elif rule.startswith("*."):
            labels, flag = rule[2:].split("."), WILDCARD
        else:
            labels, flag = rule.split("."), RULE
        forms = {tuple(labels), tuple(a_label(l) for l in labels), tuple(u_label(l) for l in labels)}
        for form in sorted(forms):
            count += add(list(form), flag, where)
    return root, count


def cross_check_idna(rules):
    try:
        import idna  # optional
    except ImportError:
        return "not cross-checked (no idna module)"
    checked = 0
    for rule, _, number in rules:
        name = rule.lstrip("!").removeprefix("*.")
        if name.isascii():
            continue
        ours = ".".join(a_label(l) for l in name.split("."))
        try:
            theirs = idna.encode(name, uts46=False).decode("ascii")
        except idna.IDNAError as e:
            # IDNA 2008 refuses a few labels (e.g. symbols); Punycode of the label is still
            # what a URL parser following UTS #46 transitional=false produces for them.
            sys.stderr.write("note: line %d: idna refuses %r (%s); kept %s\n" % (number, name, e, ours))
            continue
        if ours != theirs:
            fail("line %d: A-label %s differs from idna's %s" % (number, ours, theirs))
        checked += 1
    return "%d cross-checked with idna %s" % (checked, getattr(idna, "__version__", "?"))


def layout(root):
    """Breadth-first order; children sorted by UTF-8 bytes."""
    order, queue = [], [root]
    while queue:
        following = []
        for node in queue:
            kids = sorted(node.children.values(), key=lambda n: n.label.encode("utf-8"))
            for kid in kids:
                kid.index = len(order)
                order.append(kid)
            following.extend(kids)
        queue = following
    return order


def pack_labels(order):
    """Distinct labels end to end, reusing any byte run already present (longest first)."""
    distinct = sorted({n.label.encode("utf-8") for n in order}, key=lambda b: (-len(b), b))
    blob, where = bytearray(), {}
    for label in distinct:
        at = blob.find(label)
        if at < 0:
            overlap = next((k for k in range(min(len(label), len(blob)) - 1, 0, -1) if blob.endswith(label[:k])), 0)
            at = len(blob) - overlap
            blob += label[overlap:]
        where[label] = at
    blob = bytes(blob)
    blob.decode("utf-8")  # the seams keep it valid UTF-8; make sure
    return blob, where


def encode_records(order, root, where):
    first_child, next_child = [], len(root.children)
    for node in order:
        first_child.append(next_child)
        next_child += len(node.children)
    first_child.append(next_child)  # sentinel
    records = []
    for i, node in enumerate(order + [None]):
        if node is None:
            offset = length = flags = 0
        else:
            label = node.label.encode("utf-8")
            offset, length, flags = where[label], len(label), node.flags
        if offset >= 1 << OFFSET_BITS or not (node is None or 0 < length < 1 << LENGTH_BITS) or first_child[i] >= 1 << CHILD_BITS:
            fail("a field outgrew its bits (label offset %d, length %d, child %d): widen the record" % (offset, length, first_child[i]))
        value = offset | length << OFFSET_BITS | flags << (OFFSET_BITS + LENGTH_BITS) \
            | first_child[i] << (OFFSET_BITS + LENGTH_BITS + FLAG_BITS)
        records.append("".join(chr(ALPHABET_BASE + (value >> (6 * k) & 63)) for k in range(RECORD_CHARS)))
    return "".join(records)


def raw_literal_lines(text, width):
    """Lines of a multi-line raw string literal (#\"\"\" ... \"\"\"#), joined by line continuations."""
    if "#" in text or '"' in text or "\n" in text or "\r" in text:
        fail("data would end the string literal")
    return "\\#\n".join(text[i:i + width] for i in range(0, len(text), width))


def print_names(rules):
    seen = set()
    for rule, _, _ in rules:
        name = rule.lstrip("!").removeprefix("*.")
        labels = name.split(".")
        for form in (labels, [a_label(l) for l in labels], [u_label(l) for l in labels]):
            base = ".".join(form)
            for n in (base, "x." + base, "y.x." + base):
                if n not in seen:
                    seen.add(n)
                    print(n)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("list", nargs="?", default=DEFAULT_LIST)
    p.add_argument("-o", "--output", default=DEFAULT_OUT)
    p.add_argument("--version", help="the list's version, when the file does not say it")
    p.add_argument("--names", action="store_true",
                   help="print names to check a lookup with instead (every rule in each spelling, "
                        "and one and two labels under it): Benchmarks' psl-bench --check compares with libpsl")
    args = p.parse_args()
    if args.names:
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quietly, into `head`
        print_names(read_rules(args.list))
        return

    with open(args.list, "rb") as f:
        raw = f.read()
    text = raw.decode("utf-8")
    rules = read_rules(args.list)
    sections = {s: sum(1 for _, t, _ in rules if t == s) for s in ("ICANN", "PRIVATE")}
    kinds = {
        "wildcard": sum(1 for r, _, _ in rules if r.startswith("*.")),
        "exception": sum(1 for r, _, _ in rules if r.startswith("!")),
        "non-ASCII": sum(1 for r, _, _ in rules if not r.isascii()),
    }
    idna_note = cross_check_idna(rules)
    root, entries = build_trie(rules)
    order = layout(root)
    blob, where = pack_labels(order)
    edges = encode_records(order, root, where)

    out = []
    w = out.append
    w("// GENERATED by scripts/gen-public-suffixes.py: do not edit; regenerate instead.")
    w("//")
    w("// Source: the Public Suffix List (https://publicsuffix.org/list/public_suffix_list.dat),")
    w("// version %s," % list_version(args.list, text, args.version))
    w("// SHA-256 %s." % hashlib.sha256(raw).hexdigest())
    w("// Its data is subject to the terms of the Mozilla Public License, v. 2.0; you can obtain")
    w("// a copy of the MPL at https://mozilla.org/MPL/2.0/.")
    w("//")
    w("// Regenerate (Debian: apt-get install publicsuffix), from the repository root:")
    w("//     scripts/gen-public-suffixes.py [path/to/public_suffix_list.dat]")
    w("//")
    w("// %d rules: %d ICANN, %d PRIVATE; %d wildcard, %d exception, %d with non-ASCII labels" %
      (len(rules), sections["ICANN"], sections["PRIVATE"], kinds["wildcard"], kinds["exception"], kinds["non-ASCII"]))
    w("// A-labels: %s." % idna_note)
    w("// %d entries with both forms of the IDN rules; a trie of %d nodes (%d top-level labels)," % (entries, len(order), len(root.children)))
    w("// %d label bytes, %d record bytes. Encoding: see the generator's docstring." % (len(blob), len(edges)))
    w("")
    w("extension PublicSuffixes {")
    w("    /// Trie nodes at the top level: records 0..<rootCount.")
    w("    static let rootCount = %d" % len(root.children))
    w("    /// Trie nodes; the record at `nodeCount` is the sentinel.")
    w("    static let nodeCount = %d" % len(order))
    w("    /// Rules, exception rules and wildcard rules in the trie (each a flag of one node).")
    w("    static let entryCount = %d" % entries)
    w("    /// Characters per record.")
    w("    static let recordSize = %d" % RECORD_CHARS)
    w("")
    w("    /// Every distinct label, UTF-8, end to end (%d bytes)." % len(blob))
    w('    static let labels: StaticString = #"""')
    w(raw_literal_lines(blob.decode("utf-8"), 100))
    w('"""#')
    w("")
    w("    /// One %d-character record per trie node, breadth first, plus a sentinel." % RECORD_CHARS)
    w('    static let records: StaticString = #"""')
    w(raw_literal_lines(edges, 14 * RECORD_CHARS))
    w('"""#')
    w("}")
    w("")
    with open(args.output, "w", encoding="utf-8") as f:
        f.write("\n".join(out))
    print("wrote %s: %d rules, %d nodes, %d label bytes, %d record bytes" % (args.output, len(rules), len(order), len(blob), len(edges)))


if __name__ == "__main__":
    main()
