# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# kmod.sh - finding the kernel's rdma_cm device as upstream does (RDMA netlink first), both
# libraries side by side, transcripts compared (--cmp); /extra/bin/cm_resolve's "channel"
# (rdma_create_event_channel) and "v4" (create an id, resolve 192.0.2.2) cases are the calls.
#
# kmod_autoload: rdma_ucm is unloaded (rmmod; its /dev node goes with it) before the first call;
#   the library's netlink question (RDMA_NLDEV_CMD_GET_CHARDEV) makes the kernel load it.
# kmod_node_elsewhere: /dev/infiniband/rdma_cm is not the device while the char device exists
#   elsewhere, reachable as udev would link it (/dev/char/<major>:<minor>):
#     missing      the node removed, /dev/char link present             -> works (by number)
#     wrong        /dev/infiniband/rdma_cm is another char device (1:3) -> works (checked by number)
#     no_link      the node removed, /dev/char without the link          -> fails after 5 s (udev wait)
#     no_char_dir  the node removed, no /dev/char at all                 -> fails at once
# kmod_sysfs_fallback: no RDMA netlink (LD_PRELOAD=/extra/bin/nonetlink.so fails its socket, as
#   kernels before 5.3), so the ABI version comes from sysfs, under $SYSFS_PATH when set:
#     sys          no SYSFS_PATH: /sys, the device by name              -> works
#     misc5        SYSFS_PATH=fake tree, class/misc/rdma_cm/abi_version 5   -> EPERM (unsupported)
#     ucma9_slash  only class/infiniband_ucma/abi_version 9, SYSFS_PATH ending in //  -> EPERM
#     empty        SYSFS_PATH=an empty tree: ABI assumed, libibverbs finds no device there
# The module and the node are put back after each test whatever happened (outside the test's
# timeout); a node or module that cannot be restored fails the run (SUITEERR).
KMOD_COMMON='
note(){ echo "kmod: $*" >&2; }
loaded(){ grep -q "^rdma_ucm " /proc/modules && echo loaded || echo unloaded; }
calls(){ /extra/bin/cm_resolve channel v4 2>&1; echo "rc=$?"; }
devnum(){ cat /sys/class/misc/rdma_cm/dev; }
'
KMOD_AUTOLOAD=$KMOD_COMMON'
[ "$(loaded)" = unloaded ] || rmmod rdma_ucm >&2 2>&1 || { note "rmmod rdma_ucm failed"; exit 1; }
echo "before: rdma_ucm $(loaded), /dev/infiniband/rdma_cm $(test -e /dev/infiniband/rdma_cm && echo present || echo absent)"
calls
echo "after: rdma_ucm $(loaded), /dev/infiniband/rdma_cm $(test -c /dev/infiniband/rdma_cm && echo present || echo absent)"'

KMOD_ELSEWHERE=$KMOD_COMMON'
set -e
d=$(devnum); maj=${d%:*}; min=${d#*:}
note "rdma_cm is $maj:$min"
mkdir -p /run/kmod-elsewhere
rm -f /run/kmod-elsewhere/rdma_cm; mknod -m 0666 /run/kmod-elsewhere/rdma_cm c "$maj" "$min"
set +e
scen(){ echo "== $1"; local s=$SECONDS; calls; local t=$((SECONDS-s))
  # the udev wait is 5 s: say which side of 3 s the failure came
  [ "$2" = timed ] && { [ $t -ge 3 ] && echo "waited for udev: yes" || echo "waited for udev: no"; }; }
rm -f /dev/infiniband/rdma_cm; mkdir -p /dev/char; ln -sfn /run/kmod-elsewhere/rdma_cm "/dev/char/$maj:$min"
scen missing
mknod -m 0666 /dev/infiniband/rdma_cm c 1 3
scen wrong
rm -f /dev/infiniband/rdma_cm "/dev/char/$maj:$min"
scen no_link timed
rmdir /dev/char
scen no_char_dir timed
exit 0'

KMOD_SYSFS=$KMOD_COMMON'
f=/run/kmod-fakesys; rm -rf $f; mkdir -p $f/misc5/class/misc/rdma_cm $f/ucma9/class/infiniband_ucma $f/empty
echo 5 > $f/misc5/class/misc/rdma_cm/abi_version; echo 9 > $f/ucma9/class/infiniband_ucma/abi_version
nl=/extra/bin/nonetlink.so; [ -e $nl ] || { note "no $nl (make vm-bin)"; exit 1; }
echo "== sys"; LD_PRELOAD=$nl calls
echo "== misc5"; SYSFS_PATH=$f/misc5 LD_PRELOAD=$nl calls
echo "== ucma9_slash"; SYSFS_PATH=$f/ucma9// LD_PRELOAD=$nl calls
echo "== empty"; SYSFS_PATH=$f/empty LD_PRELOAD=$nl calls
rm -rf $f'

# kmod_restore: rdma_ucm loaded, /dev/infiniband/rdma_cm the right device (mode 0666), the
# scratch nodes gone. A failure to restore fails the run.
kmod_restore(){ local out rc
  out=$(bash -c '
    d=/dev/infiniband/rdma_cm
    rm -rf /run/kmod-elsewhere
    [ -d /dev/char ] && find /dev/char -maxdepth 1 -lname "/run/kmod-elsewhere/*" -delete
    [ -d /dev/char ] && rmdir /dev/char 2>/dev/null
    modprobe rdma_ucm || exit 1
    want=$(cat /sys/class/misc/rdma_cm/dev) || exit 1
    got=$( [ -c $d ] && printf "%d:%d" 0x$(stat -c %t $d) 0x$(stat -c %T $d))
    if [ "$got" != "$want" ]; then rm -f $d; mknod -m 0666 $d c ${want%:*} ${want#*:} || exit 1; fi
    got=$(printf "%d:%d" 0x$(stat -c %t $d) 0x$(stat -c %T $d))
    [ "$got" = "$want" ] && [ "$(stat -c %a $d)" = 666 ] || { echo "rdma_cm is $got mode $(stat -c %a $d), want $want 666"; exit 1; }
    echo "rdma_ucm loaded, $d is $got mode 666"' 2>&1); rc=$?
  echo "$out" | sed 's/^/@@kmod_restore: /'
  if [ $rc != 0 ]; then
    if declare -F suiteerr >/dev/null; then suiteerr ./suite.d/kmod.sh "rdma_ucm or /dev/infiniband/rdma_cm could not be restored: $(echo $out)"
    else echo "SUITEERR ./suite.d/kmod.sh rdma_ucm not restored" >> "$RES/results.txt"; fi
  fi; }

if _selected kmod_autoload; then t --cmp kmod_autoload 120 bash -c "$KMOD_AUTOLOAD"; kmod_restore; fi
if _selected kmod_node_elsewhere; then t --cmp kmod_node_elsewhere 120 bash -c "$KMOD_ELSEWHERE"; kmod_restore; fi
if _selected kmod_sysfs_fallback; then t --cmp kmod_sysfs_fallback 120 bash -c "$KMOD_SYSFS"; fi
