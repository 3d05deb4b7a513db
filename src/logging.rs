// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Diagnostics, off by default.
//!
//! Nothing is ever written to stdout or stderr unless the environment
//! variable `RDMACM_RS_LOG` is set (to `error`, `warn`, `info`, `debug` or
//! `trace`; any other non-empty value means `debug`).  With it unset the
//! library's output is byte-identical to upstream's.  Set
//! `RDMACM_RS_LOG_FILE` to send the messages to a file instead of stderr.
//! Both are read through the caller's `read_var` (the C API passes
//! `sys::env::var`, i.e. secure_getenv: a setuid or file-capability program
//! never logs), and the file is opened through the caller's `open` (which
//! follows no symbolic link and creates with mode 0600).

use std::ffi::{CStr, OsStr, OsString};
use std::fs::File;
use std::io::Write;

use log::{LevelFilter, Log, Metadata, Record};
use std::sync::OnceLock;
use parking_lot::Mutex;

struct Logger {
    level: LevelFilter,
    out: Mutex<Box<dyn Write + Send>>,
    /// Runs a write without acting on a thread cancellation (the C API
    /// passes sys::cancel's): writes are cancellation points of libc, and
    /// a log line may be written on paths that do not disable it.
    shield: fn(&mut dyn FnMut()),
}

impl Log for Logger {
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        m.level() <= self.level && m.target().starts_with("rdmacm")
    }
    fn log(&self, r: &Record<'_>) {
        if self.enabled(r.metadata()) {
            (self.shield)(&mut || {
                let mut out = self.out.lock();
                let _ = writeln!(out, "rdmacm-rs[{}] {}: {}", std::process::id(), r.level(), r.args());
            });
        }
    }
    fn flush(&self) {
        (self.shield)(&mut || {
            let _ = self.out.lock().flush();
        });
    }
}

static INIT: OnceLock<()> = OnceLock::new();

fn parse_level(v: &str) -> LevelFilter {
    match v.to_ascii_lowercase().as_str() {
        "error" => LevelFilter::Error,
        "warn" => LevelFilter::Warn,
        "info" => LevelFilter::Info,
        "trace" => LevelFilter::Trace,
        "off" | "0" | "" => LevelFilter::Off,
        _ => LevelFilter::Debug,
    }
}

/// Installs the logger the first time it is called, if `RDMACM_RS_LOG` (as
/// `read_var` reads it) asks for one; `open` opens `RDMACM_RS_LOG_FILE`
/// (stderr when it is unset or cannot be opened).  Cheap after the first
/// call.
pub fn init(read_var: fn(&CStr) -> Option<OsString>, open: fn(&OsStr) -> std::io::Result<File>, shield: fn(&mut dyn FnMut())) {
    INIT.get_or_init(|| {
        let Some(v) = read_var(c"RDMACM_RS_LOG") else { return };
        let level = parse_level(&v.to_string_lossy());
        if level == LevelFilter::Off {
            return;
        }
        let out: Box<dyn Write + Send> = match read_var(c"RDMACM_RS_LOG_FILE").and_then(|p| open(&p).ok()) {
            Some(f) => Box::new(f),
            None => Box::new(std::io::stderr()),
        };
        let logger = Box::leak(Box::new(Logger { level, out: Mutex::new(out), shield }));
        // A host program may already have a `log` logger; then we stay quiet.
        if log::set_logger(logger).is_ok() {
            log::set_max_level(level);
        }
    });
}

/// Unit tests: the warnings of the `rdmacm` targets, kept in memory (the
/// first call installs the logger for the test binary).
#[cfg(test)]
pub mod capture {
    use super::*;

    struct Capture(Mutex<Vec<String>>);

    impl Log for Capture {
        fn enabled(&self, m: &Metadata<'_>) -> bool {
            m.level() <= log::Level::Warn && m.target().starts_with("rdmacm")
        }
        fn log(&self, r: &Record<'_>) {
            if self.enabled(r.metadata()) {
                self.0.lock().push(format!("{}", r.args()));
            }
        }
        fn flush(&self) {}
    }

    static CAPTURE: OnceLock<&'static Capture> = OnceLock::new();

    /// Starts capturing (once per test binary).
    pub fn start() {
        CAPTURE.get_or_init(|| {
            let c: &'static Capture = Box::leak(Box::new(Capture(Mutex::new(Vec::new()))));
            log::set_logger(c).expect("no other logger in unit tests");
            log::set_max_level(LevelFilter::Warn);
            c
        });
    }

    /// The warnings captured so far that contain `s`.
    pub fn lines_with(s: &str) -> Vec<String> {
        CAPTURE.get().map(|c| c.0.lock().iter().filter(|l| l.contains(s)).cloned().collect()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn levels() {
        assert_eq!(parse_level("warn"), LevelFilter::Warn);
        assert_eq!(parse_level("yes"), LevelFilter::Debug);
        assert_eq!(parse_level("off"), LevelFilter::Off);
    }
}
