//! The expression and statement tags of a template, and the tokens of what they hold, as far
//! as the rewrite of `+` and `~` needs to read them.

/// A `{{ ... }}` or `{% ... %}` tag: the byte range of what is between its delimiters
/// (whitespace-control markers excluded).
pub(super) struct Tag {
    pub(super) body: (usize, usize),
    pub(super) statement: bool,
}

/// Every expression or statement tag, skipping comments and `raw` blocks.
pub(super) fn tags(src: &str) -> Vec<Tag> {
    let bytes = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(rel) = src[i..].find('{') {
        let at = i + rel;
        match bytes.get(at + 1) {
            Some(b'#') => {
                i = src[at + 2..]
                    .find("#}")
                    .map_or(src.len(), |e| at + 2 + e + 2);
            }
            Some(&c @ (b'{' | b'%')) => {
                let mut start = at + 2;
                if matches!(bytes.get(start), Some(b'-' | b'+')) {
                    start += 1;
                }
                let close = if c == b'{' { "}}" } else { "%}" };
                let Some(end) = tag_close(src, start, close) else {
                    return out;
                };
                let body_end = if end > start && matches!(bytes[end - 1], b'-' | b'+') {
                    end - 1
                } else {
                    end
                };
                let statement = c == b'%';
                let word = src[start..body_end].split_whitespace().next();
                out.push(Tag {
                    body: (start, body_end.max(start)),
                    statement,
                });
                i = end + 2;
                if statement && word == Some("raw") {
                    i = find_endraw(src, i);
                }
            }
            _ => i = at + 1,
        }
    }
    out
}

/// Where `close` ends the tag that starts at `from`: outside strings and, for `}}`, outside
/// the brackets of dict and list literals.
fn tag_close(src: &str, from: usize, close: &str) -> Option<usize> {
    let bytes = src.as_bytes();
    let mut depth = 0usize;
    let mut i = from;
    while i < bytes.len() {
        match bytes[i] {
            q @ (b'\'' | b'"') => {
                i += 1;
                while i < bytes.len() && bytes[i] != q {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' => depth = depth.saturating_sub(1),
            b'}' if depth > 0 => depth -= 1,
            // Bytes, not str: `i` steps through multi-byte characters.
            _ if depth == 0 && bytes[i..].starts_with(close.as_bytes()) => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

fn find_endraw(src: &str, from: usize) -> usize {
    let mut i = from;
    while let Some(rel) = src[i..].find("{%") {
        let at = i + rel;
        let mut start = at + 2;
        if matches!(src.as_bytes().get(start), Some(b'-' | b'+')) {
            start += 1;
        }
        let end = src[start..].find("%}").map_or(src.len(), |e| start + e);
        let body = src[start..end].trim_end_matches(['-', '+']).trim();
        if body == "endraw" {
            return (end + 2).min(src.len());
        }
        i = (end + 2).min(src.len());
        if i >= src.len() {
            break;
        }
    }
    src.len()
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Tok<'a> {
    Name(&'a str),
    Str,
    Num,
    Op(&'static str),
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Token<'a> {
    pub(super) kind: Tok<'a>,
    pub(super) start: usize,
    pub(super) end: usize,
}

const OPS: [&str; 24] = [
    "//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">", "=", "(", ")", "[",
    "]", "{", "}", ",", ":", ".",
];

/// Why an expression could not be cut into tokens.
#[derive(Debug, thiserror::Error)]
pub(super) enum LexError {
    #[error("unterminated string")]
    UnterminatedString,
    #[error("unexpected character {0:?}")]
    Unexpected(char),
}

pub(super) fn lex(src: &str, start: usize, end: usize) -> Result<Vec<Token<'_>>, LexError> {
    let text = &src[..end];
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = start;
    while i < end {
        let c = text[i..].chars().next().unwrap_or(' ');
        let begin = i;
        if c.is_whitespace() {
            i += c.len_utf8();
            continue;
        }
        let kind = if c == '\'' || c == '"' {
            i += 1;
            while i < end && bytes[i] != c as u8 {
                i += if bytes[i] == b'\\' { 2 } else { 1 };
            }
            if i >= end {
                return Err(LexError::UnterminatedString);
            }
            i += 1;
            Tok::Str
        } else if c.is_ascii_digit() {
            while i < end && (bytes[i].is_ascii_digit() || bytes[i] == b'_') {
                i += 1;
            }
            if i + 1 < end && bytes[i] == b'.' && bytes[i + 1].is_ascii_digit() {
                i += 1;
                while i < end && (bytes[i].is_ascii_digit() || bytes[i] == b'_') {
                    i += 1;
                }
            }
            if i < end && matches!(bytes[i], b'e' | b'E') {
                let mut j = i + 1;
                if j < end && matches!(bytes[j], b'+' | b'-') {
                    j += 1;
                }
                if j < end && bytes[j].is_ascii_digit() {
                    i = j;
                    while i < end && bytes[i].is_ascii_digit() {
                        i += 1;
                    }
                }
            }
            Tok::Num
        } else if c.is_alphabetic() || c == '_' {
            while i < end {
                let d = text[i..].chars().next().unwrap_or(' ');
                if !(d.is_alphanumeric() || d == '_') {
                    break;
                }
                i += d.len_utf8();
            }
            Tok::Name(&text[begin..i])
        } else if c == '|' {
            i += 1;
            Tok::Op("|")
        } else {
            let Some(op) = OPS.iter().find(|op| text[i..].starts_with(**op)) else {
                return Err(LexError::Unexpected(c));
            };
            i += op.len();
            Tok::Op(op)
        };
        out.push(Token {
            kind,
            start: begin,
            end: i,
        });
    }
    Ok(out)
}
