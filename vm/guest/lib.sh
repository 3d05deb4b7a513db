# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# lib.sh - test DSL for vm/suite.sh and vm/suite.d/*.sh (sourced in the guest by runner.sh).
#
#   t    [OPTS] NAME TIMEOUT CMD [ARG...]        one command, root namespace
#   pair [OPTS] NAME TIMEOUT 'SERVER' 'CLIENT'   server (bash -c string) in netns ns1 (rxe1,
#                                                192.0.2.2), client in the root ns (rxe0, 192.0.2.1)
#   pair0 [OPTS] NAME TIMEOUT 'SERVER' 'CLIENT'  same, both in the root ns (loopback, siw0)
#   skip NAME REASON                             record that a test could not run here
# OPTS:
#   --cmp           deterministic output: the host diffs the filtered stdout of the upstream and
#                   ours runs (client stdout, then server stdout); DIFF counts as a failure of ours
#   --filter SED    sed script applied to stdout before the --cmp comparison
#   --preload       also run a third time with LD_PRELOAD=/extra/ours/lib/librdmacm.so.1
#   --srv-wait S    how long to wait for the server to listen before the client starts (3): S*10
#                   looks for a listening rdma_cm id, 0.1 s apart; each look runs `rdma res show`,
#                   so under TCG a wait for a server that never shows one (fork mode listens on
#                   TCP) lasts several times S seconds: such a test's client looks for its TCP
#                   listener itself, after a wait of 1
# Every test runs once per variant: upstream (the guest's librdmacm), ours
# (LD_LIBRARY_PATH=/extra/ours/lib), and preload if asked. Both sides of a pair use the same
# variant. TIMEOUT (seconds) applies to each side of each run (timeout -k 5).
# A test passes when every process exits 0 and, before it, the loader was seen to resolve
# librdmacm.so.1 to the variant's library (_libcheck, in the same environment and netns).
# Results: /host/results.txt, logs: /host/out/.
# Retries (_again): a run of upstream's that times out is run once more (try=2 in the result
# line, reported by the host as upstream flakiness). A run of ours (ours, preload) that times
# out is a failure, unless the watchdog proved it stuck in rxe's own stall (_rxe_stall): then
# it too is run once more, its evidence kept for the host's report. Nothing else is retried.
N1="ip netns exec ns1"
RES=${RES:-/host}; mkdir -p "$RES/out"
OURS=/extra/ours/lib
WHICHLIB=/extra/bin/whichlib
VARIANTS=(upstream); [ -z "${UPSTREAM_ONLY:-}" ] && [ -e $OURS/librdmacm.so.1 ] && VARIANTS+=(ours)
ms(){ local t=${EPOCHREALTIME/./}; echo $((t/1000)); }
# RDMACM_VARIANT tells test programs which library the run must have loaded (gid_reachable).
venv(){ case $1 in upstream) echo "RDMACM_VARIANT=upstream";; ours) echo "RDMACM_VARIANT=ours LD_LIBRARY_PATH=$OURS";;
                   preload) echo "RDMACM_VARIANT=preload LD_PRELOAD=$OURS/librdmacm.so.1";; esac; }
# _selected NAME: whether this boot runs NAME: its suite file (_SF, set by runner.sh) is in this
# boot's share of the suite (SHARD_FILES with SHARD_MODE only / except: testbed.sh's two VMs),
# and NAME is in ONLY when that is set.
_selected(){ if [ -n "${SHARD_MODE:-}" ]; then
    case " $SHARD_FILES " in *" ${_SF:-} "*) [ "$SHARD_MODE" = only ] || return 1;; *) [ "$SHARD_MODE" = except ] || return 1;; esac; fi
  [ -z "${ONLY:-}" ] && return 0; local o; for o in $ONLY; do [ "$o" = "$1" ] && return 0; done; return 1; }
_status(){ local r; for r in "$@"; do case $r in 124|137) echo TIMEOUT; return;; esac; done
           for r in "$@"; do [ "$r" = 0 ] || { echo FAIL; return; }; done; echo PASS; }
_opts(){ O_CMP=0 O_PRE=0 O_FILTER= O_WAIT=3
  while :; do case ${1:-} in
    --cmp) O_CMP=1;; --preload) O_PRE=1;; --filter) O_FILTER=$2; shift;; --srv-wait) O_WAIT=$2; shift;;
    *) break;; esac; shift; done; O_REST=("$@"); }
_variants(){ local v; for v in "${VARIANTS[@]}"; do echo "$v"; done
             [ "$O_PRE" = 1 ] && [[ " ${VARIANTS[*]} " == *" ours "* ]] && echo preload; return 0; }
_tries(){ echo "1 2"; }   # at most two runs; whether a second comes: _again
_record(){ # name variant status ms rc [srv_rc]   (uses $TRY, $LIBOK, $KILLED, $WAITMS: a pair's wait for its server, ms)
  local line="RESULT $1 $2 $3 ms=$4 rc=$5 srv_rc=${6:--} cmp=$O_CMP try=${TRY:-1} lib=${LIBOK:-?} killed=${KILLED:-0} srv_wait=${WAITMS:--}"
  echo "$line" >> "$RES/results.txt"; echo "@@$line"; }
# _libcheck VARIANT WHERE [PREFIX...]: which librdmacm the loader resolves in the variant's
# environment (run under the same netns prefix as the test process). whichlib prints every
# librdmacm object mapped into it; exactly one, ours for ours/preload, the system's for
# upstream. And by content: ours must export our own ibv_gid_reachable@RDMACM_RS_1.0 and have
# the GNU build-id of the library `make lib` built ($OURS_BUILD_ID, recorded from cargo's output,
# shipped by the host as /extra/ours/build-id), upstream's neither: a copy of upstream's library
# in our library's place fails every run of ours. Prints a diagnosis and returns 1 on a mismatch.
OURS_BUILD_ID=$(cat /extra/ours/build-id 2>/dev/null)
_libcheck(){ local v=$1 where=$2 out got want rc id sym; shift 2
  out=$("$@" env $(venv $v) $WHICHLIB 2>&1); rc=$?
  got=$(echo "$out" | sed -n 's/^librdmacm //p')
  id=$(echo "$out" | sed -n 's/^buildid //p'); sym=$(echo "$out" | sed -n 's/^rs_symbol //p')
  case $v in upstream) want='/usr/lib/*/librdmacm.so.1*';; *) want="$OURS/librdmacm.so.1*";; esac
  if [ $rc != 0 ] || [ "$(echo "$got" | grep -c .)" != 1 ]; then
    echo "LIBCHECK FAIL ($v, $where): whichlib rc=$rc, mapped: $(echo $out)"; return 1; fi
  # shellcheck disable=SC2053
  [[ $got == $want ]] || { echo "LIBCHECK FAIL ($v, $where): librdmacm resolved to $got, expected $want"; return 1; }
  case $v in
  upstream)
    [ "$sym" = no ] || { echo "LIBCHECK FAIL ($v, $where): $got exports ibv_gid_reachable@RDMACM_RS_1.0 (rs_symbol=$sym): not upstream's library"; return 1; }
    [ -z "$OURS_BUILD_ID" ] || [ "$id" != "$OURS_BUILD_ID" ] || { echo "LIBCHECK FAIL ($v, $where): $got has our build-id $id"; return 1; };;
  *)
    [ "$sym" = yes ] || { echo "LIBCHECK FAIL ($v, $where): $got does not export ibv_gid_reachable@RDMACM_RS_1.0 (rs_symbol=$sym): not our library"; return 1; }
    [ -n "$OURS_BUILD_ID" ] || { echo "LIBCHECK FAIL ($v, $where): no /extra/ours/build-id: the build-id of the library make built is unknown"; return 1; }
    [ "$id" = "$OURS_BUILD_ID" ] || { echo "LIBCHECK FAIL ($v, $where): $got has build-id $id, the library make built has $OURS_BUILD_ID"; return 1; };;
  esac
  echo "LIBCHECK ok ($v, $where): $got build-id $id rs_symbol=$sym"; }
# _libcheck_elf VARIANT CMD: when CMD is an ELF program linked with librdmacm, ldd must resolve
# it to the same library in the variant's environment.
_libcheck_elf(){ local v=$1 f got; f=$(command -v "$2" 2>/dev/null) || return 0
  [ -f "$f" ] && head -c 4 "$f" | grep -q ELF || return 0
  got=$(env $(venv $v) ldd "$f" 2>/dev/null | awk '/librdmacm\.so/{for(i=1;i<=NF;i++) if ($i ~ /^\//) {print $i; exit}}')
  [ -n "$got" ] || return 0
  got=$(readlink -f "$got")
  case $v in upstream) [[ $got == /usr/lib/*/librdmacm.so.1* ]];; *) [[ $got == $OURS/librdmacm.so.1* ]];; esac ||
    { echo "LIBCHECK FAIL ($v, ldd $f): $got"; return 1; }
  echo "LIBCHECK ok ($v, ldd $f): $got"; }
_cmpfile(){ # base: build base.cmp from stdout files
  [ "$O_CMP" = 1 ] || return 0
  { sed -e "${O_FILTER:-}" "$1.out"; if [ -e "$1.srv.out" ]; then echo "--- server ---"; sed -e "${O_FILTER:-}" "$1.srv.out"; fi; } > "$1.cmp"; }
_log(){ local b=$1; { cat "$b.lib" 2>/dev/null; echo "== stdout"; cat "$b.out"; echo "== stderr"; cat "$b.err"
  if [ -e "$b.srv.out" ]; then echo "== server stdout"; cat "$b.srv.out"; echo "== server stderr"; cat "$b.srv.err"; fi
  if [ -e "$b.hang" ]; then echo "== still running four seconds before the timeout"; cat "$b.hang"; fi
  } > "$b.log"; }
# _hangdump PID...: every process under each PID (itself included) and each of its threads: name,
# wait channel, the system call it is in (number and arguments) and its kernel stack.
_hangdump(){ local p q t n=0
  for p in "$@"; do for q in $p $(_descendants $p); do
    [ -d /proc/$q ] || continue
    n=$((n+1)); echo "process $q: $(tr '\0' ' ' < /proc/$q/cmdline 2>/dev/null)"
    for t in /proc/$q/task/*; do
      echo "  thread ${t##*/} $(cat $t/comm 2>/dev/null) wchan=$(cat $t/wchan 2>/dev/null) syscall=$(cat $t/syscall 2>/dev/null)"
      sed 's/^/    /' $t/stack 2>/dev/null
    done; done; done
  [ $n -gt 0 ] || echo "no process of the run left: it ended while this was being written"; }
_descendants(){ local c; for c in $(pgrep -P "$1"); do echo "$c"; _descendants "$c"; done; }
# _rxe_stall BASE: whether the run hangs in soft-RoCE's own stall (then a line "STALL rxe ..."
# on stdout and BASE.stall made). rxe completes a receive before its responder sends the ACK;
# a program that disconnects at once (its QP to ERR) can keep that ACK from ever leaving, and
# the sender, with the retry count 7 that rdma_connect asks for by default (rxe: retry without
# end), sends the message again every timeout to a peer that no longer answers: its program
# waits for a completion that never comes. Seen with upstream's library as with ours (rdma_server
# and rdma_client, about one exchange in 60 under load). All of it must hold: an RC QP of an rxe
# device in RTS whose peer QP is in ERR; its cm_id in DISCONNECT (the peer's DREQ arrived: its
# program disconnected); a thread of the QP's process waiting on a completion channel
# (ib_uverbs_event_read: the program's own wait for a completion); the device's
# completer_retry_err growing over 2 s (it is sending again). The QPs, cm_ids and counters it
# looked at go to stdout too. A peer QP that is gone instead (its program destroyed it or ended:
# upstream's rcopy once) makes BASE.stall-gone, not BASE.stall: how that program ended is not
# known here, so _again runs such a run again only when the pair's other end exited 0 by itself
# (_stall_rerun).
_rxe_stall(){ local b=$1 c1 c2 qp cm l dev lq rq st pid w n1 n2 peer f
  c1=$(_retries); sleep 2; c2=$(_retries)
  qp=$(rdma res show qp 2>/dev/null); cm=$(rdma res show cm_id 2>/dev/null)
  echo "stall check: completer_retry_err $c1-> ${c2}over 2 s; QPs and cm_ids:"
  grep -v ' type GSI ' <<< "$qp" | sed 's/^/  /'; grep -v ' state LISTEN ' <<< "$cm" | sed 's/^/  /' 
  while read -r l; do
    set -- $l; [ "${1:-}" = link ] || continue
    dev=$2 lq=$(_field lqpn $l) rq=$(_field rqpn $l) st=$(_field state $l) pid=$(_field pid $l)
    [ "$(_field type $l)" = RC ] && [ "$st" = RTS ] && [ -n "$rq" ] && [ -n "$pid" ] || continue
    # (rdma prints these fields in this order: the peer's lqpn, rqpn, type, state; a cm_id's
    # link, cm-idn, lqpn, qp-type, state, ps, pid)
    if grep -q " lqpn $rq rqpn $lq type RC state ERR " <<< "$qp"; then peer="in ERR" f=$b.stall
    # (gone: no QP of that number but this one, on any device: numbers are per device, and the
    # peer's may be this QP's own)
    elif ! grep " lqpn $rq " <<< "$qp" | grep -qvF "$l"; then peer="gone" f=$b.stall-gone
    else continue; fi
    grep -q "^link $dev cm-idn [0-9]* lqpn $lq qp-type RC state DISCONNECT ps [A-Z]* pid $pid " <<< "$cm" || continue
    w=$(cat /proc/$pid/task/*/wchan 2>/dev/null | grep -c '^ib_uverbs_event_read')
    [ "${w:-0}" -gt 0 ] || continue
    n1=$(_field "$dev" $c1) n2=$(_field "$dev" $c2)
    [ "${n2:-0}" -gt "${n1:-0}" ] || continue
    echo "STALL rxe: $dev QP $lq (pid $pid, $(cat /proc/$pid/comm 2>/dev/null)) in RTS sends again to its peer QP $rq, $peer; its cm_id is in DISCONNECT; $w thread(s) wait for a completion; completer_retry_err +$((n2 - n1)) in 2 s"
    : > "$f"
  done <<< "$qp"; }
# _stall_rerun BASE OTHER: whether the watchdog's evidence lets a run that timed out run once more:
# a stall whose peer QP is in ERR (BASE.stall), or one whose peer QP is gone (BASE.stall-gone)
# when OTHER, the exit status of the pair's other end (empty: no other end, or it was stopped),
# is 0: that end finished its part and ended by itself.
_stall_rerun(){ [ -e "$1.stall" ] || { [ -e "$1.stall-gone" ] && [ "${2:-}" = 0 ]; }; }
# _field KEY WORD...: the word after KEY among WORD... (a "key value" list, as rdma prints them)
_field(){ local k=$1; shift; while [ $# -gt 1 ]; do [ "$1" = "$k" ] && { echo "$2"; return; }; shift; done; }
# _retries: each rdma device's completer_retry_err, as "DEVICE/PORT COUNT ..." on one line (the
# port's hw_counters in sysfs: `rdma stat show` fails now and then, "Invalid argument", sometimes
# before it has printed anything)
_retries(){ local f d
  for f in /sys/class/infiniband/*/ports/*/hw_counters/completer_retry_err; do
    [ -r "$f" ] || continue; d=${f#/sys/class/infiniband/}; d=${d%/hw_counters/*}
    printf '%s %s ' "${d/\/ports\//\/}" "$(cat "$f")"; done; }
# _watched BASE TIMEOUT CMD...: CMD (itself under timeout TIMEOUT) in the foreground (a background
# job would start with SIGINT and SIGQUIT ignored), and beside it a watchdog: when CMD still runs
# four seconds before TIMEOUT (or before a pair's server's timeout, which started WD_AHEAD
# seconds earlier), whether the run is in rxe's stall (_rxe_stall) and what every process this
# shell started (CMD, a pair's server) is doing go to BASE.hang, so that a run that times out
# says where it waited; its first line says when the watchdog woke against when it was due (far
# behind its time: the guest was starved of CPU, and the run's processes may be gone by then).
# CMD's status.
_watched(){ local b=$1 to=${2%.*} me=$BASHPID w r st; shift 2; rm -f "$b.hang" "$b.stall" "$b.stall-gone"; st=$(ms)
  ( wd=$BASHPID; due=$((to - 4 - ${WD_AHEAD:-0})); [ $due -ge 1 ] || due=1
    trap 'kill $z 2>/dev/null; exit 0' TERM; sleep $due & z=$!; wait $z
    { echo "watchdog: due $((due*1000)) ms after the start, awake at $(( $(ms)-st )) ms"
      _rxe_stall "$b"; _hangdump $(pgrep -P $me | grep -vx $wd); } > "$b.hang" 2>&1 ) > /dev/null 2>&1 & w=$!
  "$@"; r=$?
  kill $w 2>/dev/null; wait $w 2>/dev/null; return $r; }
# _again NAME VARIANT BASE STATUS [OTHER]: whether a first run that ended in STATUS is run once
# more (a second run is recorded as try=2): one of upstream's that timed out (the test bed's
# tolerance of upstream), and any run that timed out in rxe's stall (_rxe_stall, _stall_rerun:
# OTHER is the exit status of a pair's other end; its evidence is kept in
# out/stalls/NAME.VARIANT.hang, where the host's report looks for it before it accepts a second
# run of ours). A run of ours that fails, or times out anywhere else, is never run again.
_again(){ [ "$4" = TIMEOUT ] && [ "$TRY" = 1 ] || return 1
  if _stall_rerun "$3" "${5:-}"; then mkdir -p "$RES/out/stalls"; cp "$3.hang" "$RES/out/stalls/$1.$2.hang"
    [ -e "$3.stall" ] || echo "the peer's end exited 0 by itself (pair: the server's status 0, not stopped)" >> "$RES/out/stalls/$1.$2.hang"
    echo "@@RETRY $1 $2 (rxe stall: $(grep -m1 '^STALL' "$3.hang" | cut -c1-120))"; return 0; fi
  [ "$2" = upstream ] || return 1
  # (the first run's watchdog log is kept: the second run starts by removing the first's files)
  mkdir -p "$RES/out/retried"; [ ! -e "$3.hang" ] || cp "$3.hang" "$RES/out/retried/$1.$2.hang"
  echo "@@RETRY $1 $2 (timed out)"; return 0; }

t(){ _opts "$@"; set -- "${O_REST[@]}"; local n=$1 to=$2 v s rc b TRY LIBOK KILLED=0; shift 2
  _selected "$n" || return 0
  for v in $(_variants); do
    for TRY in $(_tries $v); do
      b=$RES/out/$n.$v; s=$(ms); echo "@@BEGIN $n $v"; rm -f "$b".*
      LIBOK=ok; { _libcheck $v root && _libcheck_elf $v "$1"; } > "$b.lib" 2>&1 || LIBOK=bad
      if [ $LIBOK = ok ]; then
        _watched "$b" "$to" timeout -k 5 "$to" env $(venv $v) "$@" > "$b.out" 2> "$b.err" < /dev/null; rc=$?
      else rc=1; : > "$b.out"; cp "$b.lib" "$b.err"; fi
      _again "$n" "$v" "$b" "$(_status $rc)" && continue
      _cmpfile "$b"; _log "$b"; _record "$n" "$v" "$(_status $rc)" $(( $(ms)-s )) $rc; break
    done
  done; return 0; }

_wait_listen(){ # pid S: until a LISTEN cm_id shows up, the server died, or S*10 looks (--srv-wait) are done
  local i; for ((i=0; i<$2*10; i++)); do kill -0 "$1" 2>/dev/null || return 0
    rdma res show cm_id 2>/dev/null | grep -q LISTEN && { sleep 0.3; return 0; }; sleep 0.1; done; }

pair(){ _opts "$@"; set -- "${O_REST[@]}"; local n=$1 to=$2 srv=$3 cli=$4 v s rc src p b TRY LIBOK KILLED WAITMS
  _selected "$n" || return 0
  for v in $(_variants); do
    for TRY in $(_tries $v); do
      b=$RES/out/$n.$v; s=$(ms); echo "@@BEGIN $n $v"; rm -f "$b".*; KILLED=0 WAITMS=
      LIBOK=ok; { _libcheck $v server $N1 && _libcheck $v client; } > "$b.lib" 2>&1 || LIBOK=bad
      if [ $LIBOK = bad ]; then
        rc=1 src=1; : > "$b.out"; : > "$b.srv.out"; cp "$b.lib" "$b.err"; cp "$b.lib" "$b.srv.err"
      else
        timeout -k 5 "$to" $N1 env $(venv $v) bash -c "$srv" > "$b.srv.out" 2> "$b.srv.err" < /dev/null & p=$!
        WAITMS=$(ms); _wait_listen $p "$O_WAIT"; WAITMS=$(( $(ms) - WAITMS ))
        WD_AHEAD=$(( (WAITMS+999)/1000 )) _watched "$b" "$to" timeout -k 5 "$to" env $(venv $v) bash -c "$cli" > "$b.out" 2> "$b.err" < /dev/null; rc=$?
        # a client that failed leaves servers waiting forever: give the server a moment, then
        # stop it (killed=1 in the result: its exit status then says nothing about a crash)
        if [ $rc != 0 ]; then for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 $p 2>/dev/null || break; sleep 0.2; done
          kill -0 $p 2>/dev/null && { KILLED=1; pkill -TERM -P $p 2>/dev/null; }; fi
        wait $p; src=$?
      fi
      # (the other end of a client stuck in a stall: the server, when it ended by itself)
      _again "$n" "$v" "$b" "$(_status $rc $src)" "$([ "$KILLED" = 0 ] && echo "$src")" && continue
      _cmpfile "$b"; _log "$b"; _record "$n" "$v" "$(_status $rc $src)" $(( $(ms)-s )) $rc $src; break
    done
  done; return 0; }
pair0(){ local N1=; pair "$@"; }
# skip NAME REASON: the host accepts it only when vm/tests.txt allows a skip of NAME with a
# reason matching its skip-ok= pattern; any other skip fails the run.
skip(){ _selected "$1" || return 0; echo "SKIP $1 ${*:2}" >> "$RES/results.txt"; echo "@@SKIP $1 ${*:2}"; }
# slow_dns_run SECONDS CMD...: CMD with a name server on 127.0.0.1:53 that answers after SECONDS
# (vm/guest/slow_dns.py; "nx-" names: NXDOMAIN) as the only one, in a private mount namespace
# whose /etc/hosts, nsswitch.conf (files dns) and resolv.conf point at it, so nothing else in the
# guest sees them. Exported: test commands run it under bash -c.
slow_dns_run(){ local t=$1 d=/tmp/slow-dns-etc.$$ r=/tmp/slow-dns.ready.$$ s i rc; shift
  mkdir -p $d; rm -f $r
  printf '127.0.0.1 localhost\n::1 localhost\n' > $d/hosts
  printf 'hosts: files dns\n' > $d/nsswitch.conf
  printf 'nameserver 127.0.0.1\noptions timeout:5 attempts:1\n' > $d/resolv.conf
  for i in hosts nsswitch.conf resolv.conf; do [ -e /etc/$i ] || : > /etc/$i; done
  python3 /extra/vm/guest/slow_dns.py $t $r & s=$!
  for i in $(seq 100); do [ -e $r ] && break; kill -0 $s 2>/dev/null || break; sleep 0.1; done
  if [ ! -e $r ]; then echo "the DNS server did not start" >&2; kill $s 2>/dev/null; wait $s 2>/dev/null; return 1; fi
  unshare -m bash -c 'for f in hosts nsswitch.conf resolv.conf; do mount --bind '$d'/$f /etc/$f || exit 97; done; exec "$@"' slow-dns "$@"; rc=$?
  kill $s 2>/dev/null; wait $s 2>/dev/null; rm -rf $d $r; return $rc; }
export -f slow_dns_run _rxe_stall _stall_rerun _field _retries
