#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# make bench: one VM boot runs vm/suite.d/bench.sh's driver in rounds (tests bench_r1 and
# bench_r2, each upstream's librdmacm then ours: U O U O), then this script keeps the better
# (lower) value of each case per library, prints the ratio table (ours / upstream, below 1 =
# ours faster) with the spread between rounds, and writes build/bench.json and build/bench.txt.
#
#   bench/run.sh                run the VM, then report
#   bench/run.sh --report DIR   report from an earlier run's output directory (no VM),
#                               e.g. build/vm-bench/suite/share/out
#
# Exit status: non-zero when the VM run failed, or when any case has no number in any round of
# either library (the case is named), so a case that silently stops producing a number fails.
# Noise: times under qemu TCG on shared cores move a lot; a case's "spread" is (worst - best)
# / best over the rounds of one library, and a ratio within the larger spread of the two
# libraries is marked "~" (not a difference this run can show). Instruction counts
# (cg_*) are repeatable: only the first round counts them (valgrind under TCG is slow).
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p build
if [ "${1:-}" = --report ]; then
  out=${2:?usage: bench/run.sh --report DIR}; vmrc=0; log=; load=
else
  # BENCH_CMTIME_CONNS: the cmtime sizes, passed to the guest in VM_BENCH. Default 1000:
  # "1000 10000" adds the -c 10000 case, which upstream itself does not complete in this
  # guest (its no-QP test is REJECTED with status 28): that run then fails naming those cases.
  BENCH_CMTIME_CONNS=${BENCH_CMTIME_CONNS:-1000}
  VM_BENCH="cmtime=$(echo $BENCH_CMTIME_CONNS | tr ' ' ,)"
  # BENCH_SECTIONS="rstream rsocket": only those sections of the driver (gai first ids threads
  # dns events rstream rsocket zc callgrind cmtime storm), e.g. the rsocket cases beside rstream in a few minutes;
  # "storm" alone: the storms without the driver's cases
  [ -z "${BENCH_SECTIONS:-}" ] || VM_BENCH+=" sections=$(echo $BENCH_SECTIONS | tr ' ' ,)"
  # the connection storms (vm/suite.d/storm.sh, test bench_storm) unless the sections leave them
  # out; BENCH_STORM_SIZES / BENCH_STORM_CYCLES pick other storms (see bench_storm there)
  storm=; [ -n "${BENCH_SECTIONS:-}" ] && [[ " $BENCH_SECTIONS " != *" storm "* ]] || storm=bench_storm
  [ -z "${BENCH_STORM_SIZES:-}" ] || VM_BENCH+=" storm=$(echo $BENCH_STORM_SIZES | tr ' :' ,/)"
  [ -z "${BENCH_STORM_CYCLES:-}" ] || VM_BENCH+=" stormcycles=$BENCH_STORM_CYCLES"
  export VM_BENCH VM_ONLY="bench_r1 bench_r2${storm:+ $storm}" VM_TIMEOUT=${VM_TIMEOUT:-10800}
  export RDMACM_VM_WORK=${RDMACM_VM_WORK:-$PWD/build/vm-bench}
  log=$RDMACM_VM_WORK.log
  vm/testbed.sh host || exit 1
  vm/testbed.sh image || exit 1
  echo "bench: booting the VM (log: $log; ~20 min under TCG with cmtime -c 1000; -c 10000 adds up to an hour; the storms (bench_storm) 10-35 min)" >&2
  # The host's load while the VM ran (1-minute averages before and after, and its cores): the
  # times under TCG follow it, so the report carries it (a loaded host made one run of ours
  # look 4-10x slower on some cases; the same loops in one quiet boot showed no difference).
  load0=$(cut -d' ' -f1 /proc/loadavg)
  vm/testbed.sh run > "$log" 2>&1; vmrc=$?
  load="${load0} -> $(cut -d' ' -f1 /proc/loadavg) on $(nproc) cores"
  out=$RDMACM_VM_WORK/suite/share/out
  tail -n 1 "$log" >&2
fi
files=()
for f in "$out"/bench_r[0-9]*.upstream.out "$out"/bench_r[0-9]*.ours.out; do [ -s "$f" ] && files+=("$f"); done
[ ${#files[@]} -gt 0 ] || { echo "bench: no benchmark output in $out${log:+ (see $log)}" >&2; exit 1; }
info=$(dirname "$out")/results.txt
kernel=$(sed -n 's/^INFO kernel //p' "$info" 2>/dev/null); rdmacore=$(sed -n 's/^INFO rdma-core //p' "$info" 2>/dev/null)
commit=$(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD -- src 2>/dev/null || echo "+dirty")

# every case the driver must produce (cmtime: both tables, every step, both columns); with
# BENCH_SECTIONS, those sections' cases
expected=
want(){ if [ -z "${BENCH_SECTIONS:-}" ] || [[ " $BENCH_SECTIONS " == *" $1 "* ]]; then expected+=" ${*:2}"; fi; }
want gai gai_numeric_v4 gai_numeric_v6 gai_numeric_ib gai_passive gai_hosts_name
want first gai_first_call
want ids ids_sync_ns_per_id ids_rss_kb_per_1000 ids_heap_bytes_per_id
want threads ids_threads_1_ns_per_id ids_threads_2_ns_per_id ids_threads_4_ns_per_id ids_threads_8_ns_per_id
want dns dns_call_returns_us dns_event_arrives_us
want events get_ack_ns_per_call write_get_ack_ns_per_call connect_ns_per_call accept_ns_per_call disconnect_ns_per_call
want rstream rstream_64k_xfer_us rstream_64b_lat_us
want rsocket rs_pingpong8_64b_ns_per_rt rs_duplex_64k_us_per_mib
want zc zc_1m_copy_us zc_1m_sendinplace_us zc_1m_zerocopy_us cg_zc_1m_copy cg_zc_1m_sendinplace cg_zc_1m_zerocopy
for c in gai create_destroy get_ack event_str rs_pingpong bind init_qp_attr rtr_qp_attr rts_qp_attr destroy_qp \
         create_qp resolve_addr resolve_route connect accept disconnect; do want callgrind cg_${c}_lib cg_${c}_total; done
for n in ${BENCH_CMTIME_CONNS:-1000}; do for t in qp noqp; do
  for s in full_connect create_id bind_addr resolve_addr resolve_route create_qp init_qp_attr init_qp \
           rtr_qp_attr rtr_qp rts_qp_attr rts_qp cm_connect establish disconnect destroy_id destroy_qp; do
    want cmtime cmtime${n}_${t}_${s}_total cmtime${n}_${t}_${s}_per_conn; done; done; done

awk -v expected="$expected" -v json=build/bench.json -v date="$(date -u +%FT%TZ)" -v kernel="$kernel" \
    -v rdmacore="$rdmacore" -v commit="$commit" -v load="$load" '
  FNR == 1 { lib = FILENAME ~ /\.upstream\.out$/ ? "upstream" : "ours"
             r = FILENAME; sub(/.*bench_r/, "", r); sub(/\..*/, "", r); rounds[lib] = rounds[lib] " " r; nr[lib]++ }
  $1 == "BENCH" {
    c = $2; if (!(c in seen)) { seen[c] = 1; order[n++] = c }
    if ($3 ~ /^[0-9]+(\.[0-9]+)?$/) { unit[c] = $4; vals[c, lib] = vals[c, lib] " " $3; cnt[c, lib]++
      if (!((c, lib) in best) || $3 + 0 < best[c, lib]) best[c, lib] = $3 + 0
      if (!((c, lib) in worst) || $3 + 0 > worst[c, lib]) worst[c, lib] = $3 + 0 }
    else why[c, lib] = why[c, lib] " r" r ":" $4 }
  function spread(c, l) { return best[c, l] > 0 ? (worst[c, l] - best[c, l]) / best[c, l] : 0 }
  function fmt(v) { return v == int(v) ? sprintf("%d", v) : sprintf("%.2f", v) }
  END {
    m = split(expected, e, /[ \n]+/)
    for (i = 1; i <= m; i++) if (e[i] != "" && !(e[i] in seen)) { seen[e[i]] = 1; order[n++] = e[i] }
    printf "%-40s %-11s %12s %12s %7s %9s %9s  %s\n", "case", "unit", "upstream", "ours", "ours/up", "spread-up", "spread-us", "verdict"
    printf "{\n  \"date\": \"%s\", \"kernel\": \"%s\", \"rdma_core\": \"%s\", \"ours_commit\": \"%s\",\n", date, kernel, rdmacore, commit > json
    printf "  \"host_load\": \"%s\",\n", load > json
    printf "  \"rounds\": {\"upstream\": %d, \"ours\": %d},\n  \"note\": \"qemu TCG on shared cores: times move between boots; compare ratios of one run, and only beyond the spread\",\n  \"cases\": {", nr["upstream"], nr["ours"] > json
    for (i = 0; i < n; i++) {
      c = order[i]; ok = 1
      for (l = 0; l < 2; l++) { L = l ? "ours" : "upstream"
        need = c ~ /^cg_/ ? 1 : nr[L]     # instruction counts: the first round only (repeatable)
        if (cnt[c, L] < need) { ok = 0; miss[c] = miss[c] sprintf(" %s:%d/%d rounds%s", L, cnt[c, L] + 0, need, why[c, L]) } }
      if (!ok) bad[nbad++] = c
      u = (c, "upstream") in best ? best[c, "upstream"] : ""; o = (c, "ours") in best ? best[c, "ours"] : ""
      su = (c, "upstream") in best ? spread(c, "upstream") : 0; so = (c, "ours") in best ? spread(c, "ours") : 0
      ratio = (u != "" && o != "" && u > 0) ? o / u : ""
      noise = su > so ? su : so
      if (!ok) verdict = "NO NUMBER"
      else if (ratio == "") verdict = (u == 0 && o == 0) ? "both 0" : "-"
      else if (ratio - 1 <= noise && 1 - ratio <= noise && ratio != 1) verdict = "~ (within spread)"
      else verdict = ratio < 1 ? "ours faster" : ratio > 1 ? "ours slower" : "same"
      if (c ~ /^cg_/ && ratio != "") verdict = ratio < 1 ? "ours fewer" : ratio > 1 ? "ours more" : "same"
      printf "%-40s %-11s %12s %12s %7s %8.0f%% %8.0f%%  %s\n", c, unit[c] == "" ? "-" : unit[c], u == "" ? "-" : fmt(u), o == "" ? "-" : fmt(o),
             ratio == "" ? "-" : sprintf("%.2f", ratio), su * 100, so * 100, verdict
      printf "%s\n    \"%s\": {\"unit\": \"%s\", \"ratio\": %s, \"verdict\": \"%s\"", i ? "," : "", c, unit[c], ratio == "" ? "null" : sprintf("%.4f", ratio), verdict > json
      for (l = 0; l < 2; l++) { L = l ? "ours" : "upstream"; v = vals[c, L]; gsub(/^ /, "", v); gsub(/ /, ", ", v)
        printf ", \"%s\": {\"best\": %s, \"spread\": %s, \"rounds\": [%s]}", L, (c, L) in best ? best[c, L] : "null",
               (c, L) in best ? sprintf("%.4f", spread(c, L)) : "null", v > json }
      printf "}" > json
    }
    printf "\n  },\n  \"missing\": [" > json
    for (i = 0; i < nbad; i++) printf "%s\"%s\"", i ? ", " : "", bad[i] > json
    printf "]\n}\n" > json
    for (i = 0; i < nbad; i++) printf "bench: FAIL %s has no number:%s\n", bad[i], miss[bad[i]] > "/dev/stderr"
    exit (nbad > 0) }' "${files[@]}" | tee build/bench.txt
rc=${PIPESTATUS[0]}

# The targets against this run (they do not change the exit status: the
# harness fails only when it could not measure). Columns of build/bench.txt: case unit up ours
# ratio spread-up spread-ours verdict... With BENCH_SECTIONS, a target whose case this run did
# not have is left out.
awk -v partial="${BENCH_SECTIONS:+1}" '
  NR > 1 { r[$1] = $5; v[$1] = $8 " " $9 " " $10; ours[$1] = $4; up[$1] = $3; su[$1] = $6; so[$1] = $7 }
  function say(ok, what, detail) { if (partial && detail ~ / n\/a/) return
    printf "target %-9s %s: %s\n", ok ? "MET" : "NOT MET", what, detail; met += ok; all++ }
  function num(c) { return (c in r) && r[c] != "-" }
  function atmost(c, lim, what) { say(num(c) && r[c] + 0 <= lim, what, c " ours/upstream " (num(c) ? r[c] : "n/a") " (needs <= " lim ")") }
  function notslower(c, what) { say(num(c) && v[c] !~ /slower|more/, what, c " ours/upstream " (num(c) ? r[c] : "n/a") ", spread " su[c] "/" so[c] ", " v[c]) }
  function faster(c, what) { say(num(c) && v[c] ~ /faster/, what, c " ours/upstream " (num(c) ? r[c] : "n/a") ", spread " su[c] "/" so[c] ", " v[c]) }
  END {
    print ""
    for (i = 1; i <= split("gai_numeric_v4 gai_numeric_v6 gai_numeric_ib gai_passive", g, " "); i++)
      atmost(g[i], 0.334, "rdma_getaddrinfo at least 3x upstream")
    atmost("gai_first_call", 0.10, "first call in a fresh process at most 1/10 of upstream")
    atmost("cg_gai_total", 0.5, "instructions (whole process), numeric rdma_getaddrinfo at most half")
    for (i = 1; i <= split("create_destroy get_ack write_get_ack event_str", g, " "); i++)
      atmost("cg_" g[i] "_total", 1.0, "instructions (whole process) at most upstream")
    # cmtime steps that run in the library alone (ctest/vm/bench_calls.c)
    for (i = 1; i <= split("bind init_qp_attr rtr_qp_attr rts_qp_attr destroy_qp", g, " "); i++)
      atmost("cg_" g[i] "_total", 1.0, "instructions (whole process) of a cmtime step at most upstream")
    # the other connection calls (ctest/vm/bench_calls.c)
    for (i = 1; i <= split("create_qp resolve_addr resolve_route connect accept disconnect accept_qp conn_resp_qp", g, " "); i++)
      atmost("cg_" g[i] "_total", 1.0, "instructions (whole process) of a connection call at most upstream")
    # the time of those calls and of an event (kernel work included): no slower
    for (i = 1; i <= split("get_ack write_get_ack connect accept disconnect", g, " "); i++)
      notslower(g[i] "_ns_per_call", "time of an event or a connection call no slower than upstream")
    n = 0; slow = ""
    for (c in r) if (c ~ /^cmtime/ && num(c)) { n++; if (v[c] ~ /slower/) slow = slow " " c "=" r[c] }
    if (n > 0 || !partial) say(n > 0 && slow == "", "cmtime: no step slower beyond the spread", n " step figures" (slow == "" ? "" : "; slower:" slow))
    for (c in r) if (c ~ /^cmtime[0-9]+_(qp|noqp)_(create_id|bind_addr|destroy_id|init_qp_attr|rtr_qp_attr|rts_qp_attr)_per_conn$/)
      faster(c, "cmtime user-space step faster")
    notslower("ids_threads_8_ns_per_id", "8 threads no worse than upstream")
    atmost("ids_rss_kb_per_1000", 1.0, "memory per id no more than upstream")
    atmost("ids_heap_bytes_per_id", 1.0, "heap per live id no more than upstream (bytes from malloc only: ours keeps ids, channels and events in its own mapped stores, which only the RSS row counts)")
    if (("dns_call_returns_us" in ours) || !partial) say(("dns_call_returns_us" in ours) && ours["dns_call_returns_us"] ~ /^[0-9.]+$/ && ours["dns_call_returns_us"] + 0 < 1000,
        "rdma_resolve_addrinfo returns in under 1 ms (DNS answers after 500 ms)",
        "ours " ours["dns_call_returns_us"] " us, upstream " up["dns_call_returns_us"] " us; event after " ours["dns_event_arrives_us"] " us (upstream " up["dns_event_arrives_us"] ")")
    notslower("rstream_64k_xfer_us", "rstream 64 KiB throughput no worse")
    notslower("rstream_64b_lat_us", "rstream 64 B latency no worse")
    atmost("rs_pingpong8_64b_ns_per_rt", 1.0, "8 streams from 8 threads, 64 B round trips at least upstream rate")
    atmost("cg_rs_pingpong_total", 1.0, "instructions per 64 B rsocket round trip (whole process, polling_time 0) at most upstream")
    atmost("rs_duplex_64k_us_per_mib", 1.0, "one stream sent and received at once, 64 KiB, at least upstream throughput")
    # zero-copy registration (examples/bulk, the Rust API alone: the same program in both
    # variants, so the comparison is within the ours column): 1 MiB transfers
    if (num("cg_zc_1m_copy") || !partial) say(num("cg_zc_1m_copy") && num("cg_zc_1m_zerocopy") && ours["cg_zc_1m_zerocopy"] * 4 <= ours["cg_zc_1m_copy"] + 0,
        "zero-copy 1 MiB transfer: at most 1/4 of the instructions of the copying form (user space)",
        "zerocopy " ours["cg_zc_1m_zerocopy"] " / copy " ours["cg_zc_1m_copy"] " instr/xfer")
    if (num("zc_1m_copy_us") || !partial) say(num("zc_1m_copy_us") && num("zc_1m_sendinplace_us") && ours["zc_1m_sendinplace_us"] + 0 < ours["zc_1m_copy_us"] + 0,
        "1 MiB transfer sent in place (one copy fewer, no registration per transfer) faster than the copying form",
        "copy " ours["zc_1m_copy_us"] ", sent in place " ours["zc_1m_sendinplace_us"] ", zero-copy (a registration per transfer) " ours["zc_1m_zerocopy_us"] " us/xfer")
    printf "targets: %d of %d met\n", met, all }' build/bench.txt | tee -a build/bench.txt
{ echo "bench: $(date -u +%F) kernel ${kernel:-?} rdma-core ${rdmacore:-?}, ours at ${commit:-?}${load:+; host load $load}; rounds per library: \
$(ls "$out"/bench_r[0-9]*.ours.out 2>/dev/null | wc -l); table: build/bench.txt, JSON: build/bench.json"; } >&2
# the storm table (bench/storm-report.sh: build/storm.txt), when the run had the storms
src=0
if [ -e "$out/bench_storm.upstream.out" ] || [ -e "$out/bench_storm.ours.out" ]; then echo; bench/storm-report.sh "$out"; src=$?; fi
[ $vmrc = 0 ] || echo "bench: the VM run failed (exit $vmrc): see ${log:-the run log}" >&2
[ $rc = 0 ] && [ $vmrc = 0 ] && [ $src = 0 ]
