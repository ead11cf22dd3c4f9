//! How deeply a template's expressions nest, bounded from its tokens before anything parses
//! them (see the module documentation of `guard`).

use minijinja::machinery::{Span, Token};

use super::tags::{
    Block, Tag, block_kind, for_each_tag, is_close, is_compare, is_open, line_of, top_level,
};
use crate::render::error::RenderError;

/// The deepest expression accepted, counted from its tokens (an upper bound on the depth of
/// its syntax tree). transformers' Jinja2 itself stops near here (Python's recursion limit:
/// 489 terms of `+`, 326 of `.` or `|`; measured with jinja2 3.1.6), except for chains of `~`
/// and comparisons, which Jinja2 keeps flat and minijinja does not. Real templates stay below
/// 40. Measured in a release build, minijinja's parser and compiler take at most ~400 bytes of
/// stack per level, so this is ~200 KB.
pub const MAX_EXPRESSION_DEPTH: usize = 500;

/// The most expression depth accepted along one path of nested statements (each `for`, `with`,
/// `macro` ... header's depth, plus the innermost tag's): values nested by one statement's
/// expression feed the next (`{% for x in [[x]] %}{% for x in [[x]] %}...`), and statements
/// themselves nest up to minijinja's limit of ~150.
pub const MAX_NESTED_DEPTH: usize = 1000;

/// The most nesting all `set` statements of a template may add to the values they keep
/// (counted from their tokens: each bracket, each filter twice, each comma that makes a
/// tuple). Real templates add at most 88.
pub const MAX_SET_NESTING: usize = 1000;

/// An upper bound on the depth of the syntax tree of a tag's expressions: every level of the
/// tree is an operator, a bracket or a keyword token on the way down, so the count of those
/// along the deepest path bounds it. Items of a list, call or dict (between commas, colons and
/// `=`) are siblings, so only the deepest counts; a run of comparisons is one node, as
/// minijinja parses it.
fn expression_depth(tokens: &[(Token, Span)]) -> usize {
    #[derive(Default)]
    struct Frame {
        current: usize,
        deepest: usize,
        in_comparison: bool,
    }
    let mut frames = vec![Frame::default()];
    for (token, _) in tokens {
        let depth = frames.len();
        let top = &mut frames[depth - 1];
        match token {
            t if is_open(t) => {
                top.current += 1;
                top.in_comparison = false;
                frames.push(Frame::default());
            }
            t if is_close(t) && depth > 1 => {
                let inner = frames.pop().unwrap_or_default();
                let top = &mut frames[depth - 2];
                top.current += inner.current.max(inner.deepest);
            }
            Token::Comma | Token::Colon | Token::Assign => {
                top.deepest = top.deepest.max(top.current);
                top.current = 0;
                top.in_comparison = false;
            }
            t if is_compare(t) => {
                if !top.in_comparison {
                    top.current += 1;
                }
                top.in_comparison = true;
            }
            Token::Ident("and" | "or" | "not" | "if") => {
                top.current += 1;
                top.in_comparison = false;
            }
            Token::Ident("else") => top.in_comparison = false,
            Token::Plus
            | Token::Minus
            | Token::Mul
            | Token::Div
            | Token::FloorDiv
            | Token::Pow
            | Token::Mod
            | Token::Dot
            | Token::Pipe
            | Token::Tilde
            | Token::Ident("is") => top.current += 1,
            _ => {}
        }
    }
    let mut below = 0;
    while let Some(frame) = frames.pop() {
        below = (frame.current + below).max(frame.deepest);
    }
    below
}

/// An upper bound on how many levels a `set` statement's value nests on what it reads: each
/// bracket (a list, dict, tuple or call: a filter such as `batch` or `groupby` nests its
/// input two levels), and each comma that makes a tuple without brackets.
fn set_nesting(tokens: &[(Token, Span)]) -> usize {
    let Some(assign) = top_level(tokens, |t| matches!(t, Token::Assign)) else {
        return 0;
    };
    let value = &tokens[assign + 1..];
    let mut level = 0i32;
    let mut nesting = 0usize;
    for (t, _) in value {
        match t {
            t if is_open(t) => {
                nesting += 1;
                level += 1;
            }
            t if is_close(t) => level -= 1,
            Token::Pipe => nesting += 2,
            Token::Comma if level == 0 => nesting += 1,
            _ => {}
        }
    }
    nesting
}

/// Refuses a template whose expressions nest deeper than kvaudit evaluates (see
/// [`MAX_EXPRESSION_DEPTH`], [`MAX_NESTED_DEPTH`], [`MAX_SET_NESTING`]).
pub fn check_depth(source: &str) -> Result<(), RenderError> {
    let mut around = Around::default();
    let mut kept = 0usize;
    for_each_tag(source, |tag| {
        let depth = expression_depth(&tag.tokens);
        if depth > MAX_EXPRESSION_DEPTH {
            return Err(RenderError::TooDeep(format!(
                "an expression at template line {} nests {depth} levels deep, more than the \
                 {MAX_EXPRESSION_DEPTH} kvaudit evaluates",
                line_of(&tag)
            )));
        }
        let along = around.along;
        if along + depth > MAX_NESTED_DEPTH {
            return Err(RenderError::TooDeep(format!(
                "the statements around template line {} nest expressions {} levels deep in all, \
                 more than the {MAX_NESTED_DEPTH} kvaudit evaluates",
                line_of(&tag),
                along + depth
            )));
        }
        if tag.block && matches!(tag.tokens.first(), Some((Token::Ident("set"), _))) {
            kept += set_nesting(&tag.tokens);
            if kept > MAX_SET_NESTING {
                return Err(RenderError::TooDeep(format!(
                    "the `set` statements up to template line {} nest the values they keep \
                     {kept} levels deep in all, more than the {MAX_SET_NESTING} kvaudit evaluates",
                    line_of(&tag)
                )));
            }
        }
        around.pass(&tag, depth);
        Ok(())
    })
}

/// The expression depth of the blocks open around a tag: each block that opens adds the depth
/// of its own expression, and gives it back when it closes.
#[derive(Default)]
struct Around {
    open: Vec<usize>,
    along: usize,
}

impl Around {
    fn pass(&mut self, tag: &Tag, depth: usize) {
        if !tag.block {
            return;
        }
        match block_kind(tag) {
            Block::Opens => {
                self.open.push(depth);
                self.along += depth;
            }
            Block::Closes => self.along -= self.open.pop().unwrap_or(0),
            Block::Neither => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth(src: &str) -> usize {
        let mut deepest = 0;
        for_each_tag(src, |tag| {
            deepest = deepest.max(expression_depth(&tag.tokens));
            Ok(())
        })
        .unwrap();
        deepest
    }

    #[test]
    fn depth_counts_chains_and_takes_the_deepest_item() {
        assert_eq!(depth("{{ 1 }}"), 0);
        assert_eq!(depth("{{ 1 + 2 + 3 }}"), 2);
        assert_eq!(depth("{{ -(-x) }}"), 3);
        assert_eq!(depth("{{ x.a.b|f(1 + 2) }}"), 5);
        assert_eq!(depth("{{ [a + b, c, d + e + f] }}"), 3);
        assert_eq!(depth("{{ {'k': a + b, 'l': c} }}"), 2);
        // A run of comparisons is one node; `and` starts another.
        assert_eq!(depth("{{ a < b < c < d }}"), 1);
        assert_eq!(depth("{{ a == 1 and b == 2 }}"), 3);
        assert_eq!(depth("{{ a if b else c if d else e }}"), 2);
        assert_eq!(depth("{{ 'a' ~ b ~ c }}"), 2);
        assert_eq!(depth(&format!("{{{{ x{} }}}}", ".a".repeat(600))), 600);
    }

    #[test]
    fn deep_expressions_and_nestings_are_refused() {
        let deep = |n: usize, unit: &str| format!("{{{{ {}1 }}}}", unit.repeat(n));
        assert!(check_depth(&deep(MAX_EXPRESSION_DEPTH, "1+")).is_ok());
        for unit in ["1+", "-", "not ", "1 if x else ", "'a'~"] {
            let err = check_depth(&deep(MAX_EXPRESSION_DEPTH + 1, unit)).unwrap_err();
            assert!(matches!(err, RenderError::TooDeep(_)), "{unit}: {err}");
        }
        let nested =
            "{% for x in [[[[[[[[[[x]]]]]]]]]] %}".repeat(101) + &"{% endfor %}".repeat(101);
        assert!(matches!(check_depth(&nested), Err(RenderError::TooDeep(_))));
        let sequential = "{% for x in [[[[[[[[[[x]]]]]]]]]] %}{% endfor %}".repeat(1000);
        assert!(check_depth(&sequential).is_ok());
        // Each `set` keeps what it nests for the statements after it.
        let sets = |n: usize| "{% set x = [[[[[x]]]]], 1 %}".repeat(n);
        assert!(check_depth(&sets(MAX_SET_NESTING / 6)).is_ok());
        assert!(matches!(
            check_depth(&sets(MAX_SET_NESTING / 6 + 1)),
            Err(RenderError::TooDeep(_))
        ));
        assert!(check_depth(&"{% set x = y.z %}".repeat(10_000)).is_ok());
        // An unterminated tag is left to the parser.
        assert!(check_depth("{{ 1 + ").is_ok());
    }

    /// What the bounds leave to real templates: each bound is at least seven times what any
    /// of ../shared's templates (all of templates/, templates-extra/ and the models') needs.
    #[test]
    fn real_templates_stay_far_below_the_bounds() {
        let shared = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared");
        if !shared.join("templates").is_dir() {
            eprintln!("SKIPPED real_templates_stay_far_below_the_bounds: no ../shared");
            return;
        }
        fn files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    files(&p, out);
                } else if p.extension().is_some_and(|x| x == "jinja")
                    || p.file_name().is_some_and(|n| n == "tokenizer_config.json")
                {
                    out.push(p);
                }
            }
        }
        let mut paths = Vec::new();
        for sub in ["templates", "templates-extra", "models"] {
            files(&shared.join(sub), &mut paths);
        }
        let mut texts = Vec::new();
        for p in &paths {
            let text = std::fs::read_to_string(p).unwrap();
            if p.extension().is_some_and(|x| x == "json") {
                let v: serde_json::Value = serde_json::from_str(&text).unwrap();
                match &v["chat_template"] {
                    serde_json::Value::String(t) => texts.push(t.clone()),
                    serde_json::Value::Array(list) => texts.extend(
                        list.iter()
                            .filter_map(|t| t["template"].as_str().map(str::to_string)),
                    ),
                    _ => {}
                }
            } else {
                texts.push(text);
            }
        }
        assert!(texts.len() > 300, "{} templates", texts.len());
        let (mut expression, mut nested, mut kept) = (0, 0, 0);
        for text in &texts {
            let prepared = crate::render::source::prepare(text).unwrap();
            let (mut around, mut sets) = (Around::default(), 0);
            for_each_tag(&prepared, |tag| {
                let depth = expression_depth(&tag.tokens);
                expression = expression.max(depth);
                nested = nested.max(around.along + depth);
                if matches!(tag.tokens.first(), Some((Token::Ident("set"), _))) {
                    sets += set_nesting(&tag.tokens);
                }
                around.pass(&tag, depth);
                Ok(())
            })
            .unwrap();
            kept = kept.max(sets);
        }
        eprintln!(
            "{} templates: deepest expression {expression}, deepest nesting {nested}, \
             most `set` nesting {kept}",
            texts.len()
        );
        assert!(expression * 7 <= MAX_EXPRESSION_DEPTH, "{expression}");
        assert!(nested * 7 <= MAX_NESTED_DEPTH, "{nested}");
        assert!(kept * 7 <= MAX_SET_NESTING, "{kept}");
    }
}
