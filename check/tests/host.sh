#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# check/tests/host.sh CHECKER - rdmacm-rs-check on a machine without RDMA devices (the build
# host; make check-host): it ends with one line saying so and exit status 3, not a trace; with
# --json the same as one JSON document. Over a stand-in sysfs tree (--sysfs) whose only port
# is down, every case is skipped with the reason and the status is 4 (nothing compared),
# never 0; a usage error is 2.
set -uo pipefail
chk=${1:?usage: host.sh path/to/rdmacm-rs-check}
fail=0
err(){ echo "check-tool: $*" >&2; fail=1; }
t=$(mktemp -d); trap 'rm -rf "$t"' EXIT

if [ -e /sys/class/infiniband ] && [ -n "$(ls -A /sys/class/infiniband 2>/dev/null)" ]; then
    echo "check-tool: this machine has RDMA devices: the no-device case is not tested here"
else
    "$chk" > "$t/out" 2> "$t/err"; rc=$?
    [ $rc = 3 ] || err "no device: exit $rc, expected 3"
    [ ! -s "$t/out" ] || err "no device: stdout not empty: $(head -3 "$t/out")"
    [ "$(wc -l < "$t/err")" = 1 ] || err "no device: stderr is not one line: $(cat "$t/err")"
    grep -q '^rdmacm-rs-check: no RDMA device on this machine' "$t/err" || err "no device: stderr: $(cat "$t/err")"
    "$chk" --json > "$t/out" 2> /dev/null; rc=$?
    [ $rc = 3 ] || err "no device --json: exit $rc, expected 3"
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if j["error"]=="no-device" else 1)' "$t/out" 2>/dev/null ||
        err "no device --json: $(cat "$t/out")"
fi

# a stand-in sysfs: one RoCE device whose port is down
d=$t/sys/class/infiniband/fake0
mkdir -p "$d/ports/1/gids" "$d/ports/1/gid_attrs/ndevs"
echo "1: CA" > "$d/node_type"
echo "1: DOWN" > "$d/ports/1/state"
echo "Ethernet" > "$d/ports/1/link_layer"
echo "fe80:0000:0000:0000:0000:00ff:fe00:0001" > "$d/ports/1/gids/0"
echo "lo" > "$d/ports/1/gid_attrs/ndevs/0"
ours=$(cd "$(dirname "$0")/../.." && pwd)/build/lib
if [ -e "$ours/librdmacm.so.1" ] && command -v rping > /dev/null; then
    "$chk" --sysfs "$t/sys" --ours "$ours" > "$t/out" 2> "$t/err"; rc=$?
    [ $rc = 4 ] || err "port down: exit $rc, expected 4: $(cat "$t/out" "$t/err")"
    grep -qE "^\(all\) +fake0/1 +- +- +SKIP +port state DOWN" "$t/out" || err "port down: no SKIP row for rping: $(cat "$t/out")"
    grep -q 'nothing was compared' "$t/err" || err "port down: stderr: $(cat "$t/err")"
    ! grep -qE 'AGREE|DIFFER' "$t/out" || err "port down: a verdict other than SKIP: $(cat "$t/out")"
else
    err "needs build/lib/librdmacm.so.1 (make lib) and rping (rdmacm-utils)"
fi

"$chk" --no-such-option > /dev/null 2>&1; rc=$?
[ $rc = 2 ] || err "usage error: exit $rc, expected 2"
"$chk" --case no_such_case > /dev/null 2>&1; rc=$?
[ $rc = 2 ] || err "unknown case: exit $rc, expected 2"

[ $fail = 0 ] && echo "check-tool: no device: one line, exit 3; a stand-in port that is down: every case skipped, exit 4; usage errors exit 2"
exit $fail
