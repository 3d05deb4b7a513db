# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# siwloop.sh - on demand only (VM_BENCH=siwloop, flagged bench in tests.txt): the ucmatose_siw
# exchange (server `ucmatose`, client `ucmatose -s 198.51.100.1`, both in the root ns over siw0)
# N times per library (VM_BENCH=siwloop=N; 100) with two busy loops loading the guest, to catch
# a rare CONNECT_ERROR. Both sides line-buffered, with our library's debug log and trace on
# (upstream's ignores them; VM_BENCH=siwloop-quiet: off, as in make check). Prints one line per
# failed iteration and a count; every failed iteration's outputs, logs, `rdma res show` and
# dmesg (siw's connection-setup debug lines on, dyndbg) are kept in out/siwloop/VARIANT.ITER/.
# Exits 1 when any iteration failed.
SIWLOOP='fail=0; W=/tmp/siwloop; D=/host/out/siwloop
  mount -t debugfs none /sys/kernel/debug 2>/dev/null
  for f in siw_recv_mpa_rr siw_proc_mpareply siw_qp_cm_drop siw_cm_work_handler siw_cm_llp_data_ready siw_accept; do
    echo "func $f +p" > /sys/kernel/debug/dynamic_debug/control 2>/dev/null || echo "no dyndbg for $f"; done
  for k in 1 2; do (while :; do :; done) & done
  trap "kill \$(jobs -p) 2>/dev/null" EXIT; trap "exit 1" TERM
  for i in $(seq $N); do
    rm -rf $W; mkdir -p $W/trace; dmesg -C
    [ $Q = 1 ] || export RDMACM_RS_LOG=debug RDMACM_RS_TRACE=$W/trace/
    RDMACM_RS_LOG_FILE=$W/srv.log timeout -k 2 40 stdbuf -oL -eL ucmatose > $W/srv.out 2>&1 < /dev/null & p=$!
    for j in $(seq 100); do kill -0 $p 2>/dev/null || break; rdma res show cm_id 2>/dev/null | grep -q LISTEN && break; sleep 0.1; done
    sleep 0.3
    RDMACM_RS_LOG_FILE=$W/cli.log timeout -k 2 40 stdbuf -oL -eL ucmatose -s 198.51.100.1 > $W/cli.out 2>&1 < /dev/null; rc=$?
    if [ $rc != 0 ]; then rdma res show > $W/res.txt 2>&1; rdma res show cm_id >> $W/res.txt 2>&1
      for j in $(seq 10); do kill -0 $p 2>/dev/null || break; sleep 0.2; done; kill $p 2>/dev/null; fi
    wait $p; src=$?
    if [ $rc != 0 ] || [ $src != 0 ]; then fail=$((fail+1))
      echo "iteration $i: client rc=$rc server rc=$src: $(grep -m1 -i "error\|status" $W/cli.out)"
      dmesg > $W/dmesg.txt; mkdir -p $D; rm -rf $D/$RDMACM_VARIANT.$i; cp -a $W $D/$RDMACM_VARIANT.$i; fi
  done
  echo "$RDMACM_VARIANT: $fail of $N iterations failed"; [ $fail = 0 ]'
if [[ ${BENCH:-} == *siwloop* ]]; then
  SIWN=$(echo "$BENCH" | sed -n 's/.*siwloop=\([0-9]*\).*/\1/p'); SIWQ=0; [[ $BENCH == *siwloop-quiet* ]] && SIWQ=1
  t ucmatose_siw_loop 2400 bash -c "N=${SIWN:-100} Q=$SIWQ; $SIWLOOP"
fi
