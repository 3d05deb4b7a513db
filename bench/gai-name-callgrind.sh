#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# gai-name-callgrind.sh - instructions per rdma_getaddrinfo + rdma_freeaddrinfo of a name found
# in /etc/hosts (make bench's gai_hosts_name), whole process (libc included), counted by
# valgrind's callgrind on this host, for our library and upstream's: bench/gai_callgrind.c,
# given the name, runs once with 1 call and once with 1+CALLS calls; the difference divided by
# CALLS is one call without start-up. Each run sees a private /etc/hosts ("bench-peer.test" at 192.0.2.2),
# nsswitch.conf ("hosts: files") and resolv.conf, bind-mounted in a user and mount namespace
# (unshare -rm), as make bench's bench_etc. Upstream's library wants an RDMA device before it
# translates anything: on a host without one, bench/gai_fakedev.c (preloaded for it only)
# lists a placeholder device that a name lookup never opens.
#
#   bench/gai-name-callgrind.sh [LIBDIR [UPSTREAM_LIBDIR]]
#       (defaults build/lib and the directory of the system's librdmacm.so.1; CALLS=300)
set -euo pipefail
cd "$(dirname "$0")/.."
LIB=$(cd "${1:-build/lib}" && pwd); CALLS=${CALLS:-300}; CC=${CC:-cc}
UP=${2:-$(dirname "$(ldconfig -p | awk '$1 == "librdmacm.so.1" && /x86-64/ { print $NF; exit }')")}
[ -e "$LIB/librdmacm.so.1" ] || { echo "gai-name-callgrind: $LIB/librdmacm.so.1 missing (make)"; exit 1; }
[ -e "$UP/librdmacm.so.1" ] || { echo "gai-name-callgrind: no upstream librdmacm.so.1 in '$UP'"; exit 1; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
$CC -O2 -Wall -Werror -Iinclude -o "$T/gai_callgrind" bench/gai_callgrind.c -L"$LIB" -lrdmacm
$CC -O2 -Wall -Werror -shared -fPIC -o "$T/gai_fakedev.so" bench/gai_fakedev.c
mkdir "$T/etc"
printf '127.0.0.1 localhost\n::1 localhost\n192.0.2.2 bench-peer.test\n' > "$T/etc/hosts"
printf 'hosts: files\n' > "$T/etc/nsswitch.conf"
printf 'nameserver 127.0.0.1\noptions timeout:5 attempts:1\n' > "$T/etc/resolv.conf"
# total DIR PRELOAD N PAD: the whole process's instructions for N calls, with an environment
# variable of PAD bytes (the process's layout: see below)
total(){ unshare -rm bash -c 'for f in hosts nsswitch.conf resolv.conf; do mount --bind "$0/etc/$f" /etc/$f || exit 97; done
    exec env GAI_PAD="$4" LD_LIBRARY_PATH="$1" ${2:+LD_PRELOAD=$2} valgrind -q --tool=callgrind --callgrind-out-file="$0/cg.$3" "$0/gai_callgrind" "$3" bench-peer.test' \
    "$T" "$1" "$2" "$3" "$4" >/dev/null || { echo "gai-name-callgrind: the run of $3 calls with $1 failed" >&2; return 1; }
  callgrind_annotate "$T/cg.$3" | awk '/PROGRAM TOTALS/ && !n++ { gsub(",", "", $1); print $1 }'; }
per_call(){ local a b; a=$(total "$1" "$2" 1 "$3") && b=$(total "$1" "$2" $((CALLS + 1)) "$3") || exit 1; echo $(( (b - a) / CALLS )); }
# A library's count moves with where the process's stack and heap start (upstream's by up to
# 66 instructions with the environment a few bytes longer, ours has not been seen to): each
# library is counted under 16 environments, 0 to 15 bytes longer, and summed up as the median
# and the range.
summary(){ sort -n | awk '{ v[NR] = $1 } END { printf "%d (%d-%d)", v[int((NR + 1) / 2)], v[1], v[NR] }'; }
pads=(); p=; for _ in $(seq 16); do pads+=("$p"); p+=x; done
o=$(for p in "${pads[@]}"; do per_call "$LIB" "" "$p" || exit 1; done | summary) || exit 1
u=$(for p in "${pads[@]}"; do per_call "$UP" "$T/gai_fakedev.so" "$p" || exit 1; done | summary) || exit 1
echo "rdma_getaddrinfo (name from /etc/hosts) + rdma_freeaddrinfo, instructions per call, whole process,"
echo "median (range) over 16 environment sizes:"
echo "  ours     $o ($LIB)"
echo "  upstream $u ($UP)"
awk -v o="${o%% *}" -v u="${u%% *}" 'BEGIN { printf "  ratio    %.3f (medians)\n", o / u }'
