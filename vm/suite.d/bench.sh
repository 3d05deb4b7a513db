# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# bench.sh - the benchmark (bench/run.sh, `make bench`) and its short mode.
#
# bench_driver MODE runs every case once with the library of the variant it is started in
# (LD_LIBRARY_PATH is inherited by every process it starts, servers in ns1 included, so both
# ends of cmtime and rstream use the same library) and prints one line per number:
#   BENCH <case> <value> <unit>        (every value: lower is better)
#   BENCH <case> FAIL <reason>
# It exits non-zero when any case it attempted has no number.
#   full   (VM_BENCH=1 runs only: tests bench_r1, bench_r2 = two rounds, each upstream then ours,
#          so the libraries alternate U O U O; bench/run.sh keeps the better round per case)
#   short  (every run: test bench_short, small counts, the callgrind cases in the ours run
#          only: each valgrind start costs several seconds under TCG);
#          the ours run also prints a ratio table against the upstream run of the same boot
#          (/host/out/bench_short.upstream.out); its numbers mean little, only that every case
#          still produces one.
# Cases: cmtime over rxe (both its tests, every step), rdma_getaddrinfo (numeric
# IPv4, IPv6, AF_IB, passive, a hosts-file name, first call in a fresh process), synchronous
# ids (time per id, RSS per 1000), the id loop from 1/2/4/8 threads, rdma_resolve_addrinfo
# against a DNS server that answers after 500 ms, an event's get + ack timed (after a write,
# and with the write in it), rstream 64 KiB throughput / 64 B latency,
# rsocket (not in the short mode): 8 streams ping-pong 64 B from 8 threads, and one
# stream with a sender and a receiver thread at once (64 KiB), instructions per call under callgrind (library object only, and the whole process).

# The slow DNS server: vm/guest/slow_dns.py (answers after $1 seconds).

# bench_wait_listen PID SECS [TCPPORT]: until an RDMA listen shows up (rdma res in the root
# namespace lists the ids of every namespace), or with TCPPORT a TCP listen on that port in ns1
# (cmtime's out-of-band socket: its RDMA listen comes only after the client connected to it),
# or the server died
bench_wait_listen(){ local end=$((SECONDS + $2)); while [ $SECONDS -lt $end ]; do kill -0 "$1" 2>/dev/null || return 1
  if [ -n "${3:-}" ]; then ip netns exec ns1 ss -Hltn "sport = :$3" 2>/dev/null | grep -q . && return 0
  else rdma res show cm_id 2>/dev/null | grep -q LISTEN && { sleep 0.3; return 0; }; fi; sleep 0.1; done; return 1; }
# bench_stop PID: stop a server that is still running (after its client failed)
bench_stop(){ local i; for i in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$1" 2>/dev/null || break; sleep 0.3; done
  kill -0 "$1" 2>/dev/null && { pkill -TERM -P "$1" 2>/dev/null; kill "$1" 2>/dev/null; }; wait "$1" 2>/dev/null; }
bench_fail(){ echo "BENCH $1 FAIL ${*:2}"; }

# a bench_calls case timed without valgrind: bench_calls CASE N [WRAP] (make bench's events
# section: get_ack, rdma_get_cm_event + ack of an event written before, the write in the time;
# write_get_ack: write, get, ack; connect, accept, disconnect: the call alone on a fresh
# connection's id; bench_ab's t_<case>, under WRAP), "BENCH CASE_ns_per_call"
bench_call_time(){ local c=$1 n=$2 w=${3:-} v
  # shellcheck disable=SC2086
  v=$(timeout 600 $w /extra/bin/bench_calls "$c" "$n" 2> /tmp/bench-ct.err | awk '$1 == "ns_per_call" && $2 ~ /^[0-9.]+$/ { print $2 }')
  if [ -n "$v" ]; then echo "BENCH ${c}_ns_per_call $v ns/call"
  else bench_fail "${c}_ns_per_call" no_result; sed 's/^/  bench_calls: /' /tmp/bench-ct.err >&2; fi
}

# cmtime -c N across the pair; every step of both tables (with QPs: "qp", without: "noqp"),
# total(us) (wall time of the step over all connections) and us/conn (per-connection sum)
bench_cmtime(){ local n=$1 to=$2 o=/tmp/bench-cmtime.$1 s c steps
  steps="full_connect create_id bind_addr resolve_addr resolve_route create_qp init_qp_attr init_qp rtr_qp_attr rtr_qp rts_qp_attr rts_qp cm_connect establish disconnect destroy_id destroy_qp"
  ip netns exec ns1 stdbuf -oL -eL cmtime -b 192.0.2.2 -C 192.0.2.2 -L -c "$n" > "$o.srv" 2>&1 & s=$!
  bench_wait_listen $s 30 7471
  timeout "$to" stdbuf -oL -eL cmtime -b 192.0.2.1 -C 192.0.2.2 -c "$n" > "$o" 2>&1; c=$?
  [ $c = 0 ] || bench_stop $s; wait $s 2>/dev/null
  awk -v n="$n" -v c="$c" -v steps="$steps" '
    /^qp_conn/ { t = "qp" } /^cm_conn/ { t = "noqp" }
    t != "" && NF >= 7 && $1 != "step" && $(NF - 5) ~ /^[0-9]+$/ {
      k = $1; for (i = 2; i <= NF - 6; i++) k = k "_" $i; o = NF - 6
      tot[t, k] = $(o + 2); per[t, k] = $(o + 3) }
    END { split(steps, s, " ")
      for (x = 1; x <= 2; x++) { t = x == 1 ? "qp" : "noqp"
        for (i = 1; i in s; i++) { k = s[i]; nm = "cmtime" n "_" t "_" k
          if ((t, k) in tot) { printf "BENCH %s_total %s us\n", nm, tot[t, k]; printf "BENCH %s_per_conn %s us\n", nm, per[t, k] }
          else { printf "BENCH %s_total FAIL cmtime_rc=%s_no_such_row\n", nm, c; printf "BENCH %s_per_conn FAIL cmtime_rc=%s\n", nm, c } } } }' "$o"
  [ $c = 0 ] || { echo "cmtime -c $n: client exit $c; output tail:"; tail -5 "$o"; echo "server tail:"; tail -5 "$o.srv"; } >&2
}

# rstream across the pair: NAME 'client/server options' [WRAP] (WRAP: command words both ends
# run under, e.g. env assignments; bench_ab's library choice)
bench_rstream(){ local nm=$1 w=${3:-} o=/tmp/bench-rstream.$1 s c v
  # shellcheck disable=SC2086
  ip netns exec ns1 $w rstream -b 192.0.2.2 $2 > "$o.srv" 2>&1 & s=$!
  bench_wait_listen $s 20
  # shellcheck disable=SC2086
  timeout 300 $w rstream -s 192.0.2.2 $2 > "$o" 2>&1; c=$?
  [ $c = 0 ] || bench_stop $s; wait $s 2>/dev/null
  v=$(awk 'NR == 2 && NF == 8 { print $8 }' "$o")
  if [ $c = 0 ] && [ -n "$v" ]; then echo "BENCH $nm $v us/xfer"
  else bench_fail "$nm" "rstream_rc=$c"; sed 's/^/  rstream: /' "$o" "$o.srv" >&2; fi
}

# rsocket cases (ctest/vm/bench_rsocket.c) across the pair, both ends on the same
# library: NAME MODE PORT ARGS... (NAME: the case the program prints for these ARGS). The case
# has a number only when both ends exit 0 (each checks every call, byte count and content).
# the soft-RoCE devices' hardware counters, "device/counter value" a line each
bench_rxe_counters(){ local f; for f in /sys/class/infiniband/*/ports/1/hw_counters/*; do
  [ -r "$f" ] && echo "${f#/sys/class/infiniband/} $(cat "$f")"; done 2>/dev/null; }
# the counters that moved since BEFORE (a file of bench_rxe_counters): " device/.../counter=delta" each
bench_rxe_moved(){ bench_rxe_counters | awk 'NR == FNR { a[$1] = $2; next } $2 != a[$1] { printf " %s=%d", $1, $2 - a[$1] }' "$1" -; }

# bench_rs_pair OUT PORT WAITSECS LTIMEOUT CTIMEOUT "LWRAP" "CWRAP" MODE ARGS...: one run of
# bench_rsocket across the pair: its listening end in ns1 (stdout and stderr to OUT.srv) under
# the command words LWRAP (a tool or env assignments; none when empty), waited for up to
# WAITSECS, then its connecting end under CWRAP (to OUT); the listener is stopped when the
# connecting end fails. Returns the connecting end's status; the listening end's is left in
# bench_rs_listen_rc. The wrappers are split on blanks (their paths have none).
bench_rs_pair(){ local o=$1 port=$2 w=$3 lto=$4 cto=$5 lwrap=$6 cwrap=$7 mode=$8 s c; shift 8
  # shellcheck disable=SC2086
  ip netns exec ns1 timeout "$lto" $lwrap /extra/bin/bench_rsocket "$mode" listen 192.0.2.2 "$port" "$@" > "$o.srv" 2>&1 & s=$!
  bench_wait_listen $s "$w"
  # shellcheck disable=SC2086
  timeout "$cto" $cwrap /extra/bin/bench_rsocket "$mode" connect 192.0.2.2 "$port" "$@" > "$o" 2>&1; c=$?
  [ $c = 0 ] || bench_stop $s; wait $s 2>/dev/null; bench_rs_listen_rc=$?
  return $c
}

bench_rsock(){ local nm=$1 mode=$2 port=$3 o=/tmp/bench-rsock.$1 c sc v d; shift 3
  bench_rxe_counters > "$o.rxe0"
  bench_rs_pair "$o" "$port" 20 150 120 "" "" "$mode" "$@"; c=$?; sc=$bench_rs_listen_rc
  v=$(awk -v nm="$nm" '$1 == "BENCH" && $2 == nm && $3 ~ /^[0-9]+(\.[0-9]+)?$/ { print $3 " " $4 }' "$o")
  d=$(bench_rxe_moved "$o.rxe0")
  if [ $c = 0 ] && [ $sc = 0 ] && [ -n "$v" ]; then grep -h '^#' "$o" "$o.srv"
    # what the case cost the fabric: the counters that moved, whole run
    [ -z "$d" ] || echo "# $nm rxe counters moved:$d"
    echo "BENCH $nm $v"
  else bench_fail "$nm" "connect_rc=$c,listen_rc=$sc$(awk -v nm="$nm" '$1 == "BENCH" && $2 == nm && $3 == "FAIL" { printf ",%s", $4 }' "$o")"
    sed 's/^/  bench_rsocket connect: /' "$o" >&2; sed 's/^/  bench_rsocket listen: /' "$o.srv" >&2; fi
}

# diagnostic, only when BENCH_SECTIONS names "rs_strace": the system calls at each end (strace
# -f -c) of the 8-stream ping-pong (300 round trips per stream) and of the duplex (300 messages
# of 64 KiB each way), as comment lines
bench_rs_strace(){ local o=/tmp/bench-rs-strace c
  bench_rs_pair "$o.run" 7474 60 300 300 "strace -f -c -o $o.srv" "strace -f -c -o $o" pingpong 8 300 64; c=$?
  echo "# rs_strace connect_rc=$c"; grep '^#' "$o.run"
  sed 's/^/# strace connecting: /' "$o"; sed 's/^/# strace listening: /' "$o.srv"
  bench_rs_pair "$o.run" 7477 60 300 300 "strace -f -c -o $o.srv" "strace -f -c -o $o" duplex 300 65536; c=$?
  echo "# rs_strace duplex connect_rc=$c"; grep '^#' "$o.run"
  sed 's/^/# strace duplex connecting: /' "$o"; sed 's/^/# strace duplex listening: /' "$o.srv"
}

# diagnostic (bench/ab.sh -c cm_strace, or BENCH_SECTIONS naming "cm_strace"): cmtime -c N
# across the pair, the connecting end under strace -f [WRAP: both ends under those command words];
# its system calls between the lines it prints as it goes ("Binding addresses", ...: its steps,
# in each of its tests: warmup, qp, noqp; "other": after a line of its own, such as the report,
# the writes of those lines left out), per connection, as comment lines
# "# cm_strace TEST STEP CALL=N ..." (N: calls per connection, 2 decimals), then the calls of
# all steps of the qp and noqp tests together, "BENCH cm_strace_calls N calls"
bench_cm_strace(){ local n=$1 w=${2:-} o=/tmp/bench-cm-strace s c
  rm -f "$o" "$o.trace"
  # shellcheck disable=SC2086
  ip netns exec ns1 $w stdbuf -oL -eL cmtime -b 192.0.2.2 -C 192.0.2.2 -L -c "$n" > "$o.srv" 2>&1 & s=$!
  bench_wait_listen $s 30 7471
  # shellcheck disable=SC2086
  timeout 900 $w strace -f -qq -o "$o.trace" stdbuf -oL -eL cmtime -b 192.0.2.1 -C 192.0.2.2 -c "$n" > "$o" 2>&1; c=$?
  [ $c = 0 ] || bench_stop $s; wait $s 2>/dev/null
  if [ $c != 0 ] || [ ! -s "$o.trace" ]; then bench_fail cm_strace_calls "cmtime_rc=$c"; tail -5 "$o" "$o.srv" >&2; return; fi
  # a line per call (a call another thread interrupted counts once: its "resumed" line is left out);
  # the step is the last of cmtime's lines written to stdout before it
  awk -v n="$n" '
    / write\(1, "/ { if ($0 ~ /Client warmup/) t = "warmup"; else if ($0 ~ /no QPs/) t = "noqp"; else if ($0 ~ /QPs test/) t = "qp"
      if (match($0, /"\\t[A-Za-z ]+/)) { st = substr($0, RSTART + 3, RLENGTH - 3); gsub(/ /, "_", st) } else st = "other"
      if (t != "" && !((t, st) in seen)) { seen[t, st] = 1; order[k++] = t SUBSEP st }
      next }
    /<\.\.\. .* resumed>/ || /^[0-9]+ +(\+\+\+|---)/ { next }
    t != "" && match($0, /^[0-9]+ +[a-z_0-9]+\(/) { nm = substr($0, RSTART, RLENGTH - 1); sub(/^[0-9]+ +/, "", nm)
      cnt[t, st, nm]++; if (!((t, st, nm) in has)) { has[t, st, nm] = 1; calls[t, st] = calls[t, st] " " nm }
      if (t != "warmup") all++ }
    END { for (i = 0; i < k; i++) { split(order[i], q, SUBSEP); line = ""; m = split(calls[q[1], q[2]], cs, " ")
        for (j = 1; j <= m; j++) line = line sprintf(" %s=%.2f", cs[j], cnt[q[1], q[2], cs[j]] / n)
        if (line != "") printf "# cm_strace %s %s%s\n", q[1], q[2], line }
      printf "BENCH cm_strace_calls %d calls\n", all }' "$o.trace"
}

# diagnostic, only when BENCH_SECTIONS names "rs_cg_duplex": the duplex case (200 messages of
# 64 KiB) with its connecting end under callgrind (polling_time as configured); the profile goes to
# out/callgrind/<variant>.rs_duplex.<round>
bench_rs_cg_duplex(){ local o=/tmp/bench-rs-cg-duplex c
  rm -f "$o"
  bench_rs_pair "$o.run" 7475 60 600 600 "" "valgrind -q --tool=callgrind --callgrind-out-file=$o" duplex 200 65536; c=$?
  echo "# rs_cg_duplex connect_rc=$c"; grep -h '^#' "$o.run" "$o.run.srv"
  if [ -d /host/out ] && [ -s "$o" ]; then mkdir -p /host/out/callgrind; cp "$o" "/host/out/callgrind/${RDMACM_VARIANT:-x}.rs_duplex.${BENCH_ROUND:-1}"; fi
}

# diagnostic, only when BENCH_SECTIONS names "rs_prof_duplex": the duplex case (1,000 messages of
# 64 KiB) with both ends under the sampling profiler (ctest/vm/preload/sampler.c: the VM has no
# perf); the samples go to out/prof/<variant>.<end>.<round>, read by bench/sampler-report.py
bench_rs_prof_duplex(){ local o=/tmp/bench-rs-prof c e p="env LD_PRELOAD=/extra/bin/libsampler.so RDMACM_SAMPLER"
  rm -f "$o".*
  bench_rs_pair "$o.run" 7476 20 150 120 "$p=$o.listen" "$p=$o.connect" duplex 1000 65536; c=$?
  echo "# rs_prof_duplex connect_rc=$c"; grep -h '^#' "$o.run" "$o.run.srv"
  if [ -d /host/out ]; then mkdir -p /host/out/prof
    for e in connect listen; do [ -s "$o.$e" ] && cp "$o.$e" "/host/out/prof/${RDMACM_VARIANT:-x}.$e.${BENCH_ROUND:-1}"; done; fi
}

# bench_cg_report CASE CALLS PROFILE UNIT: instructions per call (UNIT) inside librdmacm and in
# the whole process, from a callgrind profile
bench_cg_report(){ local c=$1 n=$2 f=$3 u=$4
  # self cost per object: "ob=" sets the object of the functions that follow; the cost line
  # after "calls=" is a callee's inclusive cost (not self); names are compressed as "(id) name"
  awk -v c="$c" -v n="$n" -v u="$u" '
    function obname(v,   id) { if (match(v, /^\([0-9]+\)/)) { id = substr(v, 1, RLENGTH); v = substr(v, RLENGTH + 2)
                                 if (v != "") nm[id] = v; return nm[id] } return v }
    /^ob=/ { cur = obname(substr($0, 4)); next }
    /^cob=/ { obname(substr($0, 5)); next }
    /^calls=/ { skip = 1; next }
    /^summary:/ { total = $2; next }
    # (one column per position: "line", or "instr line" with --dump-instr; the cost after them)
    /^positions:/ { pc = NF; next }
    /^[0-9+*-]/ { if (skip) { skip = 0; next } self[cur] += $(pc ? pc : 2) }
    END { lib = 0; for (o in self) if (o ~ /librdmacm\.so/) lib += self[o]
      if (total == "" || total == 0) { printf "BENCH cg_%s_lib FAIL no_instructions_counted\nBENCH cg_%s_total FAIL no_instructions_counted\n", c, c; exit }
      printf "BENCH cg_%s_lib %.0f instr/%s\n", c, lib / n, u; printf "BENCH cg_%s_total %.0f instr/%s\n", c, total / n, u }' "$f"
}

# instructions per call under callgrind (counted inside measured_<case> only); [WRAP NAME]:
# under the command words WRAP (bench_ab's library choice), the profile kept as NAME.<case>.<round>
# (per instruction too with BENCH_CG_INSTR=1)
bench_callgrind(){ local c=$1 n=$2 f=/tmp/bench-cg.$1 r w=${3:-} nm=${4:-${RDMACM_VARIANT:-x}}
  rm -f "$f"
  # shellcheck disable=SC2086
  timeout 600 $w valgrind -q --tool=callgrind ${BENCH_CG_INSTR:+--dump-instr=yes} --toggle-collect="measured_$c" --callgrind-out-file="$f" \
    /extra/bin/bench_calls "$c" "$n" > "$f.out" 2> "$f.err"; r=$?
  # keep the profile in the run's work dir (suite/share/out/callgrind/<variant>.<case>.<round>)
  # for callgrind_annotate on the host
  if [ -d /host/out ] && [ -s "$f" ]; then mkdir -p /host/out/callgrind; cp "$f" "/host/out/callgrind/$nm.$c.${BENCH_ROUND:-1}"; fi
  if [ $r != 0 ] || ! grep -qx "calls $n" "$f.out"; then
    bench_fail "cg_${c}_lib" "rc=$r"; bench_fail "cg_${c}_total" "rc=$r"; sed 's/^/  valgrind: /' "$f.err" >&2; return; fi
  bench_cg_report "$c" "$n" "$f" call
}

# instructions in the first rdma_getaddrinfo of a fresh process (bench_resolve first under
# callgrind, counted inside rdma_getaddrinfo only: its one-time set-up included, loading not);
# [WRAP NAME] as bench_callgrind; the profile kept as NAME.first.<round>
bench_cg_first(){ local f=/tmp/bench-cg.first r w=${1:-} nm=${2:-${RDMACM_VARIANT:-x}}
  rm -f "$f"
  # shellcheck disable=SC2086
  timeout 600 $w valgrind -q --tool=callgrind --toggle-collect=rdma_getaddrinfo --callgrind-out-file="$f" \
    /extra/bin/bench_resolve first > "$f.out" 2> "$f.err"; r=$?
  if [ -d /host/out ] && [ -s "$f" ]; then mkdir -p /host/out/callgrind; cp "$f" "/host/out/callgrind/$nm.first.${BENCH_ROUND:-1}"; fi
  if [ $r != 0 ] || [ ! -s "$f" ]; then
    bench_fail cg_first_lib "rc=$r"; bench_fail cg_first_total "rc=$r"; sed 's/^/  valgrind: /' "$f.err" >&2; return; fi
  bench_cg_report first 1 "$f" call
}

# instructions per rsocket round trip: the connecting end of a 1-stream 64 B
# ping-pong under callgrind, counted inside pp_round only (WARMUP + ROUNDS calls), with
# polling_time 0 on both ends so that no count depends on how long a spin lasted, and the
# listening end waiting 5 ms before each echo so that the connecting end is asleep in rrecv
# when it comes: every round trip takes the same path (send; look, arm, look, sleep, wake, take);
# [WRAP NAME PORT] as bench_callgrind (both ends under WRAP), on PORT (7474). BENCH_CG_INSTR=1:
# the profile per instruction too (--dump-instr=yes, for bench/callgrind-lines.py)
bench_cg_rsock(){ local n=$1 f=/tmp/bench-cg.rsock s c sc pt=/etc/rdma/rsocket/polling_time keep= w=${2:-} nm=${3:-${RDMACM_VARIANT:-x}} p=${4:-7474}
  [ -e $pt ] && keep=$(cat $pt); mkdir -p /etc/rdma/rsocket; echo 0 > $pt
  rm -f "$f"
  # shellcheck disable=SC2086
  BENCH_RS_ECHO_DELAY_US=5000 ip netns exec ns1 $w timeout 600 /extra/bin/bench_rsocket pingpong listen 192.0.2.2 $p 1 "$n" 64 > "$f.srv" 2>&1 & s=$!
  bench_wait_listen $s 20
  # shellcheck disable=SC2086
  timeout 600 $w valgrind -q --tool=callgrind ${BENCH_CG_INSTR:+--dump-instr=yes} --toggle-collect=pp_round --callgrind-out-file="$f" \
    /extra/bin/bench_rsocket pingpong connect 192.0.2.2 $p 1 "$n" 64 > "$f.out" 2> "$f.err"; c=$?
  [ $c = 0 ] || bench_stop $s; wait $s 2>/dev/null; sc=$?
  if [ -n "$keep" ]; then echo "$keep" > $pt; else rm -f $pt; fi
  if [ -d /host/out ] && [ -s "$f" ]; then mkdir -p /host/out/callgrind; cp "$f" "/host/out/callgrind/$nm.rs_pingpong.${BENCH_ROUND:-1}"; fi
  if [ $c != 0 ] || [ $sc != 0 ] || [ ! -s "$f" ]; then
    bench_fail cg_rs_pingpong_lib "connect_rc=$c,listen_rc=$sc"; bench_fail cg_rs_pingpong_total "connect_rc=$c,listen_rc=$sc"
    sed 's/^/  valgrind: /' "$f.err" "$f.out" >&2; sed 's/^/  bench_rsocket listen: /' "$f.srv" >&2; return; fi
  bench_cg_report rs_pingpong $((n + 20)) "$f" rt
}

# bench_gai NAME NODE SERVICE FLAGS FAMILY CALLS [WRAP...]
bench_gai(){ local a=("${@:1:6}"); shift 6; "$@" /extra/bin/bench_resolve gai "${a[@]}" || true; }

# rdma_getaddrinfo of a name from /etc/hosts, in a private mount namespace whose /etc/hosts,
# /etc/nsswitch.conf and /etc/resolv.conf are ours, so nothing else in the guest sees them
bench_etc(){ # CMD...
  local d=/tmp/bench-etc; mkdir -p $d
  printf '127.0.0.1 localhost\n::1 localhost\n192.0.2.2 bench-peer.test\n' > $d/hosts
  printf 'hosts: files\n' > $d/nsswitch.conf
  printf 'nameserver 127.0.0.1\noptions timeout:5 attempts:1\n' > $d/resolv.conf
  local f; for f in hosts nsswitch.conf resolv.conf; do [ -e /etc/$f ] || : > /etc/$f; done
  unshare -m bash -c 'for f in hosts nsswitch.conf resolv.conf; do mount --bind '$d'/$f /etc/$f || exit 97; done; exec "$@"' bench "$@"
}
# bench_dns: rdma_resolve_addrinfo of a name the slow DNS server answers after 500 ms
# (slow_dns_run, vm/guest/lib.sh); a run that printed neither case (the server did not start)
# fails both
bench_dns(){ local o
  o=$(slow_dns_run 0.5 /extra/bin/bench_resolve dns bench-slow.test 7471); echo "$o"
  grep -q '^BENCH dns_' <<< "$o" && return
  bench_fail dns_call_returns_us dns_run_printed_nothing; bench_fail dns_event_arrives_us dns_run_printed_nothing
}

# bench_dns_k K WRAP [_PREP]: bench_dns's call in K fresh processes under the command words WRAP
# (bench_ab's library choice), after PREP (bench_resolve.c, dns_prep), with the slow server
# (slow_dns_run, vm/guest/lib.sh); prints the median of dns_call_returns_us, nothing when a run
# failed
bench_dns_k(){ local k=$1 w=$2 p=${3#_}
  # shellcheck disable=SC2016
  slow_dns_run 0.5 bash -c 'for ((i = 0; i < $1; i++)); do
      v=$($2 /extra/bin/bench_resolve dns bench-slow.test 7471 $3 | awk '"'"'$2 == "dns_call_returns_us" && $3 ~ /^[0-9.]+$/ { print $3 }'"'"')
      [ -n "$v" ] || exit 1; echo "$v"; done' bench-dns "$k" "$w" "$p" |
    sort -n | awk -v k="$k" '{ v[NR] = $1 } END { if (NR == k) print v[int((NR + 1) / 2)] }'
}

# bench_first K [WRAP]: K fresh processes, each timing its first rdma_getaddrinfo (under the
# command words WRAP: bench_ab's library choice); the median. With WRAP, also (bench_ab's
# first_proc and first_minflt) the median wall time of the whole process, exec of the wrapper
# to exit (bash's EPOCHREALTIME around it), and the median of the first call's minor faults
bench_first(){ local k=$1 w=${2:-} i v o t0 t1 vals=() procs=() flts=()
  for ((i = 0; i < k; i++)); do
    t0=$EPOCHREALTIME
    # shellcheck disable=SC2086
    o=$($w /extra/bin/bench_resolve first)
    t1=$EPOCHREALTIME
    v=$(awk '$1 == "BENCH" && $3 ~ /^[0-9]+$/ { print $3 }' <<< "$o")
    [ -n "$v" ] || { bench_fail gai_first_call "run_$i"; return; }; vals+=("$v")
    procs+=("$(( (${t1/./} - ${t0/./}) * 1000 ))"); flts+=("$(awk '$2 == "gai_first_call" && $3 == "minflt" { print $4 }' <<< "$o")"); done
  printf '%s\n' "${vals[@]}" | sort -n | awk '{ v[NR] = $1 } END { printf "BENCH gai_first_call %s ns\n", v[int((NR + 1) / 2)] }'
  [ -n "$w" ] || return 0
  printf '%s\n' "${procs[@]}" | sort -n | awk '{ v[NR] = $1 } END { printf "BENCH gai_first_proc %s ns\n", v[int((NR + 1) / 2)] }'
  printf '%s\n' "${flts[@]}" | sort -n | awk '{ v[NR] = $1 } END { printf "BENCH gai_first_minflt %s faults\n", v[int((NR + 1) / 2)] }'
}

# --- zc: zero-copy registration (examples/bulk), 1 MiB RDMA writes with immediate data on
# rxe0's loopback, 2 transfers' bytes copied per transfer (MemoryRegion::new, write in, read
# out: zc_1m_copy), one (the sender's Vec registered once, in place: from_buffer, as_mut_slice;
# the receiver's copied out of a region registered once: zc_1m_sendinplace) and none (the
# receiver's Vec registered for each transfer and taken back with into_inner: zc_1m_zerocopy). The example is the Rust API alone (no librdmacm), so both
# variants run the same program: what matters is copy against zero-copy within a variant
# (bench/run.sh's target line). Time per transfer (N transfers), and in the first round the
# process's instructions per transfer under callgrind (5 transfers, counted inside the
# transfer loop only; user space only: the rxe driver's own copy in the kernel is not counted).
bench_zc(){ local n=$1 m fl fn f v
  for m in copy sendinplace zerocopy; do
    case $m in copy) fl=--copy fn=with_copies;; sendinplace) fl=--send-in-place fn=send_in_place;; *) fl= fn=zero_copy;; esac
    v=$(timeout 600 /extra/bin/examples/bulk -a 192.0.2.1 -p 7476 -S 1048576 -C "$n" $fl | sed -n 's/.*: \([0-9.]*\) us per transfer$/\1/p')
    if [ -n "$v" ]; then echo "BENCH zc_1m_${m}_us $v us/xfer"; else bench_fail zc_1m_${m}_us no_time; fi
    [ "${BENCH_ROUND:-1}" = 1 ] || continue
    f=/tmp/bench-cg.zc_$m; rm -f $f
    timeout 900 valgrind -q --tool=callgrind --toggle-collect="bulk::$fn*" --callgrind-out-file=$f \
      /extra/bin/examples/bulk -a 192.0.2.1 -p 7477 -S 1048576 -C 5 $fl > $f.out 2> $f.err
    v=$(awk '/^summary:/ { print $2 }' $f 2>/dev/null)
    if [ -n "$v" ] && [ "$v" -gt 0 ] && grep -q ' us per transfer$' $f.out; then echo "BENCH cg_zc_1m_$m $((v / 5)) instr/xfer"
    else bench_fail cg_zc_1m_$m no_instructions_counted; sed 's/^/  valgrind: /' $f.err $f.out >&2; fi
  done
}

# bench_sec NAME CMD...: run a section, then say how long it took (a comment line)
# (BENCH_SECTIONS, when set, names the sections to run: for debugging the harness)
bench_sec(){ local t0=$SECONDS; [ -z "${BENCH_SECTIONS:-}" ] || [[ " $BENCH_SECTIONS " == *" $1 "* ]] || return 0
  "${@:2}"; echo "# $1: $((SECONDS - t0)) s"; }
bench_driver(){ local mode=$1 round=${2:-1} out=/tmp/bench-driver.out t0=$SECONDS
  local gn=2000 gs=500 ids=10000 tn=2000 ev=20000 cm="1000:900 10000:900" rs_s="-S 65536 -C 300" rs_l="-S 64 -C 1 -I 2000"
  # events: the connection calls timed too (each on a fresh connection's id, its handshake
  # outside the time; make bench only)
  local evcm=300
  # rsocket: 8 streams x 1000 round trips of 64 B; one stream, 1000 x 64 KiB each way.
  # Not in the short mode (make check's bench_short): make bench only.
  local rs_pp="8 1000 64" rs_dx="1000 65536"
  # zc: transfers of 1 MiB each way of moving them (make bench only, as the rsocket cases)
  local zc=20
  # BENCH_CMTIME="N ..." (bench/run.sh passes BENCH_CMTIME_CONNS through VM_BENCH) picks other sizes
  [ -z "${BENCH_CMTIME:-}" ] || cm=$(for n in $BENCH_CMTIME; do echo "$n:900"; done)
  # (bind init_qp_attr rtr_qp_attr rts_qp_attr destroy_qp: cmtime's steps that run in the library)
  # (create_qp resolve_addr resolve_route connect accept disconnect: the other connection calls,
  # each on a fresh connection's id; accept_qp conn_resp_qp: with QPs on both ends; make bench
  # only: each call needs its handshake under valgrind)
  local cg=100 cgc="gai create_destroy get_ack write_get_ack event_str bind init_qp_attr rtr_qp_attr rts_qp_attr destroy_qp" first=11
  cgc+=" create_qp resolve_addr resolve_route connect accept disconnect accept_qp conn_resp_qp"
  export BENCH_ROUND=$round
  # callgrind counts are repeatable: only the first round counts them
  [ "$round" = 1 ] || cgc=
  if [ "$mode" = short ]; then gn=200 gs=50 ids=200 tn=80 ev=200 cm=10:60 rs_s= rs_l="-S 64 -C 1 -I 50" cg=10 first=3 rs_pp= rs_dx= zc= evcm=
    # (RTR and RTS take init_qp_attr's path: a valgrind start each saved, 10-20 s at host load 12)
    cgc=${cgc/ rtr_qp_attr rts_qp_attr/}; cgc=${cgc/ create_qp resolve_addr resolve_route connect accept disconnect accept_qp conn_resp_qp/}
    # (upstream's counts are make bench's to compare; here only ours must still produce them)
    [ "${RDMACM_VARIANT:-}" != upstream ] || cgc=; fi
  {
    echo "# bench $mode: ${RDMACM_VARIANT:-?} librdmacm: $(/extra/bin/whichlib | sed -n 's/^librdmacm //p')"
    bench_sec gai bench_gai gai_numeric_v4 192.0.2.2 7471 numeric inet $gn
    bench_sec gai bench_gai gai_numeric_v6 2001:db8::2 7471 numeric inet6 $gn
    bench_sec gai bench_gai gai_numeric_ib 2001:db8::2 7471 numeric,family ib $gn
    bench_sec gai bench_gai gai_passive - 7471 passive inet $gs
    bench_sec gai bench_gai gai_hosts_name bench-peer.test 7471 - inet $gs bench_etc
    bench_sec first bench_first $first
    bench_sec ids /extra/bin/bench_resolve ids $ids 192.0.2.2
    for t in $([ "$mode" = short ] && echo 1 8 || echo 1 2 4 8); do bench_sec threads /extra/bin/bench_resolve threads $t $tn 192.0.2.2; done
    bench_sec dns bench_dns
    for c in get_ack write_get_ack; do bench_sec events bench_call_time $c $ev; done
    for c in ${evcm:+connect accept disconnect}; do bench_sec events bench_call_time $c $evcm; done
    [ -z "$rs_s" ] || bench_sec rstream bench_rstream rstream_64k_xfer_us "$rs_s"
    bench_sec rstream bench_rstream rstream_64b_lat_us "$rs_l"
    [ -z "$rs_pp" ] || bench_sec rsocket bench_rsock rs_pingpong8_64b_ns_per_rt pingpong 7472 $rs_pp
    [ -z "$rs_dx" ] || bench_sec rsocket bench_rsock rs_duplex_64k_us_per_mib duplex 7473 $rs_dx
    [ -z "$zc" ] || bench_sec zc bench_zc $zc
    for c in $cgc; do bench_sec callgrind bench_callgrind $c $cg; done
    [ -z "$cgc" ] || [ -z "$rs_pp" ] || bench_sec callgrind bench_cg_rsock 300
    [[ " ${BENCH_SECTIONS:-} " != *" rs_strace "* ]] || bench_sec rs_strace bench_rs_strace
    [[ " ${BENCH_SECTIONS:-} " != *" cm_strace "* ]] || bench_sec cm_strace bench_cm_strace 100
    [[ " ${BENCH_SECTIONS:-} " != *" rs_cg_duplex "* ]] || bench_sec rs_cg_duplex bench_rs_cg_duplex
    [[ " ${BENCH_SECTIONS:-} " != *" rs_prof_duplex "* ]] || bench_sec rs_prof_duplex bench_rs_prof_duplex
    for n in $cm; do bench_sec cmtime bench_cmtime ${n%:*} ${n#*:}; done
  } 2>&1 | tee $out
  echo "# bench $mode round $round: $((SECONDS - t0)) s"
  # every case this mode runs must have printed a number (a program that died before printing
  # anything leaves no FAIL line behind); with BENCH_SECTIONS, the cases of those sections
  local want= c n t s rc=0
  bench_want(){ if [ -z "${BENCH_SECTIONS:-}" ] || [[ " $BENCH_SECTIONS " == *" $1 "* ]]; then want+=" ${*:2}"; fi; }
  bench_want gai gai_numeric_v4 gai_numeric_v6 gai_numeric_ib gai_passive gai_hosts_name
  bench_want first gai_first_call
  bench_want ids ids_sync_ns_per_id ids_rss_kb_per_1000 ids_heap_bytes_per_id
  bench_want dns dns_call_returns_us dns_event_arrives_us
  bench_want events get_ack_ns_per_call write_get_ack_ns_per_call
  [ -z "$evcm" ] || bench_want events connect_ns_per_call accept_ns_per_call disconnect_ns_per_call
  bench_want rstream rstream_64b_lat_us
  [ -z "$rs_s" ] || bench_want rstream rstream_64k_xfer_us
  [ -z "$rs_pp" ] || bench_want rsocket rs_pingpong8_64b_ns_per_rt
  [ -z "$rs_dx" ] || bench_want rsocket rs_duplex_64k_us_per_mib
  [ -z "$zc" ] || bench_want zc zc_1m_copy_us zc_1m_sendinplace_us zc_1m_zerocopy_us
  [ -z "$zc" ] || [ "$round" != 1 ] || bench_want zc cg_zc_1m_copy cg_zc_1m_sendinplace cg_zc_1m_zerocopy
  for t in $([ "$mode" = short ] && echo 1 8 || echo 1 2 4 8); do bench_want threads ids_threads_${t}_ns_per_id; done
  for c in $cgc; do bench_want callgrind cg_${c}_lib cg_${c}_total; done
  [ -z "$cgc" ] || [ -z "$rs_pp" ] || bench_want callgrind cg_rs_pingpong_lib cg_rs_pingpong_total
  for n in $cm; do for t in qp noqp; do for s in full_connect create_id bind_addr resolve_addr resolve_route \
      create_qp init_qp_attr init_qp rtr_qp_attr rtr_qp rts_qp_attr rts_qp cm_connect establish disconnect \
      destroy_id destroy_qp; do bench_want cmtime cmtime${n%:*}_${t}_${s}_total cmtime${n%:*}_${t}_${s}_per_conn; done; done; done
  for c in $want; do
    grep -Eq "^BENCH $c [0-9]" $out || { echo "BENCH $c FAIL no_number_printed"; rc=1; }
  done
  ! grep -q '^BENCH [^ ]* FAIL' $out && [ $rc = 0 ]
}
export -f bench_call_time bench_zc bench_rxe_moved bench_rs_pair bench_rs_strace bench_cm_strace bench_rs_cg_duplex bench_rs_prof_duplex bench_sec bench_wait_listen bench_stop bench_rxe_counters bench_fail bench_cmtime bench_rstream bench_rsock bench_callgrind bench_cg_rsock bench_cg_report bench_gai \
  bench_etc bench_dns bench_first bench_driver

# the short mode's table, in the ours run: this run against the upstream run of the same boot
bench_short(){ local up=/host/out/bench_short.upstream.out rc=0
  bench_driver short || rc=1
  if [ "${RDMACM_VARIANT:-}" = ours ]; then
    [ -s $up ] || { echo "bench_short: no upstream run ($up)"; return 1; }
    awk 'FNR == 1 { f++ } $1 == "BENCH" { v[f, $2] = $3; if (f == 2 && !($2 in seen)) { seen[$2] = 1; o[n++] = $2 } }
      END { printf "\n%-44s %14s %14s %8s\n", "case (short mode: counts too small to mean much)", "upstream", "ours", "ratio"
        for (i = 0; i < n; i++) { c = o[i]; u = v[1, c]; w = v[2, c]
          r = (u ~ /^[0-9.]+$/ && w ~ /^[0-9.]+$/ && u > 0) ? sprintf("%.2f", w / u) : "-"
          printf "%-44s %14s %14s %8s\n", c, u, w, r } }' $up /tmp/bench-driver.out
  fi
  return $rc
}
export -f bench_short

# bench/ab.sh: the rsocket cases on upstream's library and on each build it was given
# (/extra/bin/ab/NAME/librdmacm.so.1), alternated round by round in this one boot, both ends of
# every run on the same library: lines "AB CASE LIB ROUND VALUE" (FAIL when a run failed).
# The upstream and the ours variant runs each do every round (the variant does not matter:
# every run names its library).
# Cases: duplex, pingpong (bench_rsocket, as make bench's), rstream64k (upstream's rstream -S
# 65536 -C 300, as rstream_64k_xfer_us). With BENCH_AB_WRAP=syscount both ends of the
# bench_rsocket cases run under ctest/vm/preload/syscount.c: "ABSC CASE LIB ROUND END counts..."
# after each run.
bench_ab(){ local r lib w cs c nm v e i fo o=/tmp/bench-ab rc=0 port=7480 sc= libs=(upstream $BENCH_AB)
  for r in $(seq "${BENCH_AB_ROUNDS:-3}"); do
    for c in ${BENCH_AB_CASES:-duplex}; do
      case $c in duplex) nm=rs_duplex_64k_us_per_mib cs="1000 65536";; pingpong) nm=rs_pingpong8_64b_ns_per_rt cs="8 1000 64";;
        rstream64k) nm=rstream_64k_xfer_us cs="-S 65536 -C 300";;
        # instructions per call in the library under callgrind (100 calls; counts repeat exactly)
        cg_create_destroy|cg_get_ack|cg_write_get_ack) nm=${c}_lib cs=;;
        # cmtime's steps in the library (bench_calls bind, ...): in the whole process, as make bench's targets
        cg_bind|cg_init_qp_attr|cg_rtr_qp_attr|cg_rts_qp_attr|cg_destroy_qp) nm=${c}_total cs=;;
        # the other connection calls, and rdma_create_qp (bench_calls resolve_addr, ...): the same
        cg_create_qp|cg_resolve_addr|cg_resolve_route|cg_connect|cg_accept|cg_disconnect|cg_accept_qp|cg_conn_resp_qp) nm=${c}_total cs=;;
        # upstream's cmtime -c 100 with its connecting end under strace -f: its system calls per
        # connection in each step (bench_cm_strace), "ABCS LIB ROUND TEST STEP CALL=N ..." lines
        cm_strace) nm= cs=;;
        # the first rdma_getaddrinfo of 11 fresh processes: also first_proc and first_minflt
        first) nm=gai_first_call cs=;;
        # the time until rdma_resolve_addrinfo of a name the slow DNS server answers returns, in
        # 7 fresh processes (make bench's dns_call_returns_us; the median); dns_thread, dns_libc,
        # dns_resolve: after the process started a thread, asked libc for the name as a literal,
        # or made the same call on another id (bench_resolve.c, dns_prep)
        dns|dns_thread|dns_libc|dns_resolve) nm=dns_call_returns_us cs=;;
        # its instructions under callgrind (also cg_first_lib: in librdmacm's object)
        cg_first) nm=cg_first_total cs=;;
        # instructions per 64 B rsocket round trip under callgrind (as make bench's; also
        # cg_rs_pingpong_lib: in librdmacm's object)
        cg_rs_pingpong) nm=cg_rs_pingpong_total cs=;;
        # the same calls timed, without valgrind: wall ns per call (bench_calls' ns_per_call;
        # 20000 calls of the calls without a connection step, 300 of the others)
        t_gai|t_create_destroy|t_get_ack|t_write_get_ack|t_event_str|t_bind|t_init_qp_attr|t_rtr_qp_attr|t_rts_qp_attr) nm=${c#t_}_ns_per_call cs=20000;;
        t_destroy_qp|t_create_qp|t_resolve_addr|t_resolve_route|t_connect|t_accept|t_disconnect|t_accept_qp|t_conn_resp_qp) nm=${c#t_}_ns_per_call cs=300;;
        # make bench's synchronous id loop (create, rdma_resolve_addr, destroy), 2000 ids
        t_ids) nm=ids_sync_ns_per_id cs=;;
        *) echo "bench_ab: unknown case $c"; return 1;; esac
      # the order turns by one each round (no library always runs first, or after the same one)
      for i in "${!libs[@]}"; do lib=${libs[$(( (i + r) % ${#libs[@]} ))]}
        if [ "$lib" = upstream ]; then w="env -u LD_LIBRARY_PATH RDMACM_VARIANT=upstream"
        else w="env LD_LIBRARY_PATH=/extra/bin/ab/$lib RDMACM_VARIANT=ab"; fi
        if [[ $c == dns* ]]; then
          v=$(bench_dns_k 7 "$w" "${c#dns}")
        elif [ $c = first ]; then
          fo=$(bench_first 11 "$w")
          for e in proc minflt; do v=$(awk -v nm="gai_first_$e" '$1 == "BENCH" && $2 == nm && $3 ~ /^[0-9.]+$/ { print $3 }' <<< "$fo")
            echo "AB first_$e $lib $r ${v:-FAIL}"; done
          v=$(awk '$1 == "BENCH" && $2 == "gai_first_call" && $3 ~ /^[0-9.]+$/ { print $3 }' <<< "$fo")
        elif [ $c = cg_first ]; then
          fo=$(BENCH_ROUND=$r bench_cg_first "$w" "$lib")
          v=$(awk '$1 == "BENCH" && $2 == "cg_first_lib" && $3 ~ /^[0-9.]+$/ { print $3 }' <<< "$fo"); echo "AB cg_first_lib $lib $r ${v:-FAIL}"
          v=$(awk '$1 == "BENCH" && $2 == "cg_first_total" && $3 ~ /^[0-9.]+$/ { print $3 }' <<< "$fo")
        elif [ $c = cg_rs_pingpong ]; then
          port=$((port + 1))
          fo=$(BENCH_ROUND=$r bench_cg_rsock 300 "$w" "$lib" $port)
          v=$(awk '$1 == "BENCH" && $2 == "cg_rs_pingpong_lib" && $3 ~ /^[0-9.]+$/ { print $3 }' <<< "$fo"); echo "AB cg_rs_pingpong_lib $lib $r ${v:-FAIL}"
          v=$(awk '$1 == "BENCH" && $2 == "cg_rs_pingpong_total" && $3 ~ /^[0-9.]+$/ { print $3 }' <<< "$fo")
        elif [ $c = rstream64k ]; then
          # (bench_rstream reports a failure itself)
          v=$(bench_rstream "$nm" "$cs" "$w" | awk '$1 == "BENCH" && $3 ~ /^[0-9.]+$/ { print $3 }')
        elif [ $c = cm_strace ]; then
          # (the client's system calls in all its steps, the value)
          fo=$(bench_cm_strace 100 "$w"); echo "$fo" | sed -n "s/^# cm_strace /ABCS /p" | sed "s/^ABCS /ABCS $lib $r /"
          v=$(awk '$1 == "BENCH" && $2 == "cm_strace_calls" && $3 ~ /^[0-9]+$/ { print $3 }' <<< "$fo")
        elif [ $c = t_ids ]; then
          v=$($w /extra/bin/bench_resolve ids 2000 192.0.2.2 | awk '$1 == "BENCH" && $2 == "ids_sync_ns_per_id" && $3 ~ /^[0-9.]+$/ { print $3 }')
        elif [[ $c == t_* ]]; then
          v=$(bench_call_time "${c#t_}" "$cs" "$w" | awk -v nm="$nm" '$1 == "BENCH" && $2 == nm && $3 ~ /^[0-9.]+$/ { print $3 }')
        elif [[ $c == cg_* ]]; then
          fo=$(BENCH_ROUND=$r bench_callgrind "${c#cg_}" 100 "$w" "$lib")
          # (the count in librdmacm's object too, when the value is the whole process's)
          [ "$nm" = "${c}_lib" ] || { v=$(awk -v nm="${c}_lib" '$1 == "BENCH" && $2 == nm && $3 ~ /^[0-9.]+$/ { print $3 }' <<< "$fo"); echo "AB ${c}_lib $lib $r ${v:-FAIL}"; }
          v=$(awk -v nm="$nm" '$1 == "BENCH" && $2 == nm && $3 ~ /^[0-9.]+$/ { print $3 }' <<< "$fo")
        else
          [ "${BENCH_AB_WRAP:-}" != syscount ] || { sc="LD_PRELOAD=/extra/bin/libsyscount.so SYSCOUNT_FILE=$o.sc"; rm -f "$o".sc.*; }
          port=$((port + 1))
          bench_rxe_counters > "$o.rxe0"
          # shellcheck disable=SC2086
          bench_rs_pair "$o" $port 20 150 120 "$w${sc:+ $sc.listen}" "$w${sc:+ $sc.connect}" $c $cs; e=$?
          # the program's own account of the timed part: the whole guest's time (per cent of both
          # vCPUs) and each end's CPU and voluntary context switches per unit (message or round trip)
          awk -v k="$c $lib $r" '$1 == "#" && $3 == "VM" && $4 == "cpu:" { v = sprintf(" user=%d system=%d softirq=%d idle=%d", $6, $8, $14, $10) }
            $1 == "#" && $4 == "end" && $6 == "unit:" { e = $3 == "connecting" ? "c" : "l"; u = u sprintf(" %s_user_us=%s %s_sys_us=%s %s_vcsw=%s", e, $8, e, $11, e, $14 + 0) }
            END { if (v != "" || u != "") print "ABCPU " k v u }' "$o" "$o.srv"
          # the soft-RoCE counters that moved (bench/ab.sh adds the devices up)
          echo "ABRXE $c $lib $r$(bench_rxe_moved "$o.rxe0")"
          v=$([ $e = 0 ] && [ "$bench_rs_listen_rc" = 0 ] && awk -v nm="$nm" '$1 == "BENCH" && $2 == nm && $3 ~ /^[0-9.]+$/ { print $3 }' "$o")
          if [ -z "$v" ]; then echo "bench_ab: $c $lib round $r: connecting end exit $e, listening end exit $bench_rs_listen_rc" >&2
            sed 's/^/  connect: /' "$o" >&2; sed 's/^/  listen: /' "$o.srv" >&2; fi
          for e in listen connect; do [ ! -s "$o.sc.$e" ] || echo "ABSC $c $lib $r $e $(cut -d' ' -f2- "$o.sc.$e")"; done
        fi
        [ -n "$v" ] || rc=1
        echo "AB $c $lib $r ${v:-FAIL}"
      done
    done
  done
  return $rc
}
export -f bench_ab bench_cg_first bench_dns_k

# VM_BENCH on the host arrives here as BENCH: "1", or "cmtime=N,N" for other cmtime sizes
case ${BENCH:-} in *cmtime=*) BENCH_CMTIME=${BENCH#*cmtime=}; BENCH_CMTIME=${BENCH_CMTIME%% *}; export BENCH_CMTIME=${BENCH_CMTIME//,/ };; esac
# "sections=a,b" (bench/run.sh passes BENCH_SECTIONS through VM_BENCH): only those sections
case ${BENCH:-} in *sections=*) BENCH_SECTIONS=${BENCH#*sections=}; BENCH_SECTIONS=${BENCH_SECTIONS%% *}; export BENCH_SECTIONS=${BENCH_SECTIONS//,/ };; esac
case ${BENCH:-} in *ab=*) BENCH_AB=${BENCH#*ab=}; BENCH_AB=${BENCH_AB%% *}; export BENCH_AB=${BENCH_AB//,/ };; esac
case ${BENCH:-} in *abrounds=*) BENCH_AB_ROUNDS=${BENCH#*abrounds=}; export BENCH_AB_ROUNDS=${BENCH_AB_ROUNDS%% *};; esac
case ${BENCH:-} in *abwrap=*) BENCH_AB_WRAP=${BENCH#*abwrap=}; export BENCH_AB_WRAP=${BENCH_AB_WRAP%% *};; esac
case ${BENCH:-} in *abcases=*) BENCH_AB_CASES=${BENCH#*abcases=}; BENCH_AB_CASES=${BENCH_AB_CASES%% *}; export BENCH_AB_CASES=${BENCH_AB_CASES//,/ };; esac
# "cginstr=1" (bench/ab.sh -i): the profiles of the rsocket round trip and of the cg_<call> cases
# per instruction too
case ${BENCH:-} in *cginstr=1*) export BENCH_CG_INSTR=1;; esac
if [ -n "${BENCH_AB:-}" ]; then
  t bench_ab 7200 bash -c bench_ab
elif [ -n "${BENCH:-}" ]; then
  t bench_r1 3600 bash -c 'bench_driver full 1'
  t bench_r2 3600 bash -c 'bench_driver full 2'
fi
t bench_short 300 bash -c bench_short
