#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# link-order.sh SO HOTLIST: prints, in HOTLIST's order, the symbol names in SO of the functions
# HOTLIST names (demangled, without Rust's ::h<hash> suffix; one per line, '#' comments), for
# lld's --symbol-ordering-file. `make lib` links librdmacm.so.1 once, runs this on it and links
# again with the result (capi/build.rs, RDMACM_LINK_ORDER): the functions every rsend and rrecv
# runs then lie next to each other, on a few pages instead of dozens (capi/hot.txt says why).
# A name HOTLIST has and SO does not (code since changed) is skipped; nm demangles (binutils).
set -eu
so=$1 list=$2
t=$(mktemp -d); trap 'rm -rf "$t"' EXIT
nm --defined-only "$so" | awk '$2 ~ /^[tTwW]$/ { print $1, $3 }' > "$t/raw"
nm -C --defined-only "$so" | awk '$2 ~ /^[tTwW]$/ { a = $1; $1 = ""; $2 = ""; sub(/^ +/, ""); sub(/::h[0-9a-f]+$/, ""); print a "\t" $0 }' > "$t/dem"
awk -F '\t' '
  FILENAME == ARGV[1] { if ($0 !~ /^#/ && $0 != "" && !($0 in rank)) rank[$0] = ++n; next }
  FILENAME == ARGV[2] { if ($2 in rank) { r = rank[$2]; if (!(($1) in at) || r < at[$1]) at[$1] = r }; next }
  { split($0, f, " "); if (f[1] in at) { print at[f[1]] "\t" f[2] } }
' "$list" "$t/dem" "$t/raw" | sort -n -s -k1,1 | cut -f2
