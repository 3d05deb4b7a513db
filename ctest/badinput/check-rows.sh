#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# check-rows.sh - every export in abi/rdmacm.symbols has at least one case in the bad-input
# matrix (ctest/vm/badinput.c, its K(function, ...) rows), and the matrix names no function
# that is not exported. A new export without a row fails here (make check-badinput-rows).
set -euo pipefail
cd "$(dirname "$0")/../.."
exports=$(grep -v '^#' abi/rdmacm.symbols | sed -n 's/^\([A-Za-z_0-9]*\)@.*/\1/p' | sort -u)
rows=$(sed -n 's/^K(\([A-Za-z_0-9]*\),.*/\1/p' ctest/vm/badinput.c | sort -u)
missing=$(comm -23 <(echo "$exports") <(echo "$rows"))
extra=$(comm -13 <(echo "$exports") <(echo "$rows"))
[ -z "$missing" ] || { echo "bad-input matrix: no case for these exports:"; echo "$missing"; exit 1; }
[ -z "$extra" ] || { echo "bad-input matrix: cases for functions that are not exported:"; echo "$extra"; exit 1; }
echo "bad-input matrix: all $(echo "$exports" | wc -l) exports have cases ($(grep -c '^K(' ctest/vm/badinput.c) cases)"
