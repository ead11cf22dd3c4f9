//! The source rewritten so that every value a template feeds back goes through kvaudit's
//! checks (see the module documentation of `guard`).

use minijinja::machinery::{Span, Token};

use super::edits::{Edits, Instrumented, SETATTR_LEVEL};
use super::operators::{rewrite_containment, wrap_concat_operands, wrap_products, wrap_sums};
use super::reserved::{BIND_FUNCTION, BLOCK_PREFIX, SETATTR_FUNCTION, SINK};
use super::tags::{
    Block, Tag, block_kind, end_of, for_each_tag, is_close, is_open, line_of, start_of, top_level,
};
use crate::render::error::RenderError;

/// The parameter names of `(a, b=..., c)` starting at `tokens[open]`.
fn parameter_names<'s>(tokens: &[(Token<'s>, Span)], open: usize) -> Vec<&'s str> {
    let mut names = Vec::new();
    let mut level = 0i32;
    for i in open..tokens.len() {
        let t = &tokens[i].0;
        if is_open(t) {
            level += 1;
            continue;
        }
        if is_close(t) {
            level -= 1;
            if level == 0 {
                break;
            }
            continue;
        }
        if level == 1
            && let Token::Ident(name) = t
            && matches!(tokens[i - 1].0, Token::ParenOpen | Token::Comma)
            && matches!(
                tokens.get(i + 1).map(|(t, _)| t),
                Some(Token::Comma | Token::Assign | Token::ParenClose)
            )
        {
            names.push(*name);
        }
    }
    names
}

/// `{% set a, b = BIND(a), BIND(b) %}`.
fn rebind(names: &[&str]) -> String {
    let checked: Vec<String> = names
        .iter()
        .map(|n| format!("{BIND_FUNCTION}({n})"))
        .collect();
    format!("set {} = {}", names.join(", "), checked.join(", "))
}

/// Adds the statement `body` as a tag of its own right after `tag`, which takes over the
/// closing delimiter's whitespace control (`-%}` strips what follows the new tag).
fn append_statement(source: &str, tag: &Tag, body: &str, edits: &mut Edits) {
    let Some(close) = tag.close else { return };
    let (start, end) = (start_of(&close), end_of(&close));
    edits.replace(start, end, format!("%}}{{% {body} {}", &source[start..end]));
}

/// The macros whose calls can nest (a recursion, direct or through other macros), by name;
/// `None` when that cannot be told from the source: a macro used other than by calling it by
/// name (passed, stored, or its name reused), or a `call` block, whose `caller()` can call
/// back. Only a nesting call can feed a value back into the same macro, so only these need
/// their arguments checked (a check on every call cost some templates ~5% of a render).
fn reentrant_macros(source: &str) -> Option<std::collections::HashSet<String>> {
    use std::collections::{HashMap, HashSet};
    /// A name a tag uses: the macro the tag is in, and whether the name is called.
    struct Use {
        within: Option<String>,
        name: String,
        called: bool,
    }
    let mut defined: Vec<String> = Vec::new();
    let mut uses: Vec<Use> = Vec::new();
    let mut call_blocks = false;
    // The macros open around each tag, innermost last.
    let mut open: Vec<Option<String>> = Vec::new();
    let _ = for_each_tag(source, |tag| {
        let tokens = &tag.tokens;
        let keyword = match tokens.first() {
            Some((Token::Ident(w), _)) if tag.block => Some(*w),
            _ => None,
        };
        let defines = match (keyword, tokens.get(1)) {
            (Some("macro"), Some((Token::Ident(name), _))) => Some(name.to_string()),
            _ => None,
        };
        if matches!(keyword, Some("call")) {
            call_blocks = true;
        }
        // A macro's own header (its default arguments) runs inside it.
        if let Some(name) = &defines {
            defined.push(name.clone());
            open.push(Some(name.clone()));
        }
        let within = open.iter().rev().flatten().next().cloned();
        // Every name used, and whether it is called (`name(`, not a method, filter or test).
        for (i, (t, _)) in tokens.iter().enumerate() {
            let Token::Ident(name) = t else { continue };
            let after_dot = i > 0 && matches!(tokens[i - 1].0, Token::Dot | Token::Pipe);
            if after_dot || (defines.is_some() && i == 1) {
                continue;
            }
            uses.push(Use {
                within: within.clone(),
                name: name.to_string(),
                called: matches!(tokens.get(i + 1), Some((Token::ParenOpen, _))),
            });
        }
        if defines.is_none() && tag.block && block_kind(&tag) == Block::Opens {
            open.push(None);
        } else if tag.block && block_kind(&tag) == Block::Closes {
            open.pop();
        }
        Ok(())
    });
    if call_blocks {
        return None;
    }
    let macros: HashSet<&str> = defined.iter().map(String::as_str).collect();
    let mut calls: HashMap<&str, HashSet<&str>> = HashMap::new();
    for u in &uses {
        if u.name == "caller" || (macros.contains(u.name.as_str()) && !u.called) {
            return None;
        }
        if let (Some(m), true) = (&u.within, macros.contains(u.name.as_str())) {
            calls.entry(m.as_str()).or_default().insert(u.name.as_str());
        }
    }
    // A macro is re-entrant when it can reach itself through the calls.
    let reaches_itself = |start: &str| {
        let mut seen = HashSet::new();
        let mut todo: Vec<&str> = calls.get(start).into_iter().flatten().copied().collect();
        while let Some(m) = todo.pop() {
            if m == start {
                return true;
            }
            if seen.insert(m) {
                todo.extend(calls.get(m).into_iter().flatten().copied());
            }
        }
        false
    };
    Some(
        macros
            .iter()
            .filter(|m| reaches_itself(m))
            .map(|m| m.to_string())
            .collect(),
    )
}

/// The source with every value fed back routed through kvaudit's checks (see the module
/// documentation): namespace attributes, macro and `caller` arguments, recursive loop items;
/// and `~` operands through Python's `str()`.
pub fn instrument(source: &str) -> Result<Instrumented, RenderError> {
    let reentrant = reentrant_macros(source);
    let mut edits = Edits::default();
    // Captured `set` blocks open: the namespace attribute each assigns, if any.
    let mut set_blocks: Vec<Option<(String, String, usize)>> = Vec::new();
    let mut blocks = 0usize;
    for_each_tag(source, |tag| {
        wrap_concat_operands(&tag, &mut edits);
        rewrite_containment(&tag, &mut edits)?;
        wrap_sums(&tag, &mut edits);
        wrap_products(&tag, &mut edits);
        if !tag.block {
            return Ok(());
        }
        let tokens = &tag.tokens;
        let Some((Token::Ident(word), _)) = tokens.first() else {
            return Ok(());
        };
        match *word {
            "set" => match top_level(tokens, |t| matches!(t, Token::Assign)) {
                Some(assign) => {
                    let (targets, value) = (&tokens[1..assign], &tokens[assign + 1..]);
                    let (Some(first), Some(last)) = (value.first(), value.last()) else {
                        return Ok(());
                    };
                    let (from, to) = (start_of(&first.1), end_of(&last.1));
                    match targets {
                        [
                            (Token::Ident(ns), a),
                            (Token::Dot, _),
                            (Token::Ident(attr), b),
                        ] => {
                            edits.replace(start_of(a), end_of(b), SINK.to_string());
                            edits.wrap(
                                from,
                                to,
                                SETATTR_LEVEL,
                                format!("{SETATTR_FUNCTION}({ns}, '{attr}', ("),
                                "))",
                            );
                        }
                        _ if targets.iter().any(|(t, _)| matches!(t, Token::Dot)) => {
                            return Err(RenderError::Unsupported(format!(
                                "template line {}: kvaudit does not render a namespace attribute \
                                 assigned together with other targets",
                                line_of(&tag)
                            )));
                        }
                        _ => {}
                    }
                }
                None => {
                    let end =
                        top_level(tokens, |t| matches!(t, Token::Pipe)).unwrap_or(tokens.len());
                    match &tokens[1..end] {
                        [
                            (Token::Ident(ns), a),
                            (Token::Dot, _),
                            (Token::Ident(attr), b),
                        ] => {
                            blocks += 1;
                            edits.replace(
                                start_of(a),
                                end_of(b),
                                format!("{BLOCK_PREFIX}{blocks}"),
                            );
                            set_blocks.push(Some((ns.to_string(), attr.to_string(), blocks)));
                        }
                        _ => set_blocks.push(None),
                    }
                }
            },
            "endset" => {
                if let Some(Some((ns, attr, n))) = set_blocks.pop() {
                    append_statement(
                        source,
                        &tag,
                        &format!(
                            "set {SINK} = {SETATTR_FUNCTION}({ns}, '{attr}', {BLOCK_PREFIX}{n})"
                        ),
                        &mut edits,
                    );
                }
            }
            "macro" => {
                let nests = match (&reentrant, tokens.get(1)) {
                    (Some(set), Some((Token::Ident(name), _))) => set.contains(*name),
                    _ => true,
                };
                if let Some(open) = tokens
                    .iter()
                    .position(|(t, _)| matches!(t, Token::ParenOpen))
                    .filter(|_| nests)
                {
                    let names = parameter_names(tokens, open);
                    if !names.is_empty() {
                        append_statement(source, &tag, &rebind(&names), &mut edits);
                    }
                }
            }
            "call" if matches!(tokens.get(1), Some((Token::ParenOpen, _))) => {
                let names = parameter_names(tokens, 1);
                if !names.is_empty() {
                    append_statement(source, &tag, &rebind(&names), &mut edits);
                }
            }
            "for" => {
                let recursive = top_level(tokens, |t| matches!(t, Token::Ident("recursive")));
                let within = top_level(tokens, |t| matches!(t, Token::Ident("in")));
                if let (Some(_), Some(within)) = (recursive, within) {
                    let names: Vec<&str> = tokens[1..within]
                        .iter()
                        .filter_map(|(t, _)| match t {
                            Token::Ident(n) => Some(*n),
                            _ => None,
                        })
                        .collect();
                    if !names.is_empty() {
                        append_statement(source, &tag, &rebind(&names), &mut edits);
                    }
                }
            }
            _ => {}
        }
        Ok(())
    })?;
    Ok(edits.apply(source))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::guard::reserved::{SUM_FUNCTION, check_reserved};

    #[test]
    fn kept_values_and_concatenations_are_routed_through_checks() {
        let out = instrument("{% set x = a ~ 'b' ~ c.d|e %}{{ x ~ y if z else w }}")
            .unwrap()
            .text;
        assert_eq!(
            out,
            "{% set x = __kvaudit_str(a) ~ 'b' ~ __kvaudit_str(c.d|e) %}\
             {{ __kvaudit_str(x) ~ __kvaudit_str(y) if z else w }}"
        );
        assert_eq!(
            instrument("{% for x in y recursive %}{{ loop(x) }}{% endfor %}")
                .unwrap()
                .text,
            "{% for x in y recursive %}{% set x = __kvaudit_bind(x) %}{{ loop(x) }}{% endfor %}"
        );
        assert_eq!(
            instrument("{%- set ns.a = ns.a + 1 -%}").unwrap().text,
            "{%- set __kvaudit_sink = __kvaudit_setattr(ns, 'a', (ns.a + 1)) -%}"
        );
        assert_eq!(
            instrument("{% set ns.a %}x{% endset -%}\n").unwrap().text,
            "{% set __kvaudit_block_1 %}x{% endset %}{% set __kvaudit_sink = \
             __kvaudit_setattr(ns, 'a', __kvaudit_block_1) -%}\n"
        );
        assert_eq!(
            instrument("{% macro m(a, b=[1, 2], c) -%}{{ m(a, b, c) }}{%- endmacro %}")
                .unwrap()
                .text,
            "{% macro m(a, b=[1, 2], c) %}{% set a, b, c = __kvaudit_bind(a), \
             __kvaudit_bind(b), __kvaudit_bind(c) -%}{{ m(a, b, c) }}{%- endmacro %}"
        );
        // Only a macro whose calls can nest is checked: recursion, direct or mutual, or a
        // macro the source does not only call by name.
        let checked = |src: &str| instrument(src).unwrap().text.matches(BIND_FUNCTION).count();
        assert_eq!(
            checked("{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1) }}"),
            0
        );
        assert_eq!(
            checked(
                "{% macro a(x) %}{{ b(x) }}{% endmacro %}{% macro b(x) %}{{ a(x) }}{% endmacro %}\
                 {% macro c(x) %}{{ a(x) }}{% endmacro %}"
            ),
            2
        );
        assert_eq!(
            checked("{% macro m(a) %}{{ a }}{% endmacro %}{% set f = m %}{{ f(1) }}"),
            1
        );
        assert_eq!(checked("{% macro m(a=m(1)) %}{{ a }}{% endmacro %}"), 1);
        assert_eq!(
            checked("{% macro m(a) %}{{ caller() }}{% endmacro %}{% call m(1) %}x{% endcall %}"),
            1
        );
        assert_eq!(
            instrument("{{ 1 - a ~ -b * c }}|{{ x is not none ~ y }}|{{ f(a ~ b, c) }}")
                .unwrap()
                .text,
            "{{ 1 - __kvaudit_str(a) ~ __kvaudit_str(__kvaudit_product(-b , '*', c)) }}|\
             {{ __kvaudit_str(x is not none) ~ __kvaudit_str(y) }}|\
             {{ f(__kvaudit_str(a) ~ __kvaudit_str(b), c) }}"
        );
        assert_eq!(
            instrument(
                "{% if 'a' ~ b in c.d and e not in [f] %}{% for x in y if x in z %}\
                 {{ x is in y }}{% endfor %}{% endif %}"
            )
            .unwrap()
            .text,
            "{% if __kvaudit_in('a' ~ __kvaudit_str(b) , c.d) and e not in [f] %}\
             {% for x in y if __kvaudit_in(x , z) %}{{ x is in y }}{% endfor %}{% endif %}"
        );
        assert!(matches!(
            instrument("{{ a < b in c }}"),
            Err(RenderError::Unsupported(_))
        ));
        assert_eq!(
            instrument("{{ 'k' in m }}|{{ x not in ('a', 'b') }}|{{ x in y }}")
                .unwrap()
                .text,
            "{{ 'k' in m }}|{{ x not in ('a', 'b') }}|{{ __kvaudit_in(x , y) }}"
        );
        assert_eq!(
            instrument(
                "{{ a * b / c * -d ~ 'x' * 2 }}|{{ x + y * z.w|f }}|{{ a ** 2 * 3 }}|{{ 2 * 3 }}"
            )
            .unwrap()
            .text,
            "{{ __kvaudit_str(__kvaudit_product(a , '*', b , '/', c , '*', -d)) ~ \
             __kvaudit_str(__kvaudit_product('x' , '*', 2)) }}|\
             {{ __kvaudit_sum(x , '+', __kvaudit_product(y , '*', z.w|f)) }}|\
             {{ __kvaudit_product(a ** 2 , '*', 3) }}|{{ 2 * 3 }}"
        );
        assert_eq!(
            instrument(
                "{{ '<s>' + a + '\\n' + b ~ c - d }}|{{ x - y + z }}|{{ p + 1 - q }}|{{ -1 + 2 }}"
            )
            .unwrap()
            .text,
            "{{ '<s>' + a + '\\n' + __kvaudit_str(b) ~ __kvaudit_str(c) - d }}|\
             {{ __kvaudit_sum(x , '-', y , '+', z) }}|{{ p + 1 - q }}|{{ -1 + 2 }}"
        );
        // A chain of any length is one call, not calls nested as deep as the chain is long.
        let chain = format!("{{{{ x{} }}}}", " + x".repeat(400));
        assert_eq!(
            instrument(&chain)
                .unwrap()
                .text
                .matches(SUM_FUNCTION)
                .count(),
            1
        );
        // Errors are shown in the source as written.
        let source = "{{ 'x' in y ~ z }}";
        let out = instrument(source).unwrap();
        let at = out.text.find("__kvaudit_str").unwrap();
        assert_eq!(out.source_offset(at), source.find("y ~").unwrap());
        assert_eq!(out.source_offset(out.text.len()), source.len());
        assert!(matches!(
            check_reserved("{{ __kvaudit_str }}"),
            Err(RenderError::Unsupported(_))
        ));
    }
}
