// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The library's environment: every variable it reads, read one way.
//!
//! [`var`] is the only door to the environment (a source check in the tests
//! below fails on any other `getenv`/`std::env::var` under `src/`).  It goes
//! through `secure_getenv(3)`, so a setuid, setgid or file-capability
//! program linked against the library sees none of them, as it sees none of
//! upstream's (which reads none).  [`open_log_file`] opens the diagnostics
//! file the way a file named by an untrusted party must be opened.

use std::ffi::{CStr, OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::unix::fs::OpenOptionsExt;

/// Every variable the library reads, with what it does (docs/behaviour.md lists them).
pub const VARIABLES: &[(&str, &str)] = &[
    ("RDMACM_RS_LOG", "diagnostics level: error, warn, info, debug or trace; unset or off: no output"),
    ("RDMACM_RS_LOG_FILE", "append the diagnostics to this file instead of stderr"),
    ("RDMACM_RS_TRACE", "trace every CM step and event, one JSON line each, to PREFIX.PID.jsonl (docs/trace.md)"),
    ("RDMACM_RS_FORCE_LEGACY_UCMA", "test hook: keep the ucma device's legacy command family"),
    ("RDMACM_RS_IBACM_RUNDIR", "directory holding ibacm's socket (ibacm-addr.sock) instead of /run"),
    ("RDMACM_RS_RSOCKET_CONF_DIR", "test hook: directory of the rsocket tunables instead of /etc/rdma/rsocket"),
    ("SYSFS_PATH", "where sysfs is mounted (as libibverbs), for the ucma ABI version when netlink gives none"),
];

/// The value of environment variable `name`, or None when it is unset or
/// the process is privileged (setuid, setgid, capabilities: glibc's
/// secure-execution mode).
pub fn var(name: &CStr) -> Option<OsString> {
    super::unix::secure_getenv(name)
}

/// Opens (appending) the file `path` names for diagnostics: never through a
/// symbolic link in its last component (O_NOFOLLOW), never inherited across
/// exec (O_CLOEXEC), created with mode 0600 (before the umask) when absent.
pub fn open_log_file(path: &OsStr) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn log_file_no_symlink_and_mode() {
        let dir = std::env::temp_dir().join(format!("rdmacm-env-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let target = dir.join("target");
        let link = dir.join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = open_log_file(link.as_os_str()).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP));
        assert!(!target.exists(), "a symlink was followed");
        let f = dir.join("log");
        drop(open_log_file(f.as_os_str()).unwrap());
        let mode = std::fs::metadata(&f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & !0o600, 0, "log file created with mode {mode:o}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// No environment read under src/ or capi/src (the C API crate) but
    /// through `var` (unix.rs holds the one secure_getenv call; this file
    /// names the forbidden forms).
    #[test]
    fn only_secure_getenv() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut bad = Vec::new();
        let mut stack = vec![root.join("src"), root.join("capi/src")];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                    continue;
                }
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                if name == "env.rs" && p.parent().unwrap().ends_with("sys") {
                    continue;
                }
                let text = std::fs::read_to_string(&p).unwrap_or_default();
                for (i, line) in text.lines().enumerate() {
                    let code = line.split("//").next().unwrap();
                    // std's readers, libc's, and a hand-written extern declaration.
                    let extern_getenv = code.contains("fn getenv(") && code.contains("c_char");
                    let forbidden = ["std::env::var", "env::var_os", "env::vars", "libc::getenv", "__libc_getenv"];
                    if extern_getenv || forbidden.iter().any(|f| code.contains(f)) {
                        bad.push(format!("{}:{}: {}", p.display(), i + 1, line.trim()));
                    }
                }
            }
        }
        assert!(bad.is_empty(), "environment read without secure_getenv:\n{}", bad.join("\n"));
    }

    #[test]
    fn variables_are_documented() {
        // docs/behaviour.md, "Environment variables": a table row per variable.
        let page = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/behaviour.md");
        let doc = std::fs::read_to_string(&page).unwrap();
        for (v, _) in VARIABLES {
            assert!(doc.contains(&format!("| `{v}` |")), "{} has no row for {v}", page.display());
        }
    }
}
