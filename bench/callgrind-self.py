#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# callgrind-self.py PROFILE CALLS [x]: self instructions per call by function (inlined code
# merged into its function) from a bench_short profile (build/vm/suite/share/out/callgrind/
# <variant>.<case>.1, CALLS = 10 in short mode); with a third argument also the inclusive
# cost of each caller -> callee edge.  The profiles behind docs/performance.md.
import sys
from callgrind_profile import Profile
p = Profile(sys.argv[1]); n = int(sys.argv[2]) if len(sys.argv) > 2 else 10
print("total/call", sum(p.selfc.values()) / n)
for k, v in p.selfc.most_common(60): print("%7.1f %s" % (v / n, k[:150]))
if len(sys.argv) > 3:
    print("--- calls")
    for (a, b), v in sorted(p.incl.items(), key=lambda x: -x[1])[:80]: print("%7.1f %s -> %s" % (v / n, a[:70], b[:80]))
