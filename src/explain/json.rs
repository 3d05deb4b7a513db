// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! A small JSON value for the explainer's report: built in order, printed
//! with RFC 8259 escaping (no dependency for one document).
#![deny(unsafe_code)]

use std::fmt::Write;

/// A JSON value; objects keep their keys in insertion order.
#[derive(Clone, Debug, PartialEq)]
pub enum J {
    Null,
    Bool(bool),
    Int(i64),
    Num(f64),
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
}

impl J {
    /// An empty object.
    pub fn obj() -> J {
        J::Obj(Vec::new())
    }

    /// Adds (or replaces) a key of an object; no effect on other values.
    pub fn set(&mut self, k: &str, v: impl Into<J>) -> &mut J {
        if let J::Obj(m) = self {
            let v = v.into();
            match m.iter_mut().find(|(key, _)| key == k) {
                Some(e) => e.1 = v,
                None => m.push((k.to_string(), v)),
            }
        }
        self
    }

    /// Builder form of [`J::set`].
    pub fn with(mut self, k: &str, v: impl Into<J>) -> J {
        self.set(k, v);
        self
    }

    /// A key of an object.
    pub fn get(&self, k: &str) -> Option<&J> {
        match self {
            J::Obj(m) => m.iter().find(|(key, _)| key == k).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The value as text, for the human-readable report.
    pub fn plain(&self) -> String {
        match self {
            J::Str(s) => s.clone(),
            J::Null => "-".into(),
            J::Arr(a) => a.iter().map(J::plain).collect::<Vec<_>>().join(", "),
            J::Obj(m) => m.iter().map(|(k, v)| format!("{k}={}", v.plain())).collect::<Vec<_>>().join(" "),
            other => other.to_string(),
        }
    }
}

fn escape(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn write_to(v: &J, out: &mut String, indent: usize) {
    let pad = |n: usize| "  ".repeat(n);
    match v {
        J::Null => out.push_str("null"),
        J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        J::Int(i) => {
            let _ = write!(out, "{i}");
        }
        J::Num(f) if f.is_finite() => {
            let _ = write!(out, "{f}");
        }
        J::Num(_) => out.push_str("null"),
        J::Str(s) => escape(s, out),
        J::Arr(a) if a.is_empty() => out.push_str("[]"),
        J::Arr(a) => {
            out.push_str("[\n");
            for (i, x) in a.iter().enumerate() {
                out.push_str(&pad(indent + 1));
                write_to(x, out, indent + 1);
                out.push_str(if i + 1 < a.len() { ",\n" } else { "\n" });
            }
            out.push_str(&pad(indent));
            out.push(']');
        }
        J::Obj(m) if m.is_empty() => out.push_str("{}"),
        J::Obj(m) => {
            out.push_str("{\n");
            for (i, (k, x)) in m.iter().enumerate() {
                out.push_str(&pad(indent + 1));
                escape(k, out);
                out.push_str(": ");
                write_to(x, out, indent + 1);
                out.push_str(if i + 1 < m.len() { ",\n" } else { "\n" });
            }
            out.push_str(&pad(indent));
            out.push('}');
        }
    }
}

impl std::fmt::Display for J {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut s = String::new();
        write_to(self, &mut s, 0);
        f.write_str(&s)
    }
}

impl From<&str> for J {
    fn from(s: &str) -> J {
        J::Str(s.to_string())
    }
}
impl From<String> for J {
    fn from(s: String) -> J {
        J::Str(s)
    }
}
impl From<bool> for J {
    fn from(b: bool) -> J {
        J::Bool(b)
    }
}
impl From<f64> for J {
    fn from(f: f64) -> J {
        J::Num(f)
    }
}
macro_rules! ints {
    ($($t:ty),*) => { $(impl From<$t> for J { fn from(i: $t) -> J { J::Int(i as i64) } })* };
}
ints!(i32, i64, u8, u16, u32, usize);
impl<T: Into<J>> From<Option<T>> for J {
    fn from(o: Option<T>) -> J {
        o.map_or(J::Null, Into::into)
    }
}
impl<T: Into<J>> From<Vec<T>> for J {
    fn from(v: Vec<T>) -> J {
        J::Arr(v.into_iter().map(Into::into).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping() {
        let v = J::obj().with("a\"b", "x\\y\n\u{1}é").with("n", J::Null).with("l", vec![1i32, 2]);
        let s = v.to_string();
        assert!(s.contains(r#""a\"b": "x\\y\n\u0001é""#), "{s}");
        assert!(s.contains("\"n\": null"), "{s}");
        assert!(s.contains("\"l\": [\n"), "{s}");
        assert_eq!(J::Num(f64::NAN).to_string(), "null");
    }
}
