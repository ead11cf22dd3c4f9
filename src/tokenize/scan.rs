//! Just enough of a JSON reader to read entries of tokenizer.json's vocabulary and merges in
//! place, from a known offset.
//!
//! A prepared tokenizer is spot-checked against its source on every load, and building a
//! `serde_json::Value` of an 11 MB tokenizer.json takes 50–170 ms, several times the whole
//! fast path. Anything this reader is unsure of (a lone surrogate, a raw control character)
//! is a `None`: the caller then ignores the prepared file, so a corner it does not know can
//! cost speed but never change ids.

use std::borrow::Cow;

pub struct Scan<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Scan<'a> {
    pub fn new(b: &'a [u8], at: usize) -> Scan<'a> {
        Scan { b, at }
    }

    pub fn at(&self) -> usize {
        self.at
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.b.get(self.at) {
            self.at += 1;
        }
    }

    pub fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.at).copied()
    }

    pub fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.at += 1)
    }

    /// After an entry of an object or array: true for `,`, false for the closing bracket.
    pub fn more(&mut self, close: u8) -> Option<bool> {
        match self.peek()? {
            b',' => {
                self.at += 1;
                Some(true)
            }
            c if c == close => {
                self.at += 1;
                Some(false)
            }
            _ => None,
        }
    }

    /// The opening bracket and whether the object or array has any entry.
    pub fn open(&mut self, open: u8, close: u8) -> Option<bool> {
        self.eat(open)?;
        if self.peek()? == close {
            self.at += 1;
            return Some(false);
        }
        Some(true)
    }

    /// A string's text, borrowed when it has no escapes (almost always in a vocabulary).
    pub fn string(&mut self) -> Option<Cow<'a, str>> {
        self.eat(b'"')?;
        let start = self.at;
        let special = |c: &u8| *c == b'"' || *c == b'\\' || *c < 0x20;
        let i = self.b[start..].iter().position(special)?;
        if self.b[start + i] == b'"' {
            self.at = start + i + 1;
            return std::str::from_utf8(&self.b[start..start + i])
                .ok()
                .map(Cow::Borrowed);
        }
        let mut out = self.b[start..start + i].to_vec();
        self.at = start + i;
        loop {
            match *self.b.get(self.at)? {
                b'"' => {
                    self.at += 1;
                    return String::from_utf8(out).ok().map(Cow::Owned);
                }
                b'\\' => {
                    let e = *self.b.get(self.at + 1)?;
                    self.at += 2;
                    let c = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => self.unicode_escape()?,
                        _ => return None,
                    };
                    out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                }
                c if c < 0x20 => return None,
                _ => {
                    let rest = &self.b[self.at..];
                    let n = rest.iter().position(special).unwrap_or(rest.len()).max(1);
                    out.extend_from_slice(&rest[..n]);
                    self.at += n;
                }
            }
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = std::str::from_utf8(self.b.get(self.at..self.at + 4)?).ok()?;
        let v = u32::from_str_radix(digits, 16).ok()?;
        self.at += 4;
        Some(v)
    }

    /// After `\u`: one code point, a surrogate pair joined; a lone surrogate is refused as
    /// serde_json refuses it.
    fn unicode_escape(&mut self) -> Option<char> {
        let hi = self.hex4()?;
        if (0xDC00..0xE000).contains(&hi) {
            return None;
        }
        if (0xD800..0xDC00).contains(&hi) {
            if self.b.get(self.at..self.at + 2)? != b"\\u" {
                return None;
            }
            self.at += 2;
            let lo = self.hex4()?;
            if !(0xDC00..0xE000).contains(&lo) {
                return None;
            }
            return char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00));
        }
        char::from_u32(hi)
    }

    /// A non-negative integer written in plain digits (how every tokenizer.json writes ids).
    pub fn uint(&mut self) -> Option<u64> {
        self.ws();
        let start = self.at;
        while self.b.get(self.at).is_some_and(u8::is_ascii_digit) {
            self.at += 1;
        }
        let digits = std::str::from_utf8(&self.b[start..self.at]).ok()?;
        match self.b.get(self.at) {
            Some(b'.' | b'e' | b'E') => None,
            _ => digits.parse().ok(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_unescape_like_serde_json() {
        for text in [
            r#""plain""#,
            r#""a\"b\\c\/d\b\f\n\r\t""#,
            r#""\u00e9\u4e2d\ud83d\ude00 x""#,
            r#""Ġ\u0120ĠĠ""#,
        ] {
            let ours = Scan::new(text.as_bytes(), 0).string().unwrap();
            let theirs: String = serde_json::from_str(text).unwrap();
            assert_eq!(ours, theirs, "{text}");
        }
        for bad in [
            r#""\ud83d""#,
            r#""\ude00""#,
            r#""\x""#,
            "\"a\nb\"",
            r#""open"#,
        ] {
            assert!(Scan::new(bad.as_bytes(), 0).string().is_none(), "{bad}");
        }
    }
}
