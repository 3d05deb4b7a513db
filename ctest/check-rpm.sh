#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# check-rpm.sh RPMDIR DEBDIR: what `make rpm` built, against what `make deb` built.
#   - three packages, librdmacm-rs, librdmacm-rs-devel, rdmacm-rs-tools, at Cargo.toml's version;
#   - librdmacm-rs provides librdmacm.so.1()(64bit) and librdmacm.so.1(<node>)(64bit) for every
#     version node of abi/rdmacm.symbols (rpm's automatic provides), and stands in for the
#     distribution's librdmacm as the .deb does for librdmacm1t64: Provides librdmacm at
#     UPSTREAM_LEVEL, Obsoletes librdmacm below it, Conflicts librdmacm; -devel provides
#     librdmacm-devel at UPSTREAM_LEVEL;
#   - installed with rpm --root into a scratch root (--nodeps: the root has no libc), over a
#     stand-in "librdmacm-64.0" package that the Obsoletes must remove; rpm -V clean;
#   - every file of each package is the file of its .deb counterpart (librdmacm-rs1,
#     librdmacm-rs-dev, rdmacm-rs-tools): /usr/lib/<multiarch> is /usr/lib64, the documentation
#     directories, lintian overrides and build-id links aside;
#   - the library's exports (ctest/check-symbols.sh), no path of the build machine and no RPATH
#     (ctest/check-no-build-paths.sh), and a static link against the installed -devel
#     (ctest/check-static.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
R=${1:-build/rpm} D=${2:-build/deb}
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
level=$(sed -n 's/^UPSTREAM_LEVEL := //p' Makefile)
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
fail(){ echo "check-rpm: $*" >&2; exit 1; }
rpmq(){ rpm -qp --nosignature "$@" 2>/dev/null; }

declare -A RPM DEB=([librdmacm-rs]=librdmacm-rs1 [librdmacm-rs-devel]=librdmacm-rs-dev [rdmacm-rs-tools]=rdmacm-rs-tools)
n=0
for f in "$R"/RPMS/*/*.rpm; do
    [ -e "$f" ] || fail "no package in $R/RPMS"
    name=$(rpmq --qf '%{NAME}' "$f"); n=$((n+1))
    [ -n "${DEB[$name]:-}" ] || fail "unexpected package $name ($f)"
    [ "$(rpmq --qf '%{VERSION}' "$f")" = "$version" ] || fail "$name: version $(rpmq --qf '%{VERSION}' "$f"), Cargo.toml $version"
    RPM[$name]=$f
done
[ $n = 3 ] || fail "$n packages in $R/RPMS, expected 3"

# provides and relations
lib=${RPM[librdmacm-rs]} dev=${RPM[librdmacm-rs-devel]}
rpmq --provides "$lib" > "$W/provides"
for p in 'librdmacm.so.1()(64bit)' $(grep -v '^#' abi/rdmacm.symbols | sed 's/.*@@//' | sort -u | sed 's/.*/librdmacm.so.1(&)(64bit)/') \
         "librdmacm = $level" "librdmacm(x86-64) = $level"; do
    grep -qxF "$p" "$W/provides" || fail "librdmacm-rs does not provide '$p' (provides: $(echo $(cat "$W/provides")))"
done
[ "$(rpmq --obsoletes "$lib")" = "librdmacm < $level" ] || fail "librdmacm-rs Obsoletes: '$(rpmq --obsoletes "$lib")'"
[ "$(rpmq --conflicts "$lib")" = librdmacm ] || fail "librdmacm-rs Conflicts: '$(rpmq --conflicts "$lib")'"
rpmq --provides "$dev" | grep -qxF "librdmacm-devel = $level" || fail "librdmacm-rs-devel does not provide librdmacm-devel = $level"

# a stand-in for the distribution's librdmacm (an older release: the Obsoletes must replace it)
mkdir -p "$W/top"
cat > "$W/distro.spec" <<'SPEC'
Name: librdmacm
Version: 64.0
Release: 1
Summary: stand-in for the distribution's librdmacm
License: MIT
%description
A stand-in, made by ctest/check-rpm.sh.
%install
mkdir -p %{buildroot}/usr/lib64
echo stand-in > %{buildroot}/usr/lib64/librdmacm.so.1
%files
/usr/lib64/librdmacm.so.1
SPEC
rpmbuild -bb --quiet --nodeps --define "_topdir $W/top" "$W/distro.spec" > "$W/distro.log" 2>&1 ||
    { cat "$W/distro.log" >&2; fail "cannot build the stand-in package"; }
root=$W/root; mkdir -p "$root"
rpm --root "$root" --initdb
rpm --root "$root" -i --nodeps "$W"/top/RPMS/*/librdmacm-64.0-1.*.rpm 2> "$W/rpm.err" || { cat "$W/rpm.err" >&2; fail "stand-in install"; }
rpm --root "$root" -U --nodeps "${RPM[@]}" 2> "$W/rpm.err" || { cat "$W/rpm.err" >&2; fail "rpm -U of the packages into $root failed"; }
rpm --root "$root" -q librdmacm > /dev/null 2>&1 && fail "librdmacm is still installed: the Obsoletes did not replace it"
[ "$(rpm --root "$root" -qa --qf '%{NAME}\n' | sort | tr '\n' ' ')" = "librdmacm-rs librdmacm-rs-devel rdmacm-rs-tools " ] ||
    fail "installed: $(rpm --root "$root" -qa | tr '\n' ' ')"
out=$(rpm --root "$root" -Va --nodeps 2>&1) || fail "rpm -Va: $out"
[ -z "$out" ] || fail "rpm -Va: $out"

# every file against the .deb's, package by package
for name in "${!DEB[@]}"; do
    deb=$(ls "$D/${DEB[$name]}_"*.deb) || fail "no ${DEB[$name]} package in $D (make deb)"
    dpkg-deb -c "$deb" | awk '$1 !~ /^d/ {p=$6; sub(/^\./,"",p); print p}' |
        sed "s|^/usr/lib/$ma/|/usr/lib64/|" | grep -v -e '^/usr/share/doc/' -e '^/usr/share/lintian/' | sort > "$W/deb.list"
    rpm --root "$root" -ql "$name" | while read -r f; do [ -d "$root$f" ] && [ ! -L "$root$f" ] || echo "$f"; done |
        grep -v -e '^/usr/lib/\.build-id/' -e '^/usr/share/licenses/' | sort > "$W/rpm.list"
    diff -u --label "${DEB[$name]} (deb)" --label "$name (rpm)" "$W/deb.list" "$W/rpm.list" >&2 ||
        fail "the files of $name differ from ${DEB[$name]}'s"
    echo "check-rpm: $name: $(wc -l < "$W/rpm.list") files, the same as ${DEB[$name]}"
done

ctest/check-symbols.sh "$root/usr/lib64/librdmacm.so.1" abi/rdmacm.symbols
ctest/check-no-build-paths.sh "$root" "$root/usr"
ctest/check-static.sh tree "$root" /usr/lib64
echo "check-rpm: $(cd "$R"/RPMS/* && ls | tr '\n' ' '): provides, relations, rpm --root install over a stand-in librdmacm, files as the .deb's, no build path"
