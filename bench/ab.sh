#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# bench/ab.sh: compares builds of our librdmacm with upstream's on the rsocket cases of
# `make bench` (vm/suite.d/bench.sh bench_ab), alternated round by round in one VM boot, and
# reports each library's median and its ratio to upstream's (below 1 = faster). One
# `make bench` keeps the best of two rounds, which cannot tell a few per cent from the
# TCG noise; this takes as many rounds as asked and pairs them.
#
#   bench/ab.sh [-r ROUNDS] [-i] [-c "duplex pingpong rstream64k cg_create_destroy cg_get_ack first cg_first dns cg_rs_pingpong
#               cg_bind cg_init_qp_attr cg_rtr_qp_attr cg_rts_qp_attr cg_destroy_qp cg_create_qp cg_resolve_addr
#               cg_resolve_route cg_connect cg_accept cg_disconnect cg_accept_qp cg_conn_resp_qp
#               cm_strace"] [-w syscount] NAME=DIR...
#       DIR holds a librdmacm.so.1 (e.g. build/lib, or a copy of it made before a change);
#       -w syscount: both ends under ctest/vm/preload/syscount.c, and a table of the system
#       calls and context switches per message (duplex) or round trip (pingpong) and end
#   Also, for the rsocket cases: the guest's time over the timed part (user, system, softirq,
#   idle, in per cent of both vCPUs) and each end's CPU and voluntary context switches per unit,
#   as the program measured them, and the soft-RoCE counters that moved (failed runs left out);
#   with two builds or more, each later one paired with the first (same run and round)
#   first: 11 fresh processes per run, each timing its first numeric rdma_getaddrinfo (ns,
#   the median); with it come first_proc (the whole process, exec to exit, ns) and
#   first_minflt (the minor page faults of the first call); cg_first: that call's instructions
#   under callgrind, in the whole process (cg_first_lib: in librdmacm's object);
#   dns: 7 fresh processes, each timing its rdma_resolve_addrinfo of a name a DNS server answers
#   after 500 ms (make bench's dns_call_returns_us, us, the median); dns_thread, dns_libc,
#   dns_resolve: the same after the process started a thread, asked libc for the name as a
#   literal, or made the same call once before (ctest/vm/bench_resolve.c, dns_prep)
#   cg_rs_pingpong: instructions per 64 B rsocket round trip as make bench's cg_rs_pingpong_total
#   (also cg_rs_pingpong_lib), the profiles in build/vm-ab/suite/share/out/callgrind/ (-i: per
#   instruction too, valgrind's --dump-instr=yes, for bench/callgrind-lines.py)
#   cg_bind, cg_init_qp_attr, cg_rtr_qp_attr, cg_rts_qp_attr, cg_destroy_qp: cmtime's steps that
#   run in the library (ctest/vm/bench_calls.c), instructions per call in the whole process
#   (also <case>_lib: in librdmacm's object); cg_create_qp, cg_resolve_addr, cg_resolve_route,
#   cg_connect, cg_accept, cg_disconnect: the same for those calls (each connection step on a
#   fresh id taken through the steps before it); cg_accept_qp, cg_conn_resp_qp: accept and the
#   connecting end's get + ack of its connect response with QPs on both ends (their profiles kept
#   as NAME.<case>.<round> beside the round trip's, -i as there); cm_strace: cmtime -c 100 with its connecting end
#   under strace -f, a table of its system calls per connection in each step (the value: the
#   calls of its qp and noqp tests)
#   t_<call> (any cg_<call>'s call, and t_gai, t_create_destroy, t_get_ack, t_write_get_ack,
#   t_event_str): the same calls timed without valgrind, wall ns per call (bench_calls'
#   ns_per_call: 20000 calls, 300 of those with a connection step); t_ids: make bench's
#   synchronous id loop (create, rdma_resolve_addr, destroy) of 2000 ids, ns per id
#   bench/ab.sh --report DIR    report from an earlier run's output directory
#
# Each of the VM's two variant runs (upstream, ours) does every round, so ROUNDS=3 gives six
# runs per library and case (a duplex run is ~10 s under TCG).
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/ab-common.sh
rounds=3 cases=duplex out= wrap= cginstr=
while [ $# -gt 0 ]; do case $1 in
  -r) rounds=$2; shift 2;; -i) cginstr=1; shift;; -w) wrap=$2; shift 2;; -c) cases=$2; shift 2;; --report) out=$2; shift 2;;
  -h|--help) sed -n '3,47p' "$0"; exit 0;; *) break;; esac; done
if [ -z "$out" ]; then
  [ $# -gt 0 ] || { echo "usage: bench/ab.sh [-r ROUNDS] [-c CASES] NAME=DIR..." >&2; exit 2; }
  ab_stage bench/ab.sh "upstream" "$@"
  export VM_ONLY=bench_ab VM_TIMEOUT=${VM_TIMEOUT:-10800} RDMACM_VM_WORK=${RDMACM_VM_WORK:-$PWD/build/vm-ab}
  export VM_BENCH="ab=$(IFS=,; echo "${names[*]}") abrounds=$rounds abcases=$(echo $cases | tr ' ' ,)${wrap:+ abwrap=$wrap}${cginstr:+ cginstr=1}"
  ab_boot bench/ab.sh
fi
awk '
  BEGIN { seen["upstream"] = 1; lib[nl++] = "upstream" }
  $1 == "AB" { k = $2 SUBSEP $3; if (!($3 in seen)) { seen[$3] = 1; lib[nl++] = $3 } cs[$2] = 1
    if ($5 == "FAIL") { fail[k]++; next }
    n[k]++; v[k, n[k]] = $5; at[$2, $3, FILENAME, $4] = $5
    if ($3 == "upstream") { pr[$2, ++np[$2]] = FILENAME SUBSEP $4 } }
  # system calls (-w syscount): summed per case, library and field over runs and ends
  $1 == "ABSC" { k = $2 SUBSEP $3; scn[k]++; for (i = 6; i <= NF; i++) { split($i, kv, "="); if (!(kv[1] in fseen)) { fseen[kv[1]] = 1; fld[nf++] = kv[1] }
      sc[k, kv[1]] += kv[2] } }
  # the guest over each run and the soft-RoCE counters, the devices added up (kept per run: a
  # failed run'"'"'s are left out)
  $1 == "ABCPU" || $1 == "ABRXE" { r = $2 SUBSEP $3 SUBSEP FILENAME SUBSEP $4; for (i = 5; i <= NF; i++) { split($i, kv, "="); sub(/^.*\//, "", kv[1])
      if (!(($1, kv[1]) in fseen2)) { fseen2[$1, kv[1]] = 1; if ($1 == "ABCPU") cfld[ncf++] = kv[1]; else rfld[nrf++] = kv[1] }
      rv[$1, r, kv[1]] += kv[2] } runs[$1, r] = 1 }
  # system calls per cmtime step (-c cm_strace): per library, the mean over its runs
  $1 == "ABCS" { if (!(($2, FILENAME, $3) in csrun)) { csrun[$2, FILENAME, $3] = 1; csruns[$2]++ }
    k = $4 " " $5; if (!(k in csk)) { csk[k] = 1; cso[ncs++] = k }
    for (i = 6; i <= NF; i++) { split($i, kv, "="); if (!((k, kv[1]) in cscall)) { cscall[k, kv[1]] = 1; cscalls[k] = cscalls[k] " " kv[1] }
      cssum[k, kv[1], $2] += kv[2] } }
  function median(k,   m, i, j, t, a) { m = n[k]; for (i = 1; i <= m; i++) a[i] = v[k, i]
    return med_of(a, m) }
  function med_of(a, m,   i, j, t) {
    for (i = 2; i <= m; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 }
  # library l'"'"'s runs against library b'"'"'s of the same variant run and round: the median of the
  # ratios; pm pairs, l faster in pfast of them
  function paired(c, b, l,   i, f, u, w, q) { pm = pfast = 0
    for (i = 1; i <= np[c]; i++) { split(pr[c, i], f, SUBSEP); u = at[c, b, f[1], f[2]]; w = at[c, l, f[1], f[2]]
      if (u > 0 && w != "") { q[++pm] = w / u; if (w < u) pfast++ } }
    return pm ? med_of(q, pm) : 0 }
  # one table of case c: per field of fl (nfl of them), each library'"'"'s sum[c, lib, field] / cnt[c,
  # lib] / div in format fmt, the field names wide wide; rows that are 0 everywhere left out if skip0
  function table(c, title, fl, nfl, sum, cnt, div, fmt, wide, skip0,   i, j, k, nz) {
    for (j = 0; j < nl && !cnt[c SUBSEP lib[j]]; j++) ; if (j == nl) return
    printf "%s: %s\n  %-" wide "s", c, title, ""; for (j = 0; j < nl; j++) printf " %12s", lib[j]; printf "\n"
    for (i = 0; i < nfl; i++) { nz = !skip0; for (j = 0; j < nl; j++) if (sum[c, lib[j], fl[i]] != 0) nz = 1
      if (!nz) continue; printf "  %-" wide "s", fl[i]
      for (j = 0; j < nl; j++) { k = c SUBSEP lib[j]; printf " %12s", cnt[k] ? sprintf(fmt, sum[k, fl[i]] / cnt[k] / div) : "-" }
      printf "\n" } }
  END { if (ncs) { printf "cm_strace: system calls per connection in each cmtime step (connecting end, mean over runs)\n  %-34s", "test step call"
      for (j = 0; j < nl; j++) printf " %12s", lib[j]; printf "\n"
      for (i = 0; i < ncs; i++) { m = split(cscalls[cso[i]], cc, " ")
        for (ci = 1; ci <= m; ci++) { printf "  %-34s", cso[i] " " cc[ci]
          for (j = 0; j < nl; j++) printf " %12s", csruns[lib[j]] ? sprintf("%.2f", cssum[cso[i], cc[ci], lib[j]] / csruns[lib[j]]) : "-"
          printf "\n" } } }
    for (x in runs) { split(x, q, SUBSEP); if (!((q[2], q[3], q[4], q[5]) in at)) continue; k = q[2] SUBSEP q[3]
      if (q[1] == "ABCPU") { cpun[k]++; for (i = 0; i < ncf; i++) cpu[k, cfld[i]] += rv[q[1], q[2], q[3], q[4], q[5], cfld[i]] }
      else { rxn[k]++; for (i = 0; i < nrf; i++) rx[k, rfld[i]] += rv[q[1], q[2], q[3], q[4], q[5], rfld[i]] } }
    for (c in cs) { printf "%s (runs, median, min, max; ratio of the medians to upstream'"'"'s; median of the ratios to the upstream run of the same round, in how many of those pairs the library was faster):\n", c
      for (j = 0; j < nl; j++) { l = lib[j]; k = c SUBSEP l; if (!n[k]) { printf "  %-12s no number%s\n", l, fail[k] ? " (" fail[k] " failed)" : ""; continue }
        lo = hi = v[k, 1]; for (i = 2; i <= n[k]; i++) { if (v[k, i] < lo) lo = v[k, i]; if (v[k, i] > hi) hi = v[k, i] }
        med[l] = median(k)
        printf "  %-12s %2d  %10.1f %10.1f %10.1f", l, n[k], med[l], lo, hi
        if (l != "upstream" && med["upstream"] > 0) { r = paired(c, "upstream", l)
          printf "   %.3f   %s", med[l] / med["upstream"], pm ? sprintf("%.3f (%d pairs, %d faster)", r, pm, pfast) : "-" }
        printf "%s\n", fail[k] ? "  (" fail[k] " failed)" : "" }
      # builds of ours against the first one given
      for (j = 2; j < nl; j++) { r = paired(c, lib[1], lib[j])
        if (pm) printf "  %s against %s: median of the paired ratios %.3f, faster in %d of %d pairs\n", lib[j], lib[1], r, pfast, pm }
      table(c, "the timed part as the program saw it (mean over runs): the whole guest in per cent of both vCPUs; each end (c: connecting, l: listening) per unit", cfld, ncf, cpu, cpun, 1, "%.1f", 14, 0)
      table(c, "soft-RoCE counters that moved, per run (mean; both devices)", rfld, nrf, rx, rxn, 1, "%.1f", 22, 1)
      table(c, "per " (c == "duplex" ? "64 KiB message sent and received" : "round trip") " and end (-w syscount; ours makes some calls directly: see syscr/syscw)", fld, nf, sc, scn, c == "duplex" ? 1000 : 8000, "%.2f", 14, 0) } }' "$out"/bench_ab.*.out
