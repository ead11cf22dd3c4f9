//! Source-level preparation of a chat template so minijinja evaluates it as Jinja2 would.
//!
//! Jinja2's lexer turns every line break of the source into `\n` before anything else; the
//! rest are behaviours that have no hook in minijinja's engine and are handled by rewriting
//! tags: `{% generation %}` (a transformers extension) and iteration in `for` loops (Jinja2
//! iterates with Python's `iter()`: `None` raises, a string yields its characters with a known
//! length).

use std::borrow::Cow;

use super::error::RenderError;

/// The source as Jinja2's lexer sees it: it splits the whole source on `\r\n`, `\r` and `\n`
/// and joins the lines with `newline_sequence` (`\n` in transformers' environment), in
/// template text, comments, `raw` blocks and string literals alike. Escapes are decoded
/// later, so a literal's `'\r\n'` (backslash, r, ...) still renders as CR LF.
pub fn normalize_newlines(source: &str) -> Cow<'_, str> {
    if !source.contains('\r') {
        return Cow::Borrowed(source);
    }
    Cow::Owned(source.replace("\r\n", "\n").replace('\r', "\n"))
}

/// The filter every `for` loop's iterable goes through (see `env.rs`).
pub const ITER_FILTER: &str = "__kvaudit_py_iter";

pub fn prepare(source: &str) -> Result<String, RenderError> {
    let source = &*normalize_newlines(source);
    let source = &*super::markup::rewrite_operators(source)?;
    let mut out = String::with_capacity(source.len() + 64);
    let mut at = 0;
    let mut next = NextTag::default();
    while let Some(start) = next.after(source, at) {
        out.push_str(&source[at..start]);
        let rest = &source[start..];
        if rest.starts_with("{#") {
            let end = rest.find("#}").map_or(rest.len(), |e| e + 2);
            out.push_str(&rest[..end]);
            at = start + end;
            continue;
        }
        let Some(end) = tag_end(rest) else {
            // Unterminated tag: leave it to the parser to report.
            out.push_str(rest);
            super::guard::check_depth(&out)?;
            return Ok(out);
        };
        let tag = &rest[..end];
        let (open, body, close) = split_tag(tag);
        let word = body.split_whitespace().next().unwrap_or("");
        match word {
            "raw" => {
                let stop = find_endraw(rest).unwrap_or(rest.len());
                out.push_str(&rest[..stop]);
                at = start + stop;
                continue;
            }
            "for" => {
                out.push_str(open);
                out.push_str(&rewrite_for(body));
                out.push_str(close);
            }
            "generation" if body.trim() == "generation" => {
                out.push_str(open);
                out.push_str(" if true ");
                out.push_str(close);
            }
            "endgeneration" if body.trim() == "endgeneration" => {
                out.push_str(open);
                out.push_str(" endif ");
                out.push_str(close);
            }
            _ => out.push_str(tag),
        }
        at = start + end;
    }
    out.push_str(&source[at..]);
    super::guard::check_depth(&out)?;
    Ok(out)
}

/// The next `{%` and `{#`, each remembered until the scan passes it: searching both afresh
/// at every tag rescanned the rest of the template for a `{#` that was not there, which made
/// preparation quadratic (50,000 tags took over 30 s).
#[derive(Default)]
struct NextTag {
    statement: Option<Option<usize>>,
    comment: Option<Option<usize>>,
}

impl NextTag {
    fn after(&mut self, s: &str, at: usize) -> Option<usize> {
        let refresh = |slot: &mut Option<Option<usize>>, pat: &str| {
            if slot.is_none_or(|found| found.is_some_and(|p| p < at)) {
                *slot = Some(s[at..].find(pat).map(|p| p + at));
            }
            slot.flatten()
        };
        let a = refresh(&mut self.statement, "{%");
        let b = refresh(&mut self.comment, "{#");
        match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// End of a `{% ... %}` tag (exclusive), skipping `%}` inside string literals.
fn tag_end(s: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut quote: Option<u8> = None;
    let mut i = 2;
    while i < bytes.len() {
        let b = bytes[i];
        match quote {
            Some(_) if b == b'\\' => i += 1,
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if b == b'\'' || b == b'"' => quote = Some(b),
            None if b == b'%' && bytes.get(i + 1) == Some(&b'}') => return Some(i + 2),
            None => {}
        }
        i += 1;
    }
    None
}

/// `{%- body -%}` → (`{%-`, ` body `, `-%}`).
fn split_tag(tag: &str) -> (&str, &str, &str) {
    let open_len = if tag[2..].starts_with(['-', '+']) {
        3
    } else {
        2
    };
    let inner_end = tag.len() - 2;
    let close_start = if inner_end > open_len && tag[..inner_end].ends_with(['-', '+']) {
        inner_end - 1
    } else {
        inner_end
    };
    (
        &tag[..open_len],
        &tag[open_len..close_start],
        &tag[close_start..],
    )
}

fn find_endraw(s: &str) -> Option<usize> {
    let mut from = 2;
    while let Some(rel) = s[from..].find("{%") {
        let at = from + rel;
        let end = tag_end(&s[at..])?;
        let (_, body, _) = split_tag(&s[at..at + end]);
        if body.trim() == "endraw" {
            return Some(at + end);
        }
        from = at + end;
    }
    None
}

/// `for TARGETS in EXPR [if COND] [recursive]` → `for TARGETS in (EXPR)|filter ...`.
fn rewrite_for(body: &str) -> String {
    let words = top_level_words(body);
    let Some(&(in_start, in_end)) = words.iter().find(|(s, e)| &body[*s..*e] == "in") else {
        return body.to_string();
    };
    let expr_end = words
        .iter()
        .filter(|(s, _)| *s > in_end)
        .find(|(s, e)| matches!(&body[*s..*e], "if" | "recursive"))
        .map_or(body.len(), |(s, _)| *s);
    let expr = body[in_end..expr_end].trim();
    if expr.is_empty() {
        return body.to_string();
    }
    format!(
        "{} in ({expr})|{ITER_FILTER} {}",
        &body[..in_start].trim_end(),
        &body[expr_end..]
    )
}

/// Identifier-like words outside strings and brackets, as byte ranges.
fn top_level_words(body: &str) -> Vec<(usize, usize)> {
    let bytes = body.as_bytes();
    let mut words = Vec::new();
    let mut depth = 0i32;
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if let Some(q) = quote {
            if b == b'\\' {
                i += 1;
            } else if b == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        match b {
            b'\'' | b'"' => quote = Some(b),
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            _ if b.is_ascii_alphabetic() || b == b'_' => {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                let preceded_by_dot = start > 0 && bytes[start - 1] == b'.';
                if depth == 0 && !preceded_by_dot {
                    words.push((start, i));
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn for_loops_iterate_like_python() {
        let out = prepare("{%- for m in messages if m.role == 'user' -%}x{% endfor %}").unwrap();
        assert_eq!(
            out,
            format!(
                "{{%- for m in (messages)|{ITER_FILTER} if m.role == 'user' -%}}x{{% endfor %}}"
            )
        );
        let out = prepare("{% for k, v in d.items() %}{% endfor %}").unwrap();
        assert_eq!(
            out,
            format!("{{% for k, v in (d.items())|{ITER_FILTER} %}}{{% endfor %}}")
        );
        let out = prepare("{% raw %}{% for x in y %}{% endraw %}{# {% for a in b %} #}").unwrap();
        assert_eq!(
            out,
            "{% raw %}{% for x in y %}{% endraw %}{# {% for a in b %} #}"
        );
    }

    #[test]
    fn generation_tags_keep_whitespace_markers() {
        assert_eq!(
            prepare("{%- generation +%}a{% endgeneration -%}").unwrap(),
            "{%- if true +%}a{% endif -%}"
        );
    }
}
