#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# hot-symbols.py UNITS PROFILE...: the functions of our librdmacm that a callgrind profile of
# the rsocket bench cases (vm/suite.d/bench.sh rs_cg_duplex, bench_cg_rsock) calls at least
# once every 20 units (messages or round trips), most instructions first, as capi/hot.txt
# wants them (demangled, without the ::h<hash> suffix): the link order of librdmacm.so.1
# (scripts/link-order.sh). Several profiles: the union, each function at its best rank.
import sys, re, collections
units = float(sys.argv[1])
best = {}
for f in sys.argv[2:]:
    names, obs = {}, {}
    cur = ob = callee = cob = None
    fob = {}
    selfc, calls = collections.Counter(), collections.Counter()
    skip = False
    def nm(v, d):
        m = re.match(r'\((\d+)\)\s*(.*)', v)
        if m:
            if m.group(2):
                d[m.group(1)] = m.group(2)
            return d.get(m.group(1), '?')
        return v
    for line in open(f):
        line = line.rstrip('\n')
        if line.startswith('ob='): ob = nm(line[3:], obs); continue
        if line.startswith('fn='): cur = nm(line[3:], names); fob[cur] = ob; continue
        if line.startswith('cob='): cob = nm(line[4:], obs); continue
        if line.startswith('cfn='): callee = nm(line[4:], names); fob.setdefault(callee, cob or ob); continue
        if line.startswith(('fl=', 'fi=', 'fe=', 'cfi=', 'cfl=')): continue
        if line.startswith('calls='):
            calls[callee] += int(line[6:].split()[0]); skip = True; continue
        if line and (line[0].isdigit() or line[0] in '+-*'):
            if skip: skip = False; continue
            p = line.split()
            if len(p) >= 2: selfc[cur] += int(p[1])
    hot = [k for k, v in selfc.most_common() if 'librdmacm' in (fob.get(k) or '') and calls[k] / units >= 0.05]
    for i, k in enumerate(hot):
        k = re.sub(r"'\d+$", '', k)   # callgrind's recursion marks
        best[k] = min(best.get(k, i), i)
for k in sorted(best, key=lambda k: best[k]):
    print(k)
