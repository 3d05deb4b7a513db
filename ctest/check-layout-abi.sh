#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# check-layout-abi.sh - <rdma/rdma_cma_abi.h> and <infiniband/acm.h> are bit-identical to
# upstream's: ctest/layout-abi.c prints every structure's size, every field's offset and size and
# every constant's value. Against our headers it must print abi/layout-abi.txt exactly (that file
# was made from rdma-core 65.0's headers, whose output it is); against every copy of upstream's
# headers found here (the system's librdmacm-dev, the VM image's rdma-core, an ibacm acm.h) every
# line it prints must be a line of abi/layout-abi.txt (an older upstream has fewer structures:
# the newer ones are compiled only when its header has them), and it must print at least the
# structures every upstream since rdma-core 17 has.
# Both headers also compile as C++.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build}; CC=${CC:-cc}; CXX=${CXX:-c++}
W=$B/ctest/layout-abi; mkdir -p "$W"
exp=abi/layout-abi.txt
$CC -Wall -Wextra -Werror -Iinclude -o "$W/ours" ctest/layout-abi.c
"$W/ours" | diff -u "$exp" - || { echo "check-layout-abi: our headers differ from $exp" >&2; exit 1; }
printf '#include <rdma/rdma_cma_abi.h>\n#include <infiniband/acm.h>\n' |
    $CXX -x c++ -Wall -Wextra -Werror -fsyntax-only -Iinclude -
n=0
for d in /usr/include ${RDMACM_VM_CACHE:-/var/cache/rdmacm-rs-vm}/*/upstream-abi/dev/usr/include; do
    [ -e "$d/rdma/rdma_cma_abi.h" ] || continue
    inc=(); [ "$d" = /usr/include ] || inc=(-I"$d")
    $CC -Wall -Wextra -Werror "${inc[@]}" -o "$W/up" ctest/layout-abi.c
    "$W/up" > "$W/up.txt"
    extra=$(grep -vxFf "$exp" "$W/up.txt" || true)
    [ -z "$extra" ] || { echo "check-layout-abi: upstream's headers in $d print lines that ours do not:" >&2; echo "$extra" >&2; exit 1; }
    [ "$(grep -c 'ucma_abi_event_resp' "$W/up.txt")" -ge 8 ] || { echo "check-layout-abi: too little output against $d" >&2; exit 1; }
    echo "check-layout-abi: upstream's headers in $d: $(wc -l < "$W/up.txt") lines, all ours$(grep -q '^struct acm_msg' "$W/up.txt" && echo ' (with acm.h)')"
    n=$((n+1))
done
[ $n -gt 0 ] || { echo "check-layout-abi: no upstream rdma_cma_abi.h found (install librdmacm-dev)" >&2; exit 1; }
echo "check-layout-abi: our rdma_cma_abi.h and acm.h print $exp ($(wc -l < "$exp") lines)"
