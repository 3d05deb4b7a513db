#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# fuzz-smoke.sh - bounded fuzz run of rdma_getaddrinfo, the ibacm answer parser, ibv_gid_reachable's
# decision logic, the CM's decoding of kernel events, the rsocket stream protocol against a hostile
# peer and the AF_IB connect header (fuzz/).
#
#   ctest/fuzz-smoke.sh [SECONDS]      (default 60; split between the targets)
#
# With a nightly toolchain (rustup toolchain list), cargo-fuzz is installed when missing
# (cargo install --locked cargo-fuzz) and libFuzzer runs each target (ASan on by cargo-fuzz's
# default).  Without nightly, or with FUZZ_STABLE=1, the stable harness
# (fuzz/src/bin/stable_fuzz.rs) feeds the same bodies random inputs for the same time.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
SECS=${1:-60}
# the targets share the time (FUZZ_TARGETS overrides the list)
TARGETS=${FUZZ_TARGETS:-rdma_getaddrinfo acm_response gid_reachable events rsocket_wire af_ib_hdr}
NT=$(echo $TARGETS | wc -w)
HALF=$(( SECS / NT > 0 ? SECS / NT : 1 ))
say(){ echo "[fuzz-smoke] $*"; }

have_nightly(){ command -v rustup >/dev/null && rustup toolchain list 2>/dev/null | grep -q '^nightly'; }

if [ -z "${FUZZ_STABLE:-}" ] && have_nightly; then
  if ! cargo fuzz --version >/dev/null 2>&1; then
    say "installing cargo-fuzz"
    cargo install --locked cargo-fuzz >&2 || { say "cargo-fuzz install failed: stable harness instead"; FUZZ_STABLE=1; }
  fi
fi
if [ -z "${FUZZ_STABLE:-}" ] && have_nightly && cargo fuzz --version >/dev/null 2>&1; then
  # the main crate's cdylib is linked too: drop its -z defs under the sanitizer (see the script)
  export RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }-Clinker=$PWD/tools/cc-no-zdefs"
  for t in $TARGETS; do
    say "libFuzzer: $t for ${HALF}s"
    mkdir -p "corpus/$t"
    cargo +nightly fuzz run "$t" "corpus/$t" -- -max_total_time="$HALF" -rss_limit_mb=2048 -print_final_stats=1
  done
  say "clean"
else
  say "no nightly toolchain (or FUZZ_STABLE=1): stable random-input harness for ${SECS}s"
  cargo build --release --no-default-features --bin stable_fuzz
  ./target/release/stable_fuzz "$SECS"
  say "clean"
fi
