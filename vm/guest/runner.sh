#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# runner.sh - runs in the guest: environment info, then vm/suite.sh and vm/suite.d/*.sh.
[ -f /extra/config.sh ] && . /extra/config.sh
. /extra/vm/guest/lib.sh
: > "$RES/results.txt"
info(){ echo "INFO $*" >> "$RES/results.txt"; echo "@@INFO $*"; }
info kernel "$(uname -r)"
info rdma-core "$(dpkg-query -W -f '${Version}' librdmacm1t64)"
info variants "$(_opts; _variants | tr '\n' ' ')"
info devices "$(rdma link show 2>&1 | awk '{printf "%s(%s) ", $2, $NF}')"
for v in $(_opts --preload; _variants); do
  info "librdmacm[$v]" "$(env $(venv $v) ldd /usr/bin/rping 2>&1 | awk '/librdmacm/{for(i=1;i<=NF;i++) if ($i ~ /^\//) {print $i; exit}}')"
done
cd /extra/vm
. ./suite.sh
for f in ./suite.d/*.sh; do [ -e "$f" ] && . "$f"; done
echo "END" >> "$RES/results.txt"; sync
