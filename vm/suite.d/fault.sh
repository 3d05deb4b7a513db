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
