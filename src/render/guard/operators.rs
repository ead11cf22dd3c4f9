//! Operators rewritten as calls of kvaudit's checks: each operand of `~` through Python's
//! `str()`, a chain of `+` and `-` or of `*`, `/`, `//` and `%` as one call, `in` as a call.

use minijinja::machinery::{Span, Token};

use super::edits::{ADD_LEVEL, Edits, IN_LEVEL, MUL_LEVEL, STR_LEVEL};
use super::reserved::{IN_FUNCTION, PRODUCT_FUNCTION, STR_FUNCTION, SUM_FUNCTION};
use super::tags::{Tag, end_of, is_close, is_compare, is_open, line_of, start_of, top_level};
use crate::render::error::RenderError;

/// For each token, the index of the bracket that matches it (brackets only).
fn matching_brackets(tokens: &[(Token, Span)]) -> Vec<Option<usize>> {
    let mut matches = vec![None; tokens.len()];
    let mut stack = Vec::new();
    for (i, (t, _)) in tokens.iter().enumerate() {
        if is_open(t) {
            stack.push(i);
        } else if is_close(t)
            && let Some(j) = stack.pop()
        {
            matches[i] = Some(j);
            matches[j] = Some(i);
        }
    }
    matches
}

/// Whether the token can end an operand (so a `+` or `-` after it is binary).
fn ends_operand(t: &Token) -> bool {
    match t {
        Token::Ident(w) => !matches!(
            *w,
            "and" | "or" | "not" | "in" | "is" | "if" | "else" | "recursive"
        ),
        Token::Str(_)
        | Token::String(_)
        | Token::Int(_)
        | Token::Int128(_)
        | Token::Float(_)
        | Token::ParenClose
        | Token::BracketClose
        | Token::BraceClose => true,
        _ => false,
    }
}

/// Whether the token at `i` (outside any bracket of the operand being scanned) separates a
/// `~` operand from what binds less tightly: everything below `~` in Jinja2's precedence
/// (`+`/`-`, comparisons, `not`, `and`, `or`, the conditional) and the separators. A block
/// tag's first word is its statement keyword.
fn bounds_concat_operand(tokens: &[(Token, Span)], i: usize, block: bool) -> bool {
    if block && i == 0 {
        return true;
    }
    match &tokens[i].0 {
        Token::Comma | Token::Colon | Token::Assign | Token::Tilde => true,
        t if is_compare(t) => true,
        Token::Plus | Token::Minus => i > 0 && ends_operand(&tokens[i - 1].0),
        Token::Ident("and" | "or" | "if" | "else" | "recursive") => true,
        Token::Ident("not") => !(i > 0 && matches!(tokens[i - 1].0, Token::Ident("is"))),
        _ => false,
    }
}

/// Whether the token at `i` (outside any bracket of the operand being scanned) ends a chain
/// of `*`, `/`, `//` and `%`: what binds less tightly (`~`, binary `+`/`-`, comparisons,
/// `not`, `and`, `or`, the conditional), the separators, and a block tag's keyword.
fn bounds_product(tokens: &[(Token, Span)], i: usize, block: bool) -> bool {
    matches!(tokens[i].0, Token::Tilde) || bounds_concat_operand(tokens, i, block)
}

fn is_product_operator(t: &Token) -> bool {
    matches!(t, Token::Mul | Token::Div | Token::FloorDiv | Token::Mod)
}

/// Whether the token at `i` is a binary `+` or `-` (after something that ends an operand).
fn is_sum_operator(tokens: &[(Token, Span)], i: usize) -> bool {
    matches!(tokens[i].0, Token::Plus | Token::Minus) && i > 0 && ends_operand(&tokens[i - 1].0)
}

/// Whether the token at `i` (outside any bracket) ends a chain of `+` and `-`: what binds less
/// tightly (comparisons, `not`, `and`, `or`, the conditional), the separators, and a block
/// tag's keyword. `~` binds more tightly than `+` in Jinja2.
fn bounds_sum(tokens: &[(Token, Span)], i: usize, block: bool) -> bool {
    if block && i == 0 {
        return true;
    }
    match &tokens[i].0 {
        Token::Comma | Token::Colon | Token::Assign => true,
        t if is_compare(t) => true,
        Token::Ident("and" | "or" | "if" | "else" | "recursive") => true,
        Token::Ident("not") => !(i > 0 && matches!(tokens[i - 1].0, Token::Ident("is"))),
        _ => false,
    }
}

/// A chain of operators of one precedence (`a + b - c`, `a * b / c`) at one bracket level:
/// its first and last token, and its operators.
struct Chain {
    first: usize,
    last: usize,
    operators: Vec<usize>,
}

/// Where the operand run ending before token `i` starts: back over tokens (a bracketed part
/// whole) until a boundary, an unmatched opening bracket, or an unmatched closing one.
/// `is_boundary` may refuse a token outright (an error of the caller's).
fn walk_back<E>(
    tokens: &[(Token, Span)],
    brackets: &[Option<usize>],
    i: usize,
    is_boundary: &dyn Fn(usize) -> Result<bool, E>,
) -> Result<usize, E> {
    let mut first = i;
    let mut k = i;
    while k > 0 {
        let j = k - 1;
        let t = &tokens[j].0;
        if is_close(t) {
            match brackets[j] {
                Some(open) => {
                    first = open;
                    k = open;
                    continue;
                }
                None => break,
            }
        }
        if is_open(t) || is_boundary(j)? {
            break;
        }
        first = j;
        k = j;
    }
    Ok(first)
}

/// The value of a walk whose boundary test cannot fail.
fn infallible(walked: Result<usize, std::convert::Infallible>) -> usize {
    walked.unwrap_or_else(|never| match never {})
}

/// Where the operand run starting at token `from` ends (exclusive): on over tokens (a
/// bracketed part whole) until a boundary, an unmatched closing bracket, or an unmatched
/// opening one; `from` when the run is empty.
fn walk_forward<E>(
    tokens: &[(Token, Span)],
    brackets: &[Option<usize>],
    from: usize,
    is_boundary: &mut dyn FnMut(usize) -> Result<bool, E>,
) -> Result<usize, E> {
    let mut k = from;
    while k < tokens.len() {
        let t = &tokens[k].0;
        if is_open(t) {
            match brackets[k] {
                Some(close) => {
                    k = close + 1;
                    continue;
                }
                None => break,
            }
        }
        if is_close(t) || is_boundary(k)? {
            break;
        }
        k += 1;
    }
    Ok(k)
}

/// The chains in `tokens` whose operators `is_operator` recognises and whose ends
/// `is_boundary` marks (what binds less tightly), each with at least one operator.
fn chains(
    tokens: &[(Token, Span)],
    is_operator: impl Fn(usize) -> bool,
    is_boundary: impl Fn(usize) -> bool,
) -> Vec<Chain> {
    let brackets = matching_brackets(tokens);
    let mut out: Vec<Chain> = Vec::new();
    for i in 0..tokens.len() {
        if !is_operator(i) || out.iter().any(|c| c.operators.contains(&i)) {
            continue;
        }
        // Back to the chain's start, over operands (bracketed parts whole) and operators.
        let first = infallible(walk_back(tokens, &brackets, i, &|j| Ok(is_boundary(j))));
        // On to its end, noting the operators.
        let mut operators = Vec::new();
        let end = infallible(walk_forward(tokens, &brackets, first, &mut |k| {
            if is_boundary(k) {
                return Ok(true);
            }
            if is_operator(k) {
                operators.push(k);
            }
            Ok(false)
        }));
        // The walk passes the operator at `i` at least (no boundary lies between).
        let last = end.saturating_sub(1).max(i);
        // A well-formed chain starts and ends with an operand.
        if operators.first() != Some(&first) && operators.last() != Some(&last) {
            out.push(Chain {
                first,
                last,
                operators,
            });
        }
    }
    out
}

/// Rewrites a chain `a op b op c` as `function(a, 'op', b, 'op', c)`: one flat call, so a
/// long chain does not nest calls (minijinja's parser refuses calls nested ~75 deep).
fn wrap_chain(
    tokens: &[(Token, Span)],
    chain: &Chain,
    function: &str,
    level: i32,
    edits: &mut Edits,
) {
    edits.wrap(
        start_of(&tokens[chain.first].1),
        end_of(&tokens[chain.last].1),
        level,
        format!("{function}("),
        ")",
    );
    for &op in &chain.operators {
        let span = &tokens[op].1;
        let name = match tokens[op].0 {
            Token::Plus => "+",
            Token::Minus => "-",
            Token::Mul => "*",
            Token::Div => "/",
            Token::FloorDiv => "//",
            _ => "%",
        };
        edits.replace(start_of(span), end_of(span), format!(", '{name}',"));
    }
}

/// The operands of a chain, as token ranges between its operators.
fn operands(chain: &Chain) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut from = chain.first;
    for &op in &chain.operators {
        out.push((from, op));
        from = op + 1;
    }
    out.push((from, chain.last + 1));
    out
}

fn literal_of<'s>(tokens: &'s [(Token, Span)], (a, b): (usize, usize)) -> Option<&'s Token<'s>> {
    match &tokens[a..b] {
        [(t, _)] => Some(t),
        _ => None,
    }
}

/// Rewrites a chain of `+` and `-` as [`SUM_FUNCTION`]`(a, '+', b, '-', c)`: minijinja joins
/// two lists lazily but makes one list of them once thirty-odd joins are chained, with no
/// limit (`{% set x = x + x %}` forty times asked for 2**40 items), and joins strings up to
/// the fuel's 256 MB. A `+` adds two unknown values only when the chain so far holds no
/// string literal (after one, it can only join strings, which fuel bounds) and the next
/// operand is no literal; a chain without such a `+` is left as it is: most of a template's
/// `+` (`'<|im_start|>' + message.role + '\n' + message.content`).
pub(super) fn wrap_sums(tag: &Tag, edits: &mut Edits) {
    let tokens = &tag.tokens;
    if !tokens.iter().any(|(t, _)| matches!(t, Token::Plus)) {
        return;
    }
    let literal = |range| {
        matches!(
            literal_of(tokens, range),
            Some(
                Token::Str(_)
                    | Token::String(_)
                    | Token::Int(_)
                    | Token::Int128(_)
                    | Token::Float(_)
            )
        )
    };
    let string = |range| {
        matches!(
            literal_of(tokens, range),
            Some(Token::Str(_) | Token::String(_))
        )
    };
    for chain in chains(
        tokens,
        |i| is_sum_operator(tokens, i),
        |i| bounds_sum(tokens, i, tag.block),
    ) {
        let parts = operands(&chain);
        let growing = chain.operators.iter().enumerate().any(|(n, &op)| {
            matches!(tokens[op].0, Token::Plus)
                && !parts[..=n].iter().any(|&p| string(p))
                && !literal(parts[n + 1])
        });
        if growing {
            wrap_chain(tokens, &chain, SUM_FUNCTION, ADD_LEVEL, edits);
        }
    }
}

/// Rewrites a chain of `*`, `/`, `//` and `%` holding a `*` as
/// [`PRODUCT_FUNCTION`]`(a, '*', b, '/', c)`: minijinja repeats a string up to 100 MB and a
/// list lazily up to 100 million items before anything counts them, where the output limit
/// is 16 MiB. Only `*` of two number literals is left as it is.
pub(super) fn wrap_products(tag: &Tag, edits: &mut Edits) {
    let tokens = &tag.tokens;
    if !tokens.iter().any(|(t, _)| matches!(t, Token::Mul)) {
        return;
    }
    let number = |range| {
        matches!(
            literal_of(tokens, range),
            Some(Token::Int(_) | Token::Int128(_) | Token::Float(_))
        )
    };
    for chain in chains(
        tokens,
        |i| is_product_operator(&tokens[i].0),
        |i| bounds_product(tokens, i, tag.block),
    ) {
        let parts = operands(&chain);
        let repeats = chain.operators.iter().enumerate().any(|(n, &op)| {
            matches!(tokens[op].0, Token::Mul) && !(number(parts[n]) && number(parts[n + 1]))
        });
        if repeats {
            wrap_chain(tokens, &chain, PRODUCT_FUNCTION, MUL_LEVEL, edits);
        }
    }
}

/// Wraps every operand of `~` in [`STR_FUNCTION`], except string literals.
pub(super) fn wrap_concat_operands(tag: &Tag, edits: &mut Edits) {
    let tokens = &tag.tokens;
    if !tokens.iter().any(|(t, _)| matches!(t, Token::Tilde)) {
        return;
    }
    let brackets = matching_brackets(tokens);
    let mut wrapped = std::collections::HashSet::new();
    for (i, (t, _)) in tokens.iter().enumerate() {
        if !matches!(t, Token::Tilde) {
            continue;
        }
        // The operand before: back to a boundary or an unmatched opening bracket.
        let mut boundary = |j| Ok(bounds_concat_operand(tokens, j, tag.block));
        let first = infallible(walk_back(tokens, &brackets, i, &boundary));
        // The operand after: on to a boundary or an unmatched closing bracket.
        let last = infallible(walk_forward(tokens, &brackets, i + 1, &mut boundary)) - 1;
        for (a, b) in [(first, i), (i + 1, last + 1)] {
            if a >= b || !wrapped.insert(a) {
                continue;
            }
            let literal = tokens[a..b]
                .iter()
                .all(|(t, _)| matches!(t, Token::Str(_) | Token::String(_)));
            if !literal {
                edits.wrap(
                    start_of(&tokens[a].1),
                    end_of(&tokens[b - 1].1),
                    STR_LEVEL,
                    format!("{STR_FUNCTION}("),
                    ")",
                );
            }
        }
    }
}

/// Whether the token at `i` ends an operand of `in` (outside any bracket of the operand):
/// what binds less tightly than a comparison (`not`, `and`, `or`, the conditional), the
/// separators, and a block tag's keyword. Another comparison makes a chain, which is refused.
fn bounds_containment_operand(tokens: &[(Token, Span)], i: usize, block: bool) -> Option<bool> {
    if block && i == 0 {
        return Some(true);
    }
    match &tokens[i].0 {
        Token::Comma | Token::Colon | Token::Assign => Some(true),
        Token::Ident("and" | "or" | "if" | "else" | "recursive") => Some(true),
        Token::Ident("not") => Some(!(i > 0 && matches!(tokens[i - 1].0, Token::Ident("is")))),
        t if is_compare(t) => None,
        _ => Some(false),
    }
}

/// Rewrites `a in b` as [`IN_FUNCTION`]`(a, b)` and `a not in b` as `not IN_FUNCTION(a, b)`:
/// minijinja formats a needle that is not a string into one string to look for it in a
/// string, with no limit on its size (Python refuses such a needle). The `in` of a `for`
/// header and the `in` test (`x is in y`) are left alone.
pub(super) fn rewrite_containment(tag: &Tag, edits: &mut Edits) -> Result<(), RenderError> {
    let tokens = &tag.tokens;
    let loop_in = (tag.block && matches!(tokens.first(), Some((Token::Ident("for"), _))))
        .then(|| top_level(tokens, |t| matches!(t, Token::Ident("in"))))
        .flatten();
    let brackets = matching_brackets(tokens);
    let chain = || {
        RenderError::Unsupported(format!(
            "template line {}: kvaudit does not render a chain of comparisons with `in`",
            line_of(tag)
        ))
    };
    for (i, (t, _)) in tokens.iter().enumerate() {
        if !matches!(t, Token::Ident("in")) || Some(i) == loop_in || i == 0 {
            continue;
        }
        let before = &tokens[i - 1].0;
        if matches!(before, Token::Dot | Token::Ident("is"))
            || (matches!(before, Token::Ident("not"))
                && i >= 2
                && matches!(tokens[i - 2].0, Token::Ident("is")))
        {
            continue;
        }
        let negated = matches!(before, Token::Ident("not"));
        let left_end = if negated { i - 1 } else { i };
        if left_end == 0 {
            continue;
        }
        // The operands before and after: to a boundary or an unmatched bracket; a chained
        // comparison is refused.
        let mut boundary = |j| bounds_containment_operand(tokens, j, tag.block).ok_or_else(chain);
        let first = walk_back(tokens, &brackets, left_end, &boundary)?;
        let last = walk_forward(tokens, &brackets, i + 1, &mut boundary)? - 1;
        if first >= left_end || last == i {
            continue;
        }
        // A string literal to look for, or a literal list, tuple or dict to look in, is safe
        // as minijinja does it, and the same as Python's `in`: most real uses, left as they
        // are.
        let literal_needle = tokens[first..left_end]
            .iter()
            .all(|(t, _)| matches!(t, Token::Str(_) | Token::String(_)));
        let literal_haystack = is_open(&tokens[i + 1].0) && brackets[i + 1] == Some(last);
        if literal_needle || literal_haystack {
            continue;
        }
        let open = if negated {
            format!("not {IN_FUNCTION}(")
        } else {
            format!("{IN_FUNCTION}(")
        };
        edits.wrap(
            start_of(&tokens[first].1),
            end_of(&tokens[last].1),
            IN_LEVEL,
            open,
            ")",
        );
        if negated {
            let not = &tokens[i - 1].1;
            edits.replace(start_of(not), end_of(not), String::new());
        }
        let within = &tokens[i].1;
        edits.replace(start_of(within), end_of(within), ",".to_string());
    }
    Ok(())
}
