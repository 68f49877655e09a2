#!/usr/bin/env python3
# Sum a gold -Map file's kept input sections by part: the archive (libswiftCore.a, ...) or the
# SwiftPM module (the X in X.build/), for the allocated sections (no .bss, no debug info).
#   gold-map-parts.py MAP [SECTION...]   (each SECTION also broken down by part)
import re, sys, collections
path = sys.argv[1]
lines = open(path, errors='replace').read().split('\n')
i = 0
# skip to Memory map (gold) ; lld format differs
start = next((k for k, l in enumerate(lines) if l.startswith('Memory map')), None)
out = collections.Counter(); bysec = collections.defaultdict(collections.Counter)
cur = None
def comp(f):
    m = re.search(r'/lib(\w+)\.a\(', f)
    if m: return 'lib' + m.group(1) + '.a'
    m = re.search(r'/([A-Za-z0-9_]+)\.build/', f)
    if m: return m.group(1)
    return f.split('/')[-1]
if start is not None:
    pend = None
    for l in lines[start:]:
        if l and not l.startswith(' '):
            cur = l.split()[0]; continue
        m = re.match(r'^ (\S+)\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S.*)$', l)
        if m:
            sz = int(m.group(3), 16); f = m.group(4)
        else:
            m1 = re.match(r'^ (\S+)\s*$', l)
            if m1: pend = m1.group(1); continue
            m2 = re.match(r'^\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(/\S.*)$', l)
            if m2 and pend:
                sz = int(m2.group(2), 16); f = m2.group(3); pend = None
            else:
                continue
        if cur in ('.bss', '.tbss', '.comment') or cur.startswith('.debug'): continue
        c = comp(f)
        out[c] += sz; bysec[cur][c] += sz
tot = sum(out.values())
for c, s in out.most_common(40):
    print(f'{s:>10}  {c}')
print(f'{tot:>10}  total attributed (allocated, no .bss)')
if len(sys.argv) > 2:
    for sec in sys.argv[2:]:
        print('--', sec, sum(bysec[sec].values()))
        for c, s in bysec[sec].most_common(12): print(f'   {s:>10}  {c}')
