#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# runner.sh - runs in the guest: environment info, then vm/suite.sh and vm/suite.d/*.sh.
[ -f /extra/config.sh ] && . /extra/config.sh
. /extra/vm/guest/lib.sh
: > "$RES/results.txt"
info(){ echo "INFO $*" >> "$RES/results.txt"; echo "@@INFO $*"; }
info kernel "$(uname -r)"
info rdma-core "$(dpkg-query -W -f '${Version}' librdmacm1t64)"
info variants "$(_opts; _variants | tr '\n' ' ')"
info devices "$(rdma link show 2>&1 | awk '{printf "%s(%s) ", $2, $NF}')"
for v in $(_opts --preload; _variants); do
  info "librdmacm[$v]" "$(env $(venv $v) $WHICHLIB 2>&1 | sed -n 's/^librdmacm //p' | tr '\n' ' ')"
done
# Each suite file is checked with bash -n first and must source with status 0: a file that
# does not parse, or fails, is recorded (SUITEERR) and fails the run on the host, as do the
# tests it should have run (missing from the results).
suiteerr(){ echo "SUITEERR $*" >> "$RES/results.txt"; echo "@@SUITEERR $*"; }
cd /extra/vm
for _sf in ./suite.sh ./suite.d/*.sh; do
  [ -e "$_sf" ] || { suiteerr "$_sf" "missing"; continue; }
  if ! _se=$(bash -n "$_sf" 2>&1); then suiteerr "$_sf" "syntax: $(echo $_se)"; continue; fi
  _SF=${_sf##*/}; . "$_sf"; _src=$?
  [ $_src = 0 ] || suiteerr "$_sf" "sourcing it returned status $_src"
done
echo "END" >> "$RES/results.txt"; sync
