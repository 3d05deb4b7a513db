#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# callgrind-self.py PROFILE CALLS [x]: self instructions per call by function (inlined code
# merged into its function) from a bench_short profile (build/vm/suite/share/out/callgrind/
# <variant>.<case>.1, CALLS = 10 in short mode); with a third argument also the inclusive
# cost of each caller -> callee edge.  The profiles behind docs/performance.md (issue 10).
import sys, re, collections
f=sys.argv[1]; n=int(sys.argv[2]) if len(sys.argv)>2 else 10
names={}; cur=None; skip=False; selfc=collections.Counter(); incl=collections.Counter()
def nm(v):
    m=re.match(r'\((\d+)\)\s*(.*)',v)
    if m:
        if m.group(2): names[m.group(1)]=m.group(2)
        return names.get(m.group(1),'?')
    return v
callee=None
for line in open(f):
    line=line.rstrip('\n')
    if line.startswith('fn='): cur=nm(line[3:]); continue
    if line.startswith('cfn='): callee=nm(line[4:]); continue
    if line.startswith(('fl=','fi=','fe=','ob=','cob=','cfi=','cfl=')):
        if line.startswith(('fl=','fi=','fe=','cfi=','cfl=')): nm(line.split('=',1)[1])
        continue
    if line.startswith('calls='): skip=True; continue
    if line and (line[0].isdigit() or line[0] in '+-*'):
        parts=line.split()
        if len(parts)<2: continue
        c=int(parts[1])
        if skip: skip=False; incl[(cur,callee)]+=c; continue
        selfc[cur]+=c
tot=sum(selfc.values())
print("total/call", tot/n)
for k,v in selfc.most_common(60): print("%7.1f %s"%(v/n,k[:150]))
if len(sys.argv)>3:
    print("--- calls")
    for (a,b),v in sorted(incl.items(), key=lambda x:-x[1])[:80]: print("%7.1f %s -> %s"%(v/n,a[:70],b[:80]))
