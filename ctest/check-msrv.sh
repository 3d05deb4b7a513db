#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# check-msrv.sh: the minimum Rust version claimed (rust-version in Cargo.toml) is true.
#   - every crate of the workspace declares the same rust-version;
#   - clippy's incompatible_msrv lint, which clippy runs at each package's rust-version, finds no
#     use of a standard-library item stabilised after it (library and binaries of the workspace);
#   - no locked dependency declares a higher rust-version;
#   - README.md and docs/packaging.md each say "Rust ... X or later" with that version, and so
#     does scripts/deps.sh wherever it says it.
# Only one toolchain can be had on these machines, so language features newer than the claim
# (which clippy does not check) are not covered; a build with that toolchain would be.
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}
fail(){ echo "check-msrv: $*" >&2; exit 1; }
msrv=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
[ -n "$msrv" ] || fail "Cargo.toml declares no rust-version"

meta=$($CARGO metadata --locked --format-version 1 2>/dev/null) || fail "cargo metadata --locked failed"
echo "$meta" | MSRV=$msrv python3 -c '
import json, os, sys
def v(s): return tuple(int(x) for x in s.split("."))
msrv = os.environ["MSRV"]; m = json.load(sys.stdin)
ws = set(m["workspace_members"]); bad = []
for p in m["packages"]:
    rv = p.get("rust_version")
    if p["id"] in ws:
        if rv != msrv: bad.append("workspace crate %s declares rust-version %s, Cargo.toml %s" % (p["name"], rv, msrv))
    elif rv and v(rv) > v(msrv):
        bad.append("dependency %s %s needs Rust %s" % (p["name"], p["version"], rv))
for b in bad: print("check-msrv: " + b, file=sys.stderr)
sys.exit(1 if bad else 0)' || fail "rust-version $msrv is not what the workspace and its dependencies need"

# clippy reads each package's rust-version; only this lint, as an error
$CARGO clippy --locked --workspace --lib --bins -q -- -A clippy::all -D clippy::incompatible_msrv ||
    fail "the code uses items stabilised after the declared rust-version $msrv (above)"

for f in README.md docs/packaging.md scripts/deps.sh; do
    said=$(grep -oE 'Rust[^0-9]*1\.[0-9]+ or later' "$f" | grep -oE '1\.[0-9]+' || true)
    [ -n "$said" ] || [ "$f" = scripts/deps.sh ] || fail "$f does not say which Rust it needs ('Rust ... $msrv or later')"
    for v in $said; do
        [ "$v" = "$msrv" ] || fail "$f says Rust $v or later, Cargo.toml's rust-version is $msrv"
    done
done
echo "check-msrv: rust-version $msrv: workspace crates agree, no dependency needs more, clippy incompatible_msrv clean"
