# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# bench.sh - micro-benchmarks (ctest/vm/bench_resolve.c), only for `make bench` (VM_BENCH=1);
# bench/run.sh turns the two runs (upstream, ours) into ratios.
if [ -n "${BENCH:-}" ] && [ -x /extra/bin/bench_resolve ]; then
  t bench_resolve 600 /extra/bin/bench_resolve
fi
