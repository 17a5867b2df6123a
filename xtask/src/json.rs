//! Just enough JSON to read `cargo metadata` and `cargo … --message-format=json`.
//!
//! The xtask keeps `anyhow` as its only dependency (our choice, see `main.rs`: every dependency
//! is compiled before any `cargo xtask` task can start), and reading cargo's well-formed output
//! takes a hundred lines, far less to build than a JSON crate. Numbers are recognised but not
//! kept: nothing here needs them.

use anyhow::{Context, Result, bail};

/// A parsed JSON value. Object keys keep their order; lookups are linear, which is plenty for
/// cargo's small objects.
#[derive(Debug, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Number,
    String(String),
    Array(Vec<Value>),
    Object(Vec<(String, Value)>),
}

impl Value {
    /// The member `key` of an object; `None` for a missing key or a non-object.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(members) => members.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The elements of an array; empty for anything else.
    pub fn items(&self) -> &[Value] {
        match self {
            Value::Array(items) => items,
            _ => &[],
        }
    }
}

/// Parses one JSON document (surrounding whitespace allowed).
pub fn parse(text: &str) -> Result<Value> {
    let mut parser = Parser {
        bytes: text.as_bytes(),
        pos: 0,
    };
    let value = parser
        .value()
        .with_context(|| format!("at byte {}", parser.pos))?;
    parser.skip_whitespace();
    if parser.pos != parser.bytes.len() {
        bail!(
            "trailing characters after JSON value at byte {}",
            parser.pos
        );
    }
    Ok(value)
}

struct Parser<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn value(&mut self) -> Result<Value> {
        self.skip_whitespace();
        match self.peek() {
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'"') => Ok(Value::String(self.string()?)),
            Some(b't') => self.literal("true", Value::Bool(true)),
            Some(b'f') => self.literal("false", Value::Bool(false)),
            Some(b'n') => self.literal("null", Value::Null),
            Some(b'-' | b'0'..=b'9') => {
                while matches!(
                    self.peek(),
                    Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                ) {
                    self.pos += 1;
                }
                Ok(Value::Number)
            }
            Some(other) => bail!("unexpected character {:?}", other as char),
            None => bail!("unexpected end of input"),
        }
    }

    fn object(&mut self) -> Result<Value> {
        self.expect(b'{')?;
        let mut members = Vec::new();
        self.skip_whitespace();
        if self.eat(b'}') {
            return Ok(Value::Object(members));
        }
        loop {
            self.skip_whitespace();
            let key = self.string()?;
            self.skip_whitespace();
            self.expect(b':')?;
            members.push((key, self.value()?));
            self.skip_whitespace();
            if self.eat(b'}') {
                return Ok(Value::Object(members));
            }
            self.expect(b',')?;
        }
    }

    fn array(&mut self) -> Result<Value> {
        self.expect(b'[')?;
        let mut items = Vec::new();
        self.skip_whitespace();
        if self.eat(b']') {
            return Ok(Value::Array(items));
        }
        loop {
            items.push(self.value()?);
            self.skip_whitespace();
            if self.eat(b']') {
                return Ok(Value::Array(items));
            }
            self.expect(b',')?;
        }
    }

    fn string(&mut self) -> Result<String> {
        self.expect(b'"')?;
        let mut out = String::new();
        loop {
            let start = self.pos;
            while !matches!(self.peek(), Some(b'"' | b'\\') | None) {
                self.pos += 1;
            }
            out.push_str(std::str::from_utf8(&self.bytes[start..self.pos])?);
            match self.next() {
                Some(b'"') => return Ok(out),
                Some(b'\\') => {}
                _ => bail!("unterminated string"),
            }
            let escaped = match self.next() {
                Some(b'"') => '"',
                Some(b'\\') => '\\',
                Some(b'/') => '/',
                Some(b'b') => '\u{8}',
                Some(b'f') => '\u{c}',
                Some(b'n') => '\n',
                Some(b'r') => '\r',
                Some(b't') => '\t',
                Some(b'u') => self.unicode_escape()?,
                _ => bail!("invalid escape in string"),
            };
            out.push(escaped);
        }
    }

    /// The character of a `\uXXXX` escape (the `\u` already read), joining surrogate pairs.
    fn unicode_escape(&mut self) -> Result<char> {
        let high = self.hex4()?;
        let code = if (0xd800..0xdc00).contains(&high) {
            if !(self.eat(b'\\') && self.eat(b'u')) {
                bail!("unpaired surrogate in string");
            }
            let low = self.hex4()?;
            0x10000 + ((high - 0xd800) << 10) + (low.wrapping_sub(0xdc00) & 0x3ff)
        } else {
            high
        };
        char::from_u32(code).context("invalid \\u escape in string")
    }

    fn hex4(&mut self) -> Result<u32> {
        let digits = self
            .bytes
            .get(self.pos..self.pos + 4)
            .context("short \\u escape")?;
        self.pos += 4;
        Ok(u32::from_str_radix(std::str::from_utf8(digits)?, 16)?)
    }

    fn literal(&mut self, word: &str, value: Value) -> Result<Value> {
        if !self.bytes[self.pos..].starts_with(word.as_bytes()) {
            bail!("expected `{word}`");
        }
        self.pos += word.len();
        Ok(value)
    }

    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let byte = self.peek()?;
        self.pos += 1;
        Some(byte)
    }

    fn eat(&mut self, byte: u8) -> bool {
        let matched = self.peek() == Some(byte);
        if matched {
            self.pos += 1;
        }
        matched
    }

    fn expect(&mut self, byte: u8) -> Result<()> {
        if !self.eat(byte) {
            bail!("expected `{}`", byte as char);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_cargo_artifact_message() {
        let line = r#"{"reason":"compiler-artifact","package_id":"path+file:///w/host-crate#ferrocuda@0.1.0","target":{"kind":["bin"],"name":"ferrocuda","test":true},"profile":{"opt_level":"3","test":false},"features":[],"executable":"/w/target/release/ferrocuda","fresh":true,"n":-1.5e3,"x":null}"#;
        let value = parse(line).unwrap();
        assert_eq!(
            value.get("reason").and_then(Value::as_str),
            Some("compiler-artifact")
        );
        let target = value.get("target").unwrap();
        assert_eq!(target.get("kind").unwrap().items()[0].as_str(), Some("bin"));
        assert_eq!(
            value
                .get("profile")
                .and_then(|p| p.get("test"))
                .and_then(Value::as_bool),
            Some(false)
        );
        assert_eq!(value.get("x"), Some(&Value::Null));
        assert_eq!(value.get("n"), Some(&Value::Number));
    }

    #[test]
    fn decodes_string_escapes() {
        let value = parse(r#""a\"b\\c\/d\n\u00e9\ud83d\ude00""#).unwrap();
        assert_eq!(value.as_str(), Some("a\"b\\c/d\né😀"));
    }

    #[test]
    fn rejects_truncated_input() {
        assert!(parse(r#"{"a":[1,2"#).is_err());
        assert!(parse(r#"{"a":1} x"#).is_err());
    }
}
