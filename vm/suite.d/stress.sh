# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# stress.sh - concurrency stress tests, both sides in one process over rxe0.
#
# stress_cm (ctest/vm/stress_cm.c): 16 workers create, resolve, connect, disconnect and destroy
# ids (10 s; 20 s in the *_asan runs), half on one shared event channel, half synchronous
# (NULL channel); a listener thread accepts and destroys the server side; an event thread hands
# the shared channel's events to their workers before acking them, so rdma_destroy_id races the
# ack. stdout is "threads=16 ok" (--cmp), counts on stderr; a watchdog turns a hang into exit 3
# with every thread's current call on stderr.
# stress_rsocket (ctest/vm/stress_rsocket.c, modes listed there): rsocket pairs shut down and
# closed while other threads are blocked in rrecv or rpoll, data rounds, rshutdown(SHUT_RDWR)
# with both ends in one process; a watchdog names any call that does not return within 30 s
# and has the stuck threads print their stacks (exit 3).
# The *_asan runs are the same programs under AddressSanitizer/LeakSanitizer (static runtime):
# any sanitizer report fails the run.
# ThreadSanitizer builds (make -C ctest/vm tsan) are not run: only the C program is
# instrumented, and TSan reports the kernel-ordered hand-over of ids and events between
# threads (upstream) and HashMaps under parking_lot locks (ours) as races; nothing usable.

# stress_asan NAME TIMEOUT SUPP BIN ARGS...: run BIN, fail on any sanitizer report in its
# stderr; SUPP (or -) is an LSan suppression applied with upstream's library only.
stress_asan(){ local n=$1 to=$2 supp=$3; shift 3
  t "$n" "$to" bash -c '
    supp=$1; shift; err=/tmp/$(basename "$1").$$.err
    case "$LD_LIBRARY_PATH$LD_PRELOAD" in *ours*) ;; *)
      if [ "$supp" != - ]; then echo "$supp" > /tmp/$(basename "$1").supp
        export LSAN_OPTIONS=suppressions=/tmp/$(basename "$1").supp; fi;; esac
    ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0 "$@" 2> "$err"; rc=$?
    cat "$err" >&2
    if grep -q "ERROR: \(Leak\|Address\)Sanitizer" "$err"; then
      echo "sanitizer report (rc=$rc)"; exit 1; fi
    echo "no sanitizer reports (rc=$rc)"; exit $rc' _ "$supp" "$@"; }

for b in stress_cm stress_rsocket; do
  if [ -x /extra/bin/$b ]; then
    t --cmp $b 180 /extra/bin/$b -s 10
  else
    skip $b "no /extra/bin/$b (make vm-bin not run on the host)"
  fi
done
# Upstream's rpoll keeps a per-thread pollfd buffer (malloc'ed, in a __thread pointer) that is
# never freed when the thread exits: 16 bytes leaked per thread that called rpoll. With
# upstream's library that leak is suppressed; ours is checked without suppressions.
for b in stress_cm_asan:- stress_rsocket_asan:leak:rpoll; do supp=${b#*:} b=${b%%:*}
  if [ -x /extra/bin/$b ]; then
    stress_asan $b 240 "$supp" /extra/bin/$b -s 20
  else
    skip $b "no /extra/bin/$b (make vm-bin not run on the host)"
  fi
done
