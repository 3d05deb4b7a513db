# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# storm.sh - connection storms: upstream's cmtime with one listening server (ns1, rxe1) and
# several client processes (root ns, rxe0), every process on the same library, and
# ctest/vm/storm_cycles.c's connect/disconnect cycles.
#
#   storm_small   every run (make check): cmtime -m 0 (no hardware QPs), a server and 2
#                 clients, 150 connections each (300 accepted), 1 thread; passes when every
#                 process exits 0 with its table, and (ours run) each client step's total of
#                 ours is within 4x upstream's of the same boot + 300 ms, the full connect
#                 within 3x + 500 ms
#   bench_storm   make bench only (flag bench): the storm sizes of STORM_SIZES (below), each
#                 run once per library per variant run, alternating (the upstream variant run:
#                 upstream first; the ours run: ours first), so two rounds per library; then
#                 storm_cycles per library. Lines:
#                   STORM <size> <lib> <round> <case> <value>      (bench/run.sh: the storm table)
#                   STORM <size> <lib> <round> FAIL <reason>
#
# cmtime's options (rdma-core 65): -P peers (all processes, the server included), -c
# connections per listener (so each client makes -c, the server accepts -c x clients), -m US
# simulated QPs (no ibv_create_qp/modify; the CM alone), -n worker threads, -p out-of-band TCP
# port (the server binds it on 192.0.2.2 and is the root of the out-of-band tree; the clients
# join it and all steps start together), -q the first simulated QP number: each client gets its
# own range (k x 200000), as two clients with the same numbers from one address are refused by
# the kernel's CM as stale connections (REJECTED, status 10). With -P above 2 it runs one test, the table after
# "Connect (N)" / "Accept (N)".
# The kernel rejects connection requests beyond the listener's backlog of unanswered requests
# (rdma_listen backlog 0 = net.rdma_ucm.max_backlog, 1024 by default: REJECTED, status 28);
# the storms raise it to 65536 for both libraries, as a server expecting such storms does.

# storm_sample OUT PID:LABEL:LOG...: every 50 ms until every PID has exited, each process's
# resident set, descriptors and threads; the base is its last sample before its LOG shows the
# line that starts the measured test (after the warm-up connection); prints per label
# "label base_rss_kb peak_rss_kb base_fds peak_fds peak_threads"
storm_sample_py='
import os, sys, time
out = sys.argv[1]; procs = []
for a in sys.argv[2:]:
    pid, label, log = a.split(":", 2); procs.append({"pid": pid, "label": label, "log": log, "base": None, "frozen": False, "peak": [0, 0, 0]})
def read(pid):
    try:
        rss = thr = 0
        for l in open("/proc/%s/status" % pid):
            if l.startswith("VmRSS:"): rss = int(l.split()[1])
            elif l.startswith("Threads:"): thr = int(l.split()[1])
        return rss, len(os.listdir("/proc/%s/fd" % pid)), thr
    except OSError:
        return None
while True:
    alive = 0
    for p in procs:
        v = read(p["pid"])
        if v is None: continue
        alive += 1
        if not p["frozen"]:
            try:
                t = open(p["log"]).read()
            except OSError:
                t = ""
            if "Connect (" in t or "Accept (" in t: p["frozen"] = True
            else: p["base"] = v
        p["peak"] = [max(a, b) for a, b in zip(p["peak"], v)]
    if not alive: break
    time.sleep(0.05)
with open(out, "w") as f:
    for p in procs:
        b = p["base"] or (0, 0, 0)
        f.write("%s %d %d %d %d %d\n" % (p["label"], b[0], p["peak"][0], b[1], p["peak"][1], p["peak"][2]))
'

# storm_env LIB: the command words that put a process on LIB's librdmacm (upstream | ours |
# a build of ours that bench/storm-ab.sh shipped as /extra/bin/ab/LIB); LIB+trace: the same
# library with its trace on (RDMACM_RS_TRACE, one file per process in $storm_trace_dir)
storm_trace_dir=/tmp/storm-trace
storm_env(){ local t=; case $1 in *+trace) t=" RDMACM_RS_TRACE=$storm_trace_dir/"; set -- "${1%+trace}";; esac
  case $1 in upstream) echo "env -u LD_LIBRARY_PATH RDMACM_VARIANT=upstream$t";;
  ours) echo "env LD_LIBRARY_PATH=/extra/ours/lib RDMACM_VARIANT=ours$t";;
  *) echo "env LD_LIBRARY_PATH=/extra/bin/ab/$1 RDMACM_VARIANT=ab$t";; esac; }

# storm_cmtime SIZE LIB ROUND CLIENTS CONNS THREADS MODE(m|qp) PORT TIMEOUT: one storm; prints
# STORM lines (see above) and returns non-zero when it failed. Per client step: total(us) is the
# slowest client's wall time of the step (the clients start each phase together), per_conn the
# clients' mean us/conn; srv_* the server's table; memory and descriptors per connection: the
# growth from the base to the peak (storm_sample), the server's over the connections it
# accepted, the clients' summed over all of theirs.
storm_cmtime(){ local size=$1 lib=$2 round=$3 nc=$4 c=$5 th=$6 mode=$7 port=$8 to=$9
  local o=/tmp/storm.$size.$lib.$round w s k pids=() smp=() rc=0 m= peers=$(( $4 + 1 )) end why=
  w=$(storm_env "$lib"); [ "$mode" = m ] && m="-m 0"
  rm -f "$o".*
  [[ $lib != *+trace ]] || { rm -rf "$storm_trace_dir"; mkdir -p "$storm_trace_dir"; }
  # shellcheck disable=SC2086
  $w ip netns exec ns1 ${STORM_SRV_WRAP:-} stdbuf -oL -eL cmtime -b 192.0.2.2 -C 192.0.2.2 -p "$port" -L -P $peers -c "$c" $m -n "$th" > "$o.srv" 2>&1 & s=$!
  smp+=("$s:srv:$o.srv")
  if ! bench_wait_listen $s 60 "$port"; then echo "STORM $size $lib $round FAIL server_did_not_listen"; sed 's/^/  server: /' "$o.srv" >&2
    kill $s 2>/dev/null; wait $s 2>/dev/null; return 1; fi
  for k in $(seq "$nc"); do
    # shellcheck disable=SC2086
    local cw=; [ "$k" = 1 ] && cw=${STORM_CLI_WRAP:-}
    # shellcheck disable=SC2086
    $w $cw stdbuf -oL -eL cmtime -b 192.0.2.1 -C 192.0.2.2 -p "$port" -P $peers -c "$c" $m -q $((k * 200000)) -n "$th" > "$o.c$k" 2>&1 &
    pids+=($!); smp+=("$!:c$k:$o.c$k")
  done
  python3 -c "$storm_sample_py" "$o.mem" "${smp[@]}" & local sp=$!
  end=$((SECONDS + to))
  while [ $SECONDS -lt $end ]; do local alive=0
    for k in $s "${pids[@]}"; do kill -0 "$k" 2>/dev/null && alive=1; done
    [ $alive = 1 ] || break; sleep 0.2; done
  for k in $s "${pids[@]}"; do kill -0 "$k" 2>/dev/null && { why+=" timeout(${to}s)"; kill -9 "$k" 2>/dev/null; }; done
  for k in "${pids[@]}"; do wait "$k" || why+=" client_rc=$?"; done
  wait $s || why+=" server_rc=$?"
  wait $sp 2>/dev/null
  grep -q 'Timeout waiting' "$o.srv" && why+=" server_disconnect_timeout"
  awk -v size="$size" -v lib="$lib" -v r="$round" -v nc="$nc" -v conns=$((nc * c)) -v memf="$o.mem" '
    FNR == 1 { f++; on = 0; srv = FILENAME ~ /\.srv$/ }
    /^step +avg\/conn/ { on = 1; next }
    on && NF >= 7 && $(NF - 5) ~ /^[0-9]+$/ { k = $1; for (i = 2; i <= NF - 6; i++) k = k "_" $i; o = NF - 6
      if (srv) { st[k] = $(o + 2); sm[k] = $(o + 5); if (!(k in so)) { so[k] = 1; sord[ns++] = k } }
      else { if ($(o + 2) + 0 > tot[k]) tot[k] = $(o + 2) + 0; per[k] += $(o + 3); cnt[k]++; if ($(o + 5) + 0 > mx[k]) mx[k] = $(o + 5) + 0
        if (!(k in seen)) { seen[k] = 1; ord[n++] = k } } }
    END { bad = 0
      for (i = 0; i < n; i++) { k = ord[i]; if (cnt[k] != nc) bad = 1
        printf "STORM %s %s %s %s_total %d\nSTORM %s %s %s %s_per_conn %.1f\nSTORM %s %s %s %s_max %d\n", size, lib, r, k, tot[k], size, lib, r, k, per[k] / cnt[k], size, lib, r, k, mx[k] }
      for (i = 0; i < ns; i++) { k = sord[i]; if (k ~ /^(cm_connect|disconnect|destroy_id|destroy_qp|create_qp)$/)
        printf "STORM %s %s %s srv_%s_total %d\nSTORM %s %s %s srv_%s_max %d\n", size, lib, r, k, st[k], size, lib, r, k, sm[k] }
      while ((getline l < memf) > 0) { split(l, a, " "); if (a[1] == "srv") { srss = a[3] - a[2]; sfd = a[5] - a[4]; sth = a[6] }
        else { crss += a[3] - a[2]; cfd += a[5] - a[4]; if (a[6] > cth) cth = a[6] } }
      if (conns > 0 && ns > 0) printf "STORM %s %s %s srv_rss_bytes_per_conn %.0f\nSTORM %s %s %s srv_fds_per_conn %.3f\nSTORM %s %s %s srv_threads %d\n", size, lib, r, srss * 1024 / conns, size, lib, r, sfd / conns, size, lib, r, sth
      if (conns > 0 && n > 0) printf "STORM %s %s %s cli_rss_bytes_per_conn %.0f\nSTORM %s %s %s cli_fds_per_conn %.3f\nSTORM %s %s %s cli_threads %d\n", size, lib, r, crss * 1024 / conns, size, lib, r, cfd / conns, size, lib, r, cth
      exit bad || n == 0 || ns == 0 }' "$o.srv" "$o".c[0-9]* > "$o.storm" || why+=" no_table"
  # with the trace on: its lines and bytes per connection (all processes' files), then gone
  if [[ $lib == *+trace ]]; then
    cat "$storm_trace_dir"/*.jsonl 2>/dev/null | awk -v p="STORM $size $lib $round" -v conns=$((nc * c)) -v files="$(ls "$storm_trace_dir" | wc -l)" \
      '{ b += length($0) + 1 } END { printf "%s trace_files %d\n%s trace_lines %d\n%s trace_bytes_per_conn %.0f\n", p, files, p, NR, p, conns ? b / conns : 0
        if (NR == 0) exit 1 }' >> "$o.storm" || why+=" no_trace_lines"
    rm -rf "$storm_trace_dir"
  fi
  if [ -z "$why" ]; then cat "$o.storm"; return 0; fi
  why=${why# }; echo "STORM $size $lib $round FAIL ${why// /,}"
  { echo "storm $size $lib round $round:$why"; for k in "$o.srv" "$o".c[0-9]*; do echo "== $k"; tail -8 "$k"; done; } >&2
  rc=1; return $rc
}

# storm_cyc SIZE LIB ROUND CYCLES: storm_cycles on LIB; STORM lines: us per cycle, the slowest
# cycle, descriptors/RSS/threads at the first and last sample
storm_cyc(){ local o=/tmp/storm.cyc.$2.$3 w rc; w=$(storm_env "$2")
  # shellcheck disable=SC2086
  timeout 900 $w /extra/bin/storm_cycles "$4" 10 > "$o" 2>&1; rc=$?
  sed 's/^/# /' "$o" | grep -v '^# CYCLES n=' ; grep '^CYCLES n=' "$o" | tail -3 | sed 's/^/# /'
  if [ $rc = 0 ] && grep -q '^CYCLES done=' "$o"; then
    awk -v s="$1" -v l="$2" -v r="$3" '/^CYCLES done=/ { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
      split(v["fds"], f, "->"); split(v["rss_kb"], m, "->"); split(v["threads"], t, "->")
      printf "STORM %s %s %s us_per_cycle %s\nSTORM %s %s %s max_cycle_us %s\n", s, l, r, v["us_per_cycle"], s, l, r, v["max_cycle_us"]
      printf "STORM %s %s %s fds_growth %d\nSTORM %s %s %s rss_kb_growth %d\nSTORM %s %s %s threads_growth %d\n", s, l, r, f[2] - f[1], s, l, r, m[2] - m[1], s, l, r, t[2] - t[1] }' "$o"
  else echo "STORM $1 $2 $3 FAIL storm_cycles_rc=$rc"; tail -5 "$o" >&2; return 1; fi
}

storm_backlog(){ local f=/proc/sys/net/rdma_ucm/max_backlog
  [ -w $f ] && echo 65536 > $f; ip netns exec ns1 sh -c "[ -w $f ] && echo 65536 > $f"; return 0; }

# the small storm of make check (ours run: against the upstream run of this boot)
storm_small(){ local lib=upstream up=/host/out/storm_small.upstream.out rc=0
  [ "${RDMACM_VARIANT:-}" = ours ] && lib=ours
  storm_backlog
  storm_cmtime small "$lib" 1 2 150 1 m 7560 120 | tee /tmp/storm.small.out
  [ "${PIPESTATUS[0]}" = 0 ] || return 1
  [ "$lib" = ours ] || return 0
  [ -s $up ] || { echo "storm_small: no upstream run ($up)"; return 1; }
  awk '$1 == "STORM" && $2 == "small" && $5 ~ /_total$/ && $5 !~ /^srv_/ { if (FNR == NR) u[$5] = $6; else o[$5] = $6 }
    END { bad = 0; printf "\n%-28s %10s %10s %10s\n", "step (client total us)", "upstream", "ours", "limit"
      for (k in o) { if (!(k in u)) { printf "%s: no upstream number\n", k; bad = 1; continue }
        lim = k == "full_connect_total" ? 3 * u[k] + 500000 : 4 * u[k] + 300000
        printf "%-28s %10d %10d %10d%s\n", k, u[k], o[k], lim, (o[k] > lim ? "  OVER" : ""); if (o[k] > lim) bad = 1 }
      if (!("full_connect_total" in o)) bad = 1
      exit bad }' $up /tmp/storm.small.out
}
export -f storm_small storm_cmtime storm_cyc storm_env storm_backlog
export storm_sample_py storm_trace_dir

# STORM_SIZES: SIZE:CLIENTS:CONNS_PER_CLIENT:THREADS:MODE:TIMEOUT ... (VM_BENCH "storm=..." sets
# it, "," for " " and "/" for ":"); STORM_CYCLES: connect/disconnect cycles per library
# STORM_TRACE: the storms (by size name) that also run on ours with its trace on (library
# "ours+trace"; with stormlibs, the last of them; the report's trace table: ours+trace / ours)
export STORM_SIZES_DEFAULT="noqp10k_n1:4:2500:1:m:600 noqp10k_n2:4:2500:2:m:600 noqp10k_n4:4:2500:4:m:600 qp2k_n1:4:500:1:qp:600"
export STORM_TRACE_DEFAULT="noqp10k_n2"
bench_storm(){ local r sz size nc c th mode to port=7561 lib rc=0 libs=(upstream ${STORM_AB:-ours}) order=() o2
  # the upstream variant's run takes the libraries in order, the ours run in reverse
  r=1; [ "${RDMACM_VARIANT:-}" = ours ] && r=2
  for lib in "${libs[@]}"; do if [ $r = 1 ]; then order+=("$lib"); else order=("$lib" "${order[@]}"); fi; done
  storm_backlog
  echo "# storm: max_backlog $(cat /proc/sys/net/rdma_ucm/max_backlog 2>/dev/null), $(nproc) CPUs, $(awk '/MemTotal/ { print $2 " kB" }' /proc/meminfo)"
  for sz in ${STORM_SIZES:-$STORM_SIZES_DEFAULT}; do IFS=: read -r size nc c th mode to <<< "$sz"
    o2=("${order[@]}")
    # the last library of ours (make bench: ours) again with its trace on, beside it (after it
    # in round 1, before it in round 2)
    if [[ " ${STORM_TRACE-$STORM_TRACE_DEFAULT} " == *" ${size%.r[0-9]*} "* ]]; then
      if [ $r = 1 ]; then o2+=("${libs[-1]}+trace"); else o2=("${libs[-1]}+trace" "${o2[@]}"); fi; fi
    for lib in "${o2[@]}"; do port=$((port + 1)); local t0=$SECONDS
      storm_cmtime "$size" "$lib" "$r" "$nc" "$c" "$th" "$mode" "$port" "$to" || rc=1
      echo "# storm $size $lib round $r: $((SECONDS - t0)) s"; done; done
  [ "${STORM_CYCLES:-2000}" = 0 ] || for lib in "${order[@]}"; do local t0=$SECONDS
    storm_cyc cycles "$lib" "$r" "${STORM_CYCLES:-2000}" || rc=1; echo "# storm cycles $lib round $r: $((SECONDS - t0)) s"; done
  return $rc
}
export -f bench_storm

# on demand only (VM_BENCH=stormdiag): storm_cycles CYCLES (stormdiagcycles=, default 300) on
# the variant's library under strace -f -c (system calls per cycle, as comment lines) and under callgrind
# (out/callgrind/<lib>.storm_cycles: instructions per cycle, bench/callgrind-self.py), then a
# storm of 2 clients x 1000 connections (-m 0) with the server under strace -f -c; with
# "stormdiagqp" instead a storm with rxe QPs (2 clients x 300), the server and a client under it
storm_diag(){ local lib=upstream w o n=${STORM_DIAG_CYCLES:-300} rc=0
  [ "${RDMACM_VARIANT:-}" = ours ] && lib=ours
  w=$(storm_env $lib); o=/tmp/storm-diag.$lib
  if [ -n "${STORM_DIAG_QP:-}" ]; then
    # rxe QPs (2 clients x 300 connections, 1 thread), the server and the first client under strace -f -c
    storm_backlog
    STORM_SRV_WRAP="strace -f -c -o $o.qpsrv" STORM_CLI_WRAP="strace -f -c -o $o.qpcli" storm_cmtime diagqp "$lib" 1 2 300 1 qp 7595 900 |
      grep -E '_total|FAIL' || rc=1
    sed "s/^/# strace $lib qp server: /" "$o.qpsrv"; sed "s/^/# strace $lib qp client: /" "$o.qpcli"
    return $rc
  fi
    # shellcheck disable=SC2086
    timeout 600 $w strace -f -c -o "$o.strace" /extra/bin/storm_cycles "$n" 2 > "$o.out" 2>&1 || rc=1
    grep '^CYCLES done' "$o.out" | sed "s/^/# $lib strace run: /"; sed "s/^/# strace $lib: /" "$o.strace"
    # shellcheck disable=SC2086
    timeout 900 $w valgrind -q --tool=callgrind --callgrind-out-file="$o.cg" /extra/bin/storm_cycles "$n" 2 > "$o.cgout" 2>&1 || rc=1
    grep '^CYCLES done' "$o.cgout" | sed "s/^/# $lib callgrind run: /"
    [ -s "$o.cg" ] && { mkdir -p /host/out/callgrind; cp "$o.cg" "/host/out/callgrind/$lib.storm_cycles"; grep '^summary' "$o.cg" | sed "s/^/# $lib callgrind /"; }
    # a storm (2 clients x 1000 connections, -m 0, 1 thread) with the server under strace -f -c
    storm_backlog
    STORM_SRV_WRAP="strace -f -c -o $o.srvstrace" storm_cmtime diag "$lib" 1 2 1000 1 m 7590 600 | grep -E 'full_connect_total|cm_connect_total|FAIL' || rc=1
    sed "s/^/# strace $lib server: /" "$o.srvstrace"
  return $rc; }
export -f storm_diag
case ${BENCH:-} in *stormdiagqp*) export STORM_DIAG_QP=1;; esac
case ${BENCH:-} in *stormdiagcycles=*) STORM_DIAG_CYCLES=${BENCH#*stormdiagcycles=}; export STORM_DIAG_CYCLES=${STORM_DIAG_CYCLES%% *};; esac
[[ ${BENCH:-} != *stormdiag* ]] || t storm_diag 1800 bash -c storm_diag
case ${BENCH:-} in *storm=*) STORM_SIZES=${BENCH#*storm=}; STORM_SIZES=${STORM_SIZES%% *}; STORM_SIZES=${STORM_SIZES//,/ }; export STORM_SIZES=${STORM_SIZES//\//:};; esac
# "stormlibs=a,b" (bench/storm-ab.sh): the storms on upstream's and on these builds of ours
case ${BENCH:-} in *stormlibs=*) STORM_AB=${BENCH#*stormlibs=}; STORM_AB=${STORM_AB%% *}; export STORM_AB=${STORM_AB//,/ };; esac
# "stormtrace=a,b": the storms (by name) that also run on ours with its trace on ("-": none)
case ${BENCH:-} in *stormtrace=*) STORM_TRACE=${BENCH#*stormtrace=}; STORM_TRACE=${STORM_TRACE%% *}; STORM_TRACE=${STORM_TRACE//,/ }; export STORM_TRACE=${STORM_TRACE#-};; esac
case ${BENCH:-} in *stormcycles=*) STORM_CYCLES=${BENCH#*stormcycles=}; export STORM_CYCLES=${STORM_CYCLES%% *};; esac
# make bench runs the storms unless its sections leave them out
if [ -n "${BENCH:-}" ] && [ -z "${BENCH_AB:-}" ] && { [ -z "${BENCH_SECTIONS:-}" ] || [[ " $BENCH_SECTIONS " == *" storm "* ]]; }; then
  t bench_storm 3600 bash -c bench_storm
fi
t storm_small 300 bash -c storm_small
