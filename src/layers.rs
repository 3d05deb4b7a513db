// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The layering rule, checked on the sources (`cargo test --lib`).
//!
//! Every file under `src/` is a module; its layer is that of its top-level
//! module ([`LAYERS`]).  The C API, the top layer, is its own crate
//! (`rdmacm-capi`, capi/src): it names this crate only as `rdmacm::`, and
//! Cargo keeps this crate from naming it; its own files are checked here
//! for circles ([`check_clients`]).  A module may name (`crate::x`, `super::x`) only
//! modules of its own layer or below.  Within one layer, and between the
//! submodules of any module, references must not go round in a circle: the
//! check reduces every reference to the two sibling modules it connects
//! (the children of the nearest common parent) and looks for a cycle among
//! siblings.  A module and its own submodules may refer to each other
//! (a submodule is part of its parent), except under the modules named in
//! [`STRICT`]: there a submodule naming an ancestor (`super::Item`,
//! `crate::cma::Item` from inside `cma`) is an upward reference, so the
//! parent is a facade over its children and never their foundation.
//! `tests` modules are test code and not checked.  Domain modules named in [`SAFE`] must carry
//! `#![deny(unsafe_code)]`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level modules and their layer (0 = lowest).  `logging` is
/// infrastructure: any layer may use it, it uses none of them.
const LAYERS: &[(&str, u8)] = &[
    ("abi", 0),
    ("logging", 0),
    ("sys", 1),
    ("cma", 2),
    ("addrinfo", 2),
    ("rsocket", 2),
    ("gid", 2),
    ("explain", 2),
    // The public Rust API (over the domain) and the doc-hidden module that
    // declares the inner layers for the crate's own clients.
    ("api", 3),
    ("internal", 3),
    ("bin", 4),
];

/// Upward imports still being removed: (importing module, imported module).
/// This list may only shrink.
const PENDING: &[(&str, &str)] = &[];

/// Modules whose submodules (at any depth) must not name an ancestor
/// inside them: the parent only declares and re-exports its children.
const STRICT: &[&str] = &["cma", "rsocket"];

/// Whether `module` lies inside a [`STRICT`] module and `r`, one of its
/// proper ancestors, does too.
fn strict_upward(module: &[String], r: &[String]) -> bool {
    STRICT.iter().any(|s| {
        let s: Vec<&str> = s.split("::").collect();
        let inside = |m: &[String]| m.len() >= s.len() && m.iter().zip(&s).all(|(a, b)| a == b);
        inside(module) && inside(r) && r.len() < module.len() && module.starts_with(r)
    })
}

/// Domain modules (top-level or deeper) whose files must deny unsafe code.
const SAFE: &[&str] = &[
    "gid", "addrinfo", "addrinfo::acm", "addrinfo::numeric", "addrinfo::ib_hdr", "rsocket", "rsocket::wire", "rsocket::epoll", "rsocket::svc", "rsocket::dgram", "rsocket::dgram_udp", "rsocket::dgram_wire", "rsocket::conf",
    "rsocket::fdmap", "rsocket::sock", "rsocket::state", "rsocket::guard", "rsocket::cq", "rsocket::blocking", "rsocket::send", "rsocket::recv",
    "rsocket::iomap", "rsocket::lifecycle", "rsocket::options", "rsocket::stream_opts", "rsocket::poll", "rsocket::spin", "rsocket::signal",
    "rsocket::control", "rsocket::send_half", "rsocket::recv_half", "rsocket::iomap_table", "rsocket::sleepers", "cma", "cma::ai", "cma::ai_worker", "cma::api", "cma::conn", "cma::params",
    "cma::conn::mcast", "cma::conn::qp", "cma::device", "cma::events", "cma::gid_env", "cma::registry",
    "cma::acks", "cma::base", "cma::channel", "cma::cm", "cma::delivery", "cma::id",
    "explain", "explain::devices", "explain::json", "explain::trace", "cma::trace",
    "api", "api::addr", "api::error", "api::event", "api::gai", "api::id", "api::stream", "api::asyncio",
];

fn layer_of(module: &[String]) -> Option<u8> {
    let top = module.first()?;
    LAYERS.iter().find(|(n, _)| n == top).map(|&(_, l)| l)
}

/// `src/cma/conn/mod.rs` -> `["cma", "conn"]`; `src/lib.rs` -> `[]`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_string());
    }
    parts
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Code without `//` comments (line and doc comments), so that prose
/// naming a module does not count as a reference, and without inline
/// `#[cfg(test)] mod name { ... }` blocks (test code, like `tests.rs`;
/// further attributes may stand between the two).
fn code_of(text: &str) -> String {
    let mut out = Vec::new();
    let mut skip_depth: Option<i32> = None;
    let mut armed = false;
    for l in text.lines() {
        let l = match l.find("//") {
            Some(i) if !l[..i].contains('"') => &l[..i],
            _ => l,
        };
        if let Some(d) = skip_depth.as_mut() {
            *d += l.matches('{').count() as i32 - l.matches('}').count() as i32;
            if *d <= 0 {
                skip_depth = None;
            }
            continue;
        }
        let t = l.trim_start();
        let t = t.strip_prefix("pub ").or_else(|| t.strip_prefix("pub(crate) ")).unwrap_or(t);
        if armed && t.starts_with("mod ") && l.contains('{') {
            armed = false;
            skip_depth = Some(l.matches('{').count() as i32 - l.matches('}').count() as i32);
            continue;
        }
        armed = l.trim() == "#[cfg(test)]" || (armed && (l.trim().is_empty() || l.trim().starts_with("#[")));
        out.push(l);
    }
    out.join("\n")
}

fn ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The module paths a file's code names: `crate::a::b...` and
/// `super::...` (resolved against `module`), cut to the longest prefix that
/// is a module of the crate; not `pub(in crate::a)`, a visibility.
fn references(code: &str, module: &[String], modules: &BTreeSet<Vec<String>>) -> BTreeSet<Vec<String>> {
    let mut out = BTreeSet::new();
    let b = code.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let rest = &code[i..];
        let start_ok = i == 0 || !ident_char(code[..i].chars().next_back().unwrap()) || code[..i].ends_with('$');
        // `pub(in crate::a)` restricts visibility: it names no item.
        let vis = code[..i].trim_end().ends_with("(in");
        let (mut path, mut j) = if vis {
            i += 1;
            continue;
        } else if start_ok && rest.starts_with("crate::") && !code[..i].ends_with('$') {
            (Vec::new(), i + "crate::".len())
        } else if start_ok && rest.starts_with("super::") {
            // Each `super` is one module up, in `a/foo.rs` as in `a/mod.rs`.
            let mut base = module.to_vec();
            let mut k = i;
            while code[k..].starts_with("super::") {
                base.pop();
                k += "super::".len();
            }
            (base, k)
        } else {
            i += 1;
            continue;
        };
        loop {
            let seg: String = code[j..].chars().take_while(|&c| ident_char(c)).collect();
            if seg.is_empty() || seg.chars().next().unwrap().is_ascii_uppercase() {
                break;
            }
            path.push(seg.clone());
            j += seg.len();
            if code[j..].starts_with("::") {
                j += 2;
            } else {
                break;
            }
        }
        while !path.is_empty() && !modules.contains(&path) {
            path.pop();
        }
        if !path.is_empty() {
            out.insert(path);
        }
        i = j.max(i + 1);
    }
    out
}

fn has_cycle(edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Option<Vec<Vec<String>>> {
    // Depth-first search with colours; returns one cycle.
    fn visit(
        n: &Vec<String>,
        edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        state: &mut BTreeMap<Vec<String>, u8>,
        stack: &mut Vec<Vec<String>>,
    ) -> Option<Vec<Vec<String>>> {
        state.insert(n.clone(), 1);
        stack.push(n.clone());
        for m in edges.get(n).into_iter().flatten() {
            match state.get(m).copied().unwrap_or(0) {
                1 => {
                    let at = stack.iter().position(|x| x == m).unwrap();
                    let mut c = stack[at..].to_vec();
                    c.push(m.clone());
                    return Some(c);
                }
                0 => {
                    if let Some(c) = visit(m, edges, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.clone(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in edges.keys() {
        if state.get(n).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(n, edges, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

/// Problems found in the tree under `src`.
fn check(src: &Path) -> Vec<String> {
    check_tree(src, true)
}

/// Problems found in a client crate's tree (all one layer, above this
/// crate): circles among its modules.
fn check_clients(src: &Path) -> Vec<String> {
    check_tree(src, false)
}

fn check_tree(src: &Path, layered: bool) -> Vec<String> {
    let layer_of = |m: &[String]| if layered { layer_of(m) } else { Some(3) };
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(src, f)).collect();
    let mut problems = Vec::new();
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for f in &files {
        let module = module_of(src, f);
        if module.is_empty() || module.iter().any(|m| m == "tests") || module == ["layers"] {
            continue;
        }
        let Some(layer) = layer_of(&module) else {
            problems.push(format!("{}: top-level module `{}` has no layer (add it to LAYERS)", f.display(), module[0]));
            continue;
        };
        let text = std::fs::read_to_string(f).unwrap();
        let code = code_of(&text);
        if layered && SAFE.iter().any(|s| module.join("::") == *s) && !text.contains("#![deny(unsafe_code)]") {
            problems.push(format!("{}: domain module without #![deny(unsafe_code)]", f.display()));
        }
        for r in references(&code, &module, &modules) {
            if let Some(l) = layer_of(&r) {
                let pending = PENDING.iter().any(|&(a, b)| module.join("::") == a && r.join("::") == b);
                if pending {
                    continue;
                }
                if l > layer && r[0] != "logging" {
                    problems.push(format!("{}: upward import of `{}` (layer {l} from layer {layer})", f.display(), r.join("::")));
                }
            }
            if strict_upward(&module, &r) {
                problems.push(format!("{}: names its ancestor `{}` (a strict module: the parent only re-exports)", f.display(), r.join("::")));
            }
            // The two siblings this reference connects.
            let common = module.iter().zip(&r).take_while(|(a, b)| a == b).count();
            if common == module.len() || common == r.len() {
                continue; // a module and its own ancestor or descendant
            }
            edges.entry(module[..=common].to_vec()).or_default().insert(r[..=common].to_vec());
        }
    }
    if let Some(c) = has_cycle(&edges) {
        let names: Vec<String> = c.iter().map(|m| m.join("::")).collect();
        problems.push(format!("import circle: {}", names.join(" -> ")));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_hold() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let problems = check(&src);
        assert!(problems.is_empty(), "layering rule broken:\n{}", problems.join("\n"));
        let capi = Path::new(env!("CARGO_MANIFEST_DIR")).join("capi/src");
        let problems = check_clients(&capi);
        assert!(problems.is_empty(), "layering rule broken in capi/src:\n{}", problems.join("\n"));
    }

    /// The check can fail: an upward import, a circle between siblings, a
    /// missing deny and, under a [`STRICT`] module, a child naming its
    /// parent's items are each reported; a child naming its parent
    /// elsewhere, a visibility `pub(in crate::cma)` and test code are not.
    #[test]
    fn layers_check_catches_breakage() {
        let dir = std::env::temp_dir().join(format!("rdmacm-layers-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for d in ["abi", "sys", "cma/conn", "addrinfo", "gid", "bin", "rsocket"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        let w = |p: &str, s: &str| std::fs::write(dir.join(p), s).unwrap();
        w("lib.rs", "pub mod abi; pub mod sys; pub mod cma; pub mod addrinfo; pub mod gid;");
        w("abi/mod.rs", "// crate::bin in a comment is no import\n");
        w("sys/mod.rs", "use crate::cma::Thing;\n");
        w("cma/mod.rs", "#![deny(unsafe_code)]\npub mod conn; pub mod id; use crate::addrinfo::x;\n");
        w("cma/id.rs", "#![deny(unsafe_code)]\npub(in crate::cma) fn f() {}\nuse crate::sys::V;\n");
        w("cma/conn/mod.rs", "#![deny(unsafe_code)]\npub mod qp; use super::Id; use crate::cma::id::I;\n#[cfg(test)]\nmod tests {\n    use crate::bin::T;\n}\n");
        w("cma/conn/qp.rs", "#![deny(unsafe_code)]\nuse crate::cma::conn::{self as c};\nuse super::super::id::I;\n#[cfg(test)]\n#[allow(unused)]\npub mod fake {\n    use super::super::X;\n}\n");
        w("addrinfo/mod.rs", "#![deny(unsafe_code)]\npub mod sub;\nfn f() { crate::cma::go(); }\n");
        w("addrinfo/sub.rs", "#![deny(unsafe_code)]\nuse super::Parent;\n");
        w("gid/mod.rs", "use crate::abi::X;\n");
        w("bin/tool.rs", "use crate::cma::conn::Y;\n");
        w("rsocket/mod.rs", "#![deny(unsafe_code)]\npub mod a; pub mod b; pub use a::A;\n");
        w("rsocket/a.rs", "#![deny(unsafe_code)]\nuse super::b::B;\n");
        w("rsocket/b.rs", "#![deny(unsafe_code)]\nuse super::A;\n");
        let p = check(&dir);
        let _ = std::fs::remove_dir_all(&dir);
        let all = p.join("\n");
        assert!(all.contains("sys/mod.rs: upward import of `cma`"), "{all}");
        assert!(all.contains("import circle"), "{all}");
        assert!(all.contains("gid/mod.rs: domain module without"), "{all}");
        assert!(all.contains("cma/conn/mod.rs: names its ancestor `cma`"), "{all}");
        assert!(all.contains("cma/conn/qp.rs: names its ancestor `cma::conn`"), "{all}");
        assert!(!all.contains("abi/mod.rs"), "{all}");
        assert!(!all.contains("bin/tool.rs"), "{all}");
        assert!(!all.contains("addrinfo/sub.rs"), "{all}");
        assert!(!all.contains("cma/id.rs"), "{all}");
        // rsocket is strict too: a submodule naming its parent is reported;
        // the parent naming its children, and siblings one way, are fine.
        assert!(all.contains("rsocket/b.rs: names its ancestor `rsocket`"), "{all}");
        assert!(!all.contains("rsocket/a.rs") && !all.contains("rsocket/mod.rs"), "{all}");
        assert_eq!(p.len(), 6, "{all}");
    }
}
