#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# check-no-build-paths.sh SCRATCH TREE: no file under TREE (an installed tree, or an unpacked
# Debian package) names a path of the build machine: the source tree, cargo's home (registry
# sources), the home directory or SCRATCH (the DESTDIR or unpack directory); no ELF object has
# an RPATH or RUNPATH. Checked in every file, binaries included (the library's panic locations
# and debug information; `make lib` maps them to /usr/src/rdmacm-rs and /usr/share/cargo).
set -euo pipefail
scratch=$1 tree=$2
top=$(cd "$(dirname "$0")/.." && pwd)
cargo_home=${CARGO_HOME:-$HOME/.cargo}
bad=0
for p in $(printf "%s\n" "$top" "$(readlink -f "$top")" "$cargo_home" "$scratch" "$HOME/" | sort -u); do
    hits=$(grep -rlaF -- "$p" "$tree" 2>/dev/null || true)
    # a compressed man page hides nothing: look inside too
    for z in $(find "$tree" -name '*.gz'); do zcat "$z" | grep -qaF -- "$p" && hits="$hits $z"; done
    if [ -n "$(echo $hits)" ]; then
        echo "check-no-build-paths: '$p' appears in: $(echo $hits)" >&2
        for f in $hits; do strings -a "$f" | grep -F -- "$p" | head -3 | sed 's/^/    /' >&2; done
        bad=1
    fi
done
n=0
while IFS= read -r -d '' f; do
    head -c 4 "$f" | grep -q ELF || continue
    n=$((n+1))
    if readelf -d "$f" | grep -qE '\((RPATH|RUNPATH)\)'; then
        echo "check-no-build-paths: $f has $(readelf -d "$f" | grep -E 'RPATH|RUNPATH')" >&2; bad=1; fi
done < <(find "$tree" -type f -print0)
[ $n -gt 0 ] || { echo "check-no-build-paths: no ELF object under $tree" >&2; exit 1; }
[ $bad = 0 ] || exit 1
echo "check-no-build-paths: $(find "$tree" -type f | wc -l) files, $n ELF objects: no build path, no RPATH/RUNPATH"
