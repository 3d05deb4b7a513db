#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# hot-symbols.py UNITS PROFILE...: the functions of our librdmacm that a callgrind profile of
# the rsocket bench cases (vm/suite.d/bench.sh rs_cg_duplex, bench_cg_rsock) calls at least
# once every 20 units (messages or round trips), most instructions first, as capi/hot.txt
# wants them (demangled, without the ::h<hash> suffix): the link order of librdmacm.so.1
# (scripts/link-order.sh). Several profiles: the union, each function at its best rank.
import sys, re
from callgrind_profile import Profile
units = float(sys.argv[1])
best = {}
for f in sys.argv[2:]:
    p = Profile(f)
    hot = [k for k, v in p.selfc.most_common() if 'librdmacm' in (p.obj.get(k) or '') and p.calls[k] / units >= 0.05]
    for i, k in enumerate(hot):
        k = re.sub(r"'\d+$", '', k)   # callgrind's recursion marks
        best[k] = min(best.get(k, i), i)
for k in sorted(best, key=lambda k: best[k]):
    print(k)
