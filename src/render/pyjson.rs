//! Python-compatible JSON.
//!
//! transformers replaces Jinja's `tojson` with `json.dumps(x, ensure_ascii=False, indent=None,
//! separators=None, sort_keys=False)`; minijinja's own filter escapes HTML characters and writes
//! floats differently, so templates that serialise tool schemas would render other bytes.

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{Error, ErrorKind, Value};

use super::limits::{max_output, too_large};
use super::namespace::python_float_repr;

/// Options of Python's `json.dumps` that chat templates pass.
#[derive(Debug, Clone)]
pub struct DumpOptions {
    pub ensure_ascii: bool,
    pub indent: Option<String>,
    pub item_sep: String,
    pub key_sep: String,
    pub sort_keys: bool,
}

impl Default for DumpOptions {
    fn default() -> Self {
        DumpOptions {
            ensure_ascii: false,
            indent: None,
            item_sep: ", ".into(),
            key_sep: ": ".into(),
            sort_keys: false,
        }
    }
}

impl DumpOptions {
    fn from_kwargs(kwargs: &Kwargs) -> Result<Self, Error> {
        let mut opts = DumpOptions::default();
        if let Some(v) = kwargs.get::<Option<bool>>("ensure_ascii")? {
            opts.ensure_ascii = v;
        }
        if let Some(v) = kwargs.get::<Option<bool>>("sort_keys")? {
            opts.sort_keys = v;
        }
        let indent: Option<Value> = kwargs.get("indent")?;
        if let Some(indent) = indent.filter(|v| !v.is_none() && !v.is_undefined()) {
            // Python: an int gives that many spaces (negative means none), a string is used as is.
            opts.indent = Some(match indent.kind() {
                ValueKind::String => indent.as_str().unwrap_or_default().to_string(),
                ValueKind::Number => {
                    let n = indent.as_i64().unwrap_or(0).max(0);
                    if n > max_output() as i64 {
                        return Err(too_large("tojson"));
                    }
                    " ".repeat(n as usize)
                }
                _ => {
                    return Err(Error::new(
                        ErrorKind::InvalidOperation,
                        "tojson: indent must be an integer or a string",
                    ));
                }
            });
            opts.item_sep = ",".into();
        }
        let separators: Option<Value> = kwargs.get("separators")?;
        if let Some(seps) = separators.filter(|v| !v.is_none() && !v.is_undefined()) {
            let parts: Vec<Value> = seps.try_iter()?.collect();
            match parts.as_slice() {
                [a, b] if a.as_str().is_some() && b.as_str().is_some() => {
                    opts.item_sep = a.as_str().unwrap_or_default().to_string();
                    opts.key_sep = b.as_str().unwrap_or_default().to_string();
                }
                _ => {
                    return Err(Error::new(
                        ErrorKind::InvalidOperation,
                        "tojson: separators must be a pair of strings",
                    ));
                }
            }
        }
        kwargs.assert_all_used()?;
        Ok(opts)
    }
}

/// The `tojson` filter as transformers defines it.
pub fn tojson_filter(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let opts = DumpOptions::from_kwargs(&kwargs)?;
    let mut out = String::new();
    dump(value, &opts, 0, &mut out)?;
    // transformers' tojson returns a plain str: a Markup operand of `+` escapes it.
    Ok(Value::from(out))
}

/// Serialise `value` exactly as Python's `json.dumps` would.
pub fn dump(
    value: &Value,
    opts: &DumpOptions,
    depth: usize,
    out: &mut String,
) -> Result<(), Error> {
    // Kept values are bounded (namespace.rs), so this is only a guard: Python's encoder stops
    // at its recursion limit too.
    if depth > 2 * super::namespace::MAX_VALUE_DEPTH {
        return Err(Error::new(
            ErrorKind::BadSerialization,
            "tojson: maximum recursion depth exceeded while encoding a JSON object",
        ));
    }
    match value.kind() {
        ValueKind::Undefined => {
            return Err(Error::new(
                ErrorKind::BadSerialization,
                "tojson: Object of type Undefined is not JSON serializable",
            ));
        }
        ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if value.is_true() { "true" } else { "false" }),
        ValueKind::Number => {
            if value.is_integer() {
                out.push_str(&value.to_string());
            } else {
                let f = f64::try_from(value.clone())?;
                out.push_str(&python_json_float(f));
            }
        }
        ValueKind::String => {
            write_string(value.as_str().unwrap_or_default(), opts.ensure_ascii, out)?
        }
        // Items one at a time: a lazily repeated list can hold a hundred million items that
        // the output limit stops long before they are all made.
        ValueKind::Seq | ValueKind::Iterable => {
            write_container(
                out,
                opts,
                depth,
                '[',
                ']',
                value.try_iter()?,
                |item, out| dump(&item, opts, depth + 1, out),
            )?;
        }
        ValueKind::Map => {
            let mut entries: Vec<(Value, Value)> = Vec::new();
            for key in value.try_iter()? {
                let item = value.get_item(&key)?;
                entries.push((key, item));
            }
            if opts.sort_keys {
                entries.sort_by(|a, b| a.0.cmp(&b.0));
            }
            write_container(
                out,
                opts,
                depth,
                '{',
                '}',
                entries.into_iter(),
                |(key, item), out| {
                    write_key(&key, opts, out)?;
                    out.push_str(&opts.key_sep);
                    dump(&item, opts, depth + 1, out)
                },
            )?;
        }
        // Python's encoder refuses a Namespace by its type name (a plain object to minijinja).
        _ if super::namespace::is_namespace(value) => {
            return Err(Error::new(
                ErrorKind::BadSerialization,
                "tojson: Object of type Namespace is not JSON serializable",
            ));
        }
        _ => {
            return Err(Error::new(
                ErrorKind::BadSerialization,
                format!(
                    "tojson: Object of type {} is not JSON serializable",
                    value.kind()
                ),
            ));
        }
    }
    Ok(())
}

fn write_container<T>(
    out: &mut String,
    opts: &DumpOptions,
    depth: usize,
    open: char,
    close: char,
    items: impl Iterator<Item = T>,
    mut item: impl FnMut(T, &mut String) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut items = items.peekable();
    out.push(open);
    if items.peek().is_none() {
        out.push(close);
        return Ok(());
    }
    // Indentation grows with depth times items, whatever the data's size: check before each
    // piece is written, so a huge `indent` stops here instead of exhausting memory.
    let push_indent = |out: &mut String, levels: usize| -> Result<(), Error> {
        if let Some(indent) = &opts.indent {
            let need = indent
                .len()
                .checked_mul(levels)
                .and_then(|n| n.checked_add(out.len() + 1));
            if need.is_none_or(|n| n > max_output()) {
                return Err(too_large("tojson"));
            }
            out.push('\n');
            for _ in 0..levels {
                out.push_str(indent);
            }
        }
        Ok(())
    };
    for (i, next) in items.enumerate() {
        if i > 0 {
            out.push_str(&opts.item_sep);
        }
        push_indent(out, depth + 1)?;
        item(next, out)?;
        if out.len() > max_output() {
            return Err(too_large("tojson"));
        }
    }
    push_indent(out, depth)?;
    out.push(close);
    Ok(())
}

/// Python converts non-string keys: numbers and booleans become their JSON text, None "null".
fn write_key(key: &Value, opts: &DumpOptions, out: &mut String) -> Result<(), Error> {
    match key.kind() {
        ValueKind::String => {
            write_string(key.as_str().unwrap_or_default(), opts.ensure_ascii, out)?
        }
        ValueKind::None => out.push_str("\"null\""),
        ValueKind::Bool => out.push_str(if key.is_true() {
            "\"true\""
        } else {
            "\"false\""
        }),
        ValueKind::Number => {
            let mut tmp = String::new();
            dump(key, opts, 0, &mut tmp)?;
            out.push('"');
            out.push_str(&tmp);
            out.push('"');
        }
        _ => {
            return Err(Error::new(
                ErrorKind::BadSerialization,
                format!(
                    "tojson: keys must be str, int, float, bool or None, not {}",
                    key.kind()
                ),
            ));
        }
    }
    Ok(())
}

/// A JSON string, refused once the output passes the limit (escapes make up to six bytes of
/// one, so a long string of control characters grows sixfold).
fn write_string(s: &str, ensure_ascii: bool, out: &mut String) -> Result<(), Error> {
    if out.len().saturating_add(s.len()) > max_output() {
        return Err(too_large("tojson"));
    }
    super::limits::reserve_str_within(out, s.len() + 2, max_output());
    out.push('"');
    for (i, c) in s.chars().enumerate() {
        if i % 4096 == 4095 && out.len() > max_output() {
            return Err(too_large("tojson"));
        }
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if ensure_ascii && (c as u32) > 0x7f => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{:04x}", unit));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    Ok(())
}

/// `json.dumps` writes non-finite floats as JavaScript literals and finite ones as `repr`.
fn python_json_float(f: f64) -> String {
    if f.is_nan() {
        "NaN".into()
    } else if f.is_infinite() {
        if f > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        }
    } else {
        python_float_repr(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_escape_like_python() {
        let mut out = String::new();
        write_string("a\"b\\c\n\u{1}é<&>'", false, &mut out).unwrap();
        assert_eq!(out, "\"a\\\"b\\\\c\\n\\u0001é<&>'\"");
        let mut out = String::new();
        write_string("é😀", true, &mut out).unwrap();
        assert_eq!(out, "\"\\u00e9\\ud83d\\ude00\"");
    }
}
