#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# setuid-env.sh - the library reads no environment variable in a privileged
# program: a setuid-root copy of ctest/setuid_env.c, run as
# nobody with RDMACM_RS_LOG and RDMACM_RS_LOG_FILE set, must create no log
# file, neither in a directory only root may write nor in one anybody may.
# Controls: the same program without the setuid bit does create the log in
# the open directory (mode 0600), so logging is on and the test can fail;
# a log path that is a symbolic link is not followed; std reads no variable for a thread of
# ours (the library holds no RUST_MIN_STACK).  Run on ours and, for
# comparison, on upstream's librdmacm (which reads no variable at all).
#
#   ctest/setuid-env.sh OURS_LIB [UPSTREAM_LIB]     (as root)
set -euo pipefail
OURS=$(readlink -f "$1")
UP=${2:-}
cd "$(dirname "$0")/.."
say(){ echo "[setuid-env] $*"; }
# std reads RUST_MIN_STACK with getenv(3) when it starts a thread without a stack size; the
# library starts its threads with one (sys::process::thread), so std's code that reads it, and
# the name with it, is not in the library
# (librspreload.so beside it too, when it is built)
for f in "$OURS" "$(dirname "$OURS")/rsocket/librspreload.so"; do
  if [ -e "$f" ] && grep -q RUST_MIN_STACK "$f"; then
    say "FAIL $(basename "$f"): a thread is started without a stack size (std reads RUST_MIN_STACK with getenv)"; exit 1
  fi
done
if [ "$(id -u)" != 0 ]; then say "SKIP: needs root (to make a setuid-root copy)"; exit 0; fi
NOBODY=$(id -u nobody); NOGROUP=$(id -g nobody)

T=$(mktemp -d /tmp/setuid-env.XXXXXX)
trap 'rm -rf "$T"' EXIT
chmod 755 "$T"
cc -Wall -Wextra -Werror -o "$T/prog-plain" ctest/setuid_env.c -ldl
cp "$T/prog-plain" "$T/prog-setuid"
chmod 4755 "$T/prog-setuid"
mkdir -m 700 "$T/secret"
mkdir -m 1777 "$T/open"
fail=0
as_nobody(){ setpriv --reuid="$NOBODY" --regid="$NOGROUP" --clear-groups "$@"; }

check_lib(){
  local name=$1 lib=$2 out
  cp "$lib" "$T/lib-$name.so"; chmod 644 "$T/lib-$name.so"
  lib=$T/lib-$name.so
  # setuid-root program run by nobody: nothing may appear, wherever pointed
  for target in "$T/secret/log-$name" "$T/open/log-setuid-$name"; do
    out=$(as_nobody env RDMACM_RS_LOG=trace RDMACM_RS_LOG_FILE="$target" RDMACM_RS_FORCE_LEGACY_UCMA=1 \
          "$T/prog-setuid" "$lib" 2>&1) || { say "FAIL $name: setuid program failed: $out"; fail=1; }
    case $out in called:*) ;; *) say "FAIL $name: library not reached: $out"; fail=1;; esac
    if [ -e "$target" ]; then
      say "FAIL $name: setuid program created $target ($(stat -c '%U %a' "$target"))"; fail=1
    else
      say "ok   $name: setuid program ($out) created no $target"
    fi
  done
}

check_lib ours "$OURS"
# control: without the setuid bit, ours does log (so the check above can fail)
out=$(as_nobody env RDMACM_RS_LOG=trace RDMACM_RS_LOG_FILE="$T/open/log-plain" "$T/prog-plain" "$T/lib-ours.so" 2>&1)
if [ -f "$T/open/log-plain" ] && [ "$(stat -c %a "$T/open/log-plain")" = 600 ]; then
  say "ok   ours: control, the plain program ($out) created its log with mode 0600"
else
  say "FAIL ours: control, the plain program did not create $T/open/log-plain with mode 0600 ($out)"; fail=1
fi
# a symbolic link as the log path is not followed
ln -s "$T/open/victim" "$T/open/link"
out=$(as_nobody env RDMACM_RS_LOG=trace RDMACM_RS_LOG_FILE="$T/open/link" "$T/prog-plain" "$T/lib-ours.so" 2>&1)
if [ -e "$T/open/victim" ]; then
  say "FAIL ours: the log path's symbolic link was followed"; fail=1
else
  say "ok   ours: a symbolic link as the log path is not followed ($out)"
fi
if [ -n "$UP" ] && [ -e "$UP" ]; then check_lib upstream "$(readlink -f "$UP")"; fi
[ $fail = 0 ] && say "PASS" || { say "FAILED"; exit 1; }
