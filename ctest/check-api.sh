#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# check-api.sh: the public Rust API of the `rdmacm` crate is a stated surface (make check-api,
# in make check-host).
#   - api/rdmacm.api lists it: every `pub` item, field, enum variant and trait impl of the files
#     that make it (src/lib.rs's re-exports, src/api/*.rs, the tokio feature's asyncio.rs
#     included, and src/cma/params.rs: the parameter values the connection manager defines and
#     the API re-exports as they are), each under its enclosing type, derives attached; `#[cfg(test)]` modules, private
#     and pub(crate) items are not part of it. A change of the surface without the listing fails:
#     regenerate with `ctest/check-api.sh --update` and commit the listing with the change.
#   - the crate root exposes nothing but those re-exports and the doc-hidden `internal` module
#     (the C API's view, not API): any other `pub mod`/`pub use`/`pub fn` in src/lib.rs fails.
# The listing is read from the sources (stable Rust has no rustdoc JSON), so it is exactly as
# precise as the surface is written: one item per line after joining multi-line signatures.
set -euo pipefail
cd "$(dirname "$0")/.."
listing=api/rdmacm.api
gen() {
python3 - "$@" <<'PY'
import re, sys, glob
files = ["src/lib.rs"] + sorted(glob.glob("src/api/*.rs")) + ["src/cma/params.rs"]
out = []
strip_str = re.compile(r'"(\\.|[^"\\])*"|\'(\\.|[^\'\\])\'')
def norm(s):
    s = re.sub(r"\s+", " ", s).strip()
    s = re.sub(r"\s*\{\s*$", "", s)
    s = re.sub(r"\s*\{.*$", "", s) if s.startswith(("pub fn", "pub async fn")) else s
    return s.rstrip(" ;{")
for f in files:
    lines = open(f).read().split("\n")
    depth = 0
    ctx = []          # (depth at which the block opened, header)
    skip_until = None # depth to return to (cfg(test) module, fn bodies)
    pending_derive = ""
    cfg_test = False
    i = 0
    while i < len(lines):
        raw = lines[i]
        line = raw.strip()
        i += 1
        code = strip_str.sub('""', line.split("//")[0] if not line.startswith("//") else "")
        opens, closes = code.count("{"), code.count("}")
        if skip_until is not None:
            depth += opens - closes
            if depth <= skip_until:
                skip_until = None
            continue
        if line.startswith("#[cfg(test)]"):
            cfg_test = True
            continue
        m = re.match(r"#\[derive\((.*)\)\]", line)
        if m:
            pending_derive = m.group(1)
            continue
        if cfg_test and re.match(r"(pub(\(crate\))? )?mod \w+", line):
            cfg_test = False
            if opens > closes:
                skip_until = depth
                depth += opens - closes
            continue
        cfg_test = False if line and not line.startswith("#") else cfg_test
        header = None
        kind = None
        if re.match(r"(pub |async )*(unsafe )?impl\b", line) and depth == 0:
            header = norm(line)
            kind = "impl"
        elif re.match(r"pub (async )?fn |pub (struct|enum|trait|type|const|static|mod|use) |pub [a-z_0-9]+: ", line):
            # join a multi-line signature or use list
            full = line
            while not re.search(r"[{;]\s*$|\{\s*\}\s*$|\)\s*$|,\s*$", full.split("//")[0]) or (full.startswith("pub use") and ";" not in full):
                if i >= len(lines): break
                full += " " + lines[i].strip(); i += 1
                code = strip_str.sub('""', full)
                opens, closes = code.count("{"), code.count("}")
            if full.startswith(("pub fn", "pub async fn")):
                header = norm(full)
                kind = "fn"
            else:
                header = norm(full)
                kind = "item"
        elif ctx and ctx[-1][1].startswith("pub enum") and depth == ctx[-1][0] + 1 and re.match(r"[A-Z]\w*", line):
            out.append(f"{f}: {ctx[-1][1]}: variant {norm(line).rstrip(',')}")
        if header is not None:
            where = " / ".join(h for _, h in ctx)
            d = f" #[derive({pending_derive})]" if pending_derive and kind == "item" else ""
            out.append(f"{f}: " + (where + ": " if where else "") + header + d)
        if kind is not None or (line and not line.startswith("#")):
            pending_derive = "" if kind is None or kind != "item" else ""
        # blocks
        if opens > closes:
            if kind == "fn" or (kind is None and not ctx) or (kind is None and ctx and not ctx[-1][1].startswith(("pub enum", "pub struct", "pub mod", "impl", "pub trait"))):
                if kind == "fn" or kind is None:
                    skip_until = depth
            elif kind in ("impl", "item"):
                ctx.append((depth, header))
            depth += opens - closes
        else:
            depth += opens - closes
            while ctx and depth <= ctx[-1][0]:
                ctx.pop()
        if skip_until is not None and depth <= skip_until:
            skip_until = None
# trait impls of private helper types are not surface: keep an impl only when it names a public type
pub_types = set()
for l in out:
    m = re.search(r"pub (struct|enum|trait|type) (\w+)", l)
    if m: pub_types.add(m.group(2))
def keep(l):
    m = re.match(r"[^:]+: (unsafe )?impl\b(.*)$", l)
    if not m: return True
    return any(re.search(r"\b%s\b" % t, m.group(2)) for t in pub_types)
out = [l for l in out if keep(l)]
# lib.rs: only the re-exports and the internal module are public
bad = [l for l in out if l.startswith("src/lib.rs: ") and not re.match(r"src/lib.rs: pub (use api::|mod internal$)", l)]
for b in bad:
    print("check-api: the crate root exposes more than the API: " + b, file=sys.stderr)
# the nix crate is the library's own choice of system-call wrapper: none of its types in the API
# (the C API crate reaches errno values through `internal`)
nix = [l for l in out if re.search(r"\bnix::|\bErrno\b", l)]
for b in nix:
    print("check-api: a type of the nix crate in the public API: " + b, file=sys.stderr)
bad += nix
print("\n".join(out))
sys.exit(1 if bad else 0)
PY
}
if [ "${1:-}" = --update ]; then
    gen > "$listing"
    echo "check-api: wrote $listing ($(wc -l < "$listing") lines)"
    exit 0
fi
now=$(gen) || exit 1
if ! diff -u "$listing" <(echo "$now") > /tmp/check-api.$$ 2>&1; then
    cat /tmp/check-api.$$ >&2; rm -f /tmp/check-api.$$
    echo "check-api: the public Rust API changed without $listing (above: - listed, + in the code)." >&2
    echo "check-api: if the change is meant, run ctest/check-api.sh --update and commit the listing." >&2
    exit 1
fi
rm -f /tmp/check-api.$$
echo "check-api: the public Rust API matches $listing ($(echo "$now" | wc -l) items)"
