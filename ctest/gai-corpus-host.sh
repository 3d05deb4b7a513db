#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# gai-corpus-host.sh - the rdma_getaddrinfo corpus (ctest/vm/gai_corpus.c) against OUR library
# on this host, compared with upstream's output recorded in the VM test bed
# (ctest/data/gai_corpus.expected).
#
# Upstream itself cannot run this on a host without an RDMA device: it fails every lookup
# with ENODEV.  Ours translates addresses without a device, so the output must equal the
# recorded upstream output case by case.  Only cases whose node depends on the host's name
# service (ctest/data/gai_corpus.host-env) may differ; they are reported, not failed.
#
#   ctest/gai-corpus-host.sh [--asan] [--valgrind]
# Environment: B (build dir, default build), CC.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build}; CC=${CC:-cc}
EXP=${GAI_EXPECTED:-ctest/data/gai_corpus.expected} ENVF=ctest/data/gai_corpus.host-env
BIN=$B/ctest/gai_corpus
mkdir -p "$B/ctest"
[ -e "$B/lib/librdmacm.so.1" ] || { echo "gai-corpus-host: $B/lib/librdmacm.so.1 missing (make lib)"; exit 1; }
$CC -Wall -Wextra -Werror -O1 -g -Iinclude -o "$BIN" ctest/vm/gai_corpus.c -L"$B/lib" -lrdmacm -libverbs
OUT=$B/ctest/gai_corpus.host.out
LD_LIBRARY_PATH=$PWD/$B/lib "$BIN" > "$OUT"

# one line per case: "N<TAB>node<TAB>whole block with \x1f for newlines"
blocks(){ awk 'BEGIN{n=-1} /^case [0-9]+: /{if(n>=0)print n"\t"node"\t"blk; n=$2; sub(":","",n); node=$0;
  sub(/^case [0-9]+: node=/,"",node); sub(/ service=.*/,"",node); gsub(/"/,"",node); blk=$0; next}
  /^custom chain freed|^[0-9]+ cases$/{next} {blk=blk"\x1f"$0} END{if(n>=0)print n"\t"node"\t"blk}' "$1"; }
declare -A ENVOK
while IFS=$'\t' read -r node why; do [[ -z $node || $node == \#* ]] || ENVOK[$node]=$why; done < "$ENVF"
same=0 envdiff=0 bad=0
while IFS=$'\t' read -r n node a && IFS=$'\t' read -r n2 node2 b <&3; do
  if [ "$n" != "$n2" ]; then echo "case numbering differs ($n vs $n2): corpus and expected file out of step"; exit 1; fi
  if [ "$a" == "$b" ]; then same=$((same+1));
  elif [ -n "${ENVOK[$node]:-}" ]; then envdiff=$((envdiff+1));
  else bad=$((bad+1)); echo "DIFF case $n (node $node):"; echo "  expected: $a" | tr '\037' '\n' | sed 's/^/    /'
       echo "  ours:     $b" | tr '\037' '\n' | sed 's/^/    /'; fi
done < <(blocks "$EXP") 3< <(blocks "$OUT")
tail -n 2 "$OUT" | grep -q '^custom chain freed' || { echo "custom-chain free test missing"; bad=$((bad+1)); }
echo "gai corpus (host, ours vs upstream recorded in the VM): $same identical, $envdiff differ only by the host's name service (allowed: $ENVF), $bad unexpected"

for opt in "$@"; do case $opt in
  --asan)
    $CC -Wall -Wextra -Werror -g -fsanitize=address,undefined -fno-omit-frame-pointer -Iinclude \
        -o "$B/ctest/gai_corpus_asan" ctest/vm/gai_corpus.c -L"$B/lib" -lrdmacm -libverbs
    LD_LIBRARY_PATH=$PWD/$B/lib ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1 \
        "$B/ctest/gai_corpus_asan" > "$B/ctest/gai_corpus.asan.out"
    cmp -s "$B/ctest/gai_corpus.asan.out" "$OUT" || { echo "ASan run printed different results"; bad=$((bad+1)); }
    echo "gai corpus under ASan/UBSan/LSan: clean";;
  --valgrind)
    LD_LIBRARY_PATH=$PWD/$B/lib valgrind -q --leak-check=full --errors-for-leak-kinds=definite,indirect \
        --error-exitcode=9 "$BIN" > "$B/ctest/gai_corpus.vg.out"
    echo "gai corpus under valgrind: clean";;
  *) echo "unknown option $opt"; exit 2;;
esac; done
[ $bad = 0 ]
