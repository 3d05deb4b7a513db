# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# trace.sh - the trail of a failing storm (RDMACM_RS_TRACE, docs/trace.md) and rdma_destroy_id
# with the destroying thread's own event unacked. Both tests run per variant; the programs are
# upstream's ucmatose and ctest/vm/destroy_held.c, with the variant's library. Only ours traces
# and reports; upstream's runs show the same programs failing (and waiting) the same way.
#   root ns: veth0 192.0.2.1 (rxe0) <-> ns1 veth1 192.0.2.2 (rxe1); 192.0.2.77 answers nobody.
# A storm of three client processes, traced, at once: A connects 20 ids to a ucmatose server in
# ns1 (port 7481) and disconnects them; B's 20 connects go to a second server (port 7482) that
# was stopped (SIGSTOP) after it listened: they hear nothing back (B is killed after 8 s); C
# resolves 10 ids to 192.0.2.77, where no host answers (ADDR_ERROR; ucmatose stops at the first
# and destroys the others). ours: `rdma-resolve trace --json` over the three files must name
# connect to 192.0.2.2:7482 (never ended, or failed) for B's 20 ids and ADDR_ERROR of
# resolve_addr to 192.0.2.77:7481 (the rest: destroyed before their event) for C's 10, count A's 20
# ESTABLISHED, and every line must validate against the trace schema. upstream: the same exit
# statuses, and no trace file.
t trace_storm_rxe 120 bash -c '
  S=/tmp/trace_storm; RR=/extra/bin/rdma-resolve; rm -rf $S; mkdir -p $S/t
  env -u RDMACM_RS_TRACE ip netns exec ns1 stdbuf -oL ucmatose -c 20 -C 0 -p 7481 > $S/srv1.out 2>&1 & srv1=$!
  env -u RDMACM_RS_TRACE ip netns exec ns1 stdbuf -oL ucmatose -c 20 -C 0 -p 7482 > $S/srv2.out 2>&1 & srv2=$!
  for i in $(seq 50); do l=$(rdma res show cm_id 2>/dev/null | grep LISTEN); [[ $l == *:7481* && $l == *:7482* ]] && break; sleep 0.2; done
  kill -STOP $srv2
  RDMACM_RS_TRACE=$S/t/ timeout 60 stdbuf -oL ucmatose -s 192.0.2.2 -c 20 -C 0 -p 7481 > $S/a.out 2>&1 & a=$!
  RDMACM_RS_TRACE=$S/t/ timeout 8 stdbuf -oL ucmatose -s 192.0.2.2 -c 20 -C 0 -p 7482 > $S/b.out 2>&1 & b=$!
  RDMACM_RS_TRACE=$S/t/ timeout 30 stdbuf -oL ucmatose -s 192.0.2.77 -c 10 -C 0 -p 7481 > $S/c.out 2>&1; c=$?
  wait $a; a=$?; wait $b; b=$?
  kill -KILL $srv2; wait $srv2 2>/dev/null
  for i in $(seq 50); do kill -0 $srv1 2>/dev/null || break; sleep 0.2; done; kill $srv1 2>/dev/null; wait $srv1; s1=$?
  for x in a b c srv1; do echo "== $x"; head -c 1500 $S/$x.out; done
  echo "exits: A $a (0: connected), B $b (124: still waiting when killed), C $c (non-zero: address error), server 1 $s1 (0)"
  ok=1
  [ $a = 0 ] && [ $b != 0 ] && [ $c != 0 ] && [ $s1 = 0 ] || { echo "FAIL: unexpected exit statuses"; ok=0; }
  grep -q ADDR_ERROR $S/c.out || { echo "FAIL: client C reported no ADDR_ERROR"; ok=0; }
  n=$(ls $S/t | wc -l); echo "trace files: $n"; ls -l $S/t
  if [ "$RDMACM_VARIANT" = upstream ]; then
    [ $n = 0 ] || { echo "FAIL: upstream wrote trace files"; ok=0; }
    [ $ok = 1 ]; exit
  fi
  [ $n = 3 ] || { echo "FAIL: expected one trace file per client process"; ok=0; }
  $RR trace $S/t/*.jsonl; echo "rdma-resolve trace exit $?"
  $RR trace --json $S/t/*.jsonl > $S/sum.json; r=$?
  [ $r = 1 ] || { echo "FAIL: rdma-resolve trace --json exit $r, expected 1 (something failed)"; ok=0; }
  for f in $S/t/*.jsonl; do echo "== first lines of $f"; head -12 $f; done
  python3 - $S/sum.json /extra/bin/rdmacm-trace.schema.json $S/t/*.jsonl <<"PYEOF" || ok=0
import json, sys, jsonschema
s = json.load(open(sys.argv[1]))
schema = json.load(open(sys.argv[2]))
jsonschema.Draft202012Validator.check_schema(schema)
v = jsonschema.Draft202012Validator(schema)
lines = bad = 0
for f in sys.argv[3:]:
    for l in open(f):
        lines += 1
        for e in v.iter_errors(json.loads(l)):
            bad += 1; print("SCHEMA", f, e.message, l.strip()[:200])
print("lines validated:", lines, "invalid:", bad)
res = []
def check(what, ok):
    print(("ok   " if ok else "FAIL ") + what); res.append(ok)
check("no invalid line", lines > 100 and bad == 0)
check("three processes, no unreadable line", s["processes"] == 3 and s["bad_lines"] == 0)
est = [r for r in s["steps"] if r["step"] == "ESTABLISHED"]
check("A\x27s 20 connections ESTABLISHED", est and est[0]["count"] >= 20 and est[0]["failed"] == 0)
# ucmatose stops at its first ADDR_ERROR and destroys the other ids before their events
addr = [f for f in s["failures"] if f["step"] == "ADDR_ERROR" and f["of"] == "resolve_addr" and f["peer"] == "192.0.2.77:7481"]
left = [a for a in s["abandoned"] if a["step"] == "resolve_addr" and a["peer"] == "192.0.2.77:7481"]
check("ADDR_ERROR of resolve_addr to 192.0.2.77:7481, the rest of C\x27s 10 ids destroyed before their event", addr and addr[0]["count"] >= 1 and addr[0]["count"] + sum(a["count"] for a in left) == 10)
conn = [u for u in s["unfinished"] if u["step"] == "connect" and u["peer"] == "192.0.2.2:7482"]
conn += [f for f in s["failures"] if f["of"] == "connect" and f["peer"] == "192.0.2.2:7482"]
check("connect to the stopped peer 192.0.2.2:7482 named for B\x27s 20 ids", sum(c["count"] for c in conn) == 20)
check("slowest peers listed", len(s["slowest_peers"]) >= 2)
check("no disconnect listed as abandoned (the server disconnected A\x27s ids first)", not [a for a in s["abandoned"] if a["step"] == "disconnect"])
sys.exit(0 if all(res) else 1)
PYEOF
  [ $ok = 1 ]'

# rdma_destroy_id on an id whose ADDR_RESOLVED the destroying thread holds unacked
# (ctest/vm/destroy_held.c): another thread acks it when the library's log says so, else after
# 3 s. Both libraries: the destroy returns 0, and only after the ack (upstream's semantics).
# ours: the log (RDMACM_RS_LOG=warn) names the id and the held event within 1-2.5 s, says this
# thread holds it; the trace has a destroy_id_blocked line with self_deadlock true, and
# rdma-resolve trace lists it. upstream: no message; the destroy waits for the 3 s ack.
t destroy_held_rxe 60 bash -c '
  D=/tmp/destroy_held; RR=/extra/bin/rdma-resolve; rm -rf $D; mkdir -p $D/t
  RDMACM_RS_LOG=warn RDMACM_RS_LOG_FILE=$D/log RDMACM_RS_TRACE=$D/t/ /extra/bin/destroy_held 192.0.2.2 $D/log > $D/out 2>&1; r=$?
  cat $D/out; echo "destroy_held exit $r"; echo "== log"; cat $D/log 2>/dev/null
  [ $r = 0 ] || exit 1
  seen=$(sed -n "s/^message about the wait seen at +\([0-9]*\) ms$/\1/p" $D/out)
  if [ "$RDMACM_VARIANT" = upstream ]; then
    [ -z "$seen" ] && grep -q "acked by the other thread at +3[0-9][0-9][0-9] ms" $D/out && exit 0
    echo "FAIL: upstream: expected no message and the ack at 3 s"; exit 1
  fi
  ok=1
  [ -n "$seen" ] && [ "$seen" -ge 900 ] && [ "$seen" -le 2500 ] || { echo "FAIL: message not seen within 0.9-2.5 s ($seen)"; ok=0; }
  grep -q "rdma_destroy_id: id 0x[0-9a-f]* (handle [0-9]*, trace id 1) has waited 1000 ms for 1 unacked event(s): ADDR_RESOLVED (status 0, held by this thread)" $D/log || { echo "FAIL: log line"; ok=0; }
  echo "== trace"; cat $D/t/*.jsonl
  grep -q "\"step\":\"destroy_id_blocked\".*\"held\":\[{\"event\":\"ADDR_RESOLVED\",\"status\":0,\"by_this_thread\":true}\],\"self_deadlock\":true" $D/t/*.jsonl || { echo "FAIL: trace line"; ok=0; }
  grep -q "\"step\":\"destroy_id\".*\"ok\":true" $D/t/*.jsonl || { echo "FAIL: no destroy_id line after the wait"; ok=0; }
  $RR trace $D/t/*.jsonl > $D/sum.txt; cat $D/sum.txt
  grep -q "pid [0-9]* id 1 peer 192.0.2.2:7471: ADDR_RESOLVED (held by the destroying thread itself" $D/sum.txt || { echo "FAIL: summary"; ok=0; }
  [ $ok = 1 ]'
