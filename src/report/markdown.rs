//! Markdown from the tool's own templates (`templates/` at the top of the repository).
//!
//! These templates are rendered by their own minijinja `Environment`, never the Hugging
//! Face-compatible sandbox chat templates run in: it has none of the Python compatibility
//! shims, and it escapes every value that is not marked safe (Markdown by backslashes, HTML by
//! entities), so a model id, file name or token text from untrusted input cannot inject
//! markup into a CI summary.

use std::sync::LazyLock;

use anyhow::{Context, Result};
use minijinja::value::Serde;
use minijinja::{AutoEscape, Environment, Value};

use super::{Exporter, Report, Style, visible};

/// `(file name, source)` of every template, embedded so the binary needs no data files.
const TEMPLATES: &[(&str, &str)] = &[
    (
        "diff-turns.md",
        include_str!("../../templates/diff-turns.md"),
    ),
    ("check.md", include_str!("../../templates/check.md")),
    ("corpus.md", include_str!("../../templates/corpus.md")),
    ("corpus.html", include_str!("../../templates/corpus.html")),
];

static ENV: LazyLock<Environment<'static>> = LazyLock::new(report_env);

fn report_env() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_auto_escape_callback(|name| match name.rsplit('.').next() {
        Some("md") => AutoEscape::Custom("markdown".into()),
        Some("html") => AutoEscape::Html,
        _ => AutoEscape::None,
    });
    env.set_formatter(|out, state, value| {
        if matches!(state.auto_escape(), AutoEscape::Custom(name) if name == "markdown")
            && !value.is_safe()
        {
            let text = value.to_string();
            if value.is_number() {
                return out.write_str(&text).map_err(minijinja::Error::from);
            }
            return out
                .write_str(&escape_markdown(&text))
                .map_err(minijinja::Error::from);
        }
        minijinja::escape_formatter(out, state, value)
    });
    env.add_filter("visible", |s: &str| visible(s));
    // A share in [0, 1] as a percentage with one decimal, and a mean with one decimal.
    env.add_filter("percent", |x: f64| format!("{:.1}%", x * 100.0));
    env.add_filter("fixed1", |x: f64| format!("{x:.1}"));
    env.add_filter("binary_bytes", |n: f64| super::binary_bytes(n as u128));
    // A whole number with thousands separators (12,985); anything else as it is.
    env.add_filter("thousands", |v: minijinja::Value| {
        match u128::try_from(v.clone()) {
            Ok(n) => super::thousands(n),
            Err(_) => v.to_string(),
        }
    });
    for (name, source) in TEMPLATES {
        // The sources are part of the binary and tested; a failure here is a build defect.
        env.add_template(name, source)
            .unwrap_or_else(|e| panic!("report template {name}: {e}"));
    }
    env
}

/// Backslash-escapes every ASCII punctuation character (CommonMark allows it for all of them,
/// so the text renders as written) and keeps each value on one line, so a value can sit in a
/// table cell.
pub fn escape_markdown(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' | '\r' => out.push(' '),
            c if c.is_ascii_punctuation() => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// Renders one of the embedded templates with a serializable context (an exporter whose
/// context is more than the report's view, such as the HTML page with its chart geometry).
pub fn render_named(name: &str, context: impl serde::Serialize) -> Result<String> {
    let template = ENV
        .get_template(name)
        .with_context(|| format!("no template {name}"))?;
    template
        .render(Value::from(Serde(context)))
        .with_context(|| format!("cannot render templates/{name}"))
}

pub struct Markdown;

impl<R: Report> Exporter<R> for Markdown {
    fn export(&self, report: &R, _style: &Style) -> Result<String> {
        let name = format!("{}.md", R::NAME);
        let template = ENV
            .get_template(&name)
            .with_context(|| format!("no Markdown template for {}", R::NAME))?;
        let text = template
            .render(Value::from(Serde(report.view())))
            .with_context(|| format!("cannot render templates/{name}"))?;
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_values_are_escaped_and_numbers_and_safe_strings_are_not() {
        let ctx = minijinja::context! {a => "a|b *c*", n => 1.5, s => "<br>"};
        let md = ENV
            .render_named_str("t.md", "{{ a }} {{ n }} {{ s|safe }}", &ctx)
            .unwrap();
        assert_eq!(md, "a\\|b \\*c\\* 1.5 <br>");
        let html = ENV
            .render_named_str("t.html", "{{ a }} {{ s }}", &ctx)
            .unwrap();
        assert_eq!(html, "a|b *c* &lt;br&gt;");
        assert_eq!(
            escape_markdown("<d> [e](f)\nQwen/Qwen3-8B"),
            "\\<d\\> \\[e\\]\\(f\\) Qwen\\/Qwen3\\-8B"
        );
    }

    #[test]
    fn every_template_compiles_in_the_report_env() {
        for (name, _) in TEMPLATES {
            assert!(ENV.get_template(name).is_ok(), "{name}");
        }
    }
}
