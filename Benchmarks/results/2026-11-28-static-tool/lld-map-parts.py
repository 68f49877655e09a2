#!/usr/bin/env python3
# Sum an lld -Map file's input sections by part: the archive (libswiftCore.a, ...) or the
# SwiftPM module (the X in X.build/), for the allocated sections (no .bss, no debug info).
#   lld-map-parts.py MAP [SECTION...]   (each SECTION also broken down by part)
# The map: relink with `-Xlinker -Map=FILE` added to the link command of
# .build-static/release.yaml.
import re, sys, collections
out = collections.Counter(); bysec = collections.defaultdict(collections.Counter); cur=None
for l in open(sys.argv[1], errors='replace'):
    p = l.rstrip('\n')
    m = re.match(r'^\s*([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+(\d+)\s(.*)$', p)
    if not m: continue
    rest = m.group(5); sz = int(m.group(3), 16)
    if not rest.startswith(' '):
        cur = rest.strip(); continue
    r = rest.strip()
    if r.startswith('/') or r.startswith('<internal>'):
        if cur in ('.bss', '.tbss', '.comment') or cur.startswith('.debug') or cur == '.symtab' or cur=='.strtab' or cur=='.shstrtab': continue
        f = r.split(':(')[0]
        mm = re.search(r'/lib(\w+)\.a\(', f) or re.search(r'/([A-Za-z0-9_]+)\.build/', f)
        c = (('lib'+mm.group(1)+'.a') if '.a(' in f else mm.group(1)) if mm else f.split('/')[-1]
        if r.startswith('<internal>'): c = '<linker:' + cur + '>'
        out[c] += sz; bysec[cur][c] += sz
for c, s in out.most_common(45): print(f'{s:>10}  {c}')
print(f'{sum(out.values()):>10}  total')
for sec in sys.argv[2:]:
    print('--', sec, sum(bysec[sec].values()))
    for c, s in bysec[sec].most_common(15): print(f'   {s:>10}  {c}')
