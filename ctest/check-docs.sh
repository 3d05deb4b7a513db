#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# check-docs.sh: the documents hold together (make check-compat, in make check-host).
#   - README.md stays under 300 lines: the rest lives in docs/ and is linked from it;
#   - every page docs/*.md is linked from README.md;
#   - every relative link in README.md, ARCHITECTURE.md, docs/*.md and vm/README.md names a
#     file or directory that exists;
#   - no tracked file names a numbered work session: history is in git, not in the tree.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
bad(){ echo "check-docs: $*" >&2; fail=1; }

lines=$(wc -l < README.md)
[ "$lines" -lt 300 ] || bad "README.md has $lines lines (at most 299: move detail to a page under docs/ and link it)"

for page in docs/*.md; do
    grep -qF "]($page)" README.md || bad "$page is not linked from README.md"
done

for doc in README.md ARCHITECTURE.md docs/*.md vm/README.md; do
    dir=$(dirname "$doc")
    # inline links [text](target), without the #fragment; external links are not followed
    for target in $(grep -oE '\]\([^)[:space:]]+\)' "$doc" | sed 's/^](//; s/)$//; s/#.*//' | sort -u); do
        case $target in http://*|https://*|mailto:*|'') continue ;; esac
        [ -e "$dir/$target" ] || bad "$doc links to $target, which does not exist"
    done
done

# The pattern is split so that this file does not match it itself.
word='sessio''n'
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    hits=$(git grep -niE "$word [0-9]" -- . || true)
else
    hits=$(grep -rniE "$word [0-9]" --exclude-dir=.git --exclude-dir=target --exclude-dir=build . || true)
fi
[ -z "$hits" ] || bad "numbered work sessions named (say what the code does, not when it was written):
$hits"

[ $fail = 0 ] && echo "check-docs: README.md $lines lines, $(ls docs/*.md | wc -l) pages under docs/ linked from it, every relative link resolves"
exit $fail
