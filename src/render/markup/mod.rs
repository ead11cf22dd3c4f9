//! MarkupSafe's `Markup` as transformers' sandbox meets it (autoescape off).
//!
//! Jinja2's `|safe`, `|e`/`|escape` and `|forceescape` return `Markup` even with autoescape
//! off, and `Markup` escapes the other operand of `+` for HTML: `"'"|safe + name` renders the
//! name with `&#39;` and `&#34;` in it. Rendered alone a `Markup` prints as its text, and `~`
//! (Jinja2's `str_join` when autoescape is off) gives a plain `str`. minijinja marks such
//! strings *safe*, but with autoescape off it never escapes on `+`, so a template that makes
//! `Markup` values gets every `+` routed through [`ADD_FUNCTION`] and every `~` chain through
//! [`PLAIN_FUNCTION`] (a source rewrite, [`rewrite_operators`]); templates without those
//! filters are left as they are.
//!
//! Not reproduced: `Markup`'s own methods (`.strip()`, `.format()`, slicing and `%`) give a
//! plain string here, so their result no longer escapes on a later `+`.

mod lexer;
mod parser;
mod rewrite;

pub use rewrite::rewrite_operators;

use minijinja::value::ValueKind;
use minijinja::{Environment, Error, ErrorKind, Expression, Value};

use super::limits::{max_output, too_large};

/// The function every `+` of a template that makes `Markup` values becomes.
pub const ADD_FUNCTION: &str = "__kvaudit_markup_add";
/// The function every `~` chain of such a template is wrapped in (a plain string result).
pub const PLAIN_FUNCTION: &str = "__kvaudit_plain_str";

/// The filters that return `Markup` in Jinja2.
const MARKUP_FILTERS: [&str; 4] = ["safe", "e", "escape", "forceescape"];

/// MarkupSafe's `escape` of a text: the five characters it replaces, with its entities.
pub fn html_escape(text: &str, out: &mut String) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\'' => out.push_str("&#39;"),
            '"' => out.push_str("&#34;"),
            c => out.push(c),
        }
    }
}

/// The text `Markup(value)` / `escape(value)` start from: strings as they are, other values
/// as the template would print them.
fn text_of(value: &Value) -> Result<String, Error> {
    if value.is_undefined() {
        return Err(Error::new(
            ErrorKind::UndefinedError,
            "undefined value given to a Markup filter",
        ));
    }
    Ok(match value.as_str() {
        Some(s) => s.to_string(),
        None => super::namespace::py_str(value, "a Markup filter")?,
    })
}

fn is_markup(value: &Value) -> bool {
    value.kind() == ValueKind::String && value.is_safe()
}

/// `|safe`: `Markup(value)`.
pub fn safe_filter(value: Value) -> Result<Value, Error> {
    if is_markup(&value) {
        return Ok(value);
    }
    Ok(Value::from_safe_string(text_of(&value)?))
}

/// `|e` / `|escape`: `markupsafe.escape(value)`, which leaves `Markup` as it is.
pub fn escape_filter(value: Value) -> Result<Value, Error> {
    if is_markup(&value) {
        return Ok(value);
    }
    let text = text_of(&value)?;
    let mut out = String::with_capacity(text.len());
    html_escape(&text, &mut out);
    Ok(Value::from_safe_string(out))
}

/// `|forceescape`: escapes a `Markup` value's text again.
pub fn forceescape_filter(value: Value) -> Result<Value, Error> {
    let text = text_of(&value)?;
    let mut out = String::with_capacity(text.len());
    html_escape(&text, &mut out);
    Ok(Value::from_safe_string(out))
}

/// Python's `+` with `Markup.__add__` / `__radd__`: a `Markup` operand escapes a `str` one
/// and the result is `Markup`; with anything but a string `Markup` refuses (TypeError). Every
/// other pair is added as minijinja's own `+` adds it.
pub fn markup_add(a: Value, b: Value) -> Result<Value, Error> {
    let (a_str, b_str) = (a.kind() == ValueKind::String, b.kind() == ValueKind::String);
    let markup = is_markup(&a) || is_markup(&b);
    if markup && !(a_str && b_str) {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            format!(
                "unsupported operand type(s) for +: '{}' and '{}'",
                type_name(&a),
                type_name(&b)
            ),
        ));
    }
    if a_str && b_str {
        let (x, y) = (a.as_str().unwrap_or(""), b.as_str().unwrap_or(""));
        if x.len().saturating_add(y.len()) > max_output() {
            return Err(too_large("+"));
        }
        if !markup {
            return Ok(Value::from([x, y].concat()));
        }
        let mut out = String::with_capacity(x.len() + y.len());
        for (v, text) in [(&a, x), (&b, y)] {
            if v.is_safe() {
                out.push_str(text);
            } else {
                html_escape(text, &mut out);
            }
        }
        if out.len() > max_output() {
            return Err(too_large("+"));
        }
        return Ok(Value::from_safe_string(out));
    }
    native_add(a, b)
}

/// minijinja's `+` on two values (numbers, lists, tuples, and its errors).
fn native_add(a: Value, b: Value) -> Result<Value, Error> {
    use std::sync::OnceLock;
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    static EXPR: OnceLock<Expression<'static, 'static>> = OnceLock::new();
    let expr = EXPR.get_or_init(|| {
        ENV.get_or_init(Environment::new)
            .compile_expression("a + b")
            .expect("a + b compiles")
    });
    expr.eval(minijinja::context! { a => a, b => b })
        // The expression's own location (line 1 of `a + b`) would stand for the template's.
        .map_err(|e| match e.detail() {
            Some(detail) => Error::new(e.kind(), detail.to_string()),
            None => Error::from(e.kind()),
        })
}

fn type_name(v: &Value) -> &'static str {
    match v.kind() {
        ValueKind::String if v.is_safe() => "Markup",
        ValueKind::String => "str",
        ValueKind::None => "NoneType",
        ValueKind::Bool => "bool",
        ValueKind::Number if v.is_integer() => "int",
        ValueKind::Number => "float",
        ValueKind::Seq => "list",
        ValueKind::Map => "dict",
        ValueKind::Undefined => "Undefined",
        _ => "object",
    }
}

/// The result of `~` as Jinja2 gives it with autoescape off: a plain `str`.
pub fn plain_str(value: Value) -> Value {
    if is_markup(&value) {
        Value::from(value.as_str().unwrap_or_default())
    } else {
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Outputs measured with jinja2 3.1.6 / MarkupSafe 3.0.3 in transformers' environment.
    #[test]
    fn markup_renders_as_in_transformers() {
        use crate::render::TemplateEngine;
        let at = chrono::NaiveDate::from_ymd_opt(2026, 1, 15)
            .unwrap()
            .and_hms_opt(10, 0, 0)
            .unwrap();
        let ctx = minijinja::context! { x => "<x&y>", d => minijinja::context! { k => "<v'\"" } };
        let r = |src: &str| {
            TemplateEngine::new(src, crate::render::DEFAULT_FUEL)
                .and_then(|e| e.render(ctx.clone(), at))
                .map_err(|e| e.to_string())
        };
        let cases = [
            ("{{ '<a>'|safe + '<b>' }}", "<a>&lt;b&gt;"),
            ("{{ '<b>' + '<a>'|safe }}", "&lt;b&gt;<a>"),
            ("{{ '<a>'|safe + '<b>'|safe }}", "<a><b>"),
            ("{{ ('<a>'|safe ~ '<b>') + '<c>' }}", "<a><b><c>"),
            ("{{ '<a>'|safe ~ '<b>' }}", "<a><b>"),
            (
                "{{ '<a>'|e }}|{{ '<a>'|escape }}|{{ '\"&\\''|e }}",
                "&lt;a&gt;|&lt;a&gt;|&#34;&amp;&#39;",
            ),
            ("{{ ('<a>'|e) + '<' }}", "&lt;a&gt;&lt;"),
            (
                "{{ ('<a>'|e)|e }}|{{ ('<a>'|e)|forceescape }}",
                "&lt;a&gt;|&amp;lt;a&amp;gt;",
            ),
            (
                "{{ none|safe }}|{{ 1|safe }}|{{ true|e }}|{{ 1.5|e }}|{{ none|e }}",
                "None|1|True|1.5|None",
            ),
            ("{{ '<'|safe + x }}", "<&lt;x&amp;y&gt;"),
            (
                "{{ '<'|safe + d|tojson }}",
                "<{&#34;k&#34;: &#34;&lt;v&#39;\\&#34;&#34;}",
            ),
            ("{% set m = '<'|safe %}{{ m + '>' }}", "<&gt;"),
            ("{{ ('<'|safe|trim) + '>' }}", "<&gt;"),
            ("{{ ('<'|safe)|upper + '>' }}", "<&gt;"),
            ("{{ ('<'|safe)|string + '>' }}", "<&gt;"),
            ("{{ ('<'|safe)|indent(2) + '>' }}", "<&gt;"),
            ("{{ ('<'|safe)|default('x') + '>' }}", "<&gt;"),
            ("{{ ('<'|safe) * 2 + '>' }}", "<<&gt;"),
            ("{{ ['<'|safe, '>']|join + '>' }}", "<>>"),
            ("{{ ('<'|safe ~ '<'|safe) + '>' }}", "<<>"),
            (
                "{% macro f() %}<{% endmacro %}{{ f()|e + '>' }}",
                "&lt;&gt;",
            ),
            ("{% set c %}<{% endset %}{{ c + '>' }}{{ '|'|e }}", "<>|"),
            ("{{ ('a'|safe) + (['<']|first) }}", "a&lt;"),
            ("{{ ('<'|safe)|length }}{{ '<'|safe == '<' }}", "1True"),
            ("{{ ('<'|safe if true else 'x') + '>' }}", "<&gt;"),
            ("{{ '<'|safe + '>' if true }}", "<&gt;"),
            (
                "{{ 1 + 2 }}{{ [1] + [2] }}{{ 'a' + 'b' }}{{ x|e }}",
                "3[1, 2]ab&lt;x&amp;y&gt;",
            ),
        ];
        for (src, want) in cases {
            assert_eq!(r(src).as_deref(), Ok(want), "{src}");
        }
        for src in [
            "{{ '<a>'|safe + 1 }}",
            "{{ 1 + '<a>'|safe }}",
            "{{ '<a>'|safe + none }}",
            "{{ 'a' + 'b' - 1 }}{{ x|e }}",
        ] {
            assert!(r(src).is_err(), "{src} rendered {:?}", r(src));
        }
    }

    #[test]
    fn escape_like_markupsafe() {
        let mut out = String::new();
        html_escape("<a href=\"x\">'&'</a>", &mut out);
        assert_eq!(out, "&lt;a href=&#34;x&#34;&gt;&#39;&amp;&#39;&lt;/a&gt;");
    }
}
