# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# rpingloop.sh - on demand only (VM_BENCH=rpingloop, flagged bench in tests.txt): rping_rxe's two
# programs (server `rping -s` in ns1, client `rping -c -C 5` in the root ns) N times per library
# (VM_BENCH=rpingloop=N; 200) with two busy loops loading the guest, to count rping's own
# end-of-run hang: its main thread destroys the id while its event thread, woken by the
# DISCONNECTED event, is on its way to read it (vm/README.md, "Timeouts and retries";
# docs/behaviour.md, "An event on its way to its reader"). A client still running 20 s after it started counts as hung: its threads' wait
# channels and kernel stacks are kept in out/rpingloop/VARIANT.ITER/ and it is killed. Prints
# one line per hung or failed iteration and the counts. Exits 1 when ours hung or any run
# failed otherwise (upstream's hangs are counted, not failed).
RPINGLOOP='hung=0; failed=0; W=/tmp/rpingloop; D=/host/out/rpingloop
  for k in 1 2; do (while :; do :; done) & done
  trap "kill \$(jobs -p) 2>/dev/null" EXIT; trap "exit 1" TERM
  for i in $(seq $N); do
    rm -rf $W; mkdir -p $W
    ip netns exec ns1 timeout -k 2 40 rping -s -a 192.0.2.2 -C 5 -v > $W/srv.out 2>&1 < /dev/null & s=$!
    for j in $(seq 100); do kill -0 $s 2>/dev/null || break; rdma res show cm_id 2>/dev/null | grep -q LISTEN && break; sleep 0.05; done
    rping -c -I 192.0.2.1 -a 192.0.2.2 -C 5 -v > $W/cli.out 2>&1 < /dev/null & c=$!
    for j in $(seq 200); do kill -0 $c 2>/dev/null || break; sleep 0.1; done
    h=0
    if kill -0 $c 2>/dev/null; then h=1; hung=$((hung+1))
      for t in /proc/$c/task/*; do echo "== thread $(cat $t/comm) wchan $(cat $t/wchan)"; cat $t/stack; done > $W/hang.txt 2>&1
      how="not the end-of-run signature"; grep -q ucma_get_event $W/hang.txt && how="event thread in ucma_get_event"
      echo "iteration $i: client still running after 20 s ($how)"
      kill -9 $c; mkdir -p $D; rm -rf $D/$RDMACM_VARIANT.$i; cp -a $W $D/$RDMACM_VARIANT.$i
    fi
    wait $c; rc=$?
    for j in $(seq 50); do kill -0 $s 2>/dev/null || break; sleep 0.1; done; kill $s 2>/dev/null; wait $s; src=$?
    if [ $h = 0 ] && { [ $rc != 0 ] || [ $src != 0 ]; }; then failed=$((failed+1))
      echo "iteration $i: client rc=$rc server rc=$src"; mkdir -p $D; rm -rf $D/$RDMACM_VARIANT.$i; cp -a $W $D/$RDMACM_VARIANT.$i; fi
  done
  echo "$RDMACM_VARIANT: $hung of $N runs hung at the end, $failed failed otherwise"
  [ $failed = 0 ] && { [ "$RDMACM_VARIANT" = upstream ] || [ $hung = 0 ]; }'
if [[ ${BENCH:-} == *rpingloop* ]]; then
  RPN=$(echo "$BENCH" | sed -n 's/.*rpingloop=\([0-9]*\).*/\1/p'); RPN=${RPN:-200}
  t rping_end_loop $((RPN * 4 + 120)) bash -c "N=$RPN; $RPINGLOOP"
fi
