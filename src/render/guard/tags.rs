//! The tags of a template as minijinja's lexer reads them, and what the checks ask of their
//! tokens: brackets, comparisons, the statement a tag opens or closes, where a token is.

use minijinja::machinery::{Span, Token, tokenize};
use minijinja::syntax::SyntaxConfig;

use crate::render::error::RenderError;

/// One `{{ ... }}` or `{% ... %}` tag: its delimiters and the tokens between them.
pub(super) struct Tag<'s> {
    pub(super) block: bool,
    pub(super) close: Option<Span>,
    pub(super) tokens: Vec<(Token<'s>, Span)>,
}

/// Calls `f` on every tag of `source` in order, as minijinja's lexer reads them; stops at the
/// first lexing error (the parser reports it), after handing over the tag it interrupted.
pub(super) fn for_each_tag<'s>(
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

pub(super) fn is_open(t: &Token) -> bool {
    matches!(t, Token::ParenOpen | Token::BracketOpen | Token::BraceOpen)
}

pub(super) fn is_close(t: &Token) -> bool {
    matches!(
        t,
        Token::ParenClose | Token::BracketClose | Token::BraceClose
    )
}

pub(super) fn is_compare(t: &Token) -> bool {
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

/// The statement a block tag opens or closes, if any.
#[derive(PartialEq)]
pub(super) enum Block {
    Opens,
    Closes,
    Neither,
}

pub(super) fn block_kind(tag: &Tag) -> Block {
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

pub(super) fn line_of(tag: &Tag) -> usize {
    tag.tokens
        .first()
        .map_or(0, |(_, span)| usize::from(span.start_line))
}

pub(super) fn start_of(span: &Span) -> usize {
    span.start_offset as usize
}

pub(super) fn end_of(span: &Span) -> usize {
    span.end_offset as usize
}

/// The index of the first token at bracket level 0 matching `pred`.
pub(super) fn top_level(tokens: &[(Token, Span)], pred: impl Fn(&Token) -> bool) -> Option<usize> {
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
