// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The rsocket tunables: one number per file in upstream's configuration
//! directory (`/etc/rdma/rsocket`), read once, when the first rsocket is
//! made. A missing or unreadable file keeps the built-in default. For
//! tests, `RDMACM_RS_RSOCKET_CONF_DIR` (read with secure_getenv) names
//! another directory.
//!
//! The files and what they set (built-in default in brackets):
//! `polling_time` µs a waiting call busy-polls before it sleeps [10],
//! `wake_up_interval` ms rpoll sleeps at most before it looks again [500],
//! `inline_default` [64], `sqsize_default` [384], `rqsize_default` [384],
//! `mem_default` receive buffer bytes [128 KiB, at least 1],
//! `wmem_default` send buffer bytes [128 KiB, at least 4096],
//! `iomap_size` riomap table entries offered to the peer [0].
#![deny(unsafe_code)]

use std::path::PathBuf;
use std::sync::OnceLock;

/// Upstream's directory (RDMA_CONF_DIR "/rsocket").
const CONF_DIR: &str = "/etc/rdma/rsocket";
/// The test override of [`CONF_DIR`].
const CONF_DIR_ENV: &std::ffi::CStr = c"RDMACM_RS_RSOCKET_CONF_DIR";

/// The tunables (see the module comment).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conf {
    pub polling_time_us: u32,
    pub wake_up_interval_ms: i32,
    pub inline: u16,
    pub sqsize: u16,
    pub rqsize: u16,
    pub mem: u32,
    pub wmem: u32,
    pub iomap_size: u16,
}

impl Default for Conf {
    fn default() -> Conf {
        Conf { polling_time_us: 10, wake_up_interval_ms: 500, inline: 64, sqsize: 384, rqsize: 384, mem: 1 << 17, wmem: 1 << 17, iomap_size: 0 }
    }
}

/// The leading integer of a file as scanf's `%d`/`%u` reads it (leading
/// white space, an optional sign, digits); None without digits. Values
/// wrap to 64 bits, the callers truncate like the C conversions do.
fn leading_int(text: &str) -> Option<i64> {
    let t = text.trim_start();
    let (neg, rest) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let digits: &str = &rest[..rest.bytes().take_while(|b| b.is_ascii_digit()).count()];
    if digits.is_empty() {
        return None;
    }
    let mut v: i64 = 0;
    for b in digits.bytes() {
        v = v.wrapping_mul(10).wrapping_add((b - b'0') as i64);
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

impl Conf {
    /// Reads the files of `dir` over the defaults.
    pub fn read_from(dir: &std::path::Path) -> Conf {
        let mut c = Conf::default();
        let get = |name: &str| std::fs::read_to_string(dir.join(name)).ok().and_then(|t| leading_int(&t));
        if let Some(v) = get("polling_time") {
            c.polling_time_us = v as u32;
        }
        if let Some(v) = get("wake_up_interval") {
            c.wake_up_interval_ms = v as i32;
        }
        if let Some(v) = get("inline_default") {
            c.inline = v as u16;
        }
        if let Some(v) = get("sqsize_default") {
            c.sqsize = v as u16;
        }
        if let Some(v) = get("rqsize_default") {
            c.rqsize = v as u16;
        }
        if let Some(v) = get("mem_default") {
            c.mem = (v as u32).max(1);
        }
        if let Some(v) = get("wmem_default") {
            c.wmem = v as u32;
            if c.wmem < super::wire::RS_SNDLOWAT {
                c.wmem = super::wire::RS_SNDLOWAT << 1;
            }
        }
        if let Some(v) = get("iomap_size") {
            // Rounded to what the 8-bit scale of the connect data can carry,
            // by the same two conversions upstream applies.
            let t = super::wire::scale_to_value(v as u16 as u32, 8) as u16;
            c.iomap_size = super::wire::value_to_scale(t as u32, 8) as u8 as u16;
        }
        c
    }
}

/// The tunables of this process (read on first use).
pub fn get() -> &'static Conf {
    static CONF: OnceLock<Conf> = OnceLock::new();
    CONF.get_or_init(|| {
        let dir = crate::sys::env::var(CONF_DIR_ENV).map(PathBuf::from).unwrap_or_else(|| PathBuf::from(CONF_DIR));
        Conf::read_from(&dir)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scanf_like_numbers() {
        assert_eq!(leading_int("  42\n"), Some(42));
        assert_eq!(leading_int("-7"), Some(-7));
        assert_eq!(leading_int("+3x"), Some(3));
        assert_eq!(leading_int("x3"), None);
        assert_eq!(leading_int(""), None);
    }

    #[test]
    fn files_override_defaults() {
        let d = std::env::temp_dir().join(format!("rs-conf-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("dir");
        assert_eq!(Conf::read_from(&d), Conf::default());
        for (f, v) in [("polling_time", "0"), ("wake_up_interval", "20"), ("inline_default", "128"), ("sqsize_default", "70000"), ("rqsize_default", "32"), ("mem_default", "0"), ("wmem_default", "100"), ("iomap_size", "4096")] {
            std::fs::write(d.join(f), v).expect("write");
        }
        let c = Conf::read_from(&d);
        assert_eq!(c.polling_time_us, 0);
        assert_eq!(c.wake_up_interval_ms, 20);
        assert_eq!(c.inline, 128);
        assert_eq!(c.sqsize, 70000u32 as u16);
        assert_eq!(c.rqsize, 32);
        assert_eq!(c.mem, 1);
        assert_eq!(c.wmem, 4096);
        std::fs::write(d.join("iomap_size"), "64").expect("write");
        assert_eq!(Conf::read_from(&d).iomap_size, 64);
        let _ = std::fs::remove_dir_all(&d);
    }
}
