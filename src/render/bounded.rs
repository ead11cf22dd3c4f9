//! minijinja's filters that make text out of a value, with the size of that text checked
//! before it is made.
//!
//! A small value can print as a huge text (a list that repeats one long string, a format spec
//! of width 999999999), and minijinja builds the text first and counts it afterwards, so the
//! process aborted on the allocation. Each filter here checks the text's size against
//! [`MAX_OUTPUT`] first, then builds it as before.

use std::borrow::Cow;

use minijinja::value::{Kwargs, Rest, StringInput, ValueKind, ValueOrKwargs};
use minijinja::{Environment, Error, ErrorKind, State, Value};

use super::limits::{limit_error, max_output, too_large};
use super::namespace::{py_str, repr_len, write_repr};

pub fn add_filters(env: &mut Environment<'static>) {
    env.add_filter("string", string);
    env.add_filter("pprint", pprint);
    env.add_filter("format", format);
    env.add_filter("replace", replace);
    env.add_filter("upper", |state: &State, v: Value| {
        fits(&v, "upper")?;
        Ok::<_, Error>(minijinja::filters::upper(StringInput::new(state, &v)?))
    });
    env.add_filter("lower", |state: &State, v: Value| {
        fits(&v, "lower")?;
        Ok::<_, Error>(minijinja::filters::lower(StringInput::new(state, &v)?))
    });
    env.add_filter("capitalize", |state: &State, v: Value| {
        fits(&v, "capitalize")?;
        Ok::<_, Error>(minijinja::filters::capitalize(StringInput::new(state, &v)?))
    });
    env.add_filter("title", |state: &State, v: Value| {
        fits(&v, "title")?;
        let text = StringInput::new(state, &v)?;
        Ok::<_, Error>(minijinja::filters::title(Cow::Borrowed(text.as_str())))
    });
    env.add_filter(
        "split",
        |v: Value, sep: Option<std::sync::Arc<str>>, max: Option<i64>| {
            fits(&v, "split")?;
            minijinja::filters::split(&v, sep, max)
        },
    );
    env.add_filter("list", |state: &State, v: Value| {
        if let Some(s) = v.as_str().filter(|_| v.kind() == ValueKind::String) {
            super::limits::items_fit(s.chars().count(), "list")?;
        }
        minijinja::filters::list(state, v)
    });
    env.add_filter("lines", |v: Value| {
        fits(&v, "lines")?;
        minijinja::filters::lines(&v)
    });
}

/// Refuses a value whose text would pass [`MAX_OUTPUT`] bytes (measured without building it).
pub fn fits(value: &Value, what: &str) -> Result<(), Error> {
    if value.kind() == ValueKind::String {
        return Ok(());
    }
    repr_len(value, max_output())
        .map(drop)
        .ok_or_else(|| too_large(what))
}

/// Jinja2's `string`: `str(value)` (Markup stays Markup).
fn string(value: Value) -> Result<Value, Error> {
    if value.kind() == ValueKind::String {
        return Ok(value);
    }
    py_str(&value, "string").map(Value::from)
}

/// Jinja2's `pprint` is `pprint.pformat(value)`: Python's `repr` for what fits on a line.
fn pprint(value: Value) -> Result<Value, Error> {
    let size = repr_len(&value, max_output()).ok_or_else(|| too_large("pprint"))?;
    let mut out = String::with_capacity(size);
    write_repr(&value, &mut out)
        .map_err(|_| Error::new(ErrorKind::WriteFailure, "pprint failed"))?;
    Ok(Value::from(out))
}

/// Jinja2's `replace(s, old, new, count=None)`: with autoescape off (as transformers renders),
/// `str(s).replace(str(old), str(new), count)`, a plain string.
fn replace(
    value: Value,
    old: Value,
    new: Value,
    count: Option<Value>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let count = match kwargs.get::<Option<Value>>("count")? {
        Some(c) => Some(c),
        None => count,
    };
    kwargs.assert_all_used()?;
    let count = match count {
        Some(c) if !c.is_none() && !c.is_undefined() => Some(i64::try_from(c)?),
        _ => None,
    };
    let (s, old, new) = (
        py_str(&value, "replace")?,
        py_str(&old, "replace")?,
        py_str(&new, "replace")?,
    );
    Ok(Value::from(python_replace(
        &s, &old, &new, count, "replace",
    )?))
}

/// Python's `str.replace(old, new, count)`, refused before it passes [`MAX_OUTPUT`] bytes.
pub fn python_replace(
    s: &str,
    old: &str,
    new: &str,
    count: Option<i64>,
    what: &str,
) -> Result<String, Error> {
    // Python: a negative count replaces every occurrence.
    let limit = count
        .and_then(|c| usize::try_from(c).ok())
        .unwrap_or(usize::MAX);
    let found = if old.is_empty() {
        // An empty `old` matches before every character and at the end.
        s.chars().count().saturating_add(1)
    } else {
        s.matches(old).take(limit).count()
    }
    .min(limit);
    let size = s
        .len()
        .saturating_add(found.saturating_mul(new.len()))
        .saturating_sub(found.saturating_mul(old.len()));
    if size > max_output() {
        return Err(too_large(what));
    }
    if old.is_empty() {
        let mut out = String::with_capacity(size);
        let mut done = 0;
        for c in s.chars() {
            if done < found {
                out.push_str(new);
                done += 1;
            }
            out.push(c);
        }
        if done < found {
            out.push_str(new);
        }
        return Ok(out);
    }
    Ok(s.replacen(old, new, found))
}

/// minijinja's printf-style `format` filter, after checking the widths and precisions its
/// fields ask for.
fn format(state: &mut State, format: &Value, args: Rest<ValueOrKwargs>) -> Result<Value, Error> {
    if let Some(spec) = format.as_str() {
        let args: Vec<Value> = args.iter().map(|a| a.clone().into_value()).collect();
        check_format(spec, &args, Style::Printf, "format")?;
    }
    minijinja::filters::format(state, format, args)
}

/// `a * b` in a chain (see [`product`]): Python's repetition of a string, list or tuple by an
/// integer (a count below one gives an empty one; Markup stays Markup), refused before it
/// passes the output limit, or a list of more than a million items; anything else (numbers)
/// as minijinja multiplies it.
fn mul(state: &State, a: Value, b: Value) -> Result<Value, Error> {
    let repeatable = |v: &Value| {
        matches!(
            v.kind(),
            ValueKind::String | ValueKind::Seq | ValueKind::Iterable
        )
    };
    let (seq, count) = if repeatable(&a) {
        (a, b)
    } else if repeatable(&b) {
        (b, a)
    } else {
        return minijinja_mul(a, b);
    };
    let n = match count.kind() {
        ValueKind::Bool => i128::from(count.is_true()),
        ValueKind::Number if count.is_integer() => i128::try_from(count.clone())?,
        _ => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!(
                    "can't multiply sequence by non-int of type '{}'",
                    super::namespace::python_type(&count)
                ),
            ));
        }
    };
    let n = usize::try_from(n.max(0)).unwrap_or(usize::MAX);
    if let Some(s) = seq.as_str().filter(|_| seq.kind() == ValueKind::String) {
        if s.len()
            .checked_mul(n)
            .is_none_or(|size| size > max_output())
        {
            return Err(too_large("*"));
        }
        let repeated = s.repeat(n);
        return Ok(if seq.is_safe() {
            Value::from_safe_string(repeated)
        } else {
            Value::from(repeated)
        });
    }
    // A list is made, as Python makes it (minijinja repeated it lazily, so a small list could
    // stand for a hundred million items that printing, joining or `~` then went through).
    let items: Vec<Value> = seq.try_iter()?.collect();
    let total = items.len().saturating_mul(n);
    super::limits::items_fit(total, "*")?;
    state.consume_fuel(total as u64 / 2)?;
    let mut out = Vec::with_capacity(total);
    for _ in 0..n {
        out.extend(items.iter().cloned());
    }
    Ok(
        if seq
            .downcast_object_ref::<minijinja::value::Tuple>()
            .is_some()
        {
            Value::from(minijinja::value::Tuple::from(out))
        } else {
            Value::from(out)
        },
    )
}

/// `a + b` in a chain (see [`sum`]): two strings joined, or two lists or tuples, checked
/// against the output limit and a million items before minijinja joins them; anything else
/// (numbers) as minijinja adds it.
fn add(a: Value, b: Value) -> Result<Value, Error> {
    if let (Some(x), Some(y)) = (
        a.as_str().filter(|_| a.kind() == ValueKind::String),
        b.as_str().filter(|_| b.kind() == ValueKind::String),
    ) {
        if x.len().saturating_add(y.len()) > max_output() {
            return Err(too_large("+"));
        }
        let joined = [x, y].concat();
        return Ok(if a.is_safe() && b.is_safe() {
            Value::from_safe_string(joined)
        } else {
            Value::from(joined)
        });
    }
    let items = |v: &Value| match v.kind() {
        ValueKind::Seq | ValueKind::Iterable => v.len(),
        _ => None,
    };
    if let (Some(n), Some(m)) = (items(&a), items(&b)) {
        super::limits::items_fit(n.saturating_add(m), "+")?;
    }
    minijinja_binop(BinOp::Add, a, b)
}

/// A chain `a + b - c` (see `guard::operators::wrap_sums`): `args` are the operands with each
/// operator between them, evaluated left to right.
pub fn sum(args: Rest<Value>) -> Result<Value, Error> {
    fold(args, |op, a, b| match op {
        "+" => add(a, b),
        _ => minijinja_binop(BinOp::Sub, a, b),
    })
}

/// A chain `a * b / c` (see `guard::operators::wrap_products`), as [`sum`].
pub fn product(state: &State, args: Rest<Value>) -> Result<Value, Error> {
    fold(args, |op, a, b| match op {
        "*" => mul(state, a, b),
        "/" => minijinja_binop(BinOp::Div, a, b),
        "//" => minijinja_binop(BinOp::FloorDiv, a, b),
        _ => minijinja_binop(BinOp::Rem, a, b),
    })
}

fn fold(
    args: Rest<Value>,
    mut apply: impl FnMut(&str, Value, Value) -> Result<Value, Error>,
) -> Result<Value, Error> {
    let mut args = args.0.into_iter();
    let mut acc = args.next().unwrap_or_default();
    while let (Some(op), Some(b)) = (args.next(), args.next()) {
        acc = apply(op.as_str().unwrap_or_default(), acc, b)?;
    }
    Ok(acc)
}

#[derive(Clone, Copy)]
enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    FloorDiv,
    Rem,
}

/// minijinja's own arithmetic, for what kvaudit does not check itself (its number semantics,
/// its errors): fixed expressions compiled once in a bare environment.
fn minijinja_binop(op: BinOp, a: Value, b: Value) -> Result<Value, Error> {
    thread_local! {
        static EXPRESSIONS: [minijinja::Expression<'static, 'static>; 6] = {
            static ENV: std::sync::OnceLock<Environment<'static>> = std::sync::OnceLock::new();
            let env = ENV.get_or_init(Environment::new);
            ["a + b", "a - b", "a * b", "a / b", "a // b", "a % b"]
                .map(|e| env.compile_expression(e).expect("a fixed expression compiles"))
        };
    }
    EXPRESSIONS
        .with(|e| e[op as usize].eval(minijinja::context! { a => a, b => b }))
        // The expression's own location (line 1 of `a + b`) would stand for the template's:
        // the error is raised again without it, and the render places it at the call.
        .map_err(|e| match e.detail() {
            Some(detail) => Error::new(e.kind(), detail.to_string()),
            None => Error::from(e.kind()),
        })
}

/// minijinja's own `*`, for what is not a repetition (its number semantics, its errors).
fn minijinja_mul(a: Value, b: Value) -> Result<Value, Error> {
    minijinja_binop(BinOp::Mul, a, b)
}

/// The two format languages: `%` (printf) and `str.format`.
#[derive(Clone, Copy, PartialEq)]
pub enum Style {
    Printf,
    Braces,
}

/// Refuses a format minijinja's parser would panic on: it steps over the key of a `%(key)`
/// field and the index of a `{0[index]}` field one byte at a time, which splits a character
/// that takes more than one byte (found by fuzzing, `fuzz/regressions/template_methods/`).
/// Python accepts such keys; kvaudit reports that it does not.
fn check_format_keys(spec: &str, style: Style) -> Result<(), Error> {
    let bytes = spec.as_bytes();
    let refuse = || {
        Error::new(
            ErrorKind::InvalidOperation,
            "kvaudit cannot format a field whose key is not ASCII",
        )
        .with_source(super::error::NotSupported)
    };
    // Whether bytes[from..] holds a non-ASCII byte before `close` (or the end).
    let non_ascii_before = |from: usize, close: u8| {
        let rest = bytes.get(from..).unwrap_or_default();
        let end = rest.iter().position(|&b| b == close).unwrap_or(rest.len());
        (!rest[..end].is_ascii(), from + end)
    };
    let mut i = 0;
    while i < bytes.len() {
        match (style, bytes[i]) {
            (Style::Braces, b'{') if bytes.get(i + 1) == Some(&b'{') => i += 2,
            (Style::Printf, b'%') if bytes.get(i + 1) == Some(&b'%') => i += 2,
            (Style::Braces, b'{') => {
                // The argument's name or number, then `.attr` and `[index]` steps.
                i += 1;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                loop {
                    match bytes.get(i) {
                        Some(b'.') => {
                            i += 1;
                            while i < bytes.len()
                                && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_')
                            {
                                i += 1;
                            }
                        }
                        Some(b'[') => {
                            let (bad, end) = non_ascii_before(i + 1, b']');
                            if bad {
                                return Err(refuse());
                            }
                            i = end + 1;
                        }
                        _ => break,
                    }
                }
            }
            (Style::Printf, b'%') if bytes.get(i + 1) == Some(&b'(') => {
                let (bad, end) = non_ascii_before(i + 2, b')');
                if bad {
                    return Err(refuse());
                }
                i = end + 1;
            }
            _ => i += 1,
        }
    }
    Ok(())
}

/// The largest precision a format may ask for: Rust's float formatting counts exponent-form
/// digits in a u16 (a precision of 65536 in `e` or `g` panics), and no template needs more.
const MAX_PRECISION: usize = 65535;

/// Refuses a precision (the digits after the spec's `.`) over [`MAX_PRECISION`].
fn check_precision(spec: &str, what: &str) -> Result<(), Error> {
    let Some((_, after)) = spec.split_once('.') else {
        return Ok(());
    };
    let digits: &str = &after[..after
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(after.len())];
    if digits.parse::<usize>().is_ok_and(|p| p <= MAX_PRECISION) || digits.is_empty() {
        return Ok(());
    }
    Err(limit_error(format!(
        "{what}: a precision over {MAX_PRECISION} is not supported"
    )))
}

/// Refuses a format whose result could pass [`MAX_OUTPUT`] bytes: what it can write is its own
/// text, and for each field the text of the argument it names, its width and precision (every
/// number in its spec counted, a fill digit included) and room for the longest number.
pub fn check_format(spec: &str, args: &[Value], style: Style, what: &str) -> Result<(), Error> {
    check_format_keys(spec, style)?;
    let positional: Vec<&Value> = args.iter().filter(|a| !a.is_kwargs()).collect();
    let keywords = args.iter().find(|a| a.is_kwargs());
    let mut lengths: Vec<Option<usize>> = vec![None; positional.len()];
    let mut text_len = |value: &Value| -> Result<usize, Error> {
        fits(value, what)?;
        Ok(match value.as_str() {
            Some(s) => s.len(),
            None => py_str(value, what)?.len(),
        })
    };
    let mut positional_len =
        |i: usize, text_len: &mut dyn FnMut(&Value) -> Result<usize, Error>| match positional.get(i)
        {
            Some(v) => {
                if lengths[i].is_none() {
                    lengths[i] = Some(text_len(v)?);
                }
                Ok::<usize, Error>(lengths[i].unwrap_or(0))
            }
            None => Ok(0),
        };
    // A number prints at most ~330 characters before its precision (f64 max in fixed
    // notation, grouped) and a field adds sign, prefix and padding to that.
    const NUMBER_ROOM: usize = 512;
    let numbers = |field: &str| {
        field
            .split(|c: char| !c.is_ascii_digit())
            .filter(|run| !run.is_empty())
            .map(|run| run.parse::<usize>().unwrap_or(usize::MAX))
            .fold(NUMBER_ROOM, usize::saturating_add)
    };
    let mut total = spec.len();
    let mut next = 0usize;
    let bytes = spec.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        // A field's precision error, raised after its size is checked (the clearer error first).
        let precision: Option<Error>;
        let field_len = match (style, bytes[i]) {
            (Style::Braces, b'{') if bytes.get(i + 1) == Some(&b'{') => {
                i += 2;
                continue;
            }
            (Style::Printf, b'%') if bytes.get(i + 1) == Some(&b'%') => {
                i += 2;
                continue;
            }
            (Style::Braces, b'{') => {
                // The field runs to its matching `}` (nested fields are counted with it).
                let start = i + 1;
                let mut depth = 0;
                while i < bytes.len() {
                    match bytes[i] {
                        b'{' => depth += 1,
                        b'}' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    i += 1;
                }
                let field = &spec[start.min(spec.len())..i.min(spec.len())];
                i += 1;
                let name_end = field.find([':', '!']).unwrap_or(field.len());
                let (name, format_spec) = field.split_at(name_end);
                let base = &name[..name.find(['.', '[']).unwrap_or(name.len())];
                let arg = if base.is_empty() {
                    next += 1;
                    positional_len(next - 1, &mut text_len)?
                } else if let Ok(index) = base.parse::<usize>() {
                    positional_len(index, &mut text_len)?
                } else {
                    match keywords.and_then(|k| k.get_item(&Value::from(base)).ok()) {
                        Some(v) if !v.is_undefined() => text_len(&v)?,
                        _ => 0,
                    }
                };
                precision = check_precision(format_spec, what).err();
                arg.saturating_add(numbers(format_spec))
            }
            (Style::Printf, b'%') => {
                i += 1;
                let keyed = bytes.get(i) == Some(&b'(');
                if keyed {
                    while i < bytes.len() && bytes[i] != b')' {
                        i += 1;
                    }
                    i += 1;
                }
                let from = i.min(spec.len());
                while i < bytes.len() && !bytes[i].is_ascii_alphabetic() {
                    i += 1;
                }
                let flags = &spec[from..i.min(spec.len())];
                i += 1;
                // A keyed field reads the one mapping argument: its whole text bounds it.
                let arg = if keyed {
                    positional_len(0, &mut text_len)?
                } else {
                    next += 1;
                    positional_len(next - 1, &mut text_len)?
                };
                precision = check_precision(flags, what).err();
                arg.saturating_add(numbers(flags))
            }
            _ => {
                i += 1;
                continue;
            }
        };
        total = total.saturating_add(field_len);
        if total > max_output() {
            return Err(too_large(what));
        }
        if let Some(e) = precision {
            return Err(e);
        }
    }
    Ok(())
}
