#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# Regenerates the public headers with the pinned cbindgen and fails if the
# committed ones differ (run `make header` to update them).
set -eu
CBINDGEN=${CBINDGEN:-cbindgen}
want=$(sed -n 's/^CBINDGEN_VERSION := //p' Makefile)
have=$("$CBINDGEN" --version | awk '{print $2}')
[ "$have" = "$want" ] || { echo "check-header: cbindgen $have, pinned $want" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
status=0
for pair in cbindgen.toml:include/rdma/rdma_cma.h cbindgen-rsocket.toml:include/rdma/rsocket.h \
            cbindgen-gid.toml:include/infiniband/gid_reachable.h; do
    cfg=${pair%%:*}; hdr=${pair#*:}
    "$CBINDGEN" --quiet --config "$cfg" --crate rdmacm-capi -o "$tmp/out.h"
    if ! diff -u "$hdr" "$tmp/out.h"; then
        echo "check-header: $hdr is stale; run 'make header'" >&2; status=1
    fi
done
# The generated prototypes must be exactly our exports: an `extern "C"`
# import block in src/ (libibverbs, the C shim) needs `/// cbindgen:ignore`.
grep -hoE '^[a-z_0-9 ]+[ *]+([a-z_0-9]+)\(' include/rdma/rdma_cma.h include/rdma/rsocket.h \
    include/infiniband/gid_reachable.h | sed -E 's/.*[ *]([a-z_0-9]+)\($/\1/' |
    grep -v '^rdma_get_local_addr$\|^rdma_get_peer_addr$' | sort > "$tmp/decl"
grep -v '^#' abi/rdmacm.symbols | sed '/^$/d; s/@@.*//' | sort > "$tmp/syms"
if ! diff -u "$tmp/syms" "$tmp/decl"; then
    echo "check-header: declared functions (+) differ from the exports (-)" >&2; status=1
fi
[ $status = 0 ] && echo "check-header: headers match cbindgen $have output and declare exactly the exports"
exit $status
