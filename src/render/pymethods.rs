//! Python methods on template values that minijinja-contrib's pycompat lacks.
//!
//! Anything not handled here is delegated to pycompat; methods neither knows fail the render,
//! which kvaudit reports instead of guessing.

use minijinja::value::{ValueKind, from_args};
use minijinja::{Error, ErrorKind, State, Value};
use minijinja_contrib::pycompat;

pub fn unknown_method(
    state: &mut State,
    value: &Value,
    method: &str,
    args: &[Value],
) -> Result<Value, Error> {
    if let (ValueKind::String, Some(s)) = (value.kind(), value.as_str())
        && let Some(result) = string_method(s, method, args)?
    {
        return Ok(result);
    }
    pycompat::unknown_method_callback(state, value, method, args)
}

fn string_method(s: &str, method: &str, args: &[Value]) -> Result<Option<Value>, Error> {
    let v = match method {
        "rsplit" => {
            let (sep, maxsplit): (Option<&str>, Option<i64>) = from_args(args)?;
            Value::from(rsplit(s, sep, maxsplit.unwrap_or(-1))?)
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
            let (width,): (usize,) = from_args(args)?;
            let len = s.chars().count();
            if len >= width {
                Value::from(s)
            } else {
                let (sign, rest) = match s.chars().next() {
                    Some(c @ ('+' | '-')) => (c.to_string(), &s[1..]),
                    _ => (String::new(), s),
                };
                Value::from(format!("{sign}{}{rest}", "0".repeat(width - len)))
            }
        }
        "ljust" | "rjust" | "center" => {
            let (width, fill): (usize, Option<&str>) = from_args(args)?;
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
                let f = |n: usize| fc.to_string().repeat(n);
                Value::from(format!("{}{s}{}", f(left), f(right)))
            }
        }
        _ => return Ok(None),
    };
    Ok(Some(v))
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
            let mut rest = s.trim_end();
            while !rest.is_empty() {
                if parts.len() >= limit {
                    parts.push(rest.to_string());
                    break;
                }
                match rest.rfind(char::is_whitespace) {
                    Some(i) => {
                        let ws_len = rest[i..].chars().next().map_or(1, char::len_utf8);
                        parts.push(rest[i + ws_len..].to_string());
                        rest = rest[..i].trim_end();
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
    fn padding_like_python() {
        let call = |m: &str, args: &[Value]| string_method("abc", m, args).unwrap().unwrap();
        assert_eq!(call("center", &[Value::from(6)]).as_str(), Some(" abc  "));
        assert_eq!(
            call("center", &[Value::from(8), Value::from("*")]).as_str(),
            Some("**abc***")
        );
        assert_eq!(call("rjust", &[Value::from(5)]).as_str(), Some("  abc"));
    }
}
