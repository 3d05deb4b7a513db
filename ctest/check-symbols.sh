#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# Reads the dynamic symbol table of the built library and compares every
# defined symbol and its version with the checked-in list.  Fails on any
# difference: a missing or extra export, a wrong version, an unversioned
# symbol, a Rust-mangled name, or a wrong SONAME.
set -eu
lib=${1:?library}; list=${2:?symbol list}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# Defined dynamic symbols: "name@@VERSION" (default version) or "name@VERSION".
objdump -T "$lib" | awk '$0 ~ /^[0-9a-f]+ / && $0 !~ /\*UND\*/ {
    ver=$(NF-1); name=$NF
    if (ver == name) next                       # version-node definitions
    if (ver ~ /^\(/) { gsub(/[()]/, "", ver); print name "@" ver } else print name "@@" ver
}' | sort > "$tmp/got"
grep -v '^#' "$list" | sed '/^$/d' | sort > "$tmp/want"

status=0
if ! diff -u "$tmp/want" "$tmp/got" > "$tmp/diff"; then
    echo "check-symbols: exported symbols differ from $list:" >&2
    cat "$tmp/diff" >&2
    status=1
fi
if sed 's/@.*//' "$tmp/got" | grep -q '^_ZN\|^_R[0-9A-Z]\|rust_eh_personality' || grep -q '@@Base$' "$tmp/got"; then
    echo "check-symbols: Rust-internal or unversioned symbols leak out" >&2; status=1
fi
soname=$(readelf -d "$lib" | sed -n 's/.*SONAME.*\[\(.*\)\].*/\1/p')
[ "$soname" = librdmacm.so.1 ] || { echo "check-symbols: SONAME is '$soname'" >&2; status=1; }
nodes=$(readelf -V "$lib" | sed -n 's/.*Name: \(RDMACM_[0-9A-Z_.]*\).*/\1/p' | sort -u | tr '\n' ' ')
[ "$nodes" = "RDMACM_1.0 RDMACM_1.1 RDMACM_1.2 RDMACM_1.3 RDMACM_1.4 RDMACM_1.5 RDMACM_RS_1.0 " ] ||
    { echo "check-symbols: version nodes are: $nodes" >&2; status=1; }
[ $status = 0 ] && echo "check-symbols: $(wc -l < "$tmp/got") exports, all versioned as in $list, SONAME $soname"
exit $status
