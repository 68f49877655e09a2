#!/usr/bin/env python3
"""Generate Sources/HawserBase/IDNAData.swift: the tables of UTS #46 processing (IDNA).

    scripts/gen-idna-tables.py [--mapping IdnaMappingTable.txt] [--ucd DIR] [-o OUTPUT]

Three tables, each a list of code point ranges sorted by their first code point (a range
lasts until the next one starts), as fixed-width records in a string literal of characters
'0'...'o' (6 bits each, the character minus 0x30, least significant first): compiled as static
read-only bytes, no code and no start-up work, and looked up by binary search.

- `mappingRecords`, 8 characters (48 bits) a record, from UTS #46's IdnaMappingTable.txt:
      bits  0-20  first code point of the range
      bits 21-22  status: 0 valid (deviation included: Hawser does nontransitional
                  processing), 1 mapped, 2 ignored, 3 disallowed
      bits 23-41  offset of the mapping in `mappings` (mapped only)
      bits 42-47  length of the mapping in UTF-8 bytes (mapped only)
  `mappings` holds every distinct mapping once, UTF-8, end to end. The older statuses
  disallowed_STD3_valid and disallowed_STD3_mapped (UTS #46 before version 16) are read as
  valid and mapped: Hawser checks the ASCII result (forbidden domain code points) itself.
- `bidiRecords`, 5 characters (30 bits): bits 0-20 first code point, 21-24 the Bidi_Class
  (0 L, 1 R, 2 AL, 3 AN, 4 EN, 5 ES, 6 CS, 7 ET, 8 ON, 9 BN, 10 NSM, 11 any other), from the
  UCD's extracted/DerivedBidiClass.txt with its @missing defaults (RFC 5893's Bidi rule).
- `joiningRecords`, 4 characters (24 bits): bits 0-20 first code point, 21-23 the
  Joining_Type (0 U, 1 D, 2 R, 3 L, 4 T, 5 C), from extracted/DerivedJoiningType.txt
  (RFC 5892's CONTEXTJ rule for U+200C).

IdnaMappingTable.txt: --mapping PATH (https://www.unicode.org/Public/idna/), else the one in
--ucd's idna/ folder when there is one, else the table of the Python `idna` package
(idna.uts46data, which is IdnaMappingTable.txt in tuples: its docstring names the version).
--ucd defaults to /usr/share/unicode (Debian: apt-get install unicode-data).
Python 3 standard library otherwise.
"""

import argparse
import hashlib
import os
import re
import sys

STATUS = {"valid": 0, "deviation": 0, "mapped": 1, "ignored": 2, "disallowed": 3,
          "disallowed_STD3_valid": 0, "disallowed_STD3_mapped": 1}
BIDI = {"L": 0, "R": 1, "AL": 2, "AN": 3, "EN": 4, "ES": 5, "CS": 6, "ET": 7, "ON": 8, "BN": 9, "NSM": 10}
BIDI_LONG = {"Left_To_Right": "L", "Right_To_Left": "R", "Arabic_Letter": "AL", "Arabic_Number": "AN",
             "European_Number": "EN", "European_Separator": "ES", "Common_Separator": "CS",
             "European_Terminator": "ET", "Other_Neutral": "ON", "Boundary_Neutral": "BN",
             "Nonspacing_Mark": "NSM"}
JOINING = {"U": 0, "D": 1, "R": 2, "L": 3, "T": 4, "C": 5}
JOINING_LONG = {"Non_Joining": "U", "Dual_Joining": "D", "Right_Joining": "R", "Left_Joining": "L",
                "Transparent": "T", "Join_Causing": "C"}


def parse_range(text):
    text = text.strip()
    if ".." in text:
        a, b = text.split("..")
        return int(a, 16), int(b, 16)
    return int(text, 16), int(text, 16)


def mapping_from_file(path):
    """[(first, status, mapping str or None)] from IdnaMappingTable.txt, and its version."""
    rows, version = [], None
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"#\s*IdnaMappingTable-(\S+)\.txt", line)
            if m:
                version = m.group(1)
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            fields = [x.strip() for x in line.split(";")]
            first, last = parse_range(fields[0])
            status = STATUS[fields[1]]
            mapping = None
            if status == 1:
                mapping = "".join(chr(int(h, 16)) for h in fields[2].split()) if len(fields) > 2 else ""
            rows.append((first, last, status, mapping))
    return rows, version or "unknown"


def mapping_from_idna_package():
    import idna
    import idna.uts46data as u
    data = u.uts46data
    version = getattr(u, "__version__", "unknown")
    names = {"V": "valid", "D": "deviation", "M": "mapped", "I": "ignored", "X": "disallowed",
             "3": "disallowed_STD3_valid"}
    rows = []
    for i, row in enumerate(data):
        first = row[0]
        last = data[i + 1][0] - 1 if i + 1 < len(data) else 0x10FFFF
        code = row[1]
        if code == "3":
            code = "M" if len(row) > 2 else "V"
        status = STATUS[names[code]]
        rows.append((first, last, status, row[2] if status == 1 else None))
    return rows, "%s (Python idna %s, idna.uts46data)" % (version, idna.__version__)


def derived(path, long_names, short_values, default):
    """Ranges of a property from an extracted/Derived*.txt file, @missing lines applied first."""
    values = {}
    missing = []
    version = "unknown"
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"#\s*Derived\w+-(\S+)\.txt", line)
            if m:
                version = m.group(1)
            m = re.match(r"#\s*@missing:\s*([0-9A-F.]+)\s*;\s*(\w+)", line)
            if m:
                missing.append((parse_range(m.group(1)), long_names.get(m.group(2), m.group(2))))
                continue
            body = line.split("#", 1)[0].strip()
            if not body:
                continue
            r, v = [x.strip() for x in body.split(";")[:2]]
            values.setdefault("explicit", []).append((parse_range(r), v))
    table = [short_values.get(default)] * 0x110000
    for (a, b), v in missing:
        code = short_values.get(v, short_values.get(default) if v in short_values else None)
        for cp in range(a, b + 1):
            table[cp] = short_values.get(v, 11 if short_values is BIDI else 0)
    for (a, b), v in values.get("explicit", []):
        for cp in range(a, b + 1):
            table[cp] = short_values.get(v, 11 if short_values is BIDI else 0)
    return table, version


def ranges(table):
    out = []
    for cp, v in enumerate(table):
        if not out or out[-1][1] != v:
            out.append((cp, v))
    return out


def encode(value, chars):
    s = []
    for _ in range(chars):
        s.append(chr(0x30 + (value & 63)))
        value >>= 6
    assert value == 0
    return "".join(s)


def swift_raw(text):
    """Text for a raw string literal: ASCII other than letters and digits as \\#u{..} escapes."""
    return "".join(c if c.isalnum() or ord(c) > 0x7F else "\\#u{%X}" % ord(c) for c in text)


def literal(name, doc, text, per_line):
    lines = ["    /// %s" % doc, "    static let %s: StaticString = #\"\"\"" % name]
    chunks = [text[i:i + per_line] for i in range(0, len(text), per_line)]
    for i, chunk in enumerate(chunks):
        # A raw string's escaped newline (a backslash, '#', end of line) joins the lines.
        lines.append("        " + chunk + ("\\#" if i + 1 < len(chunks) else ""))
    lines.append("        \"\"\"#")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mapping")
    p.add_argument("--ucd", default="/usr/share/unicode")
    p.add_argument("-o", "--output", default="Sources/HawserBase/IDNAData.swift")
    a = p.parse_args()

    mapping_path = a.mapping or os.path.join(a.ucd, "idna", "IdnaMappingTable.txt")
    if os.path.exists(mapping_path):
        rows, mversion = mapping_from_file(mapping_path)
        msource = "IdnaMappingTable.txt %s" % mversion
        with open(mapping_path, "rb") as f:
            msource += ", SHA-256 " + hashlib.sha256(f.read()).hexdigest()
    else:
        rows, mversion = mapping_from_idna_package()
        msource = "IdnaMappingTable.txt " + mversion

    # Merge neighbours with the same status (and mapping, for mapped ones: the same string for
    # every code point of a range).
    merged = []
    for first, last, status, mapping in rows:
        if merged and merged[-1][1] == status and merged[-1][2] == mapping and status != 1:
            continue
        merged.append((first, status, mapping))
    blob = ""
    offsets = {}
    for _, status, mapping in merged:
        if status == 1 and mapping not in offsets:
            found = blob.encode("utf-8").find(mapping.encode("utf-8")) if mapping else 0
            if found >= 0 and mapping:
                offsets[mapping] = found
            else:
                offsets[mapping] = len(blob.encode("utf-8"))
                blob += mapping
    blob_bytes = blob.encode("utf-8")
    assert len(blob_bytes) < (1 << 19)
    records = []
    for first, status, mapping in merged:
        off, n = 0, 0
        if status == 1:
            mb = mapping.encode("utf-8")
            off, n = offsets[mapping], len(mb)
            assert blob_bytes[off:off + n] == mb and n < 64
        records.append(encode(first | status << 21 | off << 23 | n << 42, 8))
    assert '"""' not in blob and "\n" not in blob and "\r" not in blob

    bidi_table, bversion = derived(os.path.join(a.ucd, "extracted", "DerivedBidiClass.txt"), BIDI_LONG, BIDI, "L")
    bidi = ranges(bidi_table)
    join_table, jversion = derived(os.path.join(a.ucd, "extracted", "DerivedJoiningType.txt"), JOINING_LONG, JOINING, "U")
    joining = ranges(join_table)

    out = []
    out.append("// GENERATED by scripts/gen-idna-tables.py: do not edit; regenerate instead.")
    out.append("//")
    out.append("// Sources: UTS #46 %s;" % msource)
    out.append("// the Unicode Character Database's extracted/DerivedBidiClass.txt %s and" % bversion)
    out.append("// extracted/DerivedJoiningType.txt %s (Debian: apt-get install unicode-data)." % jversion)
    out.append("// Unicode data files are under the Unicode License v3 (https://www.unicode.org/license.txt).")
    out.append("//")
    out.append("// Regenerate, from the repository root: scripts/gen-idna-tables.py [--mapping FILE] [--ucd DIR]")
    out.append("//")
    out.append("// %d mapping ranges (%d bytes of mappings), %d Bidi_Class ranges, %d Joining_Type ranges." % (
        len(merged), len(blob_bytes), len(bidi), len(joining)))
    out.append("// Encoding: see the generator's docstring.")
    out.append("")
    out.append("extension IDNA {")
    out.append("    /// Records in ``mappingRecords`` (8 characters each).")
    out.append("    static let mappingCount = %d" % len(merged))
    out.append("    /// Records in ``bidiRecords`` (5 characters each).")
    out.append("    static let bidiCount = %d" % len(bidi))
    out.append("    /// Records in ``joiningRecords`` (4 characters each).")
    out.append("    static let joiningCount = %d" % len(joining))
    out.append("")
    out.append(literal("mappingRecords", "UTS #46 status and mapping by range.", "".join(records), 96))
    out.append("")
    # The mappings, one line per 40 code points or so (no newline inside the data: joined).
    out.append("    /// Every distinct mapping, UTF-8, end to end (%d bytes)." % len(blob_bytes))
    out.append("    static let mappings: StaticString = #\"\"\"")
    out.append("        " + swift_raw(blob))
    out.append("        \"\"\"#")
    out.append("")
    out.append(literal("bidiRecords", "Bidi_Class by range.", "".join(encode(cp | v << 21, 5) for cp, v in bidi), 100))
    out.append("")
    out.append(literal("joiningRecords", "Joining_Type by range.", "".join(encode(cp | v << 21, 4) for cp, v in joining), 96))
    out.append("}")
    with open(a.output, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")
    print("wrote %s: %d mapping ranges, %d mapping bytes, %d bidi ranges, %d joining ranges" % (
        a.output, len(merged), len(blob_bytes), len(bidi), len(joining)), file=sys.stderr)


if __name__ == "__main__":
    main()
