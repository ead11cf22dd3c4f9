//! The prepared tables compared with the start of tokenizer.json on every load: the one
//! check a forged cache file cannot pass by fixing its checksum.

use super::{EMPTY64, FastBpe};
use crate::tokenize::scan;

/// Leading vocabulary entries and merges compared with tokenizer.json on every load: the
/// byte alphabet and the merges applied first, which shape almost every token (~1 µs each).
const SPOT_CHECK: usize = 1024;

/// Where the values of `model.vocab` and `model.merges` start in tokenizer.json's text. Found
/// once when preparing (a search through megabytes) and kept in the file; a load only checks
/// that the key is in front of each, so a wrong offset fails the spot check.
pub(super) struct Spans {
    pub(super) vocab_at: usize,
    pub(super) merges_at: Option<usize>,
}

/// A quoted key cannot occur unescaped inside a JSON string, so a match followed by `:` and
/// the right bracket is a key. The vocabulary comes before the merges in every tokenizer.json
/// the crate writes; the merges are searched from the end, past the vocabulary.
pub(super) fn find_spans(text: &[u8]) -> Option<Spans> {
    let value_at = |i: usize, key: &[u8], open: u8| {
        let mut s = scan::Scan::new(text, i + key.len());
        (s.eat(b':').is_some() && s.peek() == Some(open)).then(|| s.at())
    };
    let vocab_at = memchr::memmem::find_iter(text, b"\"vocab\"")
        .find_map(|i| value_at(i, b"\"vocab\"", b'{'))?;
    let merges_at = memchr::memmem::rfind_iter(&text[vocab_at..], b"\"merges\"")
        .find_map(|i| value_at(vocab_at + i, b"\"merges\"", b'['));
    Some(Spans {
        vocab_at,
        merges_at,
    })
}

/// Whether `at` is just past `key` (quoted), a colon and whitespace.
fn key_before(text: &[u8], at: usize, key: &[u8]) -> bool {
    let Some(head) = text.get(..at) else {
        return false;
    };
    let head = head.trim_ascii_end();
    let Some(head) = head.strip_suffix(b":") else {
        return false;
    };
    head.trim_ascii_end().ends_with(key)
}

pub(super) fn spot_check(bpe: &FastBpe, source: &[u8], spans: &Spans) -> Option<()> {
    let vocab_at = spans.vocab_at;
    if !key_before(source, vocab_at, b"\"vocab\"")
        || spans
            .merges_at
            .is_some_and(|at| !key_before(source, at, b"\"merges\""))
    {
        return None;
    }
    let mut s = scan::Scan::new(source, vocab_at);
    let mut more = s.open(b'{', b'}')?;
    for _ in 0..SPOT_CHECK {
        if !more {
            break;
        }
        let token = s.string()?;
        s.eat(b':')?;
        let id = u32::try_from(s.uint()?).ok()?;
        if bpe.token(id) != Some(token.as_ref()) || bpe.lookup(&token) != Some(id) {
            return None;
        }
        more = s.more(b'}')?;
    }
    let Some(merges_at) = spans.merges_at else {
        return bpe.merges.iter().all(|&(k, _)| k == EMPTY64).then_some(());
    };
    let mut s = scan::Scan::new(source, merges_at);
    let mut more = s.open(b'[', b']')?;
    let mut joined = String::new();
    for rank in 0..SPOT_CHECK {
        if !more {
            break;
        }
        if s.peek()? == b'"' {
            let pair = s.string()?;
            let (a, b) = pair.split_once(' ')?;
            if b.contains(' ') {
                return None;
            }
            merge_matches(bpe, a, b, rank, &mut joined)?;
        } else {
            s.eat(b'[')?;
            let a = s.string()?;
            s.eat(b',')?;
            let b = s.string()?;
            s.eat(b']')?;
            merge_matches(bpe, &a, &b, rank, &mut joined)?;
        }
        more = s.more(b']')?;
    }
    Some(())
}

/// Whether the tables merge `a` and `b` into their concatenation at `rank`, or later: the
/// crate keeps a repeated pair's last rank, and a check of a prefix cannot see the repeat.
fn merge_matches(bpe: &FastBpe, a: &str, b: &str, rank: usize, joined: &mut String) -> Option<()> {
    let (a_id, b_id) = (bpe.lookup(a)?, bpe.lookup(b)?);
    joined.clear();
    joined.push_str(a);
    joined.push_str(b);
    let (stored_rank, id) = bpe.merge(a_id, b_id)?;
    (Some(id) == bpe.lookup(joined) && stored_rank as usize >= rank).then_some(())
}
