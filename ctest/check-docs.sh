#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# check-docs.sh: the documents hold together (make check-compat, in make check-host).
#   - README.md stays under 300 lines: the rest lives in docs/ and is linked from it;
#   - every page docs/*.md is linked from README.md;
#   - every relative link in README.md, ARCHITECTURE.md, docs/*.md and vm/README.md names a
#     file or directory that exists;
#   - no tracked file names a numbered work session: history is in git, not in the tree;
#   - no doc or comment names an internal issue number, a commit of this repository or a date;
#   - no source file is over 800 lines unless a line near its top says why ("Over 800 lines: ...").
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

# Docs and comments describe the present: no internal issue numbers (the word and a number; another
# project's "#123" is a citation and passes), no commit hash of this repository, no date of a
# change. Over the README, ARCHITECTURE.md, docs/, man pages (their .TH date excepted), the
# sources and their comments, the C tests, the VM test bed, the benchmarks and the scripts.
scope=(README.md ARCHITECTURE.md docs man src capi preload ctest vm bench examples scripts Makefile
       build.rs Cargo.toml cbindgen.toml include fuzz)
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    g(){ git grep -nIE "$1" -- "${scope[@]}" || true; }
else
    g(){ grep -rnIE "$1" --exclude-dir=target "${scope[@]}" 2>/dev/null || true; }
fi
pat='[Ii]ssue''s? [0-9]+'
hits=$(g "\\b$pat")
[ -z "$hits" ] || bad "internal issue numbers named (say what the code does; the tracker is not the reader's):
$hits"
dpat='20[0-9]{2}-[01][0-9]-[0-3]''[0-9]'
hits=$(g "$dpat" | grep -vE '^man/[^:]+:[0-9]+:\.TH ' || true)
[ -z "$hits" ] || bad "dates named (a measurement names its method and spread, not its day):
$hits"
if git rev-parse --verify -q HEAD >/dev/null 2>&1; then
    # Hex words of 7-40 digits with a letter and a digit in them that name a commit here.
    words=$(g '[0-9a-f]{7,40}' | grep -oE '\b[0-9a-f]{7,40}\b' | grep '[a-f]' | grep '[0-9]' | sort -u)
    commits=$(for w in $words; do echo "$w^{commit}"; done | git cat-file --batch-check 2>/dev/null |
        awk '$2 == "commit" { print $1 }' || true)
    for c in $commits; do
        for w in $words; do
            case $c in "$w"*) hits=$(git grep -nIw "$w" -- "${scope[@]}" || true)
                bad "a commit of this repository named (history is git's): $hits" ;;
            esac
        done
    done
fi

# Source files over 800 lines say why near their top (within the first 40 lines).
long=0
while IFS= read -r f; do
    n=$(wc -l < "$f")
    [ "$n" -gt 800 ] || continue
    long=$((long + 1))
    head -n 40 "$f" | grep -q 'Over 800 lines' ||
        bad "$f has $n lines and no reason near its top (split it, or say \"Over 800 lines: why\" in its first 40 lines)"
done < <(if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then git ls-files -- '*.rs' '*.c' '*.h' '*.sh' '*.py'
         else find . -path ./target -prune -o -path ./build -prune -o -type f \( -name '*.rs' -o -name '*.c' -o -name '*.h' -o -name '*.sh' -o -name '*.py' \) -print; fi)

[ $fail = 0 ] && echo "check-docs: README.md $lines lines, $(ls docs/*.md | wc -l) pages under docs/ linked from it, every relative link resolves, $long source files over 800 lines say why"
exit $fail
