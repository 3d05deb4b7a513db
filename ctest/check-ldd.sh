#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# With LD_LIBRARY_PATH pointing at our build, every program of rdmacm-utils
# must resolve librdmacm.so.1 to ours with no undefined symbol (ldd -r).
set -u
libdir=${1:?directory holding our librdmacm.so.1}
status=0; n=0
for p in rping ucmatose udaddy mckey cmtime rdma_client rdma_server rdma_xclient \
         rdma_xserver rstream riostream rcopy udpong; do
    exe=$(command -v $p) || { echo "check-ldd: $p not installed (apt-get install rdmacm-utils)" >&2; status=1; continue; }
    out=$(LD_LIBRARY_PATH=$libdir ldd -r "$exe" 2>&1)
    if ! echo "$out" | grep -q "librdmacm.so.1 => $libdir/librdmacm.so.1"; then
        echo "check-ldd: $p does not load $libdir/librdmacm.so.1" >&2; status=1
    fi
    if echo "$out" | grep -q "undefined symbol"; then
        echo "check-ldd: $p:" >&2; echo "$out" | grep "undefined symbol" >&2; status=1
    fi
    n=$((n+1))
done
[ $status = 0 ] && echo "check-ldd: $n rdmacm-utils programs resolve librdmacm.so.1 to ours, no undefined symbols"
exit $status
