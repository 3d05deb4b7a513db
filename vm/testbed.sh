#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# testbed.sh - real-kernel RDMA test bed for rdmacm-rs (qemu TCG guest, Debian sid kernel +
# rdma-core userspace, Soft-RoCE rxe0<->rxe1 over a veth pair, soft-iWARP siw0).
#   testbed.sh host    install host tools (apt-get)
#   testbed.sh key     resolve package versions and print the image cache key
#   testbed.sh image   build the guest image unless cached
#   testbed.sh run     boot the cached image, run the suite upstream vs ours, print the table
#   testbed.sh check   host + image + run
#   testbed.sh demo    host + image + boot, show our library at work beside upstream
#   testbed.sh shell   boot to an interactive guest shell (debugging)
#   testbed.sh report  print the report of the last run again (no boot)
#   testbed.sh abi     our exports and header constants against the image's rdma-core (also in run)
# Environment: RDMACM_VM_CACHE (image cache, default /var/cache/rdmacm-rs-vm),
#   RDMACM_VM_WORK (per-run files, default <repo>/build/vm), VM_UPSTREAM_ONLY=1 (run without
#   our library), VM_TIMEOUT (seconds for each VM, default 4200), VM_BOOT_WAIT (seconds a guest
#   has to show its /init before it is booted again, default 300), VM_ONLY="name ..." (run
#   only these tests), VM_SHARDS (1 or 2 VMs for the suite; default 2 for the whole suite on a
#   host with two cores), VM_APPEND (more words for the guest kernel's command line, e.g.
#   loglevel=7), RDMACM_VM_MIRROR (Debian mirror).
set -euo pipefail
_TB_RESOLVED=
VM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(dirname "$VM_DIR")
CACHE=${RDMACM_VM_CACHE:-/var/cache/rdmacm-rs-vm}
WORK=${RDMACM_VM_WORK:-$REPO/build/vm}
MIRROR=${RDMACM_VM_MIRROR:-http://deb.debian.org/debian}
OURS_LIB=${RDMACM_OURS_LIB:-$REPO/build/lib}
VM_BIN=${RDMACM_VM_BIN:-$REPO/build/vm-bin}
say(){ echo "[testbed $(date +%T)] $*" >&2; }
die(){ echo "testbed: ERROR: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "must run as root (debootstrap, chroot, apt-get)"

cmd_host(){
  local need=() t
  for t in qemu-system-x86_64:qemu-system-x86 debootstrap:debootstrap cpio:cpio xz:xz-utils \
           curl:curl timeout:coreutils; do
    command -v "${t%%:*}" >/dev/null || need+=("${t#*:}")
  done
  [ -e /usr/share/qemu/kvmvapic.bin ] || [ -e /usr/share/seabios/bios-256k.bin ] || need+=(qemu-system-x86)
  if [ ${#need[@]} = 0 ]; then say "host tools present"; return; fi
  say "installing ${need[*]}"
  apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >&2
}

# --- cache key: exact versions from sid's Packages index (one ~11 MB download) ------------
pkgver(){ awk -v p="$1" '$0=="Package: "p{f=1;next} f&&/^Version:/{print $2;exit} f&&/^$/{f=0}' "$2"; }
pkgdep(){ awk -v p="$1" '$0=="Package: "p{f=1;next} f&&/^Depends:/{print;exit} f&&/^$/{f=0}' "$2"; }
resolve(){   # writes $WORK/versions.txt and sets KEY, IMG (once per invocation)
  [ -n "${_TB_RESOLVED:-}" ] && return 0
  mkdir -p "$WORK"; local P=$WORK/Packages p v kv ks
  say "resolving versions from $MIRROR sid main amd64 Packages index"
  curl -sSfL --retry 3 -o "$P.xz.$$" "$MIRROR/dists/sid/main/binary-amd64/Packages.xz" ||
    die "cannot download $MIRROR/dists/sid/main/binary-amd64/Packages.xz"
  xz -dc "$P.xz.$$" > "$P.$$"; rm -f "$P.xz.$$"; P=$P.$$   # per-process: runs may overlap
  {
    for p in librdmacm1t64 libibverbs1 ibverbs-providers rdmacm-utils ibverbs-utils python3-pyverbs \
             libc6 iproute2 linux-image-amd64; do
      v=$(pkgver "$p" "$P"); [ -n "$v" ] || die "package '$p' not found in sid's Packages index"
      echo "$p $v"
    done
    kv=$(pkgdep linux-image-amd64 "$P" | grep -o 'linux-image-[^ ,]*' | head -1); kv=${kv#linux-image-}
    [ -n "$kv" ] || die "cannot find the kernel package linux-image-amd64 depends on"
    echo "kernel-abi $kv"
    for p in linux-image-$kv linux-binary-$kv linux-modules-$kv linux-headers-$kv; do
      v=$(pkgver "$p" "$P"); [ -n "$v" ] || die "package '$p' not found in sid's Packages index"
      echo "$p $v"
    done
    ks=linux-source-$(echo "$kv" | cut -d. -f1,2)
    v=$(pkgver "$ks" "$P"); [ -n "$v" ] || die "package '$ks' not found in sid's Packages index"
    echo "kernel-source $ks"; echo "$ks $v"
  } > "$WORK/versions.txt.$$"
  # upstream's development headers of the same rdma-core (not part of the image or its key):
  # the constants check compares our headers with them
  for p in librdmacm-dev libibverbs-dev; do
    v=$(pkgver "$p" "$P"); [ -n "$v" ] || die "package '$p' not found in sid's Packages index"
    echo "$p $v $(awk -v p="$p" '$0=="Package: "p{f=1;next} f&&/^Filename:/{print $2;exit} f&&/^$/{f=0}' "$P")"
  done > "$WORK/dev-debs.txt"
  rm -f "$P"; mv "$WORK/versions.txt.$$" "$WORK/versions.txt"
  KEY=$( { cat "$WORK/versions.txt"; sha256sum < "$VM_DIR/build-image.sh"; } | sha256sum | cut -c1-16)
  IMG=$CACHE/$KEY; _TB_RESOLVED=1
}
cmd_key(){ resolve; cat "$WORK/versions.txt"; echo "key $KEY -> $IMG"; }

cmd_image(){
  resolve
  if [ -f "$IMG/manifest.txt" ] && [ -f "$IMG/rootfs.cpio" ] && [ -f "$IMG/vmlinuz" ]; then
    say "image cached: $IMG"; sed 's/^/  /' "$IMG/manifest.txt" >&2; return; fi
  cmd_host
  local t0=$SECONDS tmp=$CACHE/$KEY.tmp.$$ lk
  mkdir -p "$CACHE"; exec {lk}> "$CACHE/.lock-$KEY"
  flock -n $lk || { say "another build of $KEY is running: waiting"; flock $lk; }
  if [ -f "$IMG/manifest.txt" ]; then say "image cached: $IMG (built meanwhile)"; return; fi
  say "building image $KEY (from scratch: ~2-4 min, ~400 MB download)"
  mkdir -p "$CACHE"; rm -rf "$tmp"; mkdir -p "$tmp"; cp "$WORK/versions.txt" "$tmp/versions.txt"
  if ! "$VM_DIR/build-image.sh" "$tmp" "$tmp/versions.txt"; then
    umount "$tmp/work/buildroot/proc" 2>/dev/null || true
    die "image build failed (work dir kept: $tmp/work)"
  fi
  rm -rf "$IMG"; mv "$tmp" "$IMG"
  say "image built in $((SECONDS-t0))s: $IMG"
}

# --- per-run archive: /init, /extra/{vm,ours/lib,bin,config.sh} appended to the image --------
OURS_STATE=
ours_state(){ # sets OURS_STATE=built|absent; dies in strict mode when ours is missing
  if [ -e "$OURS_LIB/librdmacm.so.1" ]; then OURS_STATE=built; return; fi
  OURS_STATE=absent
  [ -n "${VM_UPSTREAM_ONLY:-}" ] && { say "VM_UPSTREAM_ONLY=1: running upstream only"; return; }
  die "our library is not built: $OURS_LIB/librdmacm.so.1 missing (build it first, e.g. make; or set VM_UPSTREAM_ONLY=1)"
}
mk_extra(){ # $1 = run dir, $2 = mode
  local R=$1 X=$1/xtra
  rm -rf "$X"; mkdir -p "$X/extra/vm" "$X/extra/bin" "$X/extra/ours/lib"
  cp "$VM_DIR/guest/init" "$X/init"; chmod 755 "$X/init"
  cp -a "$VM_DIR/guest" "$VM_DIR/suite.sh" "$X/extra/vm/"; mkdir -p "$X/extra/vm/suite.d"
  cp -a "$VM_DIR"/suite.d/. "$X/extra/vm/suite.d/"
  if [ "$OURS_STATE" = built ] && [ -z "${VM_UPSTREAM_ONLY:-}" ]; then
    cp -a "$OURS_LIB"/librdmacm.so* "$X/extra/ours/lib/"
    [ -e "$X/extra/ours/lib/librdmacm.so.1" ] || die "copy of our library failed"
    # the GNU build-id of the library make lib built (from cargo's output, not the copy): the
    # guest's library check (guest/lib.sh) holds every run of ours against it
    if [ -s "$OURS_LIB/librdmacm.build-id" ]; then cp "$OURS_LIB/librdmacm.build-id" "$X/extra/ours/build-id"
    elif [ "$2" = suite ]; then die "$OURS_LIB/librdmacm.build-id missing (make lib records it): cannot identify our library"; fi
  fi
  # the test programs: a missing build/vm-bin is an error (make vm-bin), not a reason to skip
  if [ -d "$VM_BIN" ] && [ -x "$VM_BIN/whichlib" ]; then cp -a "$VM_BIN"/. "$X/extra/bin/"
  elif [ "$2" = suite ]; then die "$VM_BIN/whichlib missing: build the test programs first (make vm-bin)"
  else say "WARNING: no $VM_BIN (make vm-bin): the $2 runs without the project's test programs"; fi
  { echo "ONLY='${VM_ONLY:-}'"; echo "BENCH='${VM_BENCH:-}'"; [ -n "${VM_UPSTREAM_ONLY:-}" ] && echo "UPSTREAM_ONLY=1"
    [ -n "${SHARD_MODE:-}" ] && echo "SHARD_MODE=$SHARD_MODE SHARD_FILES='$SHARD_FILES'"; true; } > "$X/extra/config.sh"
  (cd "$X" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) > "$R/extra.cpio"
}
# boot MODE: one boot; a guest kernel that panics before its /init starts (no "@@T userspace"
# line: no test has run; seen once under qemu TCG, an int3 oops in sched_clock_cpu at ~1.5 s) is
# booted once more, said on the console and in the run's output: nothing of ours ran to fail.
# A guest that shows no sign of its /init within VM_BOOT_WAIT seconds (default 300; a boot
# reaches it in 10-60 s) is stopped and booted once more the same way: seen once under TCG, a
# guest that spun with nothing on its console for 11 minutes while a second VM booted beside it.
boot(){
  boot_once "$@"
  if [ "$1" != shell ] && ! grep -aq '^@@T userspace' "$RUN/console.log" 2>/dev/null &&
     { grep -aq 'Kernel panic' "$RUN/console.log" 2>/dev/null || [ -e "$RUN/boot-stuck" ]; }; then
    cp "$RUN/console.log" "$WORK/console.boot-panic.log"
    say "the guest $([ -e "$RUN/boot-stuck" ] && echo "showed no sign of /init in ${VM_BOOT_WAIT:-300}s" || echo "kernel panicked before /init") (no test ran; console kept in $WORK/console.boot-panic.log): booting again"
    boot_once "$@"
  fi
}
# lock_work MODE: one run of MODE per work dir, held until this process ends (a second run waits
# here); once per invocation (a second boot of the run, or the VMs of boot_shards, hold it already)
lock_work(){
  [ -z "${BOOT_LOCKED:-}" ] || return 0
  mkdir -p "$WORK"; exec {lockfd}> "$WORK/.lock-$1"
  flock -n $lockfd || { say "another $1 run uses $WORK: waiting (set RDMACM_VM_WORK to run in parallel)"; flock $lockfd; }
  BOOT_LOCKED=1
}
boot_once(){ # $1 = mode (suite|demo|shell); uses $IMG; run dir $RUN
  local mode=$1 rc=0 t0=$SECONDS
  RUN=$WORK/$mode; lock_work "$mode"
  rm -rf "$RUN"; mkdir -p "$RUN/share"; chmod 777 "$RUN/share"
  mk_extra "$RUN" "$mode"
  cat "$IMG/rootfs.cpio" "$RUN/extra.cpio" > "$RUN/initrd.img"   # rootfs.cpio is 4-byte padded
  local to=${VM_TIMEOUT:-4200} cmdline="console=ttyS0 panic=-1 quiet vmtest=$mode${VM_APPEND:+ $VM_APPEND}"
  say "booting (qemu TCG, timeout ${to}s), console log: $RUN/console.log"
  local serial=(-nographic); [ "$mode" = shell ] || serial=(-display none -serial stdio -monitor none)
  set +e
  if [ "$mode" = shell ]; then
    qemu-system-x86_64 -accel tcg -cpu max -smp 2 -m 2G -nic none "${serial[@]}" -no-reboot \
      -kernel "$IMG/vmlinuz" -initrd "$RUN/initrd.img" -append "$cmdline" \
      -virtfs local,path="$RUN/share",mount_tag=hostshare,security_model=none
    rc=$?
  else
    # the boot's watchdog (see boot): the run's qemu is the one process with this initrd
    ( for ((i=0; i<${VM_BOOT_WAIT:-300}; i++)); do sleep 1
        grep -aq '^@@T userspace' "$RUN/console.log" 2>/dev/null && exit 0; done
      : > "$RUN/boot-stuck"; pkill -f -- "-initrd $RUN/initrd.img" ) & local bw=$!
    timeout -k 10 "$to" qemu-system-x86_64 -accel tcg -cpu max -smp 2 -m 2G -nic none \
      "${serial[@]}" -no-reboot -kernel "$IMG/vmlinuz" -initrd "$RUN/initrd.img" \
      -append "$cmdline" \
      -virtfs local,path="$RUN/share",mount_tag=hostshare,security_model=none < /dev/null 2>&1 |
      sed -u 's/\r//g' | tee "$RUN/console.log" | grep -a --line-buffered -E '^@@(T |BEGIN|RESULT|RETRY|SKIP|SUITEERR|WARN|DONE|DEMO)' >&2
    rc=${PIPESTATUS[0]}
    kill $bw 2>/dev/null; wait $bw 2>/dev/null
    [ ! -e "$RUN/boot-stuck" ] || rc=125   # (stopped by the boot's watchdog)
  fi
  set -e
  rm -f "$RUN/initrd.img"
  VM_RC=$rc; VM_WALL=$((SECONDS-t0))
  say "qemu exit $rc after ${VM_WALL}s$([ $rc = 124 ] && echo ' (VM TIMEOUT)')$([ $rc = 125 ] && echo ' (stopped: no sign of /init)')"
}

# --- report: manifest, table, ratchet ------------------------------------------------------
listed(){ # file name variant -> prints reason, status 0 if listed
  awk -v n="$2" -v v="$3" '/^[ \t]*(#|$)/{next} {k=$1; $1=""; sub(/^[ \t]+/,"")}
    k==n":"v || (k==n && v!="upstream") || (k==n && FILENAME ~ /upstream/) {print ($0==""?"(no reason given)":$0); f=1; exit}
    END{exit !f}' "$1"
}
fmode(){ # name variant -> "rc=.. srv_rc=..: first line of stderr (client, else server)"
  local b=$RUN/share/out/$1.$2 l
  l=$(cat "$b.err" "$b.srv.err" 2>/dev/null | grep -m1 -v '^[[:space:]]*$' | cut -c1-110)
  echo "rc=${S[$1.$2.rc]:-?} srv_rc=${S[$1.$2.srv_rc]:-?}${l:+: $l}"
}
signalled(){ # status -> 0 if it says "ended by a signal" (128+N, N <= 64) and the harness'
  # timeout did not send it (124: timeout's TERM; 137: its KILL); 255 is exit(-1), not a signal
  case $1 in 124|137|-|'') return 1;; esac
  [ "$1" -gt 128 ] 2>/dev/null && [ "$1" -le 192 ]
}
crashed(){ # name variant -> 0 if a process ended on a signal the harness did not send
  signalled "${S[$1.$2.rc]:--}" && return 0
  [ "${S[$1.$2.killed]:-0}" = 1 ] && return 1     # the harness stopped the server itself
  signalled "${S[$1.$2.srv_rc]:--}"
}
report(){
  local R=$RUN/share/results.txt KF=$VM_DIR/known-failures.txt UF=$VM_DIR/upstream-failures.txt MF=$VM_DIR/tests.txt
  touch "$KF" "$UF"
  local passed=0 failed=0 notes=() n v st u o p c line names=() ours_any=0 problems=() flaky=0 f stalls=()
  declare -A S M_VARS M_CMP M_FLAGS
  local m_names=()
  if [ ! -f "$R" ]; then
    echo "no results file ($R): the guest did not run the suite (qemu exit $VM_RC); console tail:"
    tail -n 25 "$RUN/console.log" 2>/dev/null | sed 's/^/   /'; echo "0 passed, 1 failed"; return 1; fi
  [ -f "$MF" ] || { echo "no test manifest $MF"; echo "0 passed, 1 failed"; return 1; }
  while read -r n v c f _; do
    [[ -z $n || $n == \#* ]] && continue
    [ -z "${M_VARS[$n]:-}" ] || problems+=("$n listed twice in tests.txt")
    M_VARS[$n]=$v; M_CMP[$n]=$c; M_FLAGS[$n]=$f; m_names+=("$n")
  done < "$MF"
  # what this run was asked to do (written by mk_extra)
  local ONLY_= BENCH_= UPONLY_= shipped=0
  if [ -f "$RUN/xtra/extra/config.sh" ]; then
    ONLY_=$(. "$RUN/xtra/extra/config.sh"; echo "${ONLY:-}"); BENCH_=$(. "$RUN/xtra/extra/config.sh"; echo "${BENCH:-}")
    UPONLY_=$(. "$RUN/xtra/extra/config.sh"; echo "${UPSTREAM_ONLY:-}")
  fi
  [ -e "$RUN/xtra/extra/ours/lib/librdmacm.so.1" ] && [ -z "$UPONLY_" ] && shipped=1
  echo; echo "== environment (from the guest)"
  sed -n 's/^INFO /  /p' "$R"
  while read -r line; do
    set -- $line
    case $1 in
      RESULT) n=$2 v=$3
              if [ -n "${S[$n.$v]:-}" ]; then problems+=("duplicate result: $n ($v) ran twice"); fi
              S[$n.$v]=$4; shift 4
              for kv in "$@"; do S[$n.$v.${kv%%=*}]=${kv#*=}; done
              S[$n.cmp]=${S[$n.$v.cmp]:-0}
              [[ " ${names[*]} " == *" $n "* ]] || names+=("$n"); [ "$v" = upstream ] || ours_any=1;;
      SKIP) n=$2; [ -z "${S[$n.skip]:-}" ] || problems+=("duplicate skip: $n")
            S[$n.skip]=${line#SKIP $n }; [[ " ${names[*]} " == *" $n "* ]] || names+=("$n");;
      SUITEERR) problems+=("suite file failed: ${line#SUITEERR }");;
    esac
  done < "$R"
  # --- the manifest: nothing missing, nothing unlisted, no unexplained skip
  local want wv expected=() sel
  for n in $ONLY_; do [ -n "${M_VARS[$n]:-}" ] || problems+=("VM_ONLY names '$n', which is not in tests.txt"); done
  for n in "${m_names[@]}"; do
    sel=1
    [ "${M_FLAGS[$n]}" = bench ] && [ -z "$BENCH_" ] && sel=0
    if [ -n "$ONLY_" ] && [[ " $ONLY_ " != *" $n "* ]]; then sel=0; fi
    [ $sel = 1 ] || continue
    expected+=("$n")
    if [ -n "${S[$n.skip]:-}" ]; then
      local pat=${M_FLAGS[$n]#skip-ok=}
      if [[ ${M_FLAGS[$n]} == skip-ok=* ]] && [[ ${S[$n.skip]} =~ $pat ]]; then :; else
        problems+=("$n skipped (${S[$n.skip]}): tests.txt allows no such skip"); fi
      for v in upstream ours preload; do [ -z "${S[$n.$v]:-}" ] || problems+=("$n both skipped and run ($v)"); done
      continue
    fi
    want=upstream; [ $shipped = 1 ] && want+=" ours"
    [ $shipped = 1 ] && [[ ,${M_VARS[$n]}, == *,preload,* ]] && want+=" preload"
    for wv in $want; do [ -n "${S[$n.$wv]:-}" ] || problems+=("missing: $n ($wv) has no result"); done
    for wv in upstream ours preload; do
      [ -n "${S[$n.$wv]:-}" ] || continue
      [[ " $want " == *" $wv "* ]] || problems+=("unlisted variant: $n ran as $wv, tests.txt says ${M_VARS[$n]}")
      [ "${S[$n.$wv.cmp]}" = "$([ "${M_CMP[$n]}" = yes ] && echo 1 || echo 0)" ] ||
        problems+=("$n ($wv): --cmp is ${S[$n.$wv.cmp]}, tests.txt says cmp ${M_CMP[$n]}")
      [ "${S[$n.$wv.lib]:-}" = ok ] || problems+=("$n ($wv): wrong librdmacm loaded: $(grep -m1 'LIBCHECK FAIL' "$RUN/share/out/$n.$wv.log" 2>/dev/null || echo "lib=${S[$n.$wv.lib]:-none}")")
      if [ "${S[$n.$wv.try]:-1}" != 1 ]; then
        # a second run of ours only after a first one stuck in rxe's stall, its evidence kept
        if f=$(grep -m1 '^STALL rxe' "$RUN/share/out/stalls/$n.$wv.hang" 2>/dev/null); then
          S[$n.$wv.stall]=1; stalls+=("$n ($wv): ${f#STALL rxe: }")
        elif [ "$wv" = upstream ]; then flaky=$((flaky+1))
        else problems+=("$n ($wv) was run again without a recorded rxe stall: runs of ours are run again only after one"); fi
      fi
    done
  done
  for n in "${names[@]}"; do [[ " ${expected[*]} " == *" $n "* ]] || problems+=("unlisted: $n ran but is not expected (tests.txt, VM_ONLY, bench)"); done
  cmpres(){ # name variant -> SAME|DIFF|""
    [ "${S[$1.cmp]:-0}" = 1 ] || return 0
    local a=$RUN/share/out/$1.upstream.cmp b=$RUN/share/out/$1.$2.cmp
    [ -e "$a" ] && [ -e "$b" ] || { echo DIFF; return 0; }
    if cmp -s "$a" "$b"; then echo SAME; else echo DIFF; fi
  }
  echo; echo "== side by side (librdmacm: upstream = guest's rdma-core, ours = LD_LIBRARY_PATH, preload = LD_PRELOAD)"
  printf '%-28s | %-8s | %-13s | %-13s | %s\n' test upstream ours preload note
  printf '%s\n' "-----------------------------+----------+---------------+---------------+-----------------------------"
  local modes=()
  for n in "${names[@]}"; do
    if [ -n "${S[$n.skip]:-}" ]; then
      printf '%-28s | %-8s | %-13s | %-13s | %s\n' "$n" SKIP SKIP - "skipped: ${S[$n.skip]}"; continue; fi
    u=${S[$n.upstream]:-MISSING}; local note="" why cells=() lastwhy= ujudge=1
    if [ "$u" != PASS ]; then
      if why=$(listed "$UF" "$n" upstream); then note="upstream fails: $why"; ujudge=0
        [ $ours_any = 1 ] || passed=$((passed+1))
        modes+=("$n: upstream $u $(fmode "$n" upstream)")
      else note="UNEXPECTED upstream $u (not in upstream-failures.txt)"; failed=$((failed+1)); notes+=("$n.upstream"); fi
    elif why=$(listed "$UF" "$n" upstream); then
      note="upstream now passes, remove it from upstream-failures.txt"; failed=$((failed+1))
    elif [ $ours_any = 0 ]; then passed=$((passed+1)); fi
    for v in upstream ours preload; do
      [ "${S[$n.$v.try]:-1}" != 1 ] || continue
      if [ -n "${S[$n.$v.stall]:-}" ]; then note+="${note:+; }$v: first run in rxe's stall, run again"
      elif [ $v = upstream ]; then note+="${note:+; }upstream flaky: first run timed out, retried"; fi
    done
    for v in ours preload; do
      o=${S[$n.$v]:-}; [ -n "$o" ] || { cells+=("-"); continue; }
      c=$(cmpres "$n" "$v"); cells+=("$o${c:+ $c}")
      if [ $ujudge = 0 ]; then
        # upstream cannot pass it here: ours must still neither hang nor crash
        local um om; um=$(fmode "$n" upstream); om=$(fmode "$n" "$v")
        modes+=("$n: $v $o $om ($([ "${S[$n.upstream]} $um" = "$o $om" ] && echo "the same failure as upstream" || echo "fails differently from upstream"))")
        if [ "$o" = TIMEOUT ]; then failed=$((failed+1)); note+="; $v: HANG (timed out)"; notes+=("$n.$v")
        elif crashed "$n" "$v"; then failed=$((failed+1)); note+="; $v: CRASH (killed by a signal)"; notes+=("$n.$v")
        else passed=$((passed+1)); note+="; $v: judged on crash/hang only: $o"; fi
        continue
      fi
      local eff=$o; [ "$o" = PASS ] && [ "$c" = DIFF ] && eff=DIFF
      if [ "$eff" = PASS ]; then
        if why=$(listed "$KF" "$n" "$v"); then failed=$((failed+1))
          note+="${note:+; }$v: now passes, remove it from known-failures.txt"
        else passed=$((passed+1)); fi
      else
        if [ "${S[$n.$v.lib]:-}" != ok ]; then failed=$((failed+1)); note+="${note:+; }$v: WRONG LIBRARY"; notes+=("$n.$v")
        elif why=$(listed "$KF" "$n" "$v"); then passed=$((passed+1))
          if [ "$v" = preload ] && [ "$why" = "${lastwhy:-}" ]; then note+="; preload: known (same)"
          else note+="${note:+; }$v: known: $why"; fi; lastwhy=$why
        else failed=$((failed+1)); note+="${note:+; }$v: UNEXPECTED $eff (not in known-failures.txt)"
          notes+=("$n.$v"); fi
      fi
    done
    printf '%-28s | %-8s | %-13s | %-13s | %s\n' "$n" "$u" "${cells[0]}" "${cells[1]}" "$note"
  done
  if [ ${#modes[@]} -gt 0 ]; then
    echo; echo "== failure modes where upstream fails (ours judged on crash and hang only)"
    printf '  %s\n' "${modes[@]}"
  fi
  for n in "${notes[@]}"; do   # show what went wrong for unexpected failures
    # (display only; under set -e/pipefail a failing diff or a missing log must not end the report)
    echo; echo "-- $n: $RUN/share/out/$n.log (tail)"
    # the run's own line first: its status, both exit codes and whether the server was stopped
    grep "^RESULT ${n%.*} ${n##*.} " "$R" | sed 's/^/   /' || :
    if [ -e "$RUN/share/out/$n.log" ]; then tail -n 40 "$RUN/share/out/$n.log" | sed 's/^/   /'; else echo "   (no log)"; fi
    local a=$RUN/share/out/${n%.*}.upstream.cmp b=$RUN/share/out/$n.cmp
    if [ -e "$a" ] && [ -e "$b" ] && ! cmp -s "$a" "$b"; then
      echo "   diff upstream ours:"; (diff "$a" "$b" || :) | head -20 | sed 's/^/   /'; fi
  done
  local k; for k in $(awk '!/^[ \t]*(#|$)/{sub(/:.*/,"",$1); print $1}' "$KF" "$UF" | sort -u); do
    [ -n "${M_VARS[$k]:-}" ] || problems+=("'$k' is listed in known-/upstream-failures.txt but not in tests.txt")
    [[ " ${expected[*]} " == *" $k "* ]] || [[ " ${names[*]} " == *" $k "* ]] || continue
    [[ " ${names[*]} " == *" $k "* ]] || echo "warning: '$k' is listed in known-/upstream-failures.txt but did not run"
  done
  if ! grep -qx END "$R"; then problems+=("suite did not complete (no END in results; VM exit $VM_RC)")
  elif [ "$VM_RC" != 0 ]; then problems+=("VM exit status $VM_RC"); fi
  [ $flaky = 0 ] || echo "upstream flakiness: $flaky upstream run(s) timed out once and were retried (runs of ours never are, but for rxe's stall)"
  if [ ${#stalls[@]} -gt 0 ]; then
    echo "rxe stalls (the kernel's: a sender retrying without end to a peer QP in ERR or gone; logs in out/stalls/), each run once more:"
    printf '  %s\n' "${stalls[@]}"; fi
  problems+=("${UPABI_PROBLEMS[@]}")
  if [ ${#problems[@]} -gt 0 ]; then
    echo; echo "== test bed problems (each counts as a failure)"; printf '  FAIL %s\n' "${problems[@]}"
    failed=$((failed+${#problems[@]}))
  fi
  echo; echo "logs: $RUN/share/out/  console: $RUN/console.log"
  echo "$passed passed, $failed failed"
  [ $failed = 0 ]
}

# --- upstream's ABI of the image's rdma-core: our exports and header constants against it ------
UPABI_PROBLEMS=()
upstream_abi(){
  local D=$IMG/upstream-abi t p v f out
  if [ ! -f "$D/done" ]; then
    t=$IMG/upstream-abi.tmp.$$; rm -rf "$t"; mkdir -p "$t/dev"
    (cd "$t" && cpio -id --quiet 'usr/lib/x86_64-linux-gnu/librdmacm.so.1*' < "$IMG/rootfs.cpio")
    while read -r p v f; do
      [ "$v" = "$(awk '$1=="librdmacm1t64"{print $2}' "$WORK/versions.txt")" ] ||
        die "$p $v is not the image's rdma-core ($(grep librdmacm1t64 "$WORK/versions.txt"))"
      curl -sSfL --retry 3 -o "$t/$p.deb" "$MIRROR/$f" || die "cannot download $MIRROR/$f"
      dpkg-deb -x "$t/$p.deb" "$t/dev"; rm -f "$t/$p.deb"
    done < "$WORK/dev-debs.txt"
    touch "$t/done"; mv -T "$t" "$D" 2>/dev/null || rm -rf "$t"
  fi
  say "upstream ABI of the image (rdma-core $(awk '$1=="librdmacm1t64"{print $2}' "$WORK/versions.txt")): exports and header constants"
  if ! out=$("$REPO/ctest/check-symbols-upstream.sh" "$OURS_LIB/librdmacm.so.1" "$D/usr/lib/x86_64-linux-gnu/librdmacm.so.1" 2>&1); then
    UPABI_PROBLEMS+=("exports against the image's librdmacm: $(echo $out)"); fi
  echo "$out" >&2
  if ! out=$(B=$WORK/abi "$REPO/ctest/check-constants.sh" "$D/dev/usr/include" 2>&1); then
    UPABI_PROBLEMS+=("header constants against the image's rdma-core headers: $(echo $out)"); fi
  echo "$out" >&2
}

# --- two VMs side by side: the suite in two shares, one merged report -----------------------
# The guest is one busy core in effect (TCG, and the suite runs one test at a time), so on a host
# with two cores or more the whole suite runs in two VMs at once, each one its share of the
# suite files: the second VM the files in SHARD2_FILES (about half the suite's time), the first
# all others. Every file is still sourced in both (helpers and variables cross files); a test
# runs where its file's share is (guest/lib.sh, _selected). Each boot has its own work
# directory (WORK/shard1, WORK/shard2); their results, outputs and consoles are merged into
# WORK/suite, which the report reads as it reads a single boot's.
SHARD2_FILES="rsocket.sh preload.sh cancel.sh stress.sh bench.sh soak.sh badinput.sh"
shards(){ # how many VMs this run boots: VM_SHARDS=1|2; by default 2 for the whole suite on a host
  # with two cores or more and 6 GB available, 1 for a selection (VM_ONLY) or a bench run
  case ${VM_SHARDS:-} in 1|2) echo "$VM_SHARDS"; return;; '') ;; *) die "VM_SHARDS must be 1 or 2";; esac
  local mem; mem=$(awk '/^MemAvailable:/{print int($2/1048576)}' /proc/meminfo 2>/dev/null || echo 0)
  if [ -z "${VM_ONLY:-}" ] && [ -z "${VM_BENCH:-}" ] && [ "$(nproc)" -ge 2 ] && [ "${mem:-0}" -ge 6 ]; then echo 2; else echo 1; fi
}
boot_shards(){ # both shares of the suite at once, then the merge into WORK/suite (RUN, VM_RC, VM_WALL)
  local base=$WORK s rc w f
  lock_work suite
  for s in 1 2; do
    rm -f "$base/shard$s.rc"
    ( WORK=$base/shard$s SHARD_FILES=$SHARD2_FILES SHARD_MODE=$([ $s = 1 ] && echo except || echo only)
      [ $s = 1 ] || sleep 10   # (not two kernels booting in the same second)
      boot suite; echo "$VM_RC $VM_WALL" > "$base/shard$s.rc" ) 2>&1 | sed -u "s/^/[vm$s] /" >&2 &
  done
  wait
  RUN=$base/suite; rm -rf "$RUN"; mkdir -p "$RUN/share/out"
  VM_RC=0; VM_WALL=0
  for s in 1 2; do
    rc="(VM $s: none)" w=0; [ ! -s "$base/shard$s.rc" ] || read -r rc w < "$base/shard$s.rc"
    [ "$VM_RC" != 0 ] || VM_RC=$rc; [ "$w" -le "$VM_WALL" ] || VM_WALL=$w
    f=$base/shard$s/suite
    [ ! -d "$f/share/out" ] || cp -al "$f/share/out/." "$RUN/share/out/"
    { echo "==== VM $s of 2 (suite files: $(. "$f/xtra/extra/config.sh" 2>/dev/null; echo "$SHARD_MODE $SHARD_FILES"))"
      cat "$f/console.log" 2>/dev/null; } >> "$RUN/console.log"
  done
  [ ! -d "$base/shard1/suite/xtra" ] || mv "$base/shard1/suite/xtra" "$RUN/"
  # one results file: the first VM's environment lines, both VMs' results, END when both ended
  { grep -v '^END$' "$base/shard1/suite/share/results.txt" 2>/dev/null
    grep -v -e '^END$' -e '^INFO ' "$base/shard2/suite/share/results.txt" 2>/dev/null
    grep -qx END "$base/shard1/suite/share/results.txt" 2>/dev/null &&
      grep -qx END "$base/shard2/suite/share/results.txt" 2>/dev/null && echo END; true; } > "$RUN/share/results.txt"
  say "both VMs done: exit ${VM_RC}, the longer took ${VM_WALL}s; merged into $RUN"
}

cmd_run(){
  ours_state; resolve
  [ -f "$IMG/rootfs.cpio" ] || die "no image for key $KEY in $CACHE (run: $0 image)"
  say "image $KEY: $(grep -E '^(kernel|rdma-core)' "$IMG/manifest.txt" | tr '\n' ' ')"
  say "ours: $OURS_STATE ($OURS_LIB)"
  [ "$OURS_STATE" = built ] && [ -z "${VM_UPSTREAM_ONLY:-}" ] && upstream_abi
  if [ "$(shards)" = 2 ]; then boot_shards; else boot suite; fi
  say "elapsed in this invocation: ${SECONDS}s (VM ${VM_WALL}s)"
  report
}
cmd_abi(){ ours_state; resolve; [ -f "$IMG/rootfs.cpio" ] || die "no image for key $KEY (run: $0 image)"; upstream_abi
  [ ${#UPABI_PROBLEMS[@]} = 0 ] || { printf 'FAIL %s\n' "${UPABI_PROBLEMS[@]}"; return 1; }; }
cmd_check(){ cmd_host; ours_state; cmd_image; cmd_run; }   # report's line stays the last one
cmd_report(){ RUN=$WORK/suite; VM_RC=0; grep -aq '^@@DONE' "$RUN/console.log" 2>/dev/null || VM_RC=unknown; report; }
cmd_shell(){ VM_UPSTREAM_ONLY=${VM_UPSTREAM_ONLY:-1}; ours_state; resolve; boot shell; }
# demo_summary: one screen at the end of the demo: each step it showed, upstream's and ours'
# outcome side by side and whether they agree (guest/demo.sh records them in demo-steps.txt).
# Steps compared by exit status ("exit"), by exit status and output ("out"), by the library
# each loaded ("lib": the system's for upstream, /extra/ours for ours), or not at all
# ("explain": upstream's tools' bare error beside rdma-resolve's explanation).
demo_summary(){
  local F=$RUN/share/demo-steps.txt O=$RUN/share/demo-out id lib outcome kind label n=0 agree=0 ids=() verdict
  declare -A OUT KIND LABEL
  echo; echo "================================ demo summary ================================"
  if [ ! -s "$F" ]; then echo "no steps recorded ($F): see $RUN/share/demo.txt and $RUN/console.log"; return 1; fi
  while IFS=$'\t' read -r id lib outcome kind label; do
    [ -n "${KIND[$id]:-}" ] || ids+=("$id")
    OUT[$id.$lib]=$outcome KIND[$id]=$kind; [ -n "${LABEL[$id]:-}" ] || LABEL[$id]=$label
  done < "$F"
  printf '%-44s %-19s %-19s %s\n' step upstream ours agree
  for id in "${ids[@]}"; do
    local u=${OUT[$id.upstream]:--} o=${OUT[$id.ours]:--} a
    case ${KIND[$id]} in
      explain) a="(not compared)";;
      *) if [ "$u" = - ] || [ "$o" = - ]; then a="-"
         else n=$((n+1))
           case ${KIND[$id]} in
             lib) if [[ $u == /usr/lib/*librdmacm* && $o == /extra/ours/lib/librdmacm* ]]; then a="yes: each its own library"; agree=$((agree+1))
                  else a="NO: not the expected libraries"; fi
                  u="system's: ${u##* (}"; u="${u%)}"; o="ours: ${o##* (}"; o="${o%)}";;
             out) if [ "$u" != "$o" ]; then a="NO: exit differs"
                  elif cmp -s "$O/$id.upstream" "$O/$id.ours"; then a="yes: same output"; agree=$((agree+1))
                  else a="exit same, output differs"; fi;;
             *)   if [ "$u" = "$o" ]; then a=yes; agree=$((agree+1)); else a="NO"; fi;;
           esac
         fi;;
    esac
    printf '%-44s %-19s %-19s %s\n' "${LABEL[$id]:0:44}" "$u" "$o" "$a"
  done
  if [ $n = 0 ]; then verdict="nothing compared (our library was not shipped)"
  elif [ $agree = $n ]; then verdict="ours and upstream agree on all $n compared steps"
  else verdict="ours and upstream agree on $agree of $n compared steps"; fi
  echo "------------------------------------------------------------------------------"
  echo "$verdict"
  echo "agree: the same exit statuses with each library (and the same output where it is deterministic);"
  echo "rdma-resolve rows: upstream's rping error beside ours' explanation, shown, not compared"
  echo "full log: $RUN/share/demo.txt (console: $RUN/console.log)"
}
cmd_demo(){
  cmd_host; VM_UPSTREAM_ONLY=; [ -e "$OURS_LIB/librdmacm.so.1" ] || say "WARNING: our library is not built ($OURS_LIB): the demo shows upstream only"
  OURS_STATE=absent; [ -e "$OURS_LIB/librdmacm.so.1" ] && OURS_STATE=built
  cmd_image; boot demo
  echo; cat "$RUN/share/demo.txt" 2>/dev/null || { echo "demo produced no output (console: $RUN/console.log)"; return 1; }
  demo_summary || true
  [ "$VM_RC" = 0 ]
}

case ${1:-} in
  host|key|image|abi|run|check|demo|shell|report) c=$1; shift; "cmd_$c" "$@";;
  *) awk 'NR>1 && !/^#/{exit} NR>1{sub(/^# ?/,""); print}' "$0"; exit 2;;
esac
