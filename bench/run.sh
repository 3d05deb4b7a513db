#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# make bench: boots the VM test bed with only the benchmark test, runs
# ctest/vm/bench_resolve once with upstream's librdmacm and once with ours
# in the same boot, and prints each case as a ratio (ours / upstream; below
# 1 means ours is faster).  Absolute times under qemu TCG are inflated; only
# the ratios mean anything.  The table is also written to build/bench.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
export VM_BENCH=1 VM_ONLY="bench_resolve"
export RDMACM_VM_WORK=${RDMACM_VM_WORK:-$PWD/build/vm-bench}
vm/testbed.sh host
vm/testbed.sh image
vm/testbed.sh run > "$RDMACM_VM_WORK.log" 2>&1 || true    # the verdict is not ours to give here
out=$RDMACM_VM_WORK/suite/share/out
for v in upstream ours; do
    [ -s "$out/bench_resolve.$v.out" ] || { echo "bench: no output from the $v run (see $RDMACM_VM_WORK.log)" >&2; exit 1; }
done
awk '
    FNR == 1 { v = (FILENAME ~ /upstream/) ? "upstream" : "ours" }
    $1 == "BENCH" { val[v, $2] = $3; if (!($2 in seen)) { seen[$2] = 1; order[n++] = $2 } }
    END {
        printf "%-26s %14s %14s %12s\n", "case", "upstream ns", "ours ns", "ours/upstream"
        for (i = 0; i < n; i++) {
            c = order[i]; u = val["upstream", c]; o = val["ours", c]
            r = (u ~ /^[0-9]+$/ && o ~ /^[0-9]+$/ && u > 0) ? sprintf("%.2f", o / u) : "-"
            printf "%-26s %14s %14s %12s\n", c, u, o, r
        }
    }' "$out/bench_resolve.upstream.out" "$out/bench_resolve.ours.out" | tee build/bench.txt
