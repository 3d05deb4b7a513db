#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# check-ratchet.sh - the allow-lists may only grow on purpose. For every commit since the base
# recorded in .ci/ratchet-base (the lines present then are grandfathered), each entry that
# commit adds to a ratchet file must be named in its commit message by a trailer
#     Ratchet-Add: <entry> <why>
# Ratchet files and their entries:
#   vm/known-failures.txt     first field (test or test:variant)
#   vm/upstream-failures.txt  first field (test)
#   vm/tests.txt              lines with a skip-ok= flag: test name (the flag's pattern counts:
#                             changing it is adding an entry)
# An entry is "added" when its key was not in the parent commit's file; rewording the reason of
# an existing entry or removing one needs nothing. Needs the history since the base: a shallow
# clone fails with a message saying how to deepen it.
set -euo pipefail
cd "$(dirname "$0")/.."
FILES="vm/known-failures.txt vm/upstream-failures.txt vm/tests.txt"
[ -f .ci/ratchet-base ] || { echo "check-ratchet: .ci/ratchet-base missing"; exit 1; }
base=$(sed -n '/^[0-9a-f]\{40\}/{s/ .*//;p;q}' .ci/ratchet-base)
git rev-parse -q --verify HEAD >/dev/null || { echo "check-ratchet: not a git checkout"; exit 1; }
if ! git cat-file -e "$base^{commit}" 2>/dev/null; then
  if [ "$(git rev-parse --is-shallow-repository)" = true ]; then
    echo "check-ratchet: shallow clone without the base commit $base: run 'git fetch --unshallow' (the check needs every commit since the base)"
  else echo "check-ratchet: base commit $base (.ci/ratchet-base) is not in this repository"; fi
  exit 1
fi
git merge-base --is-ancestor "$base" HEAD || { echo "check-ratchet: base $base is not an ancestor of HEAD"; exit 1; }
keys(){ # file contents on stdin -> one key per line
  case $1 in
    vm/tests.txt) awk '!/^[ \t]*(#|$)/ && $4 ~ /^skip-ok=/ {print $1 " " $4}';;
    *) awk '!/^[ \t]*(#|$)/ {print $1}';;
  esac | sort -u; }
bad=0 n=0 added=0
for c in $(git rev-list --no-merges "$base"..HEAD -- $FILES); do
  n=$((n+1)); msg=$(git log -1 --format=%B "$c")
  for f in $FILES; do
    comm -13 <(git show "$c^:$f" 2>/dev/null | keys "$f") <(git show "$c:$f" 2>/dev/null | keys "$f") > /tmp/ratchet.$$ || true
    while read -r k _; do
      [ -n "$k" ] || continue; added=$((added+1))
      if ! grep -qE "^Ratchet-Add:[[:space:]]+(${k//[/\\[}|${k%%:*})[[:space:]]+[^[:space:]]" <<< "$msg"; then
        echo "check-ratchet: commit $(git log -1 --format='%h %s' "$c" | cut -c1-70) adds '$k' to $f without a 'Ratchet-Add: $k <why>' line in its message"
        bad=$((bad+1))
      fi
    done < /tmp/ratchet.$$
  done
done
rm -f /tmp/ratchet.$$
[ $bad = 0 ] || exit 1
echo "check-ratchet: $n commit(s) since $(git rev-parse --short "$base") touch the ratchet files; $added added entr(y/ies), each named by Ratchet-Add"
