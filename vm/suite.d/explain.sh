# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# explain.sh - rdma-resolve (/extra/bin/rdma-resolve, built from src/bin with the
# library's Rust API, so it is always ours) against the kernel, and against what the upstream
# tools observe. Every test runs per variant: the tool is the same, rping/ucmatose use the
# variant's library. A test fails when the tool's JSON does not say what the topology implies
# (checked with python, /tmp/explain_check.py below) or when the tool says "resolved" where
# rping -c does not reach RDMA_CM_EVENT_ROUTE_RESOLVED (or the other way round).
#   root ns: veth0 192.0.2.1 (rxe0) <-> ns1 veth1 192.0.2.2 (rxe1);
#            veth2 198.51.100.1 (siw0) <-> ns1 veth3 198.51.100.2 (no RDMA device)
RR=/extra/bin/rdma-resolve
SCHEMA=/extra/bin/rdma-resolve.schema.json
cat > /tmp/explain_check.py <<'PYEOF'
# explain_check.py FILE EXPR... : every EXPR (python, over j = the document, step(name) =
# that step's object, data(name) = its data) must be true; prints the failing ones.
import json, sys
j = json.load(open(sys.argv[1]))
def step(n):
    for s in j["steps"]:
        if s["step"] == n:
            return s
    raise KeyError("no step " + n)
def data(n):
    return step(n)["data"]
bad = 0
for e in sys.argv[2:]:
    try:
        ok = eval(e)
    except Exception as x:
        ok = False; e += "  (%r)" % x
    print(("ok   " if ok else "FAIL ") + e)
    bad += not ok
sys.exit(1 if bad else 0)
PYEOF
cat > /tmp/explain_lib.sh <<'SHEOF'
RR=/extra/bin/rdma-resolve
# tool [args]: the tool's JSON into /tmp/rr.json (also shown), its exit status in $TOOL_RC
tool(){ echo "\$ rdma-resolve --json $*"; $RR --json "$@" > /tmp/rr.json; TOOL_RC=$?; cat /tmp/rr.json
        echo "rdma-resolve exit $TOOL_RC"; }
check(){ python3 /tmp/explain_check.py /tmp/rr.json "$@"; }
# rping_resolves [rping args]: 0 when rping -c reaches ROUTE_RESOLVED (no server: it stops there
# or at the connect), with the variant's library
rping_resolves(){ echo "\$ rping -c -d -v -C 1 $*  (stdout line-buffered: a hung rping is killed)"; timeout 10 stdbuf -oL rping -c -d -v -C 1 "$@" > /tmp/rp.txt 2>&1; echo "rping exit $?"
                  sed 's/^/  rping: /' /tmp/rp.txt | head -20; grep -q RDMA_CM_EVENT_ROUTE_RESOLVED /tmp/rp.txt; }
# ucmatose_resolves [args]: 0 when ucmatose saw no ADDR_ERROR/ROUTE_ERROR and no resolve failure
ucmatose_resolves(){ echo "\$ ucmatose -c 1 -C 1 $*"; timeout 10 stdbuf -oL ucmatose -c 1 -C 1 "$@" > /tmp/uc.txt 2>&1; echo "ucmatose exit $?"
                     sed 's/^/  ucmatose: /' /tmp/uc.txt | head -20
                     ! grep -qE 'ADDR_ERROR|ROUTE_ERROR|UNREACHABLE|failure resolving|rdma_resolve_(addr|route)' /tmp/uc.txt; }
# agree WHAT: the tool's verdict ($TOOL_RC) and the upstream tool's ($?) must be the same
agree(){ local r=$?; local t=$([ "$TOOL_RC" = 0 ] && echo resolved || echo failed) u=$([ $r = 0 ] && echo resolved || echo failed)
         if [ "$t" = "$u" ]; then echo "AGREE $1: rdma-resolve $t, $1 $u"; else echo "DISAGREE $1: rdma-resolve $t, $1 $u"; return 1; fi; }
SHEOF

# rxe across the pair: resolved on rxe0, a RoCE v2 GID, a path record, ibv_gid_reachable yes.
t explain_rxe 90 bash -c '. /tmp/explain_lib.sh; set -o pipefail
  tool 192.0.2.2 && check "j[\"result\"][\"ok\"]" "data(\"route\")[\"interface\"] == \"veth0\"" \
    "data(\"device\")[\"ports\"][0][\"device\"] == \"rxe0\"" \
    "data(\"resolve_addr\")[\"events\"][0][\"event\"] == \"RDMA_CM_EVENT_ADDR_RESOLVED\"" \
    "data(\"resolve_addr\")[\"resolved\"][\"device\"] == \"rxe0\"" \
    "data(\"resolve_addr\")[\"resolved\"][\"gid_type\"] == \"RoCE v2\"" \
    "data(\"resolve_addr\")[\"resolved\"][\"gid_index\"] is not None" \
    "data(\"neighbour\")[\"state\"] in (\"REACHABLE\", \"STALE\", \"DELAY\", \"PROBE\")" \
    "data(\"resolve_route\")[\"path\"][\"mtu\"] >= 1024" "step(\"gid_reachable\")[\"status\"] == \"ok\"" &&
  { rping_resolves -a 192.0.2.2; agree rping; }'
# nobody answers ARP for 192.0.2.9 on veth0
t explain_rxe_unreachable 90 bash -c '. /tmp/explain_lib.sh
  tool -t 1000 192.0.2.9; check "not j[\"result\"][\"ok\"]" "\"no neighbour answered for 192.0.2.9 on veth0\" in j[\"result\"][\"reason\"]" \
    "step(\"resolve_addr\")[\"data\"][\"events\"][0][\"event\"] == \"RDMA_CM_EVENT_ADDR_ERROR\"" \
    "step(\"resolve_route\")[\"status\"] == \"skipped\"" || exit 1
  rping_resolves -a 192.0.2.9; agree rping'
# siw: 198.51.100.2 answers ARP (veth3); iWARP has no path record
t explain_siw 90 bash -c '. /tmp/explain_lib.sh
  tool 198.51.100.2; check "j[\"result\"][\"ok\"]" "data(\"route\")[\"interface\"] == \"veth2\"" \
    "data(\"resolve_addr\")[\"resolved\"][\"device\"] == \"siw0\"" "data(\"resolve_route\")[\"path\"] is None" \
    "step(\"gid_reachable\")[\"status\"] == \"ok\"" "data(\"gid_reachable\")[\"gid\"] == \"::ffff:198.51.100.2\"" || exit 1
  rping_resolves -a 198.51.100.2; agree rping || exit 1
  ucmatose_resolves -s 198.51.100.2; agree ucmatose'
t explain_siw_unreachable 90 bash -c '. /tmp/explain_lib.sh
  tool -t 1000 198.51.100.9; check "not j[\"result\"][\"ok\"]" "\"no neighbour answered for 198.51.100.9 on veth2\" in j[\"result\"][\"reason\"]" || exit 1
  rping_resolves -a 198.51.100.9; agree rping || exit 1
  ucmatose_resolves -s 198.51.100.9; agree ucmatose'
# in ns1, 198.51.100.1 is reached through veth3, which has no RDMA device
t explain_no_rdma_device 90 ip netns exec ns1 bash -c '. /tmp/explain_lib.sh
  tool 198.51.100.1; check "not j[\"result\"][\"ok\"]" "j[\"result\"][\"failed_step\"] == \"device\"" \
    "\"198.51.100.1 is routed via veth3, which has no RDMA device\" in j[\"result\"][\"reason\"]" \
    "\"rdma link add\" in j[\"result\"][\"fix\"] and \"netdev veth3\" in j[\"result\"][\"fix\"]" \
    "data(\"resolve_addr\")[\"events\"][0][\"event\"] == \"RDMA_CM_EVENT_ADDR_ERROR\"" || exit 1
  rping_resolves -a 198.51.100.1; agree rping'
# no route at all
t explain_no_route 60 bash -c '. /tmp/explain_lib.sh
  tool 203.0.113.5; check "not j[\"result\"][\"ok\"]" "j[\"result\"][\"failed_step\"] == \"route\"" \
    "\"no route to 203.0.113.5\" in j[\"result\"][\"reason\"]" || exit 1
  rping_resolves -a 203.0.113.5; agree rping'
# IPv6 global across the pair
t explain_ipv6 90 bash -c '. /tmp/explain_lib.sh
  tool 2001:db8::2; check "j[\"result\"][\"ok\"]" "data(\"resolve_addr\")[\"resolved\"][\"device\"] == \"rxe0\"" || exit 1
  rping_resolves -a 2001:db8::2; agree rping'
# IPv6 link-local of veth1, with the scope (%veth0) and without (the kernel then picks the
# first link with an fe80::/64 route, here veth0: resolved, with a warning)
t explain_ipv6_linklocal 120 bash -c '. /tmp/explain_lib.sh
  ll=$(ip -n ns1 -6 addr show dev veth1 scope link | sed -n "s/.*inet6 \(fe80[^/]*\).*/\1/p" | head -1)
  [ -n "$ll" ] || { echo "veth1 has no link-local address"; exit 1; }
  tool "$ll%veth0"; check "j[\"result\"][\"ok\"]" "data(\"route\")[\"interface\"] == \"veth0\"" \
    "data(\"resolve_addr\")[\"resolved\"][\"device\"] == \"rxe0\"" || exit 1
  rping_resolves -a "$ll%veth0"; agree rping || exit 1
  # without a scope the kernel guesses the link (the first fe80::/64 route): the tool says so
  tool "$ll"; check "j[\"result\"][\"ok\"]" "\"no scope\" in data(\"route\")[\"warning\"]" "\"%veth0\" in data(\"route\")[\"warning\"]" || exit 1
  rping_resolves -a "$ll"; agree rping'
# passive: the wildcard (no device) and a bound address (rxe0); a port in use
t explain_passive 90 bash -c '. /tmp/explain_lib.sh
  tool --passive; check "j[\"result\"][\"ok\"]" "j[\"steps\"][0][\"data\"][\"entries\"][0][\"flags\"] & 1" \
    "step(\"route\")[\"status\"] == \"skipped\"" "data(\"bind\")[\"bound\"][\"device\"] is None" "step(\"listen\")[\"status\"] == \"ok\"" || exit 1
  tool --passive -p 7471 192.0.2.1; check "j[\"result\"][\"ok\"]" "data(\"bind\")[\"bound\"][\"device\"] == \"rxe0\"" || exit 1
  rping -s -a 192.0.2.1 -p 7472 -C 1 & p=$!; sleep 2
  tool --passive -p 7472 192.0.2.1; check "not j[\"result\"][\"ok\"]" "j[\"result\"][\"failed_step\"] == \"bind\"" "\"in use\" in j[\"result\"][\"reason\"]"; r=$?
  kill $p; wait $p; exit $r'
# every JSON document the tool printed above, and a few more, against the schema
t explain_json_schema 120 bash -c '. /tmp/explain_lib.sh
  i=0; for a in "192.0.2.2" "-t 500 192.0.2.9" "198.51.100.2" "203.0.113.5" "--passive" "-P udp -p 7000 2001:db8::2" \
      "nosuch.invalid" "--all-devices 192.0.2.2" "-f ib 192.0.2.2" "-b 192.0.2.1 192.0.2.2" "-b 198.51.100.1 192.0.2.2"; do
    i=$((i+1)); $RR --json $a > /tmp/s$i.json; echo "rdma-resolve --json $a: exit $?"
  done
  python3 - '"$SCHEMA"' /tmp/s*.json <<PY
import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator.check_schema(schema)
v = jsonschema.Draft202012Validator(schema)
bad = 0
for f in sys.argv[2:]:
    doc = json.load(open(f))
    errs = list(v.iter_errors(doc))
    print(f, doc["request"], "ok" if not errs else "INVALID")
    for e in errs:
        print("  ", list(e.path), e.message); bad += 1
# the checker must be able to fail: a document with a wrong field is rejected
doc["result"]["ok"] = "yes"
assert list(v.iter_errors(doc)), "schema accepted a bad document"
sys.exit(1 if bad else 0)
PY'
# --all-devices: rxe0 on veth0 (RoCE v2 GIDs), siw0 on veth2
t explain_all_devices 60 bash -c '. /tmp/explain_lib.sh
  $RR --all-devices; tool --all-devices; check \
    "[p[\"netdev\"] for d in j[\"devices\"] if d[\"name\"] == \"rxe0\" for p in d[\"ports\"]] == [\"veth0\"]" \
    "[p[\"netdev\"] for d in j[\"devices\"] if d[\"name\"] == \"siw0\" for p in d[\"ports\"]] == [\"veth2\"]" \
    "any(g[\"type\"] == \"RoCE v2\" and g[\"gid\"] == \"::ffff:192.0.2.1\" for d in j[\"devices\"] for p in d[\"ports\"] for g in p[\"gids\"])"'
# -v traces the library decisions on stderr, one line each; without it stderr stays empty
t explain_verbose 60 bash -c '. /tmp/explain_lib.sh
  $RR -v 192.0.2.2 > /tmp/v.out 2> /tmp/v.err; echo "exit $?"; cat /tmp/v.err
  for w in "rdma_getaddrinfo: libc getaddrinfo branch" "ibacm: " "resolve_addr: id .* command to the kernel" "event RDMA_CM_EVENT_ADDR_RESOLVED status 0" \
           "device: id .* takes the device the kernel chose" "resolve_route: id" "event RDMA_CM_EVENT_ROUTE_RESOLVED status 0"; do
    grep -q "$w" /tmp/v.err || { echo "no trace line with: $w"; exit 1; }; done
  $RR 192.0.2.2 > /tmp/q.out 2> /tmp/q.err; [ ! -s /tmp/q.err ] || { echo "stderr without -v:"; cat /tmp/q.err; exit 1; }
  RDMACM_RS_LOG=debug RDMACM_RS_LOG_FILE=/tmp/f.log $RR 192.0.2.2 > /dev/null 2> /tmp/f.err
  [ ! -s /tmp/f.err ] && grep -q "rdma_getaddrinfo: " /tmp/f.log || { echo "RDMACM_RS_LOG_FILE not honoured"; exit 1; }
  # any program on our library: rping with RDMACM_RS_LOG=debug (upstream: no such lines)
  RDMACM_RS_LOG=debug timeout 10 rping -c -a 192.0.2.2 -C 1 > /tmp/rp.out 2> /tmp/rp.err; grep rdmacm-rs /tmp/rp.err
  if [ "$RDMACM_VARIANT" = ours ]; then
    for w in "resolve_addr: id .* command to the kernel" "device: id .* takes the device the kernel chose" "event RDMA_CM_EVENT_ROUTE_RESOLVED status 0"; do
      grep -q "^rdmacm-rs\[[0-9]*\] DEBUG: .*$w" /tmp/rp.err || { echo "rping on ours: no trace line with: $w"; exit 1; }; done
  else ! grep -q rdmacm-rs /tmp/rp.err || exit 1; fi
  timeout 10 rping -c -a 192.0.2.2 -C 1 2> /tmp/rq.err; ! grep -q rdmacm-rs /tmp/rq.err || { echo "rping traced without RDMACM_RS_LOG"; exit 1; }
  echo "trace ok: $(wc -l < /tmp/v.err) lines"'
# the kernel's rdma_ucm module unloaded (rmmod, then loaded again; the test checks that the
# device node and a resolution are back, so no later test runs without them). Both libraries
# load the module themselves (they ask RDMA netlink for the rdma_cm char device, which makes
# the kernel load it; ours in src/sys/netlink.rs). The tool explains our library, so: when
# it says "not loaded", rping on OUR library must fail to resolve too (whatever the variant),
# and upstream's rping is only reported; when our library loads the module itself, the tool
# must resolve and agree with the variant's rping.
t explain_no_rdma_ucm 90 bash -c '. /tmp/explain_lib.sh
  rmmod rdma_ucm || { echo "rmmod rdma_ucm failed"; exit 1; }
  tool 192.0.2.2; r=0
  if [ "$TOOL_RC" != 0 ]; then
    check "j[\"result\"][\"failed_step\"] == \"resolve_addr\"" \
      "j[\"result\"][\"reason\"].startswith(\"the kernel'"'"'s rdma_ucm module is not loaded\")" "\"modprobe rdma_ucm\" in j[\"result\"][\"fix\"]" || r=1
    echo "rping on our library:"; LD_LIBRARY_PATH=/extra/ours/lib rping_resolves -a 192.0.2.2; agree "rping (ours)" || r=1
    if [ "$RDMACM_VARIANT" = upstream ]; then rping_resolves -a 192.0.2.2 && u=resolved || u=failed
      echo "INFO upstream rping: $u (upstream loads rdma_ucm through RDMA netlink; ours does not yet)"; fi
  else
    echo "our library loaded rdma_ucm itself"; check "j[\"result\"][\"ok\"]" || r=1
    rping_resolves -a 192.0.2.2; agree rping || r=1
  fi
  modprobe rdma_ucm; for i in 1 2 3 4 5 6 7 8 9 10; do [ -c /dev/infiniband/rdma_cm ] && break; sleep 0.5; done
  [ -c /dev/infiniband/rdma_cm ] || { echo "/dev/infiniband/rdma_cm did not come back"; exit 1; }
  $RR 192.0.2.2 > /dev/null || { echo "no resolution after modprobe rdma_ucm"; exit 1; }
  exit $r'
