# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# bench/ab-common.sh: what bench/ab.sh and bench/storm-ab.sh share, sourced by both (from the
# tree's top): the builds of ours to compare, staged for the VM, and the one boot that runs them.

# ab_stage PROG RESERVED NAME=DIR...: each DIR's librdmacm.so.1 copied to build/vm-bin/ab/NAME/
# (shipped to the guest with the other test binaries); the names in `names`. NAME is letters,
# digits, '_' and '-', and none of the space-separated RESERVED names (the guest's own ones).
ab_stage(){ local prog=$1 reserved=" $2 " a n d; shift 2
  names=()
  rm -rf build/vm-bin/ab
  for a in "$@"; do n=${a%%=*} d=${a#*=}
    [[ $n =~ ^[A-Za-z0-9_-]+$ ]] && [[ $reserved != *" $n "* ]] && [ "$n" != "$a" ] || { echo "$prog: want NAME=DIR, not '$a'" >&2; exit 2; }
    [ -e "$d/librdmacm.so.1" ] || { echo "$prog: no $d/librdmacm.so.1" >&2; exit 2; }
    mkdir -p "build/vm-bin/ab/$n"; cp -L "$d/librdmacm.so.1" "build/vm-bin/ab/$n/librdmacm.so.1"; names+=("$n")
  done; }

# ab_boot PROG: builds the test binaries and boots the VM once for VM_ONLY and VM_BENCH (set and
# exported by the caller, with VM_TIMEOUT and RDMACM_VM_WORK), the host's load before and after
# on stderr; `out` is then the run's output directory and `vmrc` the VM's exit status.
ab_boot(){ local prog=$1 log load0
  make -s lib vm-bin >/dev/null || exit 1
  log=$RDMACM_VM_WORK.log
  vm/testbed.sh host && vm/testbed.sh image || exit 1
  echo "$prog: booting the VM (log: $log)" >&2
  load0=$(cut -d' ' -f1 /proc/loadavg)
  vm/testbed.sh run > "$log" 2>&1; vmrc=$?
  echo "$prog: host load $load0 -> $(cut -d' ' -f1 /proc/loadavg) on $(nproc) cores" >&2
  out=$RDMACM_VM_WORK/suite/share/out
  [ $vmrc = 0 ] || echo "$prog: the VM run failed (exit $vmrc): see $log" >&2; }
