//! Python methods on template values that minijinja-contrib's pycompat lacks.
//!
//! Anything not handled here is delegated to pycompat; methods neither knows fail the render,
//! which kvaudit reports instead of guessing.
//!
//! Python's rules for `str` that these methods follow (what is whitespace, where lines break,
//! what `strip` takes away) are kept here for the filters (`trim`, `indent`) and the server
//! profiles that apply them too, so that they all strip and split alike.

use minijinja::value::{ValueKind, from_args};
use minijinja::{Error, ErrorKind, State, Value};
use minijinja_contrib::pycompat;

use super::bounded::{Style, check_format, python_replace};
use super::limits::{items_fit, max_output, too_large};
use super::namespace::python_type;

pub fn unknown_method(
    state: &mut State,
    value: &Value,
    method: &str,
    args: &[Value],
) -> Result<Value, Error> {
    if super::namespace::is_namespace(value) {
        // Python's Namespace has no methods: `ns.items()` is an undefined attribute there.
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("'Namespace' object has no attribute '{method}'"),
        ));
    }
    if let (ValueKind::String, Some(s)) = (value.kind(), value.as_str())
        && let Some(result) = string_method(value, s, method, args)?
    {
        return Ok(result);
    }
    pycompat::unknown_method_callback(state, value, method, args)
}

/// Python's TypeError for an undefined argument at `at` of `args` to a method handled here
/// (minijinja reads it as missing: `'  a '.strip(nope)` strips white space where Jinja2
/// raises); `None` for a method left to pycompat. Python counts the arguments before it looks
/// at them, so too many is reported first.
fn undefined_argument(method: &str, at: usize, args: usize) -> Option<Error> {
    const NOT_AN_INTEGER: &str = "'Undefined' object cannot be interpreted as an integer";
    // The most arguments each method takes, and CPython's words when it gets more.
    let (most, too_many) = match method {
        "strip" | "lstrip" | "rstrip" => (
            1,
            format!("{method} expected at most 1 argument, got {args}"),
        ),
        "ljust" | "rjust" | "center" => (
            2,
            format!("{method} expected at most 2 arguments, got {args}"),
        ),
        "split" | "rsplit" => (
            2,
            format!("{method}() takes at most 2 arguments ({args} given)"),
        ),
        "splitlines" => (
            1,
            format!("splitlines() takes at most 1 argument ({args} given)"),
        ),
        "index" | "rindex" => (
            3,
            format!("{method}() takes at most 3 arguments ({args} given)"),
        ),
        "removeprefix" | "removesuffix" | "partition" | "rpartition" | "zfill" => (
            1,
            format!("str.{method}() takes exactly one argument ({args} given)"),
        ),
        "isspace" | "casefold" | "swapcase" => (
            0,
            format!("str.{method}() takes no arguments ({args} given)"),
        ),
        _ => return None,
    };
    let text = match (method, at) {
        _ if args > most => too_many,
        ("strip" | "lstrip" | "rstrip", _) => return Some(strip_arg_error(method)),
        ("split" | "rsplit", 0) => "must be str or None, not Undefined".to_string(),
        ("split" | "rsplit" | "splitlines" | "zfill", _) | ("ljust" | "rjust" | "center", 0) => {
            NOT_AN_INTEGER.to_string()
        }
        ("ljust" | "rjust" | "center", _) => {
            "The fill character must be a unicode character, not Undefined".to_string()
        }
        ("removeprefix" | "removesuffix", _) => {
            format!("{method}() argument must be str, not Undefined")
        }
        ("partition" | "rpartition" | "index" | "rindex", 0) => {
            "must be str, not Undefined".to_string()
        }
        _ => "slice indices must be integers or None or have an __index__ method".to_string(),
    };
    Some(Error::new(ErrorKind::InvalidOperation, text))
}

/// `value` is the string `s`, returned as it is where a method leaves the text unchanged.
fn string_method(
    value: &Value,
    s: &str,
    method: &str,
    args: &[Value],
) -> Result<Option<Value>, Error> {
    // A derived string of a Markup value stays Markup, as MarkupSafe's wrapped methods return.
    let derived = |text: &str| {
        if value.is_safe() {
            Value::from_safe_string(text.to_string())
        } else {
            Value::from(text)
        }
    };
    if let Some(at) = args.iter().position(Value::is_undefined) {
        return undefined_argument(method, at, args.len()).map_or(Ok(None), Err);
    }
    let v = match method {
        // Python's whitespace (see `is_python_space`); pycompat's trims Rust's.
        "strip" | "lstrip" | "rstrip" => {
            let (chars,): (Option<&str>,) = from_args(args)?;
            let ends = match method {
                "strip" => Ends::Both,
                "lstrip" => Ends::Start,
                _ => Ends::End,
            };
            let kept = python_strip(s, chars, ends);
            if kept.len() == s.len() {
                value.clone()
            } else {
                derived(kept)
            }
        }
        "isspace" => {
            let () = from_args(args)?;
            Value::from(!s.is_empty() && s.chars().all(is_python_space))
        }
        "split" => {
            let (sep, maxsplit): (Option<&str>, Option<i64>) = from_args(args)?;
            items_fit(pieces_at_most(s, sep, maxsplit.unwrap_or(-1)), "split")?;
            let parts = split(s, sep, maxsplit.unwrap_or(-1))?;
            Value::from(parts.into_iter().map(derived).collect::<Vec<_>>())
        }
        "splitlines" => {
            let (keepends,): (Option<bool>,) = from_args(args)?;
            items_fit(python_lines(s).count(), "splitlines")?;
            let keep = keepends.unwrap_or(false);
            Value::from(
                python_lines(s)
                    .map(|(line, with_break)| derived(if keep { with_break } else { line }))
                    .collect::<Vec<_>>(),
            )
        }
        "rsplit" => {
            let (sep, maxsplit): (Option<&str>, Option<i64>) = from_args(args)?;
            items_fit(pieces_at_most(s, sep, maxsplit.unwrap_or(-1)), "rsplit")?;
            let parts = rsplit(s, sep, maxsplit.unwrap_or(-1))?;
            Value::from(parts.iter().map(|p| derived(p)).collect::<Vec<_>>())
        }
        "removeprefix" => {
            let (prefix,): (&str,) = from_args(args)?;
            Value::from(s.strip_prefix(prefix).unwrap_or(s))
        }
        "removesuffix" => {
            let (suffix,): (&str,) = from_args(args)?;
            Value::from(s.strip_suffix(suffix).unwrap_or(s))
        }
        "partition" | "rpartition" => {
            let (sep,): (&str,) = from_args(args)?;
            if sep.is_empty() {
                return Err(Error::new(ErrorKind::InvalidOperation, "empty separator"));
            }
            let found = if method == "partition" {
                s.find(sep)
            } else {
                s.rfind(sep)
            };
            let parts = match found {
                Some(i) => [&s[..i], sep, &s[i + sep.len()..]],
                None if method == "partition" => [s, "", ""],
                None => ["", "", s],
            };
            Value::from(parts.iter().map(|p| Value::from(*p)).collect::<Vec<_>>())
        }
        "index" | "rindex" => {
            let (sub,): (&str,) = from_args(args)?;
            let found = if method == "index" {
                s.find(sub)
            } else {
                s.rfind(sub)
            };
            match found {
                Some(byte) => Value::from(s[..byte].chars().count()),
                None => {
                    return Err(Error::new(
                        ErrorKind::InvalidOperation,
                        "substring not found",
                    ));
                }
            }
        }
        "casefold" => Value::from(s.to_lowercase()),
        "swapcase" => Value::from(
            s.chars()
                .flat_map(|c| {
                    if c.is_uppercase() {
                        c.to_lowercase().collect::<Vec<_>>()
                    } else {
                        c.to_uppercase().collect::<Vec<_>>()
                    }
                })
                .collect::<String>(),
        ),
        "zfill" => {
            let (width,): (Value,) = from_args(args)?;
            let width = python_width(&width)?;
            let len = s.chars().count();
            if len >= width {
                Value::from(s)
            } else {
                padded_size(s, width - len, '0', method)?;
                let (sign, rest) = match s.chars().next() {
                    Some(c @ ('+' | '-')) => (c.to_string(), &s[1..]),
                    _ => (String::new(), s),
                };
                Value::from(format!("{sign}{}{rest}", "0".repeat(width - len)))
            }
        }
        "format" => {
            // pycompat formats; the widths, precisions and arguments are checked first.
            check_format(s, args, Style::Braces, "format")?;
            return Ok(None);
        }
        "replace" => {
            let (old, new, count): (&str, &str, Option<i64>) = from_args(args)?;
            let replaced = python_replace(s, old, new, count, "replace")?;
            derived(&replaced)
        }
        "join" => {
            let (items,): (Value,) = from_args(args)?;
            python_join(value, s, &items)?
        }
        "ljust" | "rjust" | "center" => {
            let (width, fill): (Value, Option<&str>) = from_args(args)?;
            let width = python_width(&width)?;
            let fill = fill.unwrap_or(" ");
            let mut fill_chars = fill.chars();
            let (Some(fc), None) = (fill_chars.next(), fill_chars.next()) else {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    "The fill character must be exactly one character long",
                ));
            };
            let len = s.chars().count();
            if len >= width {
                Value::from(s)
            } else {
                let pad = width - len;
                let (left, right) = match method {
                    "ljust" => (0, pad),
                    "rjust" => (pad, 0),
                    // CPython's centre puts the extra character on the left when the width is odd.
                    _ => {
                        let left = pad / 2 + (pad & width & 1);
                        (left, pad - left)
                    }
                };
                padded_size(s, pad, fc, method)?;
                let f = |n: usize| fc.to_string().repeat(n);
                Value::from(format!("{}{s}{}", f(left), f(right)))
            }
        }
        _ => return Ok(None),
    };
    Ok(Some(v))
}

/// At most how many pieces `split`/`rsplit` cut `s` into (counted without making them).
fn pieces_at_most(s: &str, sep: Option<&str>, maxsplit: i64) -> usize {
    let cuts = match sep {
        Some("") => 0,
        Some(sep) => s.matches(sep).count(),
        None => s.chars().filter(|&c| is_python_space(c)).count(),
    };
    let cuts = match usize::try_from(maxsplit) {
        Ok(most) => cuts.min(most),
        Err(_) => cuts,
    };
    cuts.saturating_add(1)
}

/// A width argument as Python reads it: an integer (a bool counts), negative meaning no
/// padding.
fn python_width(width: &Value) -> Result<usize, Error> {
    let n = match width.kind() {
        ValueKind::Bool => i128::from(width.is_true()),
        ValueKind::Number if width.is_integer() => i128::try_from(width.clone())?,
        _ => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!(
                    "'{}' object cannot be interpreted as an integer",
                    python_type(width)
                ),
            ));
        }
    };
    Ok(usize::try_from(n.max(0)).unwrap_or(usize::MAX))
}

/// Refuses padding `s` with `pad` copies of `fill` past [`MAX_OUTPUT`] bytes, before it is
/// allocated (`'x'.center(10**10)` asked for 10 GB).
fn padded_size(s: &str, pad: usize, fill: char, method: &str) -> Result<(), Error> {
    let size = pad
        .checked_mul(fill.len_utf8())
        .and_then(|n| n.checked_add(s.len()));
    if size.is_none_or(|n| n > max_output()) {
        return Err(too_large(method));
    }
    Ok(())
}

/// Python's `sep.join(items)`: every item a string, the result refused past [`MAX_OUTPUT`]
/// bytes. A `Markup` separator escapes plain items and gives `Markup`, as MarkupSafe's does.
fn python_join(sep_value: &Value, sep: &str, items: &Value) -> Result<Value, Error> {
    let markup = sep_value.is_safe();
    let mut out = String::new();
    for (i, item) in items.try_iter()?.enumerate() {
        let Some(text) = item.as_str().filter(|_| item.kind() == ValueKind::String) else {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!(
                    "sequence item {i}: expected str instance, {} found",
                    python_type(&item)
                ),
            ));
        };
        let escaped;
        let text = if markup && !item.is_safe() {
            let mut e = String::with_capacity(text.len());
            super::markup::html_escape(text, &mut e);
            escaped = e;
            escaped.as_str()
        } else {
            text
        };
        let sep = if i > 0 { sep } else { "" };
        let piece = sep.len().saturating_add(text.len());
        if out.len().saturating_add(piece) > max_output() {
            return Err(too_large("join"));
        }
        super::limits::reserve_str_within(&mut out, piece, max_output());
        out.push_str(sep);
        out.push_str(text);
    }
    Ok(if markup {
        Value::from_safe_string(out)
    } else {
        Value::from(out)
    })
}

/// Python's `str.split(sep=None, maxsplit=-1)`: with no separator, runs of Python whitespace
/// split and the ends are dropped (the rest after `maxsplit` splits keeps its trailing
/// whitespace); an empty separator raises.
fn split<'s>(s: &'s str, sep: Option<&str>, maxsplit: i64) -> Result<Vec<&'s str>, Error> {
    let limit = usize::try_from(maxsplit).unwrap_or(usize::MAX);
    let mut parts = Vec::new();
    match sep {
        Some("") => return Err(Error::new(ErrorKind::InvalidOperation, "empty separator")),
        Some(sep) => {
            let mut rest = s;
            while parts.len() < limit
                && let Some(i) = rest.find(sep)
            {
                parts.push(&rest[..i]);
                rest = &rest[i + sep.len()..];
            }
            parts.push(rest);
        }
        None => {
            let mut rest = s.trim_start_matches(is_python_space);
            while !rest.is_empty() {
                if parts.len() >= limit {
                    parts.push(rest);
                    break;
                }
                match rest.find(is_python_space) {
                    Some(i) => {
                        parts.push(&rest[..i]);
                        rest = rest[i..].trim_start_matches(is_python_space);
                    }
                    None => {
                        parts.push(rest);
                        rest = "";
                    }
                }
            }
        }
    }
    Ok(parts)
}

/// Python's `str.rsplit(sep=None, maxsplit=-1)`.
fn rsplit(s: &str, sep: Option<&str>, maxsplit: i64) -> Result<Vec<String>, Error> {
    let limit = if maxsplit < 0 {
        usize::MAX
    } else {
        maxsplit as usize
    };
    let mut parts: Vec<String> = Vec::new();
    match sep {
        Some("") => return Err(Error::new(ErrorKind::InvalidOperation, "empty separator")),
        Some(sep) => {
            let mut rest = s;
            while parts.len() < limit {
                match rest.rfind(sep) {
                    Some(i) => {
                        parts.push(rest[i + sep.len()..].to_string());
                        rest = &rest[..i];
                    }
                    None => break,
                }
            }
            parts.push(rest.to_string());
        }
        None => {
            let trim_end = |t: &'_ str| t.trim_end_matches(is_python_space).len();
            let mut rest = &s[..trim_end(s)];
            while !rest.is_empty() {
                if parts.len() >= limit {
                    parts.push(rest.to_string());
                    break;
                }
                match rest.rfind(is_python_space) {
                    Some(i) => {
                        let ws_len = rest[i..].chars().next().map_or(1, char::len_utf8);
                        parts.push(rest[i + ws_len..].to_string());
                        rest = &rest[..trim_end(&rest[..i])];
                    }
                    None => {
                        parts.push(rest.to_string());
                        rest = "";
                    }
                }
            }
        }
    }
    parts.reverse();
    Ok(parts)
}

/// Python's `str.splitlines()` (without keepends).
pub fn python_splitlines(s: &str) -> Vec<&str> {
    python_lines(s).map(|(line, _)| line).collect()
}

/// The lines of `s` as Python's `str.splitlines` cuts them: each line without its break, and
/// the line with its break (a text's last line may have none).
pub fn python_lines(s: &str) -> impl Iterator<Item = (&str, &str)> {
    let mut start = 0;
    std::iter::from_fn(move || {
        let rest = &s[start..];
        if rest.is_empty() {
            return None;
        }
        let (at, len) = rest
            .char_indices()
            .find(|&(_, c)| is_python_line_break(c))
            .map_or((rest.len(), 0), |(i, c)| {
                let crlf = c == '\r' && rest[i + 1..].starts_with('\n');
                (i, if crlf { 2 } else { c.len_utf8() })
            });
        start += at + len;
        Some((&rest[..at], &rest[..at + len]))
    })
}

/// The characters Python's `str.splitlines` breaks at (CR LF is one break).
fn is_python_line_break(c: char) -> bool {
    matches!(
        c,
        '\n' | '\r'
            | '\u{0b}'
            | '\u{0c}'
            | '\u{1c}'
            | '\u{1d}'
            | '\u{1e}'
            | '\u{85}'
            | '\u{2028}'
            | '\u{2029}'
    )
}

/// Whitespace as Python's `str.isspace`, `strip()` and `split()` know it: Rust's (Unicode
/// White_Space) plus the four separators U+001C..U+001F, which Python counts and Rust does not.
pub fn is_python_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Which ends of a string Python's `strip`, `lstrip` and `rstrip` take characters from.
#[derive(Clone, Copy)]
pub enum Ends {
    Both,
    Start,
    End,
}

/// Python's `str.strip(chars)` (and `lstrip`, `rstrip`): whitespace when `chars` is None, else
/// any of its characters.
pub fn python_strip<'s>(s: &'s str, chars: Option<&str>, ends: Ends) -> &'s str {
    let strip = |c: char| match chars {
        None => is_python_space(c),
        Some(set) => set.contains(c),
    };
    match ends {
        Ends::Both => s.trim_matches(strip),
        Ends::Start => s.trim_start_matches(strip),
        Ends::End => s.trim_end_matches(strip),
    }
}

/// The TypeError `str.strip` (or `lstrip`, `rstrip`) raises for a `chars` that is neither None
/// nor a string.
pub fn strip_arg_error(method: &str) -> Error {
    Error::new(
        ErrorKind::InvalidOperation,
        format!("{method} arg must be None or str"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rsplit_like_python() {
        assert_eq!(rsplit("a,b,c", Some(","), 1).unwrap(), vec!["a,b", "c"]);
        assert_eq!(rsplit("a,b,c", Some(","), -1).unwrap(), vec!["a", "b", "c"]);
        assert_eq!(rsplit("  a b  c ", None, 1).unwrap(), vec!["  a b", "c"]);
        assert_eq!(rsplit("", None, -1).unwrap(), Vec::<String>::new());
        assert_eq!(rsplit("", Some(","), -1).unwrap(), vec![""]);
    }

    #[test]
    fn whitespace_is_pythons() {
        // CPython 3: "\x1c a\x1db \x1f".split() == ['a', 'b'], and so on.
        let s = "\u{1c} a\u{1d}b \u{1f}";
        assert_eq!(split(s, None, -1).unwrap(), vec!["a", "b"]);
        assert_eq!(split(s, None, 1).unwrap(), vec!["a", "b \u{1f}"]);
        assert_eq!(rsplit(s, None, 1).unwrap(), vec!["\u{1c} a", "b"]);
        assert_eq!(split("a,b,c", Some(","), 1).unwrap(), vec!["a", "b,c"]);
        assert!(split("a", Some(""), -1).is_err());
        assert_eq!(split("", None, -1).unwrap(), Vec::<&str>::new());
        assert_eq!(python_strip(s, None, Ends::Both), "a\u{1d}b");
        assert_eq!(python_strip(s, None, Ends::Start), "a\u{1d}b \u{1f}");
        assert_eq!(python_strip(s, None, Ends::End), "\u{1c} a\u{1d}b");
        assert_eq!(python_strip("xxaxx", Some("x"), Ends::Both), "a");
        assert_eq!(python_strip(" a ", Some(""), Ends::Both), " a ");
        let lines: Vec<_> = python_lines("a\rb\r\nc\u{1c}d\n").collect();
        assert_eq!(
            lines,
            vec![("a", "a\r"), ("b", "b\r\n"), ("c", "c\u{1c}"), ("d", "d\n")]
        );
        let isspace = |t: &str| {
            let v = Value::from(t);
            string_method(&v, t, "isspace", &[])
                .unwrap()
                .unwrap()
                .is_true()
        };
        assert!(isspace("\u{1c}\u{1f} \u{85}"));
        assert!(!isspace(""));
        assert!(!isspace("\u{1c}a"));
    }

    #[test]
    fn padding_like_python() {
        let abc = Value::from("abc");
        let call = |m: &str, args: &[Value]| string_method(&abc, "abc", m, args).unwrap().unwrap();
        assert_eq!(call("center", &[Value::from(6)]).as_str(), Some(" abc  "));
        assert_eq!(
            call("center", &[Value::from(8), Value::from("*")]).as_str(),
            Some("**abc***")
        );
        assert_eq!(call("rjust", &[Value::from(5)]).as_str(), Some("  abc"));
    }
}
