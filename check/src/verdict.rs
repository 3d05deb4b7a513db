// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! What a run of a case did and the verdict on a pair of runs: each side's outcome, the
//! verdict words the table prints, and how two outputs are made comparable and told apart.

use crate::run::End;

/// What one side's run of a case did.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub client: End,
    pub server: Option<End>,
    pub ms: u128,
    /// normalised output (compared cases)
    pub output: String,
    /// why it failed, in one line (empty when it passed)
    pub why: String,
    pub note: String,
}

impl Outcome {
    pub fn ok(&self) -> bool {
        self.why.is_empty()
    }
    pub fn timed_out(&self) -> bool {
        self.client == End::Timeout || self.server == Some(End::Timeout)
    }
    pub fn cell(&self) -> String {
        if self.ok() {
            "pass".into()
        } else if self.client == End::Killed && crate::run::stopping() {
            "stopped".into()
        } else if self.client == End::Timeout || self.server == Some(End::Timeout) {
            "timeout".into()
        } else {
            "fail".into()
        }
    }
}

#[derive(Clone, Debug)]
pub enum Verdict {
    /// both passed and, where compared, printed the same
    Agree,
    /// upstream passed, ours did not, or printed something else: counted
    Differ(String),
    /// upstream failed too: reported, not counted
    BothFail(String),
    /// ours passed where upstream failed: reported, not counted
    OursOnly,
    /// a case only ours can run (no upstream call): reported, not counted
    Info(String),
    Skip(String),
    Stopped,
}

impl Verdict {
    pub fn word(&self) -> &'static str {
        match self {
            Verdict::Agree => "AGREE",
            Verdict::Differ(_) => "DIFFER",
            Verdict::BothFail(_) => "BOTH-FAIL",
            Verdict::OursOnly => "OURS-ONLY",
            Verdict::Info(_) => "INFO",
            Verdict::Skip(_) => "SKIP",
            Verdict::Stopped => "STOPPED",
        }
    }
    pub fn counted(&self) -> bool {
        matches!(self, Verdict::Differ(_))
    }
    pub fn note(&self) -> String {
        match self {
            Verdict::Differ(s) | Verdict::BothFail(s) | Verdict::Info(s) | Verdict::Skip(s) => {
                s.clone()
            }
            Verdict::OursOnly => "ours passes where upstream fails".into(),
            Verdict::Stopped => "interrupted".into(),
            Verdict::Agree => String::new(),
        }
    }
}

pub struct Row {
    pub case: &'static str,
    pub port: String,
    pub upstream: Option<Outcome>,
    pub ours: Option<Outcome>,
    pub verdict: Verdict,
}

/// Masks what differs from run to run and says nothing about the library: the case's port
/// number and pointers.
pub fn normalise(s: &str, port: u16) -> String {
    let ps = port.to_string();
    let mut out = String::new();
    for line in s.lines() {
        let mut l = String::new();
        for w in line.split_inclusive(|c: char| !c.is_ascii_alphanumeric()) {
            let (word, sep) = match w.char_indices().last() {
                Some((i, c)) if !c.is_ascii_alphanumeric() => (&w[..i], &w[i..]),
                _ => (w, ""),
            };
            if word == ps {
                l.push_str("PORT");
            } else if word.starts_with("0x") && word.len() > 2 {
                l.push_str("0xADDR");
            } else {
                l.push_str(word);
            }
            l.push_str(sep);
        }
        out.push_str(&l);
        out.push('\n');
    }
    out
}

/// The first line that says what went wrong: an error, a failure or an event name.
pub fn first_error(texts: &[&str]) -> String {
    let keys = [
        "error",
        "fail",
        "unable",
        "RDMA_CM_EVENT",
        "errno",
        "refused",
        "timed out",
        "timeout",
        "unreachable",
    ];
    for t in texts {
        for l in t.lines() {
            let low = l.to_ascii_lowercase();
            if keys.iter().any(|k| low.contains(&k.to_ascii_lowercase())) {
                return l.trim().chars().take(160).collect();
            }
        }
    }
    texts
        .iter()
        .flat_map(|t| t.lines())
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .chars()
        .take(160)
        .collect()
}

pub fn first_diff(a: &str, b: &str) -> String {
    for (x, y) in a.lines().zip(b.lines()) {
        if x != y {
            return format!("upstream '{}', ours '{}'", x.trim(), y.trim());
        }
    }
    format!(
        "upstream {} lines, ours {} lines",
        a.lines().count(),
        b.lines().count()
    )
}
