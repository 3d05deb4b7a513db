#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# Keeps the compatibility table (docs/compatibility.md) and the code in agreement:
# - every exported symbol (abi/rdmacm.symbols) has exactly one row, with
#   its version node;
# - a row says "not implemented" exactly when the function's body calls
#   capi::not_implemented (returns ENOSYS).
set -eu
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
grep -v '^#' abi/rdmacm.symbols | sed '/^$/d; s/@@/ /' | sort > "$tmp/syms"
table=docs/compatibility.md
# table rows: | `name` | NODE | status |
sed -n 's/^| `\([a-z_]*\)` | \(RDMACM_[A-Z0-9_.]*\) | \(.*\) |$/\1 \2 \3/p' $table | sort > "$tmp/rows"
cut -d' ' -f1,2 "$tmp/rows" > "$tmp/row-syms"
status=0
if ! diff -u "$tmp/syms" "$tmp/row-syms"; then
    echo "check-compat: $table rows differ from abi/rdmacm.symbols" >&2; status=1
fi
grep -rho 'not_implemented("[a-z_]*")' src capi/src | sed 's/not_implemented("\(.*\)")/\1/' | sort -u > "$tmp/ni-code"
awk '$3 == "not" && $4 == "implemented" {print $1}' "$tmp/rows" | sort -u > "$tmp/ni-table"
if ! diff -u "$tmp/ni-code" "$tmp/ni-table"; then
    echo "check-compat: $table 'not implemented' rows (+) differ from the code's ENOSYS stubs (-)" >&2; status=1
fi
[ $status = 0 ] && echo "check-compat: $table agrees with the code ($(wc -l < "$tmp/ni-code") functions not implemented yet)"
exit $status
