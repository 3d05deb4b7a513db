#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# build-image.sh OUT EXPECTED - build the guest image (Debian sid minbase + rdma-core userspace +
# sid kernel + out-of-tree siw.ko) into directory OUT: vmlinuz, rootfs.cpio, manifest.txt.
# EXPECTED is the versions file resolved by testbed.sh (lines "package version"); the build
# fails loudly if what apt installs differs from it (sid moved under us: just rerun).
# Called by testbed.sh (which runs it as root); the sha256 of this file is part of the cache key.
# The guest's /init and the test scripts are NOT part of the image: they come in the per-run
# extra initramfs archive, so changing them never rebuilds the image.
set -euo pipefail
OUT=$1 EXPECTED=$2
MIRROR=${RDMACM_VM_MIRROR:-http://deb.debian.org/debian}
APT="apt-get -q -y -o Acquire::Check-Valid-Until=false"   # sid's Release may be served expired
PKGS=libibverbs1,ibverbs-providers,librdmacm1t64,rdmacm-utils,ibverbs-utils,python3-pyverbs,iproute2,kmod,procps,strace,psmisc,valgrind,iperf3,socat,netcat-openbsd,python3-jsonschema,nginx,curl,rsync,netperf
MODS="veth rdma_rxe siw rdma_ucm ib_uverbs ib_umad 9pnet_virtio 9p"
say(){ echo "[build-image $(date +%T)] $*" >&2; }
die(){ echo "build-image: ERROR: $*" >&2; exit 1; }
want(){ awk -v p="$1" '$1==p{print $2; f=1} END{exit !f}' "$EXPECTED" || die "package $1 missing from $EXPECTED"; }

W=$OUT/work; rm -rf "$W"; mkdir -p "$W"; cd "$W"
KV=$(want kernel-abi)                 # e.g. 7.2.13+deb14-amd64
KVER=$(want linux-image-$KV)          # e.g. 7.2.13-1
KSRC=$(want kernel-source)            # e.g. linux-source-7.2

say "debootstrap sid minbase (+ $PKGS)"
debootstrap --variant=minbase --include=$PKGS sid rootfs "$MIRROR" > debootstrap.log 2>&1 ||
  { tail -30 debootstrap.log >&2; die "debootstrap failed (log: $W/debootstrap.log)"; }

say "buildroot (headers, siw.ko)"; cp -a rootfs buildroot; B=$W/buildroot
mount -t proc proc "$B/proc"; trap 'umount "$B/proc" 2>/dev/null || true' EXIT
chroot "$B" $APT update > apt.log 2>&1 || { tail apt.log >&2; die "apt-get update in chroot failed"; }
KDEBS=$(chroot "$B" apt-cache depends "linux-image-$KV=$KVER" 2>>apt.log |
        awk '/Depends: linux-(binary|modules|base)-/{printf "%s ", $2}')
say "kernel $KV $KVER: ${KDEBS:-linux-image-$KV}"
DEBIAN_FRONTEND=noninteractive chroot "$B" $APT install --no-install-recommends make \
  "linux-headers-$KV=$KVER" >> apt.log 2>&1 || { tail -20 apt.log >&2; die "cannot install linux-headers-$KV=$KVER"; }
chroot "$B" sh -c "cd /root && $APT download ${KDEBS:-linux-image-$KV} $KSRC" >> apt.log 2>&1 ||
  { tail -20 apt.log >&2; die "cannot download kernel packages ${KDEBS:-linux-image-$KV} $KSRC"; }
for d in "$B"/root/linux-*.deb; do case $d in *linux-source*) ;; *) dpkg -x "$d" kpkg;; esac; done
M=$(dirname "$(find kpkg -name modules.order | head -1)"); [ -d "$M" ] || die "no modules in kernel packages"
cp "$(find kpkg -name 'vmlinuz*' | head -1)" vmlinuz
cp -a "$M" "$B/usr/lib/modules/"; mkdir -p "$B/usr/lib/modules/$KV/extra"
if ! grep -q '^CONFIG_RDMA_SIW=[ym]' "$B/usr/src/linux-headers-$KV/.config"; then
  say "siw: not in Debian's config, building it out of tree from $KSRC"
  dpkg-deb --fsys-tarfile "$B"/root/linux-source-*.deb | tar -xO --wildcards './usr/src/linux-source-*.tar.xz' |
    tar -xJ -C "$B/root" --strip-components=1 --wildcards '*/drivers/infiniband/sw/siw/*'
  chroot "$B" make -s -C "/usr/src/linux-headers-$KV" M=/root/drivers/infiniband/sw/siw CONFIG_RDMA_SIW=m modules > siw.log 2>&1 ||
    { tail -30 siw.log >&2; die "siw.ko build failed"; }
  chroot "$B" x86_64-linux-gnu-strip --strip-debug /root/drivers/infiniband/sw/siw/siw.ko
  cp "$B/root/drivers/infiniband/sw/siw/siw.ko" "$B/usr/lib/modules/$KV/extra/"
fi
chroot "$B" depmod "$KV"

say "guest tree"; G=$W/guest; cp -a rootfs "$G"
# versions actually installed must be the ones the cache key was computed from
chroot "$G" dpkg-query -W -f '${Package} ${Version}\n' > installed.txt
bad=0
while read -r p v; do
  case $p in kernel-*|linux-*) continue;; esac
  got=$(awk -v p="$p" '$1==p{print $2}' installed.txt)
  [ "$got" = "$v" ] || { echo "build-image: $p: key says $v, installed ${got:-nothing}" >&2; bad=1; }
done < "$EXPECTED"
[ $bad = 0 ] || die "installed versions differ from the resolved key (sid changed during the build?): rerun"
# upstream's library package, kept so that a test can swap our .deb in and upstream's back
mkdir -p "$G/opt/rdma-core/debs"
chroot "$B" sh -c "cd /root && $APT download librdmacm1t64=$(want librdmacm1t64)" >> apt.log 2>&1 ||
  { tail -20 apt.log >&2; die "cannot download librdmacm1t64"; }
cp "$B"/root/librdmacm1t64_*.deb "$G/opt/rdma-core/debs/"
rm -rf "$G"/var/cache/apt/archives/*.deb "$G"/var/lib/apt/lists/* "$G"/usr/share/{locale,man,info}
mkdir -p "$G/opt/rdma-core/tests"; cp -a "$G/usr/share/doc/rdma-core/tests/." "$G/opt/rdma-core/tests/"
gunzip -f "$G"/opt/rdma-core/tests/*.gz 2>/dev/null || true; rm -rf "$G/usr/share/doc"  # dh_compress gzipped some
[ -f "$G/opt/rdma-core/tests/run_tests.py" ] || die "pyverbs tests not found in python3-pyverbs"
mkdir -p "$G/usr/lib/modules/$KV"; cp "$M"/modules.{builtin,builtin.modinfo,order} "$G/usr/lib/modules/$KV/"
for f in $(for m in $MODS; do chroot "$B" modprobe -S "$KV" --show-depends $m; done | awk '$1=="insmod"{print $2}' | sort -u); do
  mkdir -p "$G/usr${f%/*}"; cp "$B$f" "$G/usr$f"; done
chroot "$G" depmod "$KV"
(cd "$G" && find . -print0 | cpio --null -o -H newc --quiet) > rootfs.cpio
truncate -s %4 rootfs.cpio                               # appended archives must start 4-byte aligned
{ echo "kernel $KV $KVER"
  echo "rdma-core $(awk '$1=="librdmacm1t64"{print $2}' installed.txt)"
  echo "built $(date -u +%FT%TZ) on $(hostname)"; } > manifest.txt
cp installed.txt "$OUT/installed.txt"; mv vmlinuz rootfs.cpio manifest.txt "$OUT/"
cd "$OUT"; umount "$B/proc" 2>/dev/null || true; trap - EXIT; rm -rf "$W"
say "done: $(du -h "$OUT"/vmlinuz "$OUT"/rootfs.cpio | tr '\n\t' '  ')"
