//! A template's shape, bounded and instrumented before minijinja compiles it.
//!
//! minijinja limits how deeply brackets and statements nest, but a chain (`1+1+...`,
//! `-----1`, `x.a.a...`, `x|f|f...`, `a if b else c if ...`) becomes a syntax tree as deep as
//! the chain is long, and minijinja's parser, compiler and variable analysis, kvaudit's own
//! readers of the tree (server profiles, history switches) and the tree's drop all recurse on
//! it: a 50,000-term expression overflowed the stack. [`check_depth`] bounds that depth from the
//! template's tokens (minijinja's own lexer, which does not recurse), before anything parses it.
//!
//! Values nest too, and what recurses over them (printing, `tojson`, `==`, sorting, dropping)
//! cannot be reached from outside minijinja. A value can only grow deeper than one expression
//! makes it by being kept and fed back. A variable `set` at one point of the template is kept
//! for what follows, but never fed back to the same statement (a loop's body starts each
//! iteration from the variables outside it, a macro's from those it was defined with), so
//! [`check_depth`] bounds what all `set` statements together can nest. What is fed back, a
//! namespace attribute set in a loop, a macro or `caller` argument in a recursion, a recursive
//! loop's item, [`instrument`] routes through a function that checks the value when it is
//! kept (see `namespace.rs`). It also routes every operand of `~` through Python's `str()` with
//! a bound on its size (minijinja formats a list operand into one string with no limit: a list
//! that repeats a long string made gigabytes).

use minijinja::machinery::{Span, Token, tokenize};
use minijinja::syntax::SyntaxConfig;

use super::error::RenderError;

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

/// Names kvaudit adds to the source; a template may not use them itself (it could rebind a
/// check to something else).
pub const RESERVED_PREFIX: &str = "__kvaudit";
pub const BIND_FUNCTION: &str = "__kvaudit_bind";
pub const SETATTR_FUNCTION: &str = "__kvaudit_setattr";
pub const STR_FUNCTION: &str = "__kvaudit_str";
pub const IN_FUNCTION: &str = "__kvaudit_in";
pub const SUM_FUNCTION: &str = "__kvaudit_sum";
pub const PRODUCT_FUNCTION: &str = "__kvaudit_product";

/// How the wraps nest where they open at one offset (lower is outer), as the operators
/// bind: a namespace assignment holds anything, a comparison holds sums, a sum holds `~`
/// chains, a `~` operand holds products.
const SETATTR_LEVEL: i32 = 0;
const IN_LEVEL: i32 = 1;
const ADD_LEVEL: i32 = 200_000;
const STR_LEVEL: i32 = 300_000;
const MUL_LEVEL: i32 = 500_000;
const SINK: &str = "__kvaudit_sink";
const BLOCK_PREFIX: &str = "__kvaudit_block_";

/// One `{{ ... }}` or `{% ... %}` tag: its delimiters and the tokens between them.
struct Tag<'s> {
    block: bool,
    close: Option<Span>,
    tokens: Vec<(Token<'s>, Span)>,
}

/// Calls `f` on every tag of `source` in order, as minijinja's lexer reads them; stops at the
/// first lexing error (the parser reports it), after handing over the tag it interrupted.
fn for_each_tag<'s>(
    source: &'s str,
    mut f: impl FnMut(Tag<'s>) -> Result<(), RenderError>,
) -> Result<(), RenderError> {
    let mut current: Option<Tag<'s>> = None;
    for item in tokenize(source, false, SyntaxConfig::default()) {
        let Ok((token, span)) = item else { break };
        match token {
            Token::VariableStart | Token::BlockStart => {
                current = Some(Tag {
                    block: matches!(token, Token::BlockStart),
                    close: None,
                    tokens: Vec::new(),
                });
            }
            Token::VariableEnd | Token::BlockEnd => {
                if let Some(mut tag) = current.take() {
                    tag.close = Some(span);
                    f(tag)?;
                }
            }
            Token::TemplateData(_) => {}
            _ => {
                if let Some(tag) = current.as_mut() {
                    tag.tokens.push((token, span));
                }
            }
        }
    }
    match current {
        Some(tag) => f(tag),
        None => Ok(()),
    }
}

fn is_open(t: &Token) -> bool {
    matches!(t, Token::ParenOpen | Token::BracketOpen | Token::BraceOpen)
}

fn is_close(t: &Token) -> bool {
    matches!(
        t,
        Token::ParenClose | Token::BracketClose | Token::BraceClose
    )
}

fn is_compare(t: &Token) -> bool {
    matches!(
        t,
        Token::Eq
            | Token::Ne
            | Token::Lt
            | Token::Lte
            | Token::Gt
            | Token::Gte
            | Token::Ident("in")
    )
}

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

/// The statement a block tag opens or closes, if any.
#[derive(PartialEq)]
enum Block {
    Opens,
    Closes,
    Neither,
}

fn block_kind(tag: &Tag) -> Block {
    let Some((Token::Ident(word), _)) = tag.tokens.first() else {
        return Block::Neither;
    };
    match *word {
        "for" | "if" | "macro" | "call" | "filter" | "with" | "autoescape" | "block" => {
            Block::Opens
        }
        // A `set` without `=` captures its body.
        "set" if !tag.tokens.iter().any(|(t, _)| matches!(t, Token::Assign)) => Block::Opens,
        w if w.starts_with("end") => Block::Closes,
        _ => Block::Neither,
    }
}

fn line_of(tag: &Tag) -> usize {
    tag.tokens
        .first()
        .map_or(0, |(_, span)| usize::from(span.start_line))
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
    let mut open: Vec<usize> = Vec::new();
    let mut along = 0usize;
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
        if tag.block {
            match block_kind(&tag) {
                Block::Opens => {
                    open.push(depth);
                    along += depth;
                }
                Block::Closes => along -= open.pop().unwrap_or(0),
                Block::Neither => {}
            }
        }
        Ok(())
    })
}

/// A change to the source: `text` replaces `start..end` (an insertion when they are equal).
/// Edits at one offset apply closing text before opening text, an outer opening before an
/// inner one and an inner closing before an outer one, then replacements.
struct Edit {
    start: usize,
    end: usize,
    order: (u8, i32),
    text: String,
}

#[derive(Default)]
struct Edits(Vec<Edit>);

impl Edits {
    /// Wraps `start..end` in `open` and `close`; `level` 0 is outermost.
    fn wrap(&mut self, start: usize, end: usize, level: i32, open: String, close: &str) {
        self.0.push(Edit {
            start,
            end: start,
            order: (1, level),
            text: open,
        });
        self.0.push(Edit {
            start: end,
            end,
            order: (0, -level),
            text: close.to_string(),
        });
    }

    fn replace(&mut self, start: usize, end: usize, text: String) {
        self.0.push(Edit {
            start,
            end,
            order: (2, 0),
            text,
        });
    }

    fn apply(mut self, source: &str) -> Instrumented {
        self.0.sort_by_key(|e| (e.start, e.order));
        let extra: usize = self.0.iter().map(|e| e.text.len()).sum();
        let mut text = String::with_capacity(source.len() + extra);
        let mut kept = Vec::with_capacity(self.0.len() + 1);
        let mut at = 0;
        for edit in &self.0 {
            if edit.start < at {
                continue;
            }
            kept.push((text.len(), at, edit.start - at));
            text.push_str(&source[at..edit.start]);
            text.push_str(&edit.text);
            at = edit.end;
        }
        kept.push((text.len(), at, source.len() - at));
        text.push_str(&source[at..]);
        Instrumented { text, kept }
    }
}

/// The instrumented source, and where its text came from: for each run copied from the
/// source, (offset in `text`, offset in the source, length). Errors point into `text`; a user
/// is shown the source they wrote.
pub struct Instrumented {
    pub text: String,
    kept: Vec<(usize, usize, usize)>,
}

impl Instrumented {
    /// The source offset of `text` offset `at` (text kvaudit inserted maps to where it went).
    pub fn source_offset(&self, at: usize) -> usize {
        let i = self.kept.partition_point(|&(from, _, _)| from <= at);
        match i.checked_sub(1).map(|i| self.kept[i]) {
            Some((from, source, len)) => source + (at - from).min(len),
            None => 0,
        }
    }
}

fn start_of(span: &Span) -> usize {
    span.start_offset as usize
}

fn end_of(span: &Span) -> usize {
    span.end_offset as usize
}

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
fn wrap_sums(tag: &Tag, edits: &mut Edits) {
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
fn wrap_products(tag: &Tag, edits: &mut Edits) {
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
fn wrap_concat_operands(tag: &Tag, edits: &mut Edits) {
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
fn rewrite_containment(tag: &Tag, edits: &mut Edits) -> Result<(), RenderError> {
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

/// The index of the first token at bracket level 0 matching `pred`.
fn top_level(tokens: &[(Token, Span)], pred: impl Fn(&Token) -> bool) -> Option<usize> {
    let mut level = 0i32;
    for (i, (t, _)) in tokens.iter().enumerate() {
        if level == 0 && pred(t) {
            return Some(i);
        }
        if is_open(t) {
            level += 1;
        } else if is_close(t) {
            level -= 1;
        }
    }
    None
}

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

/// Refuses a template that uses a name kvaudit adds to templates itself: it could rebind a
/// check to something else.
pub fn check_reserved(source: &str) -> Result<(), RenderError> {
    for_each_tag(source, |tag| {
        match tag.tokens.iter().find_map(|(t, _)| match t {
            Token::Ident(n) if n.starts_with(RESERVED_PREFIX) => Some(*n),
            _ => None,
        }) {
            Some(name) => Err(RenderError::Unsupported(format!(
                "the template uses the name `{name}`, which kvaudit reserves"
            ))),
            None => Ok(()),
        }
    })
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
            let (mut open, mut along, mut sets) = (Vec::new(), 0, 0);
            for_each_tag(&prepared, |tag| {
                let depth = expression_depth(&tag.tokens);
                expression = expression.max(depth);
                nested = nested.max(along + depth);
                if matches!(tag.tokens.first(), Some((Token::Ident("set"), _))) {
                    sets += set_nesting(&tag.tokens);
                }
                if tag.block {
                    match block_kind(&tag) {
                        Block::Opens => {
                            open.push(depth);
                            along += depth;
                        }
                        Block::Closes => along -= open.pop().unwrap_or(0),
                        Block::Neither => {}
                    }
                }
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
