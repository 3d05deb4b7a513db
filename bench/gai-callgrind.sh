#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# gai-callgrind.sh - instructions per numeric rdma_getaddrinfo + rdma_freeaddrinfo call,
# counted by valgrind's callgrind on this host (no device needed): the program
# bench/gai_callgrind.c runs once with 1 call and once with 1+CALLS calls; the difference
# divided by CALLS is the cost of one call without start-up (library load, first-use init).
#
#   bench/gai-callgrind.sh [LIBDIR]      (default build/lib; CALLS=1000)
set -euo pipefail
cd "$(dirname "$0")/.."
LIB=$(cd "${1:-build/lib}" && pwd); CALLS=${CALLS:-1000}; CC=${CC:-cc}
[ -e "$LIB/librdmacm.so.1" ] || { echo "gai-callgrind: $LIB/librdmacm.so.1 missing (make)"; exit 1; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
$CC -O2 -Wall -Werror -Iinclude -o "$T/gai_callgrind" bench/gai_callgrind.c -L"$LIB" -lrdmacm
total(){ LD_LIBRARY_PATH=$LIB valgrind -q --tool=callgrind --callgrind-out-file="$T/cg.$1" "$T/gai_callgrind" "$1" >/dev/null
         callgrind_annotate "$T/cg.$1" | awk '/PROGRAM TOTALS/ && !n++ { gsub(",", "", $1); print $1 }'; }
a=$(total 1); b=$(total $((CALLS + 1)))
echo "rdma_getaddrinfo (numeric) + rdma_freeaddrinfo: $(( (b - a) / CALLS )) instructions per call ($LIB)"
