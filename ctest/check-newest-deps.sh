#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# check-newest-deps.sh: `rdmacm` builds without a warning (-D warnings), library and examples,
# with and without the tokio feature, against the newest dependencies its Cargo.toml allows:
# what a new project that adds the crate resolves today (`cargo update` in a copy of the
# workspace; the tree's own Cargo.lock is not touched). make check-host runs it; the declared
# minimum Rust version is check-msrv's, with the locked versions.
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}
fail(){ echo "check-newest-deps: $*" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# What cargo reads to build the package: the workspace's tracked files (every member's manifest
# and sources; a member added later needs no change here), or outside git the known ones.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -z | xargs -0 cp --parents -t "$tmp"/
else
    cp -r Cargo.toml Cargo.lock build.rs src abi api examples tests README.md capi preload check "$tmp"/
    rm -rf "$tmp"/capi/target "$tmp"/preload/target "$tmp"/check/target
fi
if ! out=$(cd "$tmp" && $CARGO update 2>&1); then
    echo "$out" >&2
    fail "cargo update could not resolve the newest dependencies (above)"
fi
grep -E '^ *(Updating|Downgrading|Adding) ' <<<"$out" | sed 's/^ */check-newest-deps: /' || true
# A target directory of its own under target/, kept between runs (the dependencies' builds).
export CARGO_TARGET_DIR=$PWD/target/newest-deps
for feat in "" "--features tokio"; do
    # shellcheck disable=SC2086
    (cd "$tmp" && RUSTFLAGS="-D warnings" $CARGO build -q --locked -p rdmacm --lib --examples $feat) ||
        fail "rdmacm ${feat:-without features} does not build cleanly with the newest dependencies (above)"
done
echo "check-newest-deps: rdmacm builds without warnings against $(grep -cx 'name = ".*"' "$tmp"/Cargo.lock) newest locked packages, with and without tokio"
