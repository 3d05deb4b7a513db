// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! What the library reads once per process: the environment (RS_SQ_SIZE,
//! RS_RQ_SIZE, RS_INLINE, RDMAV_FORK_SAFE, through secure_getenv) and
//! /etc/rdma/rsocket/preload_config, which limits which programs and which
//! kinds of sockets are taken over (see man/rspreload.7 for the format).

use std::ffi::CStr;
use std::os::raw::c_char;

/// Where upstream's preload library reads its configuration.
pub const CONFIG_FILE: &str = "/etc/rdma/rsocket/preload_config";

/// One line of preload_config; `None` fields are wildcards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub program: Option<String>,
    pub domain: Option<i32>,
    pub type_: Option<i32>,
    pub protocol: Option<i32>,
}

#[derive(Clone, Debug, Default)]
pub struct Config {
    pub sq_size: i32,
    pub rq_size: i32,
    pub inline: i32,
    pub fork: bool,
    /// RDMACM_RS_LOG set: the library says on stderr what it does with
    /// each socket and with fork-mode sockets (off otherwise, like the
    /// main library's logging).
    pub trace: bool,
    pub rules: Vec<Rule>,
}

/// C's atoi: optional blanks and sign, then digits; anything else ends it
/// (no digits: 0).
pub fn atoi(s: &str) -> i32 {
    let s = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut v: i64 = 0;
    for b in digits.bytes().take_while(u8::is_ascii_digit) {
        v = (v * 10 + i64::from(b - b'0')).min(i64::from(u32::MAX) + 1);
    }
    (if neg { -v } else { v }) as i32
}

fn word(field: &str, names: &[(&str, i32)]) -> Option<Option<i32>> {
    if field == "*" {
        return Some(None);
    }
    names.iter().find(|(n, _)| n.eq_ignore_ascii_case(field)).map(|&(_, v)| Some(v))
}

/// Parses preload_config: one rule per line, `program domain type protocol`;
/// `#` at the start of a line makes it a comment; a line without four
/// fields or with an unknown word is ignored.
pub fn parse_rules(text: &str) -> Vec<Rule> {
    const DOMAINS: &[(&str, i32)] = &[
        ("INET", libc::AF_INET),
        ("AF_INET", libc::AF_INET),
        ("PF_INET", libc::AF_INET),
        ("INET6", libc::AF_INET6),
        ("AF_INET6", libc::AF_INET6),
        ("PF_INET6", libc::AF_INET6),
        ("IB", libc::AF_IB),
        ("AF_IB", libc::AF_IB),
        ("PF_IB", libc::AF_IB),
    ];
    const TYPES: &[(&str, i32)] =
        &[("STREAM", libc::SOCK_STREAM), ("SOCK_STREAM", libc::SOCK_STREAM), ("DGRAM", libc::SOCK_DGRAM), ("SOCK_DGRAM", libc::SOCK_DGRAM)];
    const PROTOS: &[(&str, i32)] =
        &[("TCP", libc::IPPROTO_TCP), ("IPPROTO_TCP", libc::IPPROTO_TCP), ("UDP", libc::IPPROTO_UDP), ("IPPROTO_UDP", libc::IPPROTO_UDP)];
    let mut rules = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = line.split_ascii_whitespace().take(4).collect();
        let [prog, dom, typ, proto] = f[..] else { continue };
        let (Some(domain), Some(type_), Some(protocol)) = (word(dom, DOMAINS), word(typ, TYPES), word(proto, PROTOS)) else {
            continue;
        };
        // upstream reads the program name into 63 characters
        let program = (prog != "*").then(|| prog.chars().take(63).collect());
        rules.push(Rule { program, domain, type_, protocol });
    }
    rules
}

impl Config {
    /// Whether a socket(domain, type, protocol) call of program `prog` is
    /// to be tried as an rsocket.  No rules: every socket is.
    pub fn intercepts(&self, prog: &str, domain: i32, type_: i32, protocol: i32) -> bool {
        if self.rules.is_empty() {
            return true;
        }
        let type_ = type_ & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
        let protocol = match (protocol, type_) {
            (0, libc::SOCK_STREAM) => libc::IPPROTO_TCP,
            (0, libc::SOCK_DGRAM) => libc::IPPROTO_UDP,
            (p, _) => p,
        };
        self.rules.iter().any(|r| {
            // a rule's program name matches every program name it begins, ignoring case
            r.program.as_deref().is_none_or(|n| {
                prog.len() >= n.len() && prog.as_bytes()[..n.len()].eq_ignore_ascii_case(n.as_bytes())
            }) && r.domain.is_none_or(|d| d == domain)
                && r.type_.is_none_or(|t| t == type_)
                && r.protocol.is_none_or(|p| p == protocol)
        })
    }
}

fn env(name: &CStr) -> Option<String> {
    // SAFETY: name is NUL-terminated; secure_getenv returns NULL or a
    // NUL-terminated string owned by the environment, copied at once.
    let p = unsafe { secure_getenv(name.as_ptr()) };
    // SAFETY: p is non-NULL and NUL-terminated (above).
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

extern "C" {
    static program_invocation_short_name: *const c_char;
    fn secure_getenv(name: *const c_char) -> *mut c_char;
}

/// The program's short name (glibc's program_invocation_short_name).
pub fn program_name() -> String {
    // SAFETY: glibc sets this pointer before main to a NUL-terminated
    // string that lives for the whole process.
    let p = unsafe { program_invocation_short_name };
    if p.is_null() {
        return String::new();
    }
    // SAFETY: p is non-NULL and NUL-terminated (above).
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// Reads the environment and the configuration file.
pub fn load() -> Config {
    let num = |n: &CStr| env(n).map_or(0, |v| atoi(&v));
    Config {
        sq_size: num(c"RS_SQ_SIZE"),
        rq_size: num(c"RS_RQ_SIZE"),
        inline: num(c"RS_INLINE"),
        fork: num(c"RDMAV_FORK_SAFE") != 0,
        trace: env(c"RDMACM_RS_LOG").is_some(),
        rules: std::fs::read(CONFIG_FILE).map(|b| parse_rules(&String::from_utf8_lossy(&b))).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atoi_like_c() {
        assert_eq!(atoi("64"), 64);
        assert_eq!(atoi("  -3x"), -3);
        assert_eq!(atoi("x"), 0);
        assert_eq!(atoi(""), 0);
        assert_eq!(atoi("+12 "), 12);
    }

    #[test]
    fn rules_parse_and_match() {
        let r = parse_rules(
            "# comment\n\
             iperf inet stream tcp\n\
             * AF_INET6 * *\n\
             bad INET STREAM SCTP\n\
             short INET\n\
             socat * DGRAM UDP\n",
        );
        assert_eq!(r.len(), 3);
        assert_eq!(r[0], Rule { program: Some("iperf".into()), domain: Some(libc::AF_INET), type_: Some(libc::SOCK_STREAM), protocol: Some(libc::IPPROTO_TCP) });
        assert_eq!(r[1], Rule { program: None, domain: Some(libc::AF_INET6), type_: None, protocol: None });
        let c = Config { rules: r, ..Config::default() };
        assert!(c.intercepts("iperf3", libc::AF_INET, libc::SOCK_STREAM, 0));
        assert!(c.intercepts("IPERF", libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, libc::IPPROTO_TCP));
        assert!(!c.intercepts("iper", libc::AF_INET, libc::SOCK_STREAM, 0));
        assert!(!c.intercepts("iperf3", libc::AF_INET, libc::SOCK_DGRAM, 0));
        assert!(c.intercepts("anything", libc::AF_INET6, libc::SOCK_DGRAM, 0));
        assert!(c.intercepts("socat", libc::AF_INET, libc::SOCK_DGRAM, 0));
        assert!(!c.intercepts("socat", libc::AF_INET, libc::SOCK_STREAM, 0));
        assert!(Config::default().intercepts("x", libc::AF_UNIX, libc::SOCK_STREAM, 0));
    }
}
