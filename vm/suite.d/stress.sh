# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# stress.sh - concurrency stress tests (issue 8, item 5), both sides in one process over rxe0.
#
# stress_cm (ctest/vm/stress_cm.c): 16 workers create, resolve, connect, disconnect and destroy
# ids for 20 s, half on one shared event channel, half synchronous (NULL channel); a listener
# thread accepts and destroys the server side; an event thread hands the shared channel's
# events to their workers before acking them, so rdma_destroy_id races the ack. stdout is
# "threads=16 ok" (--cmp), counts on stderr; a watchdog turns a hang into exit 3 with every
# thread's current call on stderr.
# stress_rsocket (ctest/vm/stress_rsocket.c): rsocket pairs shut down and closed while other
# threads are blocked in rrecv and rpoll, data rounds, rshutdown(SHUT_RDWR) with both ends in
# one process; a watchdog names any call that does not return within 30 s (exit 3).
# The *_asan runs are the same programs under AddressSanitizer/LeakSanitizer (static runtime):
# any sanitizer report fails the run.
# stress_*_tsan: the programs under ThreadSanitizer. Only the C test program is instrumented
# (neither upstream's library nor ours, which is Rust built without -Zsanitizer), so these
# only see races on the program's own memory and the lock order of the pthread calls the
# libraries make through the interceptors; any report fails the run.

# stress_san NAME TIMEOUT SAN BIN ARGS...: run BIN, fail on any sanitizer report in its stderr
stress_san(){ local n=$1 to=$2 san=$3; shift 3
  t "$n" "$to" bash -c '
    san=$1; shift; err=/tmp/$(basename "$1").$$.err
    [ "$san" = thread ] && sysctl -qw vm.mmap_rnd_bits=28 2>/dev/null
    ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0 TSAN_OPTIONS=second_deadlock_stack=1 \
      "$@" 2> "$err"; rc=$?
    cat "$err" >&2
    if grep -q "ERROR: \(Leak\|Address\)Sanitizer\|WARNING: ThreadSanitizer\|ERROR: ThreadSanitizer" "$err"; then
      echo "sanitizer report (rc=$rc)"; exit 1; fi
    echo "no sanitizer reports (rc=$rc)"; exit $rc' _ "$san" "$@"; }

for b in stress_cm stress_rsocket; do
  if [ -x /extra/bin/$b ]; then
    t --cmp $b 180 /extra/bin/$b -s 20
  else
    skip $b "no /extra/bin/$b (make vm-bin not run on the host)"
  fi
done
for b in stress_cm_asan stress_rsocket_asan; do
  if [ -x /extra/bin/$b ]; then
    stress_san $b 240 address /extra/bin/$b -s 20
  else
    skip $b "no /extra/bin/$b (make vm-bin not run on the host)"
  fi
done
for b in stress_cm_tsan stress_rsocket_tsan; do
  if [ -x /extra/bin/$b ]; then
    stress_san $b 240 thread /extra/bin/$b -s 20
  else
    skip $b "no /extra/bin/$b (make vm-bin not run on the host)"
  fi
done
