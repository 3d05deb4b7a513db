#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# deps.sh - the one list of what building, testing and demonstrating rdmacm-rs needs on a
# Debian-like machine. `make check`, `make demo` and .ci/run call it first.
#   scripts/deps.sh          install what is missing (apt-get, as root); not root: print the
#                            exact command and stop
#   scripts/deps.sh --list   print the package list
# Rust (cargo, at least the rust-version of Cargo.toml) is not a Debian package here: when
# missing or older, it says so and stops.
set -euo pipefail
PKGS=(build-essential pkg-config lld binutils valgrind
      libibverbs-dev librdmacm-dev rdmacm-utils ibverbs-utils
      iproute2 util-linux qemu-system-x86 debootstrap cpio xz-utils curl
      debhelper dpkg-dev fakeroot lintian man-db groff-base    # make deb, check-man
      rpm rpmlint file)                                         # make rpm (rpmbuild, rpmlint; brp-strip uses file)
if [ "${1:-}" = --list ]; then printf '%s\n' "${PKGS[@]}"; exit 0; fi
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  cmd="apt-get install -y --no-install-recommends ${missing[*]}"
  if [ "$(id -u)" != 0 ]; then
    echo "deps: missing packages: ${missing[*]}" >&2
    echo "deps: run as root:  apt-get update && $cmd" >&2
    exit 1
  fi
  echo "deps: installing ${missing[*]}"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive $cmd -q
fi
msrv=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' "$(dirname "$0")/../Cargo.toml")
command -v cargo >/dev/null ||
  { echo "deps: no Rust toolchain (cargo): install Rust $msrv or later, e.g. from https://rustup.rs" >&2; exit 1; }
have=$(cargo --version | awk '{print $2}')
[ "$(printf '%s\n%s\n' "$msrv" "${have%%-*}" | sort -V | head -1)" = "$msrv" ] ||
  { echo "deps: cargo $have is older than the rust-version $msrv of Cargo.toml: install Rust $msrv or later" >&2; exit 1; }
cargo clippy --version >/dev/null 2>&1 ||
  { echo "deps: no clippy (make check-msrv runs it): rustup component add clippy" >&2; exit 1; }
echo "deps: all present (${#PKGS[@]} packages, $(cargo --version))"
