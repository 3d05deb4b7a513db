#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# check-package.sh: `cargo package -p rdmacm` succeeds, the package builds on its own (cargo's
# verify step: the crate compiled from the packed files alone), and it holds what the library
# needs and nothing of the rest of the tree (make check-api, in make check-host):
#   - its sources, C shims and build script, the licences and the README;
#   - no file of the C API crate, librspreload, the C tests, the VM test bed or the packaging.
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}
fail(){ echo "check-package: $*" >&2; exit 1; }
list=$($CARGO package -p rdmacm --allow-dirty --list 2>/dev/null) || fail "cargo package --list failed"
for need in Cargo.toml build.rs src/lib.rs src/api/mod.rs src/internal.rs src/sys/verbs_shim.c \
            src/sys/gid_shim.c src/sys/cancel_shim.c COPYING.BSD COPYING.GPL2 README.md; do
    grep -qx "$need" <<<"$list" || fail "the package lacks $need"
done
stray=$(grep -E '^(capi|preload|ctest|vm|debian|rpm|bench|fuzz|man|include|scripts|target)/' <<<"$list" || true)
[ -z "$stray" ] || fail "the package holds files the library does not need:
$stray"
# (its own target directory: a verify build in target/ records the packed copy's files as the
# workspace crate's sources, and later builds there would not see an edited source as changed)
if ! out=$(CARGO_TARGET_DIR=target/package-check $CARGO package -p rdmacm --allow-dirty 2>&1); then
    echo "$out" >&2
    fail "cargo package (with its verify build) failed (above)"
fi
echo "check-package: rdmacm packs $(wc -l <<<"$list") files and builds from them alone"
