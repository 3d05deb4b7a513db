// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The two libraries under comparison and how a program is made to load each: by path,
//! through LD_LIBRARY_PATH in the child's environment only (the installed library is
//! never touched).  Which file the loader really picks is checked with ldd before any
//! case runs, and told apart by content: ours defines the version node RDMACM_RS_1.0.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Clone, Debug)]
pub struct Lib {
    /// "upstream" or "ours"
    pub name: &'static str,
    /// LD_LIBRARY_PATH for the programs (None: the loader's own search, no variable).
    pub dir: Option<PathBuf>,
    /// The librdmacm.so.1 the loader resolves with that environment.
    pub resolved: PathBuf,
    /// The library's own librspreload.so, when it has one.
    pub preload: Option<PathBuf>,
    /// more environment for this side's programs (--env-ours)
    pub env: Vec<(String, String)>,
}

impl Lib {
    /// "upstream's library" / "our library"
    pub fn called(&self) -> &'static str {
        if self.name == "ours" {
            "our library"
        } else {
            "upstream's library"
        }
    }

    /// The environment a program of this side runs with: the caller's, without any
    /// LD_LIBRARY_PATH / LD_PRELOAD of its own, plus this side's directory.
    pub fn apply(&self, cmd: &mut Command) {
        cmd.env_remove("LD_LIBRARY_PATH").env_remove("LD_PRELOAD");
        if let Some(d) = &self.dir {
            cmd.env("LD_LIBRARY_PATH", d);
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
    }
}

/// PATH lookup.
pub fn which(prog: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
}

/// The librdmacm.so.1 that `ldd PROG` resolves with LD_LIBRARY_PATH=dir (or none).
pub fn resolve(prog: &Path, dir: Option<&Path>) -> Result<PathBuf, String> {
    let mut c = Command::new("ldd");
    c.arg(prog)
        .env_remove("LD_LIBRARY_PATH")
        .env_remove("LD_PRELOAD");
    if let Some(d) = dir {
        c.env("LD_LIBRARY_PATH", d);
    }
    let out = c.output().map_err(|e| format!("cannot run ldd: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    for line in text.lines() {
        let l = line.trim();
        if !l.starts_with("librdmacm.so.1 ") {
            continue;
        }
        let Some((_, rest)) = l.split_once("=> ") else {
            continue;
        };
        let path = rest.split_whitespace().next().unwrap_or("");
        if path == "not" || path.is_empty() {
            return Err(format!("{} finds no librdmacm.so.1", prog.display()));
        }
        return fs::canonicalize(path).map_err(|e| format!("{path}: {e}"));
    }
    Err(format!(
        "{} is not linked with librdmacm.so.1 (ldd)",
        prog.display()
    ))
}

/// Ours defines the symbol version RDMACM_RS_1.0 (for ibv_gid_reachable); upstream's
/// library does not.
pub fn is_ours(lib: &Path) -> bool {
    let needle = b"RDMACM_RS_1.0";
    fs::read(lib)
        .map(|b| b.windows(needle.len()).any(|w| w == needle))
        .unwrap_or(false)
}

/// librspreload.so beside a librdmacm (rdma-core and our packages: LIBDIR/rsocket/).
pub fn preload_of(resolved: &Path, dir: Option<&Path>) -> Option<PathBuf> {
    let mut cands = Vec::new();
    if let Some(d) = dir {
        cands.push(d.join("rsocket/librspreload.so"));
    }
    if let Some(d) = resolved.parent() {
        cands.push(d.join("rsocket/librspreload.so"));
    }
    cands.into_iter().find(|p| p.is_file())
}

/// A directory given on the command line: it must hold librdmacm.so.1.
pub fn check_dir(opt: &str, d: &Path) -> Result<PathBuf, String> {
    let d = fs::canonicalize(d).map_err(|e| format!("{opt} {}: {e}", d.display()))?;
    if !d.join("librdmacm.so.1").exists() {
        return Err(format!("{opt} {}: no librdmacm.so.1 there", d.display()));
    }
    Ok(d)
}

/// This build's library directory, when the checker runs from the build tree
/// (target/release/rdmacm-rs-check -> build/lib).
pub fn build_tree_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let root = exe.parent()?.parent()?.parent()?;
    let d = root.join("build/lib");
    d.join("librdmacm.so.1").exists().then_some(d)
}
