# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# fault.sh - faults, each on both libraries, transcripts compared (--cmp).
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
#   fault_removal_*     rdma link delete under a live connection with traffic (rstream; rping
#                       only on demand), below
#   fault_rsocket_*     ctest/vm/fault_rsocket.c: fork with live rsockets, RLIMIT_MEMLOCK for
#                       rsocket buffers, signals in a blocking rpoll/rrecv, below
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

# Removing a device under live connections with traffic: a private veth
# pair made for the test, vrt0 10.98.0.1 (root ns, rxe device rxert0) <-> vrt1 10.98.0.2 (netns
# nsrt, rxert1); upstream's rping or rstream, server in nsrt on rxert1, client in the root ns on
# rxert0, both with the variant's library. Once rxert0's packet counter shows traffic,
# "rdma link delete rxert0" runs under the live connection (the client's device). Printed (and
# compared): whether traffic flowed, each program's exit status and whether it reported the
# device removal, whether the deletion completed while a program still ran, its status.
# The client and the deletion get 60 s (no hang), the server (whose device stays) as long, then
# it is stopped and reported. The programs' stderr (deduplicated), and the kernel stacks of
# anything still running, go to the log. Everything made for the test is removed afterwards.
# (Both ends on one rxe device, loopback, wedged the guest when the device was deleted under
# rping's traffic with upstream's library: not used.)
#   removal_traffic TOOL SERVER-ARGS CLIENT-ARGS
removal_traffic(){ local tool=$1 sargs=$2 cargs=$3 d=/tmp/removal_$1 cnt=/sys/class/infiniband/rxert0/ports/1/hw_counters/sent_pkts
  local s c del i p rc=0 srv_rc cli_rc del_rc traffic=no hung= early=no
  rm -rf $d; mkdir -p $d
  ip link del vrt0 2>/dev/null; ip netns del nsrt 2>/dev/null
  if ! { ip netns add nsrt && ip link add vrt0 type veth peer name vrt1 && ip link set vrt1 netns nsrt &&
         ip addr add 10.98.0.1/24 dev vrt0 && ip link set vrt0 up && ip netns exec nsrt ip addr add 10.98.0.2/24 dev vrt1 &&
         ip netns exec nsrt ip link set vrt1 up && ip netns exec nsrt ip link set lo up &&
         rdma link add rxert0 type rxe netdev vrt0 && ip netns exec nsrt rdma link add rxert1 type rxe netdev vrt1; }; then
    echo "setup failed"; ip link del vrt0 2>/dev/null; ip netns del nsrt 2>/dev/null; return 1; fi
  ip netns exec nsrt $tool $sargs > $d/srv.out 2> $d/srv.err & s=$!
  for i in $(seq 50); do rdma res show cm_id 2>/dev/null | grep -q "LISTEN.*10.98.0.2" && break; sleep 0.2; done; sleep 0.3
  $tool $cargs > $d/cli.out 2> $d/cli.err & c=$!
  for i in $(seq 300); do [ "$(cat $cnt 2>/dev/null || echo 0)" -ge 300 ] && { traffic=yes; break; }
    kill -0 $c 2>/dev/null || break; sleep 0.1; done
  echo "traffic before the deletion: $traffic"
  echo "client running at the deletion: $(kill -0 $c 2>/dev/null && echo yes || echo no)"
  rdma link delete rxert0 > $d/del.out 2>&1 & del=$!
  for i in $(seq 600); do
    if ! kill -0 $del 2>/dev/null && { kill -0 $s 2>/dev/null || kill -0 $c 2>/dev/null; }; then early=yes; fi
    kill -0 $s 2>/dev/null || kill -0 $c 2>/dev/null || kill -0 $del 2>/dev/null || break; sleep 0.1; done
  for p in s c del; do kill -0 ${!p} 2>/dev/null || continue; hung+=" $p"
    { echo "== still running after 60 s: $p"
      for t in /proc/${!p}/task/*; do echo "-- $t $(cut -d' ' -f3 $t/stat) $(cat $t/wchan)"; timeout 2 cat $t/stack; done; } >&2 2>&1
    kill -9 ${!p}; done
  # a process stuck in the kernel survives SIGKILL: never wait for it
  for i in $(seq 50); do kill -0 $s 2>/dev/null || kill -0 $c 2>/dev/null || kill -0 $del 2>/dev/null || break; sleep 0.1; done
  kill -0 $s 2>/dev/null && srv_rc=stuck || { wait $s; srv_rc=$?; }
  kill -0 $c 2>/dev/null && cli_rc=stuck || { wait $c; cli_rc=$?; }
  kill -0 $del 2>/dev/null && del_rc=stuck || { wait $del; del_rc=$?; }
  echo "client and deletion finished within 60 s: $([[ $hung == *c* || $hung == *del* ]] && echo no || echo yes)"
  echo "server still running after 60 s (stopped): $([[ $hung == *s* ]] && echo yes || echo no)"
  echo "client exit $cli_rc; reported device removal: $(grep -qi 'device removal' $d/cli.err && echo yes || echo no)"
  echo "server exit $srv_rc; reported device removal: $(grep -qi 'device removal' $d/srv.err && echo yes || echo no)"
  echo "rdma link delete exit $del_rc"
  echo "deletion completed while a program still ran: $early"
  echo "rxert0 listed afterwards: $(rdma link show 2>/dev/null | grep -q 'rxert0' && echo yes || echo no)"
  for f in cli srv; do echo "== $f stderr (deduplicated)" >&2; sort $d/$f.err | uniq -c >&2; echo "== $f stdout" >&2; head -20 $d/$f.out >&2; done
  dmesg | tail -n 30 >&2
  ip link del vrt0 2>/dev/null; ip netns del nsrt 2>/dev/null
  [[ $hung == *c* || $hung == *del* ]] && rc=1
  # a crash: killed by a signal the test did not send
  for p in cli_rc srv_rc; do [ "${!p}" = stuck ] && { rc=1; continue; }
    [ ${!p} -gt 128 ] && [ ${!p} != 255 ] && [ ${!p} != 137 ] && { echo "$p: killed by signal $((${!p}-128))"; rc=1; }; done
  return $rc; }
export -f removal_traffic
# rping exits on DEVICE_REMOVAL; with traffic running that left the client stuck in the kernel
# (unkillable, rdma link delete never returning) on the guest's kernel 7.2.13 with upstream's
# library, both ends on one device and on two: no comparison is possible in that boot, so this
# test runs only when asked (VM_BENCH=removal; flagged bench in tests.txt).
if [[ ${BENCH:-} == *removal* ]]; then
  t --cmp fault_removal_rping 180 bash -c 'removal_traffic rping "-s -a 10.98.0.2 -p 7993" "-c -a 10.98.0.2 -p 7993 -C 100000000"'
fi
t --cmp fault_removal_rstream 180 bash -c 'removal_traffic rstream "-b 10.98.0.2 -p 7994 -S 65536 -C 300" "-s 10.98.0.2 -p 7994 -S 65536 -C 300"'

# rsockets under faults (ctest/vm/fault_rsocket.c): fork() with live rsockets
# (parent keeps transferring, the child makes its own connection), without and with
# RDMAV_FORK_SAFE=1; RLIMIT_MEMLOCK 0 and 64 KiB as nobody (rsocket, rconnect); a signal
# interrupting a blocking rpoll and rrecv, without and with SA_RESTART.
t --cmp fault_rsocket_fork 120 /extra/bin/fault_rsocket fork
t --cmp fault_rsocket_fork_safe 120 env RDMAV_FORK_SAFE=1 /extra/bin/fault_rsocket fork
t --cmp fault_rsocket_memlock 120 /extra/bin/fault_rsocket memlock0 memlock64k
t --cmp fault_rsocket_signal 120 /extra/bin/fault_rsocket rpoll_eintr rpoll_restart rrecv_eintr rrecv_restart
# fork() without exec: the child makes and uses a connection of its own with the library it
# inherited (the parent keeps transferring meanwhile). Ours must pass. Upstream's outcome is
# printed ("exit status N") and not judged: its scenario process is killed by SIGSEGV in most
# runs, so its exit status would make the test flaky rather than a comparison.
# Three rounds: a wake-up lost to the parent's threads (fixed) showed in one run of several.
t fault_rsocket_fork_noexec 150 bash -c 'for i in 1 2 3; do /extra/bin/fault_rsocket fork_noexec > /tmp/fne.out; r=$?; cat /tmp/fne.out; echo "exit status $r"; [ "$RDMACM_VARIANT" = upstream ] && continue; [ $r = 0 ] && grep -q "^fork: child exited cleanly" /tmp/fne.out || exit 1; done'
