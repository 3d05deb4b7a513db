#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# callgrind-lines.py PROFILE CALLS OBJECT [TOP] [--instr LIB]: self instructions per call by
# source line, inside the objects whose path contains OBJECT (e.g. librdmacm), most first, with
# the files' totals before them: where inlined code costs, which callgrind-self.py merges into
# its function. --instr LIB (a profile taken with --dump-instr=yes: bench/ab.sh -i, or
# BENCH_CG_INSTR=1): per instruction instead, each shown with its disassembly from LIB (the same
# build as the profiled one, e.g. a copy of build/lib/librdmacm.so.1 made before the run).
import re, subprocess, sys, collections
from callgrind_profile import name

args = [a for a in sys.argv[1:] if a != '--instr']
lib = None
if '--instr' in sys.argv:
    i = sys.argv.index('--instr'); lib = sys.argv[i + 1]; args.remove(lib)
path, n, want = args[0], int(args[1]), args[2]
top = int(args[3]) if len(args) > 3 else 60
tabs = {'ob': {}, 'fl': {}, 'fn': {}}

def pos(tok, last):
    if tok == '*':
        return last
    if tok[0] in '+-':
        return last + int(tok, 16 if tok[1:].startswith('0x') else 10)
    return int(tok, 16 if tok.startswith('0x') else 10)

npos = 1; ob = fl = None; last = [0, 0]; skip = False
line_cost, file_cost, instr_cost = collections.Counter(), collections.Counter(), collections.Counter()
for raw in open(path):
    raw = raw.rstrip('\n')
    if raw.startswith('positions:'):
        npos = len(raw.split()) - 1
        last = [0] * npos
        continue
    k, eq, v = raw.partition('=')
    if eq and k in ('ob', 'cob'):
        x = name(v, tabs['ob'])
        if k == 'ob':
            ob = x
        continue
    if eq and k in ('fl', 'fi', 'fe', 'cfi', 'cfl'):
        x = name(v, tabs['fl'])
        if k != 'cfi' and k != 'cfl':
            fl = x
        continue
    if eq and k in ('fn', 'cfn'):
        name(v, tabs['fn'])
        continue
    if eq and k == 'calls':
        skip = True
        continue
    if eq or not raw or not (raw[0].isdigit() or raw[0] in '+-*'):
        continue
    parts = raw.split()
    if len(parts) < npos + 1:
        continue
    last = [pos(parts[i], last[i]) for i in range(npos)]
    if skip:
        skip = False
        continue
    if ob and want in ob:
        c = int(parts[npos])
        line_cost[(fl, last[-1])] += c
        file_cost[fl] += c
        if npos == 2:
            instr_cost[last[0]] += c

print("total %.1f" % (sum(file_cost.values()) / n))
for f, c in file_cost.most_common(25):
    print("%8.1f %s" % (c / n, f))
print('---')
if lib and instr_cost:
    asm = {}
    for l in subprocess.run(['objdump', '-d', '--no-show-raw-insn', '-C', lib], capture_output=True, text=True).stdout.splitlines():
        m = re.match(r'\s*([0-9a-f]+):\s*(.*)', l)
        if m:
            asm[int(m.group(1), 16)] = m.group(2)
    for a, c in instr_cost.most_common(top):
        print("%8.1f %8x %s" % (c / n, a, asm.get(a, '?')[:110]))
else:
    for (f, l), c in line_cost.most_common(top):
        print("%8.1f %s:%d" % (c / n, f, l))
