# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# fault.sh - issue 12: faults, each on both libraries, transcripts compared (--cmp).
#   fault_fd            ctest/vm/fault_fd.c: RLIMIT_NOFILE exhausted while creating event channels,
#                       synchronous ids, rsockets, before the first call and in rdma_getaddrinfo;
#                       the errno of the first failure and recovery once descriptors are freed
#   fault_fork(_safe)   ctest/vm/fault_proc.c fork: fork() with live ids (without and with
#                       RDMAV_FORK_SAFE=1): the child creates and resolves its own id, the parent's
#                       ids keep working
#   fault_signal        a signal interrupting rdma_get_cm_event and a synchronous rdma_resolve_addr,
#                       without and with SA_RESTART: EINTR or restart as upstream
#   fault_memlock       RLIMIT_MEMLOCK 0 as an unprivileged user: rdma_create_qp and a registration
#   fault_no_ucm        the basic calls with the rdma_ucm module unloaded (reloaded afterwards):
#                       upstream's errno (or upstream's on-demand module load)
t --cmp fault_fd 300 /extra/bin/fault_fd
t --cmp fault_fork 120 /extra/bin/fault_proc fork
t --cmp fault_fork_safe 120 env RDMAV_FORK_SAFE=1 /extra/bin/fault_proc fork
t --cmp fault_signal 180 /extra/bin/fault_proc signal_event_eintr signal_event_restart signal_resolve_eintr signal_resolve_restart
t --cmp fault_memlock 60 /extra/bin/fault_proc memlock
t --cmp fault_no_ucm 120 bash -c '
  modprobe -r rdma_ucm 2>/dev/null; for i in $(seq 20); do grep -q "^rdma_ucm " /proc/modules || break; sleep 0.2; modprobe -r rdma_ucm 2>/dev/null; done
  if grep -q "^rdma_ucm " /proc/modules; then echo "rdma_ucm still loaded (in use): cannot run" >&2; exit 1; fi
  /extra/bin/fault_proc basic; rc=$?
  echo "rdma_ucm loaded again by the calls: $(grep -q "^rdma_ucm " /proc/modules && echo yes || echo no)"
  modprobe rdma_ucm; exit $rc'
# Allocation failure at every allocation of rdma_getaddrinfo, rdma_create_id, rdma_create_qp and
# the event path (ctest/vm/fault_malloc.c, which interposes malloc itself): with ours, every
# injected failure must give a clean error, no leak, and a usable library afterwards; the
# upstream run records upstream's outcomes (not compared: the allocation counts differ).
t fault_malloc 900 /extra/bin/fault_malloc

# Removing a device under live connections with traffic (issue 12, item 3): a private veth
# pair (vrt0 10.98.0.1 <-> vrt1) with an rxe device rxert on vrt0, made for the test and removed
# afterwards (no other device of the test bed is touched); upstream's rping or rstream, server
# and client both on rxert (loopback), run with the variant's library. Once the device's packet
# counter shows traffic, "rdma link delete rxert" runs under the live connection. Printed (and
# compared): whether traffic flowed, each program's exit status, whether it reported the
# device removal, whether it and the deletion finished within 60 s (no hang), the deletion's
# status. The programs' stderr (deduplicated) goes to the log. A program still running after
# 60 s is killed and reported; the test passes only when nothing hung and nothing crashed
# (killed by a signal other than the test's own).
#   removal_traffic TOOL SERVER-ARGS CLIENT-ARGS
removal_traffic(){ local tool=$1 sargs=$2 cargs=$3 d=/tmp/removal_$1 cnt=/sys/class/infiniband/rxert/ports/1/hw_counters/sent_pkts
  local s c del i rc=0 srv_rc cli_rc del_rc traffic=no hung=
  rm -rf $d; mkdir -p $d
  ip link del vrt0 2>/dev/null
  if ! { ip link add vrt0 type veth peer name vrt1 && ip addr add 10.98.0.1/24 dev vrt0 &&
         ip link set vrt0 up && ip link set vrt1 up && rdma link add rxert type rxe netdev vrt0; }; then
    echo "setup failed"; ip link del vrt0 2>/dev/null; return 1; fi
  $tool $sargs > $d/srv.out 2> $d/srv.err & s=$!
  for i in $(seq 50); do rdma res show cm_id 2>/dev/null | grep -q "LISTEN.*10.98.0.1" && break; sleep 0.2; done; sleep 0.3
  $tool $cargs > $d/cli.out 2> $d/cli.err & c=$!
  for i in $(seq 300); do [ "$(cat $cnt 2>/dev/null || echo 0)" -ge 300 ] && { traffic=yes; break; }
    kill -0 $c 2>/dev/null || break; sleep 0.1; done
  echo "traffic before the deletion: $traffic"
  echo "client running at the deletion: $(kill -0 $c 2>/dev/null && echo yes || echo no)"
  rdma link delete rxert > $d/del.out 2>&1 & del=$!
  # up to 60 s for the three to finish
  local early=no
  for i in $(seq 600); do
    if ! kill -0 $del 2>/dev/null && { kill -0 $s 2>/dev/null || kill -0 $c 2>/dev/null; }; then early=yes; fi
    kill -0 $s 2>/dev/null || kill -0 $c 2>/dev/null || kill -0 $del 2>/dev/null || break; sleep 0.1; done
  for p in s c del; do kill -0 ${!p} 2>/dev/null && { hung+=" $p"; kill -9 ${!p}; }; done
  wait $s; srv_rc=$?; wait $c; cli_rc=$?; wait $del; del_rc=$?
  echo "finished within 60 s: ${hung:+no, killed:}${hung:-yes}"
  echo "client exit $cli_rc; reported device removal: $(grep -qi 'device removal' $d/cli.err && echo yes || echo no)"
  echo "server exit $srv_rc; reported device removal: $(grep -qi 'device removal' $d/srv.err && echo yes || echo no)"
  echo "rdma link delete exit $del_rc"
  echo "deletion completed while a program still ran: $early"
  echo "rxert listed afterwards: $(rdma link show 2>/dev/null | grep -q rxert && echo yes || echo no)"
  for f in cli srv; do echo "== $f stderr (deduplicated)" >&2; sort $d/$f.err | uniq -c >&2; echo "== $f stdout" >&2; head -20 $d/$f.out >&2; done
  ip link del vrt0 2>/dev/null
  [ -z "$hung" ] || rc=1
  # a crash: killed by a signal the test did not send
  for r in $cli_rc $srv_rc; do [ $r -gt 128 ] && [ $r != 255 ] && [ -z "$hung" ] && { echo "killed by signal $((r-128))"; rc=1; }; done
  return $rc; }
export -f removal_traffic
t --cmp fault_removal_rping 150 bash -c 'removal_traffic rping "-s -a 10.98.0.1 -p 7993" "-c -a 10.98.0.1 -p 7993 -C 100000000"'
t --cmp fault_removal_rstream 150 bash -c 'removal_traffic rstream "-b 10.98.0.1 -p 7994 -S 65536 -C 300" "-s 10.98.0.1 -p 7994 -S 65536 -C 300"'

# rsockets under faults (issue 12, item 3; ctest/vm/fault_rsocket.c): fork() with live rsockets
# (parent keeps transferring, the child makes its own connection), without and with
# RDMAV_FORK_SAFE=1; RLIMIT_MEMLOCK 0 and 64 KiB as nobody (rsocket, rconnect); a signal
# interrupting a blocking rpoll and rrecv, without and with SA_RESTART.
t --cmp fault_rsocket_fork 120 /extra/bin/fault_rsocket fork
t --cmp fault_rsocket_fork_safe 120 env RDMAV_FORK_SAFE=1 /extra/bin/fault_rsocket fork
t --cmp fault_rsocket_memlock 120 /extra/bin/fault_rsocket memlock0 memlock64k
t --cmp fault_rsocket_signal 120 /extra/bin/fault_rsocket rpoll_eintr rpoll_restart rrecv_eintr rrecv_restart
