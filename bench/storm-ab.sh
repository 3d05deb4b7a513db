#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# bench/storm-ab.sh: the connection storms of `make bench` (vm/suite.d/storm.sh bench_storm) on
# upstream's library and on given builds of ours, in one VM boot, the libraries taken in turn
# storm by storm (the upstream variant's run in the order given, the ours run in reverse: two
# rounds per library), then each library's storm steps (median of its rounds) against
# upstream's and the later builds against the first.
#
#   bench/storm-ab.sh [-s "NAME:CLIENTS:CONNS:THREADS:m|qp:TIMEOUT ..."] [-y CYCLES] NAME=DIR...
#       DIR holds a librdmacm.so.1 (a copy of build/lib made before a change, say); -s the
#       storms (default: 10,000 connections -m at 2 threads; storms named NAME.r1, NAME.r2 ...
#       are reported as more rounds of NAME), -y storm_cycles per library (0: none, the default);
#       -t "STORM ...": those storms also run on the last NAME with its trace on (NAME+trace,
#       reported against NAME; default: none)
#   bench/storm-ab.sh --report DIR
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/ab-common.sh
sizes="noqp10k_n2:4:2500:2:m:900" cycles=0 out= trace=-
while [ $# -gt 0 ]; do case $1 in
  -s) sizes=$2; shift 2;; -y) cycles=$2; shift 2;; -t) trace=$2; shift 2;; --report) out=$2; shift 2;;
  -h|--help) sed -n '3,16p' "$0"; exit 0;; *) break;; esac; done
if [ -z "$out" ]; then
  [ $# -gt 0 ] || { echo "usage: bench/storm-ab.sh [-s SIZES] [-y CYCLES] [-t STORMS] NAME=DIR..." >&2; exit 2; }
  ab_stage bench/storm-ab.sh "upstream ours" "$@"
  export VM_ONLY=bench_storm VM_TIMEOUT=${VM_TIMEOUT:-7200} RDMACM_VM_WORK=${RDMACM_VM_WORK:-$PWD/build/vm-storm-ab}
  export VM_BENCH="sections=storm stormlibs=$(IFS=,; echo "${names[*]}") storm=$(echo $sizes | tr ' :' ,/) stormcycles=$cycles stormtrace=$(echo $trace | tr ' ' ,)"
  ab_boot bench/storm-ab.sh
fi
awk '
  $1 == "STORM" && $5 == "FAIL" { printf "FAIL %s %s round %s: %s\n", $2, $3, $4, $6; next }
  # storms named NAME.rN are rounds of NAME
  $1 == "STORM" { sub(/\.r[0-9]+$/, "", $2) }
  $1 == "STORM" && $5 ~ /_total$/ && $6 ~ /^[0-9.]+$/ { k = $2 SUBSEP $5
    if (!(k in seen)) { seen[k] = 1; ks[nk++] = k } if (!($3 in ls)) { ls[$3] = 1; if ($3 != "upstream") lib[nl++] = $3 }
    v[k, $3] = v[k, $3] " " $6; if (!((k, $3) in best) || $6 + 0 < best[k, $3]) best[k, $3] = $6 + 0 }
  function med(str,   a, m, i, j, t) { m = split(str, a, " ")
    for (i = 2; i <= m; i++) { t = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return m == 0 ? "" : m % 2 ? a[(m + 1) / 2] + 0 : (a[m / 2] + a[m / 2 + 1]) / 2 }
  END { for (i = 0; i < nk; i++) for (j = -1; j < nl; j++) { l = j < 0 ? "upstream" : lib[j]; best[ks[i], l] = med(v[ks[i], l]) }
    printf "median of the rounds per library; /up: against upstream'"'"'s median\n"
    printf "%-12s %-24s %12s", "storm", "step total (us), median", "upstream"; for (j = 0; j < nl; j++) printf " %12s %8s", lib[j], "/up"
    if (nl > 1) for (j = 1; j < nl; j++) printf " %10s", (lib[j] ~ /\+trace$/ ? "trace on/off" : lib[j] "/" lib[0]); printf "   rounds\n"
    for (i = 0; i < nk; i++) { k = ks[i]; split(k, p, SUBSEP); u = best[k, "upstream"]; printf "%-12s %-24s %12s", p[1], p[2], u
      for (j = 0; j < nl; j++) { b = best[k, lib[j]]; printf " %12s %8s", b, (u > 0 && b != "" ? sprintf("%.2f", b / u) : "-") }
      # a library with its trace on (NAME+trace) against NAME, the others against the first
      if (nl > 1) for (j = 1; j < nl; j++) { l0 = lib[j]; sub(/\+trace$/, "", l0); if (l0 == lib[j]) l0 = lib[0]
        a = best[k, l0]; b = best[k, lib[j]]; printf " %10s", (a > 0 && b != "" ? sprintf("%.2f", b / a) : "-") }
      printf "   up:%s", v[k, "upstream"]; for (j = 0; j < nl; j++) printf " %s:%s", lib[j], v[k, lib[j]]; printf "\n" } }' "$out"/bench_storm.*.out
