#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# check-symbols-upstream.sh OURS [UPSTREAM]: every symbol the system's (upstream's) librdmacm
# exports must be exported by ours with the same version and the same default/non-default
# binding (name@@VER or name@VER). abi/rdmacm.symbols is checked against our build by
# check-symbols.sh; this checks it against upstream's. Extra exports of ours (newer version
# nodes than the installed upstream, RDMACM_RS_*) are listed, not failed.
set -eu
ours=${1:?our library}
up=${2:-$(ldconfig -p | awk '$1 == "librdmacm.so.1" && $NF ~ /^\// {print $NF; exit}')}
[ -n "$up" ] && [ -e "$up" ] || { echo "check-symbols-upstream: no system librdmacm.so.1 (install librdmacm1 / librdmacm1t64)" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
syms(){ objdump -T "$1" | awk '$0 ~ /^[0-9a-f]+ / && $0 !~ /\*UND\*/ {
    ver=$(NF-1); name=$NF
    if (ver == name) next
    if (ver ~ /^\(/) { gsub(/[()]/, "", ver); print name "@" ver } else print name "@@" ver
}' | sort -u; }
syms "$up" > "$tmp/up"; syms "$ours" > "$tmp/ours"
[ -s "$tmp/up" ] || { echo "check-symbols-upstream: no versioned exports read from $up" >&2; exit 1; }
missing=$(comm -23 "$tmp/up" "$tmp/ours")
if [ -n "$missing" ]; then
    echo "check-symbols-upstream: exported by upstream ($up) but not by ours with that version:" >&2
    echo "$missing" | sed 's/^/  /' >&2
    for s in $missing; do n=${s%%@*}; grep "^$n@" "$tmp/ours" | sed 's/^/    ours has: /' >&2 || true; done
    exit 1
fi
echo "check-symbols-upstream: all $(wc -l < "$tmp/up") exports of $(readlink -f "$up") present in ours with the same version; ours adds $(comm -13 "$tmp/up" "$tmp/ours" | wc -l) ($(comm -13 "$tmp/up" "$tmp/ours" | sed 's/.*@//' | sort | uniq -c | awk '{printf "%s%s %s", s, $1, $2; s=", "}'))"
