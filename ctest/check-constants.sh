#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# check-constants.sh [UPSTREAM_INCLUDE_DIR ...]: the value of every public constant of the four
# public headers upstream installs (rdma/rdma_cma.h, rdma/rsocket.h, rdma/rdma_verbs.h,
# infiniband/ib.h), with upstream's headers and with ours.
#
# The names are read from upstream's headers themselves (the preprocessor's output with -dD and
# line markers): every enumerator of every enum declared in those four files and every
# object-like #define with a value. A generated C program prints "NAME value" for each; it is
# compiled once against upstream's headers and once against ours (include/), and the two
# outputs must be identical. A constant missing from ours fails to compile; a changed value
# shows in the diff. Constants only ours defines are listed (newer than the installed upstream,
# or our own), and compared too when the other side has them.
# Default upstream include dir: the system's (/usr/include, librdmacm-dev).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build}; CC=${CC:-cc}
W=$B/ctest/constants; mkdir -p "$W"
HDRS="rdma/rdma_cma.h rdma/rsocket.h rdma/rdma_verbs.h infiniband/ib.h"
UPINC=("$@"); [ ${#UPINC[@]} -gt 0 ] || UPINC=(/usr/include)
incflags(){ local d; for d in "$@"; do printf -- '-I%s ' "$d"; done; }
for h in $HDRS; do
  found=; for d in "${UPINC[@]}"; do [ -e "$d/$h" ] && found=1; done
  [ -n "$found" ] || { echo "check-constants: upstream header $h not found in ${UPINC[*]} (install librdmacm-dev)"; exit 1; }
done

# names NAME-SOURCE-INCLUDE-FLAGS...: prints the constants declared in the four headers
names(){
  printf '#include <%s>\n' $HDRS | $CC -E -dD "$@" -x c - | awk -v hdrs="$HDRS" '
    BEGIN { n = split(hdrs, H, " ") }
    /^# [0-9]+ "/ { f = $3; gsub(/"/, "", f); mine = 0
                    for (i = 1; i <= n; i++) if (substr(f, length(f) - length(H[i]) + 1) == H[i] && substr(f, length(f) - length(H[i]), 1) == "/") mine = 1
                    next }
    !mine { next }
    /^#define / { if ($2 ~ /^[A-Z][A-Z0-9_]*$/ && NF >= 3) print $2; next }
    /^#/ { next }
    { text = text " " $0 }
    END {
      while (match(text, /enum[ \t]*[A-Za-z0-9_]*[ \t]*\{[^}]*\}/)) {
        body = substr(text, RSTART, RLENGTH); text = substr(text, RSTART + RLENGTH)
        sub(/^[^{]*\{/, "", body); sub(/\}$/, "", body)
        k = split(body, item, ",")
        for (i = 1; i <= k; i++) { e = item[i]; sub(/=.*/, "", e); gsub(/[ \t]/, "", e); if (e != "") print e }
      }
    }' | sort -u
}
names $(incflags "${UPINC[@]}") > "$W/upstream.names"
names -Iinclude > "$W/ours.names"
[ "$(wc -l < "$W/upstream.names")" -gt 50 ] || { echo "check-constants: only $(wc -l < "$W/upstream.names") names read from upstream's headers"; exit 1; }
gen(){ # names file -> C program
  printf '#include <stdio.h>\n'; printf '#include <%s>\n' $HDRS
  printf 'int main(void)\n{\n'
  while read -r n; do printf '\tprintf("%%s %%lld\\n", "%s", (long long)(%s));\n' "$n" "$n"; done < "$1"
  printf '\treturn 0;\n}\n'; }
gen "$W/upstream.names" > "$W/upstream-names.c"
$CC -w -o "$W/up" $(incflags "${UPINC[@]}") "$W/upstream-names.c"
if ! $CC -w -o "$W/ours" -Iinclude "$W/upstream-names.c" 2> "$W/ours.cc.err"; then
  echo "check-constants: upstream's constants do not all compile against our headers:"
  grep -E 'error' "$W/ours.cc.err" | head -20; exit 1; fi
"$W/up" > "$W/up.txt"; "$W/ours" > "$W/ours.txt"
if ! diff -u "$W/up.txt" "$W/ours.txt" > "$W/diff"; then
  echo "check-constants: values differ (- upstream ${UPINC[*]}, + ours):"; grep '^[-+][A-Z]' "$W/diff"; exit 1; fi
extra=$(comm -13 "$W/upstream.names" "$W/ours.names" | tr '\n' ' ')
echo "check-constants: $(wc -l < "$W/up.txt") constants of upstream's ${HDRS// /, } (${UPINC[*]}) have the same values in ours${extra:+; only in ours: $extra}"
