#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# check-frames.sh LIB - a thread cancelled inside a call that librspreload.so forwards ends
# with a forced unwind through the export's frame, which must hold no destructor and no
# catch_unwind (RFC 2945: crossing such a frame is undefined behaviour).  A function with
# either has an LSDA (exception table) in its unwind information; so every exported function,
# and every function of the library an export calls directly other than the panic boundary
# (whose catch_unwind returns before the forwarded call is made), must have none.
# Needs binutils (nm, objdump, readelf).
set -euo pipefail
lib=${1:?usage: check-frames.sh path/to/librspreload.so}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# FDEs: start end has-LSDA(0/1), from the unwind tables
readelf --debug-dump=frames "$lib" | awk '
  /^[0-9a-f]+ [0-9a-f]+ [0-9a-f]+ CIE/ { cie = $1; fde = 0; next }
  /^[0-9a-f]+ [0-9a-f]+ [0-9a-f]+ FDE/ {
    if (fde) print lo, hi, lsda
    match($0, /cie=[0-9a-f]+/); c = substr($0, RSTART + 4, RLENGTH - 4)
    match($0, /pc=[0-9a-f]+\.\.[0-9a-f]+/); split(substr($0, RSTART + 3, RLENGTH - 3), pc, /\.\./)
    lo = pc[1]; hi = pc[2]; lsda = 0; fde = 1; cur = c; next
  }
  /^ +Augmentation: / { aug[cie] = $2; next }
  /^ +Augmentation data: / { if (fde && index(aug[cur], "L")) lsda = 1; next }
  END { if (fde) print lo, hi, lsda }' > "$tmp/fdes"
[ -s "$tmp/fdes" ] || { echo "check-frames: no unwind tables read from $lib"; exit 1; }

lsda_of() { # address (hex) -> 0/1, or "none" without an FDE
  awk -v a="$1" 'function h(x) { while (length(x) < 16) x = "0" x; return x } # (no strtonum in mawk)
    h($1) <= h(a) && h(a) < h($2) { print $3; found = 1; exit }
    END { if (!found) print "none" }' "$tmp/fdes"
}

nm -D --defined-only "$lib" | awk '$2 == "T" { print $1, $3 }' > "$tmp/exports"
objdump -d --no-show-raw-insn "$lib" > "$tmp/dis"

bad=0 n=0 callees=0
while read -r addr name; do
  n=$((n + 1))
  l=$(lsda_of "$addr")
  if [ "$l" != 0 ]; then
    echo "check-frames: export $name: unwind information with an LSDA ($l): a forced unwind through it is undefined behaviour"
    bad=$((bad + 1))
  fi
  # direct calls from the export's body to functions of the library (not through the PLT)
  awk -v f="<$name>:" '$2 == f { on = 1; next } on && /^$/ { exit }
    on && /call +[0-9a-f]+ </ { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9a-f]+$/ && $(i + 1) ~ /^</) print $i, $(i + 1) }' "$tmp/dis" |
    sort -u > "$tmp/calls"
  while read -r caddr cname; do
    case $cname in
      *@plt*) continue ;;
      # the panic boundary (rspreload::boundary, mangled): catch_unwind by design, never on
      # the stack while the forwarded call runs
      *9rspreload8boundary*) continue ;;
    esac
    callees=$((callees + 1))
    l=$(lsda_of "$caddr")
    if [ "$l" != 0 ]; then
      echo "check-frames: export $name calls $cname, which has an LSDA ($l): a forced unwind through it is undefined behaviour"
      bad=$((bad + 1))
    fi
  done < "$tmp/calls"
done < "$tmp/exports"
[ "$n" -gt 30 ] || { echo "check-frames: only $n exports found in $lib"; exit 1; }
[ $bad = 0 ] || exit 1
echo "check-frames: $n exports and the $callees call(s) they make into the library have no LSDA: a forced unwind may pass them"
