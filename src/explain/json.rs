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

/// Parses one JSON document (RFC 8259; numbers without a fraction or an
/// exponent that fit an i64 become [`J::Int`]).  The error says where.
pub fn parse(text: &str) -> Result<J, String> {
    let mut p = Parser { b: text.as_bytes(), i: 0, depth: 0 };
    p.ws();
    let v = p.value()?;
    p.ws();
    if p.i != p.b.len() {
        return Err(format!("trailing data at byte {}", p.i));
    }
    Ok(v)
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
    depth: u32,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }
    fn err<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("{what} at byte {}", self.i))
    }
    fn eat(&mut self, c: u8) -> bool {
        if self.b.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn lit(&mut self, w: &str, v: J) -> Result<J, String> {
        if self.b[self.i..].starts_with(w.as_bytes()) {
            self.i += w.len();
            Ok(v)
        } else {
            self.err("unexpected character")
        }
    }
    fn value(&mut self) -> Result<J, String> {
        match self.b.get(self.i) {
            None => self.err("unexpected end"),
            Some(b'{') => self.nested(true),
            Some(b'[') => self.nested(false),
            Some(b'"') => Ok(J::Str(self.string()?)),
            Some(b't') => self.lit("true", J::Bool(true)),
            Some(b'f') => self.lit("false", J::Bool(false)),
            Some(b'n') => self.lit("null", J::Null),
            Some(_) => self.number(),
        }
    }
    fn nested(&mut self, obj: bool) -> Result<J, String> {
        self.depth += 1;
        if self.depth > 64 {
            return self.err("nested too deep");
        }
        self.i += 1;
        let (mut m, mut a) = (Vec::new(), Vec::new());
        self.ws();
        let close = if obj { b'}' } else { b']' };
        if !self.eat(close) {
            loop {
                self.ws();
                if obj {
                    if self.b.get(self.i) != Some(&b'"') {
                        return self.err("expected a key");
                    }
                    let k = self.string()?;
                    self.ws();
                    if !self.eat(b':') {
                        return self.err("expected ':'");
                    }
                    self.ws();
                    m.push((k, self.value()?));
                } else {
                    a.push(self.value()?);
                }
                self.ws();
                if self.eat(close) {
                    break;
                }
                if !self.eat(b',') {
                    return self.err("expected ',' or the end");
                }
            }
        }
        self.depth -= 1;
        Ok(if obj { J::Obj(m) } else { J::Arr(a) })
    }
    fn hex4(&mut self) -> Result<u32, String> {
        let h = self.b.get(self.i..self.i + 4).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u32::from_str_radix(h, 16).ok());
        match h {
            Some(v) => {
                self.i += 4;
                Ok(v)
            }
            None => self.err("bad \\u escape"),
        }
    }
    fn string(&mut self) -> Result<String, String> {
        self.i += 1;
        let mut out = Vec::new();
        loop {
            let Some(&c) = self.b.get(self.i) else { return self.err("unterminated string") };
            self.i += 1;
            match c {
                b'"' => break,
                b'\\' => {
                    let Some(&e) = self.b.get(self.i) else { return self.err("unterminated string") };
                    self.i += 1;
                    let ch = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let mut u = self.hex4()?;
                            if (0xd800..0xdc00).contains(&u) && self.b[self.i..].starts_with(b"\\u") {
                                self.i += 2;
                                let lo = self.hex4()?;
                                u = 0x10000 + ((u - 0xd800) << 10) + (lo.wrapping_sub(0xdc00) & 0x3ff);
                            }
                            char::from_u32(u).unwrap_or('\u{fffd}')
                        }
                        _ => return self.err("bad escape"),
                    };
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                }
                c if c < 0x20 => return self.err("control character in a string"),
                c => out.push(c),
            }
        }
        String::from_utf8(out).map_err(|_| format!("invalid UTF-8 before byte {}", self.i))
    }
    fn number(&mut self) -> Result<J, String> {
        let start = self.i;
        while self.i < self.b.len() && matches!(self.b[self.i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9') {
            self.i += 1;
        }
        let t = std::str::from_utf8(&self.b[start..self.i]).unwrap_or("");
        if t.is_empty() {
            return self.err("unexpected character");
        }
        if let Ok(i) = t.parse::<i64>() {
            return Ok(J::Int(i));
        }
        match t.parse::<f64>() {
            Ok(f) if f.is_finite() => Ok(J::Num(f)),
            _ => Err(format!("bad number {t:?} at byte {start}")),
        }
    }
}

impl J {
    /// The value as an integer (an integral number), if it is one.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            J::Int(i) => Some(*i),
            J::Num(f) if f.fract() == 0.0 => Some(*f as i64),
            _ => None,
        }
    }

    /// The value as a string, if it is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            J::Str(s) => Some(s),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsing() {
        let v = parse(r#" {"a": [1, -2.5, true, null, "x\"\u00e9\ud83d\ude00"], "b": {}} "#).unwrap();
        assert_eq!(v.get("a"), Some(&J::Arr(vec![J::Int(1), J::Num(-2.5), J::Bool(true), J::Null, J::Str("x\"é😀".into())])));
        assert_eq!(v.get("b"), Some(&J::obj()));
        let round = J::obj().with("k", "a\nb\u{1}").with("n", 12i64).with("l", vec![1i32]);
        assert_eq!(parse(&round.to_string()).unwrap(), round);
        for bad in ["", "{", "[1,]", "{\"a\" 1}", "\"\u{1}\"", "tru", "1 2", "{\"a\":1,}", "\"\\x\""] {
            assert!(parse(bad).is_err(), "{bad:?} parsed");
        }
        assert!(parse(&"[".repeat(100)).is_err());
    }

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
