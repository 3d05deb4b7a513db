# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# bench.sh - micro-benchmarks (ctest/vm/bench_resolve.c), only for `make bench` (VM_BENCH=1);
# bench/run.sh turns the two runs (upstream, ours) into ratios.
# (vm/tests.txt marks it "bench": the host expects it only in a VM_BENCH run.)
if [ -n "${BENCH:-}" ]; then
  t bench_resolve 600 /extra/bin/bench_resolve
fi
