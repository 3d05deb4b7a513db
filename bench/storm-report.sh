#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# bench/storm-report.sh DIR: the storm table of `make bench` from a run's output directory
# (DIR/bench_storm.{upstream,ours}.out, written by vm/suite.d/storm.sh's bench_storm): per
# storm size (and thread count) and case, each library's best round, ours/upstream, the spread
# of each library's rounds ((worst - best) / best) and a verdict ("~": the ratio is within the
# larger spread). First a matrix of the step totals (ours/upstream, size by size), then every
# case, then (storms run on ours with RDMACM_RS_TRACE on too) the trace's cost: ours with it on
# / ours with it off, step by step, and the lines and bytes it wrote per connection. Writes
# build/storm.txt. Exit status: non-zero when a storm has no number for a library in some
# round (a FAIL line), naming it.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bench/storm-report.sh DIR}
files=()
for f in "$out"/bench_storm.upstream.out "$out"/bench_storm.ours.out; do [ -s "$f" ] && files+=("$f"); done
[ ${#files[@]} -gt 0 ] || { echo "storm: no storm output in $out" >&2; exit 1; }
mkdir -p build
awk '
  $1 == "STORM" && $5 == "FAIL" { fail[$2 " " $3 " round " $4] = $6; if (!($2 in sz)) { sz[$2] = 1; szo[nsz++] = $2 }; next }
  $1 == "STORM" && $6 ~ /^-?[0-9]+(\.[0-9]+)?$/ {
    s = $2; l = $3; c = $5; v = $6 + 0
    if (!(s in sz)) { sz[s] = 1; szo[nsz++] = s }
    if (!((s, c) in seen)) { seen[s, c] = 1; co[s, nc[s]++] = c }
    n[s, c, l]++; vals[s, c, l] = vals[s, c, l] " " $6
    if (!((s, c, l) in best) || v < best[s, c, l]) best[s, c, l] = v
    if (!((s, c, l) in worst) || v > worst[s, c, l]) worst[s, c, l] = v }
  function spread(s, c, l) { return best[s, c, l] > 0 ? (worst[s, c, l] - best[s, c, l]) / best[s, c, l] : 0 }
  function ratio(s, c) { return ((s, c, "upstream") in best) && ((s, c, "ours") in best) && best[s, c, "upstream"] > 0 ? best[s, c, "ours"] / best[s, c, "upstream"] : "" }
  function mark(s, c,   r, q) { r = ratio(s, c); if (r == "") return "-"
    q = spread(s, c, "upstream"); if (spread(s, c, "ours") > q) q = spread(s, c, "ours")
    return sprintf("%.2f%s", r, (r - 1 <= q && 1 - r <= q && r != 1) ? "~" : "") }
  END {
    # the matrix: client step totals (cmtime total(us): the step over all connections, slowest
    # client), the server steps, memory, and the cycles
    split("full_connect create_id bind_addr resolve_addr resolve_route create_qp init_qp cm_connect disconnect destroy_id destroy_qp", st, " ")
    printf "storm: ours/upstream of the best round per library (below 1 = ours faster; ~ = within the spread of the rounds)\n"
    printf "%-26s", "step total (us)"; m = 0
    for (i = 0; i < nsz; i++) if ((szo[i], "full_connect_total") in seen) { cols[m++] = szo[i]; printf " %12s", szo[i] }
    printf "\n"
    for (j = 1; j in st; j++) { printf "%-26s", st[j]; for (i = 0; i < m; i++) printf " %12s", mark(cols[i], st[j] "_total"); printf "\n" }
    split("srv_cm_connect_total srv_disconnect_total srv_destroy_id_total srv_rss_bytes_per_conn cli_rss_bytes_per_conn srv_fds_per_conn cli_fds_per_conn", xs, " ")
    for (j = 1; j in xs; j++) { printf "%-26s", xs[j]; for (i = 0; i < m; i++) printf " %12s", mark(cols[i], xs[j]); printf "\n" }
    printf "\n%-12s %-28s %12s %12s %7s %9s %9s  %s\n", "storm", "case", "upstream", "ours", "ours/up", "spread-up", "spread-us", "rounds (upstream | ours)"
    for (i = 0; i < nsz; i++) { s = szo[i]
      for (k = 0; k < nc[s]; k++) { c = co[s, k]
        u = (s, c, "upstream") in best ? best[s, c, "upstream"] : "-"; o = (s, c, "ours") in best ? best[s, c, "ours"] : "-"
        if (u == 0 && o == 0 && worst[s, c, "upstream"] == 0 && worst[s, c, "ours"] == 0) continue
        if (u == "-" && o == "-") continue
        printf "%-12s %-28s %12s %12s %7s %8.0f%% %8.0f%%  %s |%s\n", s, c, u, o, mark(s, c), spread(s, c, "upstream") * 100, spread(s, c, "ours") * 100, vals[s, c, "upstream"], vals[s, c, "ours"] } }
    # the trace: ours with RDMACM_RS_TRACE on against ours with it off, same storms and boot
    t = "ours+trace"; ht = 0
    for (i = 0; i < nsz; i++) { s = szo[i]
      for (k = 0; k < nc[s]; k++) { c = co[s, k]; if (!((s, c, t) in best)) continue
        if (!ht) { ht = 1; printf "\ntrace on/off (ours with RDMACM_RS_TRACE on / ours with it off; below 1 = faster on)\n"
          printf "%-12s %-28s %12s %12s %7s %9s %9s  %s\n", "storm", "case", "ours", "ours+trace", "on/off", "spread-of", "spread-on", "rounds (off | on)" }
        if (c !~ /_total$|^trace_/) continue
        o = best[s, c, "ours"]; if (o == "") o = "-"; u = best[s, c, t]
        q = spread(s, c, "ours"); if (spread(s, c, t) > q) q = spread(s, c, t)
        rr = o != "-" && o > 0 ? u / o : ""
        printf "%-12s %-28s %12s %12s %7s %8.0f%% %8.0f%%  %s |%s\n", s, c, o, u, rr == "" ? "-" : sprintf("%.2f%s", rr, (rr - 1 <= q && 1 - rr <= q && rr != 1) ? "~" : ""), spread(s, c, "ours") * 100, spread(s, c, t) * 100, vals[s, c, "ours"], vals[s, c, t] } }
    bad = 0; for (k in fail) { printf "storm: FAIL %s: %s\n", k, fail[k] > "/dev/stderr"; bad = 1 }
    exit bad }' "${files[@]}" | tee build/storm.txt
rc=${PIPESTATUS[0]}
# the cycles and the teardown, said in words
awk '$1 == "STORM" && $2 == "cycles" && (($5 ~ /^(fds|threads)_growth$/ && $6 != 0) || ($5 == "rss_kb_growth" && $6 > 1024)) { printf "storm: cycles %s round %s: %s %s\n", $3, $4, $5, $6; g = 1 }
     END { if (!g) print "storm: cycles: no descriptor, thread or RSS growth (beyond 1 MiB) past the warm-up in any run" }' "${files[@]}" | tee -a build/storm.txt
exit $rc
