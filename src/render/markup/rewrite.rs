//! A template that makes `Markup` values rewritten so that its `+` and `~` behave as
//! MarkupSafe's (see the module documentation of `markup`).

use super::lexer::{Tok, lex, tags};
use super::parser::{Node, Op, Parser};
use super::{ADD_FUNCTION, MARKUP_FILTERS, PLAIN_FUNCTION};
use crate::render::error::RenderError;

/// The template with its `+` and `~` rewritten when it uses a filter that makes `Markup`;
/// unchanged (borrowed) otherwise.
pub fn rewrite_operators(source: &str) -> Result<std::borrow::Cow<'_, str>, RenderError> {
    let tags = tags(source);
    let uses_markup = tags.iter().any(|t| {
        lex(source, t.body.0, t.body.1).is_ok_and(|tokens| {
            tokens.windows(2).any(|w| {
                w[0].kind == Tok::Op("|")
                    && matches!(w[1].kind, Tok::Name(n) if MARKUP_FILTERS.contains(&n))
            })
        })
    });
    if !uses_markup {
        return Ok(std::borrow::Cow::Borrowed(source));
    }
    let mut out = String::with_capacity(source.len() + 256);
    let mut at = 0;
    for tag in &tags {
        let (start, end) = tag.body;
        let tokens = lex(source, start, end).map_err(|e| unsupported(source, start, &e))?;
        let mut parser = Parser {
            toks: &tokens,
            pos: 0,
            depth: 0,
        };
        // A statement's keyword, then every expression in it in turn: the other words of a
        // statement (`=`, `,`, `in` of a `for` target list...) are skipped between them.
        if tag.statement && matches!(tokens.first().map(|t| t.kind), Some(Tok::Name(_))) {
            parser.pos = 1;
        }
        let mut nodes = Vec::new();
        while parser.pos < tokens.len() {
            if parser.starts_expression() {
                let node = parser
                    .expression()
                    .map_err(|e| unsupported(source, start, e))?;
                nodes.push(node);
            } else {
                parser.pos += 1;
            }
        }
        out.push_str(&source[at..start]);
        let mut from = start;
        for node in &nodes {
            out.push_str(&source[from..node.start]);
            emit(source, node, &mut out);
            from = node.end;
        }
        out.push_str(&source[from..end]);
        at = end;
    }
    out.push_str(&source[at..]);
    Ok(std::borrow::Cow::Owned(out))
}

fn unsupported(source: &str, at: usize, why: impl std::fmt::Display) -> RenderError {
    let line = source[..at].matches('\n').count() + 1;
    RenderError::Unsupported(format!(
        "the template makes Markup values (|safe, |e) and kvaudit cannot read the expression at line {line} to apply MarkupSafe's `+`: {why}"
    ))
}

/// The expression text with its `+` and `~` operations replaced.
fn emit(src: &str, node: &Node, out: &mut String) {
    match &node.op {
        Op::Add => {
            out.push_str(ADD_FUNCTION);
            out.push('(');
            emit(src, &node.children[0], out);
            out.push_str(", ");
            emit(src, &node.children[1], out);
            out.push(')');
        }
        Op::Concat | Op::Other => {
            if node.op == Op::Concat {
                out.push_str(PLAIN_FUNCTION);
                out.push('(');
            }
            let mut from = node.start;
            for child in &node.children {
                out.push_str(&src[from..child.start]);
                emit(src, child, out);
                from = child.end;
            }
            out.push_str(&src[from..node.end]);
            if node.op == Op::Concat {
                out.push(')');
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewrite(src: &str) -> String {
        rewrite_operators(src).unwrap().into_owned()
    }

    #[test]
    fn templates_without_markup_are_left_alone() {
        let src = "{{ a + b ~ c }}{% set x = y + 1 %}";
        assert!(matches!(
            rewrite_operators(src).unwrap(),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn operators_become_calls_with_jinja2_precedence() {
        let a = ADD_FUNCTION;
        let p = PLAIN_FUNCTION;
        assert_eq!(
            rewrite("{{ 'x'|safe + t['name'] + 'y' }}"),
            format!("{{{{ {a}({a}('x'|safe, t['name']), 'y') }}}}")
        );
        // `~` binds tighter than `+`; `-` keeps its place in the chain.
        assert_eq!(
            rewrite("{{- a + b ~ c - d|e -}}"),
            format!("{{{{- {a}(a, {p}(b ~ c)) - d|e -}}}}")
        );
        assert_eq!(
            rewrite("{% set x = f(k=a + b, *c) if n is divisibleby 3 else [1 + 2] %}{{ x|e }}"),
            format!(
                "{{% set x = f(k={a}(a, b), *c) if n is divisibleby 3 else [{a}(1, 2)] %}}{{{{ x|e }}}}"
            )
        );
        assert_eq!(
            rewrite("{% for k, v in (d + e).items() if v + 1 %}{{ v|safe }}{% endfor %}"),
            format!(
                "{{% for k, v in ({a}(d, e)).items() if {a}(v, 1) %}}{{{{ v|safe }}}}{{% endfor %}}"
            )
        );
        // Comments, raw blocks and strings are not expressions.
        assert_eq!(
            rewrite(
                "{# a + b #}{% raw %}{{ a + b }}{% endraw %}{{ '+' ~ {'k': 1}['k'] }}{{ x|e }}"
            ),
            format!(
                "{{# a + b #}}{{% raw %}}{{{{ a + b }}}}{{% endraw %}}{{{{ {p}('+' ~ {{'k': 1}}['k']) }}}}{{{{ x|e }}}}"
            )
        );
    }

    /// Long chains are refused with an error, never walked until the stack overflows.
    #[test]
    fn long_chains_stop_with_an_error() {
        for link in [" + a", ".a", "|trim", "(1)"] {
            let src = format!("{{{{ x|safe }}}}{{{{ y{} }}}}", link.repeat(200_000));
            let err = match rewrite_operators(&src) {
                Ok(_) => panic!("{link}: a 200,000-link chain was accepted"),
                Err(e) => e.to_string(),
            };
            assert!(err.contains("nested more than"), "{link}: {err}");
        }
        let fine = format!("{{{{ x|safe }}}}{{{{ y{} }}}}", " + a".repeat(500));
        assert!(rewrite_operators(&fine).is_ok());
    }

    /// Found by fuzzing: a multi-byte character inside a tag of a Markup template panicked
    /// (a str slice inside the character).
    #[test]
    fn multibyte_characters_inside_tags() {
        let src = "{{ x|e }}{{ 上 + '東' ~ ü }}{% set é = 'ß' %}";
        let out = rewrite(src);
        assert_eq!(
            out,
            format!(
                "{{{{ x|e }}}}{{{{ {ADD_FUNCTION}(上, {PLAIN_FUNCTION}('東' ~ ü)) }}}}{{% set é = 'ß' %}}"
            )
        );
    }
}
