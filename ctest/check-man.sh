#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# check-man.sh - the manual is complete and clean:
#   * every export of abi/rdmacm.symbols has a page man/<name>.3;
#   * every inline helper of <rdma/rdma_verbs.h> and <rdma/rdma_cma.h> (static inline
#     functions whose names do not start with an underscore, rdma_seterrno excepted: an
#     internal of the header) has a page man/<name>.3;
#   * rdma_cm.7's ENVIRONMENT section names every environment variable the library reads
#     (the string literals passed to secure_getenv / getenv / env::var / env::var_os /
#     sys::env::var under src/, outside test code);
#   * every page renders with `man --warnings -l` without a single warning, from an
#     installed tree (make install into a scratch DESTDIR), so that the `.so` links of the
#     rsocket calls resolve the way they will once installed;
#   * every page that is installed is one of man/ (nothing stale) and every `.so` link
#     points at a page we ship.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
err(){ echo "check-man: $*" >&2; fail=1; }

# --- a page for every export and every helper ------------------------------------------
exports=$(grep -v '^#' abi/rdmacm.symbols | sed 's/@.*//' | sort -u)
helpers=$(sed -n 's/^static inline [^(]*[ *]\([a-z][a-z0-9_]*\)(.*/\1/p; /^static inline [^(]*$/{n; s/^\([a-z][a-z0-9_]*\)(.*/\1/p}' \
    include/rdma/rdma_verbs.h include/rdma/rdma_cma.h | grep -v '^rdma_seterrno$' | sort -u)
nh=$(echo "$helpers" | grep -c .)
[ "$nh" -ge 17 ] || err "found only $nh inline helpers in the headers (parser broken?): $helpers"
for f in $exports $helpers; do
    [ -f "man/$f.3" ] || err "no page man/$f.3"
done

# --- rdma_cm(7) ENVIRONMENT lists every variable the library reads -----------------------
envsec=$(sed -n '/^\.SH ENVIRONMENT/,/^\.SH /p' man/rdma_cm.7)
vars=$(find src capi/src -name '*.rs' ! -name 'tests.rs' ! -path '*/tests/*' -print0 |
    xargs -0 awk '/#\[cfg\(test\)\]/{nextfile} {print}' |
    grep -oE '(secure_getenv|getenv|env::var_os|env::var|var_os|var)\(\s*c?"[A-Z][A-Z0-9_]*"' |
    grep -oE '"[A-Z0-9_]+"' | tr -d '"' | sort -u)
# named through a constant: `let name = c"X"; ... secure_getenv(name)`
vars=$(printf '%s\n%s\n' "$vars" "$(grep -rhoE 'let [a-z_]+ = c"[A-Z][A-Z0-9_]*";' src capi/src | grep -oE '"[A-Z0-9_]+"' | tr -d '"')" | grep . | sort -u)
# and every name of sys::env::VARIABLES (the one list of what the library reads)
vars=$(printf '%s\n%s\n' "$vars" "$(sed -n '/^pub const VARIABLES/,/^];/p' src/sys/env.rs | grep -oE '^ *\("[A-Z][A-Z0-9_]*"' | grep -oE '[A-Z][A-Z0-9_]*')" | grep . | sort -u)
[ -n "$vars" ] || err "found no environment variable in src/ (parser broken?)"
for v in $vars; do
    grep -q "^\.B $v\$" <<<"$envsec" || err "rdma_cm.7 ENVIRONMENT does not list $v (read in src/)"
done

# --- every page renders without a warning, installed -----------------------------------
dest=$(mktemp -d); trap 'rm -rf "$dest"' EXIT
make -s install-man DESTDIR="$dest" PREFIX=/usr >/dev/null
mandir=$dest/usr/share/man
n=0
for p in "$mandir"/man*/*; do
    b=$(basename "$p"); [ -f "man/$b" ] || err "installed page $b is not in man/"
    if head -1 "$p" | grep -q '^\.so '; then
        t=$(head -1 "$p" | sed 's/^\.so //')
        [ -f "$mandir/$t" ] || err "$b: .so link to $t, which is not installed"
        [ "$(grep -c . "$p")" = 1 ] || err "$b: a .so link page must hold nothing else"
    fi
    # man resolves .so relative to the manual's root: run it from there.
    out=$(cd "$mandir" && LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l "${p#"$mandir"/}" 2>&1 >/dev/null) ||
        err "$b: man -l failed"
    [ -z "$out" ] || err "$b: man --warnings: $(echo $out)"
    txt=$(cd "$mandir" && LC_ALL=C.UTF-8 MANWIDTH=80 man -E UTF-8 -l "${p#"$mandir"/}" 2>/dev/null)
    grep -q '^NAME' <<<"$txt" && grep -q 'rdmacm-rs' <<<"$txt" || err "$b: rendered page lacks NAME or is not ours"
    n=$((n+1))
done
[ $fail = 0 ] || exit 1
echo "check-man: $(echo "$exports" | wc -l) exports and $nh inline helpers have pages; $n pages render without warnings; rdma_cm.7 lists $(echo $vars | wc -w) environment variables ($(echo $vars))"
