#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# check-link-order.sh [LIB]: the functions capi/hot.txt names lie side by side in the text of
# librdmacm.so.1 as `make lib` built it (capi/build.rs, scripts/link-order.sh): fails when fewer
# than MIN of them are found (the list has gone stale against the code) or when their span is
# more than their sizes plus alignment (the order was not applied). Prints the span in pages.
set -eu
cd "$(dirname "$0")/.."
lib=${1:-build/lib/librdmacm.so.1}
MIN=40
order=$(mktemp); trap 'rm -f "$order"' EXIT
scripts/link-order.sh "$lib" capi/hot.txt > "$order"
nm --defined-only -S "$lib" | awk -v min=$MIN '
  function hex(h,   i, v) { v = 0; h = tolower(h); for (i = 1; i <= length(h); i++) v = v * 16 + index("0123456789abcdef", substr(h, i, 1)) - 1; return v }
  FILENAME == ARGV[1] { want[$1] = 1; next }
  NF == 4 && ($4 in want) && !($4 in seen) { seen[$4] = 1; a = hex($1); s = hex($2)
    n++; sum += s + 64; if (n == 1 || a < lo) lo = a; if (a + s > hi) hi = a + s }
  END {
    if (n < min) { printf "check-link-order: only %d of the functions capi/hot.txt names are in the library (want %d): regenerate it (bench/hot-symbols.py)\n", n, min; exit 1 }
    printf "check-link-order: %d hot functions, %d bytes from 0x%x, %d pages (%d bytes of code)\n", n, hi - lo, lo, int((hi - 1) / 4096) - int(lo / 4096) + 1, sum - 64 * n
    if (hi - lo > sum) { printf "check-link-order: they are spread over %d bytes for %d of code and alignment: the link order was not applied\n", hi - lo, sum; exit 1 }
  }' "$order" -
