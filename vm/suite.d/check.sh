# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# check.sh - rdmacm-rs-check (check/, the tool a site runs on its own fabric before a swap)
# on the test bed's soft devices. The checker runs every program twice itself, with
# upstream's library (the guest's, found by the loader) and with ours (--ours, by
# LD_LIBRARY_PATH in the programs' environment only): its own environment does not reach
# the programs. It runs as nobody (no root needed on rxe/siw). Every program gets 90 s
# (--timeout), not the default 30: under TCG with other VMs on the cores a CM exchange can
# stall for a retry (an rdma_server/rdma_client pair over rxe0 ran out of 30 s with ours once,
# and with upstream's once before); a run of ours is not retried (guest/lib.sh, _again).
#   root ns: rxe0 on veth0 192.0.2.1, siw0 on veth2 198.51.100.1; rxe1's veth1 is in ns1,
#   so rxe1 has no address here and is reported unusable.
CHK=/extra/bin/rdmacm-rs-check
cat > /tmp/check_lib.sh <<'SHEOF'
CHK=/extra/bin/rdmacm-rs-check
# as_nobody CMD...: CMD as the unprivileged user nobody (the checker needs no root here)
as_nobody(){ setpriv --reuid=nobody --regid=nogroup --clear-groups --reset-env -- env PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"; }
# row CASE PORT VERDICT: the table in /tmp/chk.txt has that row
row(){ grep -qE "^$1 +$2 +[a-z-]+ +[a-z-]+ +$3( |\$)" /tmp/chk.txt || { echo "FAIL: no row '$1 $2 ... $3'"; return 1; }; echo "ok: $1 $2 $3"; }
# nothing_left: no program of the checker's still runs, no cm_id is left, no work dir
nothing_left(){ local p
  p=$(pgrep -a -x 'rping|ucmatose|udaddy|mckey|rstream|riostream|cmtime|rdma_server|rdma_client|python3' || true)
  [ -z "$p" ] || { echo "FAIL: left running: $p"; return 1; }
  [ -z "$(rdma res show cm_id 2>/dev/null)" ] || { echo "FAIL: cm_ids left:"; rdma res show cm_id; return 1; }
  ! ls -d /tmp/rdmacm-rs-check.* 2>/dev/null || { echo "FAIL: a work directory is left"; return 1; }
  echo "ok: nothing left running, no cm_id, no work directory"; }
# ours_dir: our library directory laid out as installed or built (librspreload.so under
# rsocket/), in /tmp/ours-lib: /extra/ours/lib holds librdmacm.so* only
ours_dir(){ rm -rf /tmp/ours-lib; mkdir -p /tmp/ours-lib/rsocket; cp -a /extra/ours/lib/. /tmp/ours-lib/
  cp /extra/bin/librspreload.so /tmp/ours-lib/rsocket/; chmod -R a+rX /tmp/ours-lib; }
# dump_kept: the programs' output of every row that is not AGREE or SKIP (a --keep run), then
# the directory goes
dump_kept(){ local d; d=$(sed -n "s/^programs.* output: //p" /tmp/chk.txt); [ -d "$d" ] || return 0
  awk "\$5 != \"AGREE\" && \$5 != \"SKIP\" && NF >= 5 {print \$1\".\"\$2}" /tmp/chk.txt | tr / - | while read -r k; do
    for f in "$d/$k".*; do [ -e "$f" ] && { echo "=== $f"; head -40 "$f"; }; done; done; rm -rf "$d"; }
SHEOF

# The checker makes both libraries' runs itself; the variant only sets the checker's own
# environment, which it does not pass on to the programs (it sets LD_LIBRARY_PATH per side).
# So the long run is made once: the ours variant runs the short set (--quick) over rxe0 and
# siw0 and reads the table; the upstream variant runs rping alone with --json and reads the
# document. Both as nobody, both must exit 0 with every run program's verdict AGREE.
t checker_soft 600 bash -c '. /tmp/check_lib.sh
  if [ "$RDMACM_VARIANT" = upstream ]; then
    ours_dir; as_nobody $CHK --case rping --json --timeout 90 --ours /tmp/ours-lib > /tmp/chk.json; rc=$?; cat /tmp/chk.json; echo "rdmacm-rs-check exit $rc"
    [ $rc = 0 ] || exit 1
    python3 -c "import json,sys; j=json.load(open(\"/tmp/chk.json\")); r={(c[\"case\"],c[\"port\"]):c for c in j[\"cases\"]}
ok = r[(\"rping\",\"rxe0/1\")][\"verdict\"]==\"AGREE\" and r[(\"rping\",\"siw0/1\")][\"verdict\"]==\"AGREE\" and r[(\"(all)\",\"rxe1/1\")][\"verdict\"]==\"SKIP\"
ok = ok and j[\"libraries\"][1][\"path\"].startswith(\"/tmp/ours-lib/\") and j[\"libraries\"][0][\"path\"].startswith(\"/usr/lib/\")
print(\"json ok\" if ok else \"json FAIL\"); sys.exit(0 if ok else 1)" || exit 1
    nothing_left; exit
  fi
  ours_dir; as_nobody $CHK --quick --keep --timeout 90 --ours /tmp/ours-lib > /tmp/chk.txt; rc=$?; cat /tmp/chk.txt; echo "rdmacm-rs-check exit $rc"
  dump_kept; [ $rc = 0 ] || exit 1
  row rping rxe0/1 AGREE && row ucmatose rxe0/1 AGREE && row udaddy rxe0/1 AGREE && row rstream rxe0/1 AGREE &&
  row rspreload rxe0/1 AGREE && row rdma_client rxe0/1 AGREE && row getaddrinfo rxe0/1 AGREE &&
  row rping siw0/1 AGREE && row ucmatose siw0/1 AGREE && row udaddy siw0/1 SKIP &&
  row "\\(all\\)" rxe1/1 SKIP && row af_ib rxe0/1 SKIP && nothing_left'

# A library of ours that fails one call: failroute.so (ctest/shim/failroute.c) preloaded into
# ours' programs only (--env-ours) makes rdma_resolve_route fail. The checker must say DIFFER
# for rping (which calls it) and exit 1; ucmatose over siw0 is not run (--device rxe0).
t checker_broken 300 bash -c '. /tmp/check_lib.sh
  ours_dir; as_nobody $CHK --case rping,rdma_client --device rxe0 --timeout 90 --ours /tmp/ours-lib --env-ours LD_PRELOAD=/extra/bin/failroute.so > /tmp/chk.txt
  rc=$?; cat /tmp/chk.txt; echo "rdmacm-rs-check exit $rc"
  [ $rc = 1 ] || { echo "FAIL: exit $rc, expected 1"; exit 1; }
  row rping rxe0/1 DIFFER && grep -E "^rping .*DIFFER .*ours: .*rdma_resolve_route" /tmp/chk.txt && nothing_left'

# Ctrl-C: SIGINT once the first program runs; the checker stops it, prints the table so far,
# exits 130 and leaves nothing behind. A program counts as started when one poll saw it (a short
# run may have ended before a second look). (set -m: a background job of a shell without job
# control would start with SIGINT ignored.)
t checker_sigint 120 bash -c '. /tmp/check_lib.sh; set -m
  ours_dir; as_nobody $CHK --ours /tmp/ours-lib > /tmp/chk.txt 2> /tmp/chk.err & p=$!
  started=0; for i in $(seq 600); do pgrep -a -u nobody -x "rping|ucmatose" && { started=1; break; }; sleep 0.1; done
  [ $started = 1 ] || echo "FAIL: no program started in 60 s"
  c=$(pgrep -x -u nobody rdmacm-rs-check); echo "SIGINT to $c"; kill -INT $c; wait $p; rc=$?
  cat /tmp/chk.txt /tmp/chk.err; echo "rdmacm-rs-check exit $rc"
  [ $rc = 130 ] || { echo "FAIL: exit $rc, expected 130"; exit 1; }
  grep -q "^case .*verdict" /tmp/chk.txt && grep -q "interrupted" /tmp/chk.txt && nothing_left && [ $started = 1 ]'

# Two hosts: a serving instance in ns1 (rxe1 on veth1, 192.0.2.2) answers a --peer run from
# the root namespace (rxe0 on veth0): the server side of each case there, the client here,
# both with the same side's library. Both as nobody; exit 0, rows AGREE, the serving instance
# ends by itself after the run (exit 0), nothing left. As in checker_soft, the variant does not
# matter to the checker: the upstream variant runs rping alone.
t checker_peer 600 bash -c '. /tmp/check_lib.sh; ours_dir
  ip netns exec ns1 setpriv --reuid=nobody --regid=nogroup --clear-groups --reset-env -- env PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    $CHK --serve --timeout 90 --ours /tmp/ours-lib > /tmp/chk_srv.txt 2>&1 & s=$!
  for i in $(seq 100); do grep -q "serving one checking run" /tmp/chk_srv.txt && break; sleep 0.1; done
  cases=rping,udaddy,rdma_client,rspreload; [ "$RDMACM_VARIANT" = upstream ] && cases=rping
  as_nobody $CHK --peer 192.0.2.2 --case $cases --timeout 90 --ours /tmp/ours-lib > /tmp/chk.txt
  rc=$?; cat /tmp/chk.txt; echo "rdmacm-rs-check exit $rc"
  for i in $(seq 100); do kill -0 $s 2>/dev/null || break; sleep 0.1; done
  kill -0 $s 2>/dev/null && { echo "FAIL: the serving instance did not end"; kill $s; }
  wait $s; src=$?; echo "--- serving instance (exit $src):"; cat /tmp/chk_srv.txt
  [ $rc = 0 ] && [ $src = 0 ] || exit 1
  grep -q "^peer: 192.0.2.2 (server side there), this host 192.0.2.1 on rxe0/1" /tmp/chk.txt &&
  row rping rxe0/1 AGREE || exit 1; [ $cases = rping ] ||
  { row udaddy rxe0/1 AGREE && row rdma_client rxe0/1 AGREE && row rspreload rxe0/1 AGREE; } && nothing_left'
