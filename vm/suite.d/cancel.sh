# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# cancel.sh - a program that works with upstream's librdmacm must not die with ours
# because of how C threads end. ctest/vm/cancel.c and cancel_dl.c (runner and output format in
# ctest/vm/cancel.h): each case in its own child, a watchdog per step (a hang costs 8 s), two
# lines per case: the first run (how the thread ended, what stayed usable) and N more runs
# (descriptor and thread growth). Lines of cases upstream gets wrong are marked "~ " and kept
# out of the comparison (CANCEL_F); the program tolerates their failure only where the code at
# fault is upstream's: -k LIST with the upstream variant, -K LIST in every variant (upstream's
# librspreload's own code). Everything else must pass with ours, and match upstream's line.
CANCEL=/extra/bin/cancel
CANCEL_DL=/extra/bin/cancel_dl
CANCEL_F='/^~ /d'
CANCEL_PL_UP=$(dpkg -L librdmacm1t64 2>/dev/null | grep '/rsocket/librspreload\.so$' | head -1)
CANCEL_PL_UP=${CANCEL_PL_UP:-/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so}
CANCEL_PL_RS=/extra/bin/librspreload.so
CANCEL_N=10

# librdmacm's blocking calls (upstream: a half-made id's descriptor leaks per cancelled
# rdma_create_ep), pthread_exit from a signal handler, exit() with blocked threads
t --cmp --filter "$CANCEL_F" cancel_cm 240 $CANCEL -n $CANCEL_N -k create_ep.x \
  get_cm_event resolve_addr create_ep connect get_request accept disconnect sig_exit exit
# rsockets' blocking calls. Upstream: the socket of a cancelled rrecv, rsend, riowrite or
# repoll_wait hangs its next call (a lock left taken); a second cancelled rpoll/rselect spins
# in the call and never acts on the cancel
t --cmp --filter "$CANCEL_F" cancel_rs 240 $CANCEL -n $CANCEL_N -k rrecv,rsend,riowrite,repoll_wait,rpoll.x,rselect.x \
  raccept rconnect rrecv rsend riowrite rpoll rselect repoll_wait
# a cancel pending when the thread enters a call (upstream: canceled inside the library's
# initialization, or in rdma_getaddrinfo's connect to ibacm, it leaves a lock taken and the
# next call hangs: pend_first_*, pend_getaddrinfo)
t --cmp --filter "$CANCEL_F" cancel_pending 240 $CANCEL -n $CANCEL_N -k pend_getaddrinfo,pend_first_channel,pend_first_getaddrinfo,pend_first_rsocket \
  pend_channel pend_create_id pend_bind pend_destroy_id pend_init_qp_attr pend_resolve_addr pend_disconnect \
  pend_getaddrinfo pend_rsocket \
  pend_first_channel pend_first_getaddrinfo pend_first_rsocket
# rdma_getaddrinfo blocked in a name lookup: a name server on 127.0.0.1:53 that answers after
# 2 s (vm/guest/slow_dns.py), the program in a mount namespace whose resolv.conf and
# nsswitch.conf point at it (nothing else in the guest sees them)
cancel_dns(){ slow_dns_run 2 "$@"; }
export -f cancel_dns
t --cmp --filter "$CANCEL_F" cancel_dns 120 bash -c "cancel_dns $CANCEL -n 2 getaddrinfo_dns"
# accept / recv / poll on a socket librspreload made an rsocket.
# _up: upstream's librspreload in both variants (over the variant's librdmacm); its accept
#      leaks a descriptor per cancel in every variant (-K)
# _rs: each variant's own: upstream's librspreload over upstream's librdmacm, ours over ours
# _rs_uplib: our librspreload over upstream's librdmacm in both variants (not compared)
t --cmp --filter "$CANCEL_F" cancel_pl_up 240 env LD_PRELOAD=$CANCEL_PL_UP $CANCEL -n $CANCEL_N -K pl_accept.x -k pl_recv,pl_poll.x \
  pl_accept pl_recv pl_poll
t --cmp --filter "$CANCEL_F" cancel_pl_rs 240 bash -c "pl=$CANCEL_PL_RS; [ \"\$RDMACM_VARIANT\" = upstream ] && pl=$CANCEL_PL_UP
  exec env LD_PRELOAD=\$pl $CANCEL -n $CANCEL_N -k pl_accept.x,pl_recv,pl_poll.x pl_accept pl_recv pl_poll"
#   (recv left out there: upstream's rrecv hangs the socket; the same run in both variants, so
#   fewer repeats)
t cancel_pl_rs_uplib 120 env -u LD_LIBRARY_PATH LD_PRELOAD=$CANCEL_PL_RS RDMACM_VARIANT=upstream $CANCEL -n 5 -k pl_poll.x \
  pl_accept pl_poll
# dlopen / dlclose cycles: no crash, no growth (upstream: 2 descriptors per cycle, the verbs
# devices it opened); the unload itself in cancel_dl_unload
t --cmp --filter "$CANCEL_F" cancel_dl 240 $CANCEL_DL -n 20 -k dl_plain.x,dl_rsocket.x,dl_rsconn.x \
  dl_plain dl_rsocket dl_rsconn dl_resolve
# upstream unloads at dlclose; ours is linked -z nodelete (docs/behaviour.md: process-wide
# state callers may still hold) and must stay loaded, every cycle alike (-U)
t cancel_dl_unload 120 bash -c "m=-U; [ \"\$RDMACM_VARIANT\" = upstream ] && m=-u
  exec $CANCEL_DL \$m -n 0 dl_plain dl_rsocket dl_rsconn dl_resolve"
