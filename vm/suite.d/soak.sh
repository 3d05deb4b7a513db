# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# soak.sh - ctest/vm/soak.c runs connect/transfer/disconnect cycles (an
# rdma_cm connection with QPs and an rsocket stream per cycle, both ends in one process over
# rxe0) and samples open descriptors, RSS and threads at equal intervals; after the first
# sample (warm-up) descriptors and threads must be no higher at the last sample (a count above
# the baseline at a middle sample is printed) and RSS at most 2048 kB above it at every one.
#   soak_short   every run: 40 s, 4 samples, both libraries (not compared: cycle counts and
#                sizes differ between the libraries; each must hold its own baseline)
#   soak_long    `make soak` only (VM_BENCH=soak, flagged bench in tests.txt): ours 600 s with a
#                sample per minute; upstream's run is a 60 s reference (SOAK_UPSTREAM_SECS)
t soak_short 420 /extra/bin/soak 40 4
if [[ ${BENCH:-} == *soak* ]]; then
  t soak_long 1200 bash -c 'if [ "$RDMACM_VARIANT" = upstream ]; then exec /extra/bin/soak '"${SOAK_UPSTREAM_SECS:-60}"' 6; fi
    exec /extra/bin/soak 600 10'
fi
