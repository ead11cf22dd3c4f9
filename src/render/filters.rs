//! Jinja2's `indent`, `join` and `trim`, and the `iter()` a `for` loop applies, as
//! transformers' Jinja2 runs them: minijinja's own differ in what they output, or in how much
//! they let a template build before anything is counted.

use minijinja::value::ValueKind;
use minijinja::{Error, ErrorKind, State, Value};

use super::limits::{items_fit, max_output, reserve_str_within, too_large};
use super::pymethods::{Ends, python_splitlines, python_strip, strip_arg_error};

/// Jinja2's `indent`: it appends a newline before splitting into lines, so a trailing newline
/// survives (minijinja drops it), and it splits on every line boundary Python knows. Indenting
/// a `Markup` value gives `Markup`.
pub(super) fn jinja_indent(
    value: &Value,
    width: Option<Value>,
    first: Option<bool>,
    blank: Option<bool>,
    kwargs: minijinja::value::Kwargs,
) -> Result<Value, Error> {
    let width = kwargs.get::<Option<Value>>("width")?.or(width);
    let first = kwargs
        .get::<Option<bool>>("first")?
        .or(first)
        .unwrap_or(false);
    let blank = kwargs
        .get::<Option<bool>>("blank")?
        .or(blank)
        .unwrap_or(false);
    kwargs.assert_all_used()?;
    let indention = match width {
        None => "    ".to_string(),
        Some(w) if w.kind() == ValueKind::String => w.as_str().unwrap_or_default().to_string(),
        Some(w) => {
            let n = w.as_i64().unwrap_or(4).max(0);
            if n > max_output() as i64 {
                return Err(too_large("indent"));
            }
            " ".repeat(n as usize)
        }
    };
    let Some(value_text) = value.as_str() else {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("indent needs a string, not {}", value.kind()),
        ));
    };
    let text = format!("{value_text}\n");
    let lines = python_splitlines(&text);
    let projected = lines
        .len()
        .checked_mul(indention.len().saturating_add(1))
        .and_then(|n| n.checked_add(text.len()));
    if projected.is_none_or(|n| n > max_output()) {
        return Err(too_large("indent"));
    }
    let mut rv = if blank {
        lines.join(&format!("\n{indention}"))
    } else {
        let mut it = lines.into_iter();
        let mut rv = it.next().unwrap_or_default().to_string();
        let rest: Vec<String> = it
            .map(|l| {
                if l.is_empty() {
                    String::new()
                } else {
                    format!("{indention}{l}")
                }
            })
            .collect();
        if !rest.is_empty() {
            rv.push('\n');
            rv.push_str(&rest.join("\n"));
        }
        rv
    };
    if first {
        rv = format!("{indention}{rv}");
    }
    Ok(if value.is_safe() {
        Value::from_safe_string(rv)
    } else {
        Value::from(rv)
    })
}

/// Jinja2's `join(d='', attribute=None)`, checking the result's size before it grows:
/// minijinja's own checks it only for a non-empty joiner, so `[big]*100|join` grew until the
/// process aborted.
pub(super) fn bounded_join(
    value: &Value,
    joiner: Option<Value>,
    attribute: Option<Value>,
    kwargs: minijinja::value::Kwargs,
) -> Result<String, Error> {
    let joiner = kwargs.get::<Option<Value>>("d")?.or(joiner);
    let attribute = kwargs.get::<Option<Value>>("attribute")?.or(attribute);
    kwargs.assert_all_used()?;
    let joiner = match &joiner {
        None => String::new(),
        Some(j) if j.is_none() || j.is_undefined() => String::new(),
        Some(j) => j.to_string(),
    };
    if value.is_none() || value.is_undefined() {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("cannot join value of type {}", value.kind()),
        ));
    }
    let mut out = String::new();
    for (i, item) in value.try_iter()?.enumerate() {
        let item = match &attribute {
            Some(path) => attribute_of(&item, path)?,
            None => item,
        };
        let sep = if i > 0 { joiner.as_str() } else { "" };
        if out.len().saturating_add(sep.len()) > max_output() {
            return Err(too_large("join"));
        }
        reserve_str_within(&mut out, sep.len(), max_output());
        out.push_str(sep);
        super::namespace::write_str(&item, "join", max_output(), &mut out)?;
    }
    Ok(out)
}

/// Jinja2's attribute getter: a dotted path whose integer parts index sequences.
fn attribute_of(item: &Value, path: &Value) -> Result<Value, Error> {
    if path.is_integer() {
        return item.get_item(path);
    }
    let mut at = item.clone();
    for part in path.to_string().split('.') {
        at = match part.parse::<i64>() {
            Ok(n) => at.get_item(&Value::from(n))?,
            Err(_) => at.get_attr(part)?,
        };
    }
    Ok(at)
}

/// Jinja2's `trim(value, chars=None)`, which is `str(value).strip(chars)` (minijinja's own trims
/// Rust's whitespace, which lacks U+001C..U+001F). A value that is not a string is printed as
/// the template prints it; an undefined `chars` raises Python's TypeError, as `str.strip` does
/// in Jinja2 (minijinja's own trim reads it as None). A string with nothing to strip is
/// returned as it is, not copied: templates trim every message's content in every prompt.
pub(super) fn jinja_trim(
    state: &State,
    value: &Value,
    args: minijinja::value::Rest<minijinja::value::ValueOrKwargs>,
) -> Result<Value, Error> {
    // Read raw: minijinja's optional arguments take an undefined value for a missing one.
    let type_error = |text: String| Error::new(ErrorKind::InvalidOperation, text);
    let args = args.into_values();
    let mut positional = args.as_slice();
    let mut keyword = None;
    if let Some((last, rest)) = positional.split_last()
        && last.is_kwargs()
    {
        let kwargs = minijinja::value::Kwargs::try_from(last.clone())?;
        if let Some(other) = kwargs.args().find(|&k| k != "chars") {
            return Err(type_error(format!(
                "do_trim() got an unexpected keyword argument '{other}'"
            )));
        }
        if kwargs.has("chars") {
            keyword = Some(kwargs.get::<Value>("chars")?);
        }
        positional = rest;
    }
    let given = match (positional, keyword) {
        ([], chars) => chars,
        ([chars], None) => Some(chars.clone()),
        ([_], Some(_)) => {
            return Err(type_error(
                "do_trim() got multiple values for argument 'chars'".into(),
            ));
        }
        (more, _) => {
            return Err(type_error(format!(
                "do_trim() takes from 1 to 2 positional arguments but {} were given",
                more.len() + 1
            )));
        }
    };
    // Jinja2 passes `chars` on to `str.strip`, which raises for anything but None and a
    // string, an undefined value included.
    let chars = match &given {
        Some(c) if c.is_none() => None,
        Some(c) => Some(c.as_str().ok_or_else(|| strip_arg_error("strip"))?),
        None => None,
    };
    if value.kind() != ValueKind::String {
        // str(value) first, refused past the output limit before it is built.
        super::bounded::fits(value, "trim")?;
    }
    let input = minijinja::value::StringInput::new(state, value)?;
    let text = input.as_str();
    let kept = python_strip(text, chars, Ends::Both);
    if kept.len() == text.len() && value.kind() == ValueKind::String {
        return Ok(value.clone());
    }
    Ok(input.preserve_safety(kept.to_string()))
}

/// Python's `iter()` as a `for` loop applies it: None and numbers raise, a string yields its
/// characters (minijinja would iterate None as empty and a string with an unknown length).
pub(super) fn python_iter(value: Value) -> Result<Value, Error> {
    match value.kind() {
        ValueKind::None => Err(Error::new(
            ErrorKind::InvalidOperation,
            "'NoneType' object is not iterable",
        )),
        ValueKind::Number | ValueKind::Bool => Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("'{}' object is not iterable", value.kind()),
        )),
        _ if super::namespace::is_namespace(&value) => Err(Error::new(
            ErrorKind::InvalidOperation,
            "'Namespace' object is not iterable",
        )),
        ValueKind::String => Ok(Value::from(
            {
                let text = value.as_str().unwrap_or_default();
                items_fit(text.chars().count(), "iterating a string")?;
                text
            }
            .chars()
            .map(|c| Value::from(c.to_string()))
            .collect::<Vec<_>>(),
        )),
        _ => Ok(value),
    }
}
