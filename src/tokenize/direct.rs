//! Byte-level BPE ids without the `tokenizers` crate's encoding pipeline.
//!
//! The crate builds a `NormalizedString` with byte alignments for every piece of text, an
//! `Encoding` with offsets, token strings and masks, and a `Token` with an owned string per id,
//! and kvaudit then keeps only the ids. On a corpus of short chats those allocations are most
//! of the run. For the pipelines real chat models use (optional NFC, a sequence of regex
//! `Split`s, then `ByteLevel` without its own regex, then BPE) this module computes the same
//! ids directly: the same added-token scans, the same normalization crate, the same regex
//! engine and pattern text, the same byte-to-char table and the same BPE merges, over borrowed
//! slices. Any other pipeline is left to the crate, and a pipeline this module accepts is used
//! only after it encodes the probe texts exactly like the crate.

use std::borrow::Cow;

use super::TokenizeError;
use super::added_scan::AddedScan;
use super::word_ids::WordIds;
use serde_json::Value as Json;
use tokenizers::AddedToken;
use unicode_normalization_alignments::{IsNormalized, UnicodeNormalization, is_nfc_quick};

/// Which pieces a `Split` keeps (its behavior and `invert`, as the crate applies them).
#[derive(Clone, Copy)]
enum Keep {
    /// `Isolated`: matches and the text between them, each its own piece.
    All,
    /// `Removed` with `invert`: the matches only.
    Matches,
    /// `Removed`: the text between matches only.
    Gaps,
}

impl Keep {
    fn gaps(self) -> bool {
        matches!(self, Keep::All | Keep::Gaps)
    }

    fn matches(self) -> bool {
        matches!(self, Keep::All | Keep::Matches)
    }
}

struct Split {
    matcher: Matcher,
    keep: Keep,
}

/// A `Split` pattern, run by the crate's engine or, where that gives the same matches, by the
/// `regex` crate's automata (several times faster than fancy-regex's backtracking VM).
enum Matcher {
    Fancy(fancy_regex::Regex),
    /// No look-around and no empty match: fancy-regex hands such a pattern to the `regex`
    /// crate whole.
    Plain(regex::Regex),
    /// `X|\s*[\r\n]+|\s+(?!\S)|\s+`, the tail every GPT-4-style pattern ends with, with `X`
    /// free of look-around and empty matches. `all` is the pattern without its look-ahead
    /// branch; `head` is `^(?:X|\s*[\r\n]+)`. Where `all` matches with its last branch, the
    /// original would have tried `\s+(?!\S)` first: that takes the whitespace run but its
    /// last character when a non-space follows (and the run is longer than one character).
    Tail {
        all: regex_automata::meta::Regex,
        head: regex::Regex,
        /// `^\s+$`, the same `\s` as the pattern's.
        space: regex::Regex,
        /// Where `X` is a known one, ASCII pieces are found without the automaton.
        ascii: Option<super::ascii_split::AsciiSplit>,
    },
}

/// The tail as it is spelled in tokenizer.json files: with escapes, or with a raw CR and LF.
const TAILS: [&str; 2] = [
    r"|\s*[\r\n]+|\s+(?!\S)|\s+",
    "|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
];

impl Matcher {
    fn new(source: &str) -> Option<Matcher> {
        let free = |p: &str| {
            regex_syntax::parse(p).ok().is_some_and(|hir| {
                hir.properties().look_set().is_empty()
                    && hir.properties().minimum_len().is_some_and(|n| n > 0)
            })
        };
        let tail = TAILS
            .iter()
            .find_map(|tail| Some((source.strip_suffix(tail).filter(|x| free(x))?, tail)));
        if let Some((x, tail)) = tail {
            let newline = &tail[1..tail.find("|\\s+(").unwrap_or(tail.len())];
            let all = regex_automata::meta::Regex::new(&format!("{x}|{newline}|\\s+")).ok()?;
            let head = regex::Regex::new(&format!("^(?:{x}|{newline})")).ok()?;
            let space = regex::Regex::new(r"^\s+$").ok()?;
            let ascii = super::ascii_split::for_head(x);
            return Some(Matcher::Tail {
                all,
                head,
                space,
                ascii,
            });
        }
        if free(source) {
            return regex::Regex::new(source).ok().map(Matcher::Plain);
        }
        fancy_regex::Regex::new(source).ok().map(Matcher::Fancy)
    }

    /// The matches in `text`, in order, as the crate finds them (it stops at the first regex
    /// error, a backtrack limit, and keeps the rest as text between matches).
    fn each<E>(
        &self,
        text: &str,
        mut f: impl FnMut(usize, usize) -> Result<(), E>,
    ) -> Result<(), E> {
        match self {
            Matcher::Fancy(re) => {
                for m in re.find_iter(text).map_while(Result::ok) {
                    f(m.start(), m.end())?;
                }
            }
            Matcher::Plain(re) => {
                for m in re.find_iter(text) {
                    f(m.start(), m.end())?;
                }
            }
            Matcher::Tail {
                all,
                head,
                space,
                ascii,
            } => {
                let mut at = 0;
                while at < text.len() {
                    // A piece always advances; the guard keeps a slip there from looping.
                    let hand = ascii.and_then(|a| a.piece(text.as_bytes(), at));
                    if let Some(end) = hand.filter(|&end| end > at) {
                        f(at, end)?;
                        at = end;
                        continue;
                    }
                    // These patterns match at almost every position, and a search anchored
                    // where the last match ended finds the same leftmost match without the
                    // reverse scan an unanchored search needs for its start.
                    let from = regex_automata::Input::new(text).range(at..);
                    let anchored = from.clone().anchored(regex_automata::Anchored::Yes);
                    let Some(m) = all.search(&anchored).or_else(|| all.search(&from)) else {
                        break;
                    };
                    let (start, mut end) = (m.start(), m.end());
                    let run = &text[start..end];
                    // Cheapest tests first (a leading ASCII byte outside `\s` rules out a
                    // whitespace run); `head` alone decides which branch matched.
                    let lead = run.as_bytes()[0];
                    let may_be_space = lead >= 0x80 || matches!(lead, b'\t' | 0x0B | 0x0C | b' ');
                    if end < text.len()
                        && may_be_space
                        && !run.contains(['\r', '\n'])
                        && space.is_match(run)
                        && !head.is_match(&text[start..])
                        && let Some((last, _)) = run.char_indices().next_back()
                        && last > 0
                    {
                        end = start + last;
                    }
                    f(start, end)?;
                    at = end;
                }
            }
        }
        Ok(())
    }
}

pub struct Direct {
    /// Added tokens matched in the raw text (`normalized: false`).
    raw_added: Option<AddedScan>,
    /// Added tokens matched in the normalized text, by their normalized content.
    normalized_added: Option<AddedScan>,
    nfc: bool,
    splits: Vec<Split>,
    /// Whether a text can take over the ids of a reply it repeats (see [`Direct::take_over`]).
    reuses: bool,
}

/// What a later text that repeats a reply can take over from the reply's encoding: the run of
/// text after the reply's last added token, normalized, and where its ids start.
#[derive(Debug, Clone)]
pub struct Tail {
    normalized: String,
    first_id: usize,
}

/// Bytes a repeated run must have before taking its ids over is worth the checks.
pub(super) const MIN_TAKE_OVER: usize = 32;
/// Bytes of the reply's run before the shared part, at most, for a take-over.
const MAX_RUN_LEAD: usize = 1024;
/// Boundaries of each side looked at for one both texts share.
const BOUNDARIES: usize = 8;

/// How a split run over a text that is cut short ends.
enum Halt {
    Reached,
    Failed(TokenizeError),
}

impl From<TokenizeError> for Halt {
    fn from(e: TokenizeError) -> Halt {
        Halt::Failed(e)
    }
}

fn halted(r: Result<(), Halt>) -> Result<(), TokenizeError> {
    match r {
        Ok(()) | Err(Halt::Reached) => Ok(()),
        Err(Halt::Failed(e)) => Err(e),
    }
}

/// The split `ByteLevel` makes when its `use_regex` is on: the tokenizers crate's pattern.
const BYTE_LEVEL_PATTERN: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

impl Direct {
    /// The direct form of a pipeline, when it is one this module reproduces: no truncation or
    /// padding, added tokens that neither strip nor match single words, a normalizer that is
    /// absent, empty or NFC, and a pre-tokenizer of regex splits ending in a `ByteLevel` with
    /// no prefix space.
    pub fn new(
        normalizer: Option<Json>,
        pre_tokenizer: Option<Json>,
        added: &[(u32, AddedToken)],
    ) -> Option<Direct> {
        let nfc = match normalizer {
            None => false,
            Some(n) => match kind(&n)? {
                "NFC" => true,
                "Sequence" => match n.get("normalizers")?.as_array()?.as_slice() {
                    [] => false,
                    [one] if kind(one)? == "NFC" => true,
                    _ => return None,
                },
                _ => return None,
            },
        };
        let steps = match pre_tokenizer? {
            p if kind(&p)? == "Sequence" => p.get("pretokenizers")?.as_array()?.clone(),
            p => vec![p],
        };
        let (byte_level, regex_splits) = steps.split_last()?;
        if kind(byte_level)? != "ByteLevel" || byte_level.get("add_prefix_space")?.as_bool()? {
            return None;
        }
        let mut splits = regex_splits
            .iter()
            .map(split_step)
            .collect::<Option<Vec<_>>>()?;
        // ByteLevel's own regex (GPT-2's tokenizers) is one more split of the pieces, isolating
        // its matches, before the bytes are mapped.
        if byte_level.get("use_regex")?.as_bool()? {
            splits.push(Split {
                matcher: Matcher::new(BYTE_LEVEL_PATTERN)?,
                keep: Keep::All,
            });
        }
        if added
            .iter()
            .any(|(_, t)| t.lstrip || t.rstrip || t.single_word)
        {
            return None;
        }
        let normalize = |s: &str| -> String {
            if nfc {
                s.nfc().map(|(c, _)| c).collect()
            } else {
                s.to_string()
            }
        };
        // Patterns that do not build leave the crate's own scan to decide.
        let trie = |normalized: bool| -> Option<Option<AddedScan>> {
            let patterns = added
                .iter()
                .filter(|(_, t)| t.normalized == normalized)
                .map(|(id, t)| {
                    let content = if normalized {
                        normalize(&t.content)
                    } else {
                        t.content.clone()
                    };
                    (content, *id)
                });
            AddedScan::new(patterns).ok()
        };
        let normalized_added = trie(true)?;
        // One split of the GPT-4 kind, isolating its matches: after a place where that split
        // starts a new piece, it cuts the rest of the text as if the text began there (no
        // look-behind), so ids after such a place depend only on the text after it.
        let reuses = normalized_added.is_none()
            && matches!(
                splits.as_slice(),
                [Split {
                    matcher: Matcher::Tail { .. } | Matcher::Plain(_),
                    keep: Keep::All,
                }]
            );
        Some(Direct {
            raw_added: trie(false)?,
            normalized_added,
            nfc,
            splits,
            reuses,
        })
    }

    pub fn reuses(&self) -> bool {
        self.reuses
    }

    /// The ids of `text`, as `encode(text, add_special_tokens = false)` gives them.
    pub fn encode(&self, text: &str, words: &dyn WordIds) -> Result<Vec<u32>, TokenizeError> {
        self.encode_with(text, words, None, None)
    }

    /// The ids of a reply, and what a prompt that repeats it can take over (when this
    /// pipeline allows it).
    pub fn encode_reply(
        &self,
        text: &str,
        words: &dyn WordIds,
    ) -> Result<(Vec<u32>, Option<Tail>), TokenizeError> {
        if !self.reuses {
            return Ok((self.encode(text, words)?, None));
        }
        let mut tail = Tail {
            normalized: String::new(),
            first_id: 0,
        };
        let ids = self.encode_with(text, words, None, Some(&mut tail))?;
        Ok((
            ids,
            (tail.normalized.len() >= MIN_TAKE_OVER).then_some(tail),
        ))
    }

    /// The ids of `text`, taking over the ids of `reply` (its ids and [`Tail`]) where a run
    /// of `text` repeats the reply's last run: the same ids as [`encode`](Self::encode).
    /// Also says how many of the ids were taken over.
    pub fn encode_reusing(
        &self,
        text: &str,
        words: &dyn WordIds,
        reply: (&[u32], &Tail),
    ) -> Result<(Vec<u32>, usize), TokenizeError> {
        let mut taken = 0;
        let ids = self.encode_with(text, words, Some((reply.0, reply.1, &mut taken)), None)?;
        Ok((ids, taken))
    }

    /// The ids of `gap`, a text with no added token that is matched on the raw text (its
    /// caller's scan for them cut it out), appended to `out`, taking over the ids of `reply`
    /// as [`encode_reusing`](Self::encode_reusing) does; how many were taken over.
    pub fn encode_gap(
        &self,
        gap: &str,
        words: &dyn WordIds,
        reply: Option<(&[u32], &Tail)>,
        out: &mut Vec<u32>,
    ) -> Result<usize, TokenizeError> {
        let mut taken = 0;
        let mut scratch = String::new();
        let reply = reply.map(|(ids, tail)| (ids, tail, &mut taken));
        self.run(gap, words, reply, &mut scratch, out, None)?;
        Ok(taken)
    }

    /// One run between added tokens.
    fn run(
        &self,
        gap: &str,
        words: &dyn WordIds,
        reply: Option<(&[u32], &Tail, &mut usize)>,
        scratch: &mut String,
        out: &mut Vec<u32>,
        keep: Option<&mut Tail>,
    ) -> Result<(), TokenizeError> {
        let keep = keep.map(|k| {
            k.first_id = out.len();
            k.normalized.clear();
            &mut k.normalized
        });
        if let Some((ids, tail, taken)) = reply
            && let Some(n) = self.take_over(gap, ids, tail, words, scratch, out)?
        {
            *taken += n;
            return Ok(());
        }
        self.normalized(gap, words, scratch, out, keep)
    }

    fn encode_with(
        &self,
        text: &str,
        words: &dyn WordIds,
        mut reply: Option<(&[u32], &Tail, &mut usize)>,
        mut keep: Option<&mut Tail>,
    ) -> Result<Vec<u32>, TokenizeError> {
        let mut out = Vec::with_capacity(text.len() / 3);
        let mut scratch = String::new();
        let mut run = |gap: &str, out: &mut Vec<u32>, keep: Option<&mut Tail>| {
            let reply = reply
                .as_mut()
                .map(|(ids, tail, taken)| (*ids, *tail, &mut **taken));
            self.run(gap, words, reply, &mut scratch, out, keep)
        };
        match &self.raw_added {
            Some(scan) => {
                let mut from = 0;
                for m in scan.find_iter(text) {
                    run(&text[from..m.start], &mut out, None)?;
                    out.push(m.id);
                    from = m.end;
                }
                run(&text[from..], &mut out, keep.as_deref_mut())?;
            }
            None => run(text, &mut out, keep)?,
        }
        Ok(out)
    }

    /// The ids of `gap` (a run between added tokens) when it ends with a long part of the
    /// reply's last run, taken over from there on: how many ids were taken, or None (nothing
    /// written) when it cannot.
    ///
    /// Exact because the run's ids are the ids of its pieces, each merged on its own, and
    /// after a place where the split starts a piece in both texts the two texts are cut
    /// alike (see `reuses`). With NFC, the gap is already normal and normalizes on its own
    /// when everything before the shared part is ASCII and the shared part starts with an
    /// ASCII character (which neither composes nor reorders with what precedes it); the
    /// shared part is then a piece of the reply's normalized run.
    fn take_over(
        &self,
        gap: &str,
        ids: &[u32],
        tail: &Tail,
        words: &dyn WordIds,
        scratch: &mut String,
        out: &mut Vec<u32>,
    ) -> Result<Option<usize>, TokenizeError> {
        let run = tail.normalized.as_str();
        let shared = gap
            .bytes()
            .rev()
            .zip(run.bytes().rev())
            .take_while(|(a, b)| a == b)
            .count();
        if shared < MIN_TAKE_OVER {
            return Ok(None);
        }
        let mut a = gap.len() - shared;
        while !gap.is_char_boundary(a) {
            a += 1;
        }
        if self.nfc && !(gap[..a].is_ascii() && gap.as_bytes().get(a).is_some_and(u8::is_ascii)) {
            return Ok(None);
        }
        let b = run.len() - (gap.len() - a);
        // The reply's run is encoded again up to the shared part: worth it only when the
        // part before is short (a line break, a role header).
        if b > MAX_RUN_LEAD {
            return Ok(None);
        }
        let Some(split) = self.splits.first() else {
            return Ok(None);
        };
        let in_gap = boundaries(&split.matcher, gap, a)?;
        let in_run = boundaries(&split.matcher, run, b)?;
        let Some(r) = in_gap.iter().copied().find(|r| in_run.contains(r)) else {
            return Ok(None);
        };
        let mut before = Vec::new();
        self.split_until(run, b + r, words, scratch, &mut before)?;
        let Some(taken) = ids.get(tail.first_id + before.len()..) else {
            return Ok(None);
        };
        self.split_until(gap, a + r, words, scratch, out)?;
        out.extend_from_slice(taken);
        Ok(Some(taken.len()))
    }

    /// The ids of `text` up to `stop`, a place where the (only) split starts a piece.
    fn split_until(
        &self,
        text: &str,
        stop: usize,
        words: &dyn WordIds,
        scratch: &mut String,
        out: &mut Vec<u32>,
    ) -> Result<(), TokenizeError> {
        let mut prev = 0;
        halted(self.splits[0].matcher.each(text, |start, end| {
            if start >= stop {
                return Err(Halt::Reached);
            }
            self.pieces(1, &text[prev..start], words, scratch, out)?;
            self.pieces(1, &text[start..end], words, scratch, out)?;
            prev = end;
            if end >= stop {
                return Err(Halt::Reached);
            }
            Ok(())
        }))?;
        self.pieces(1, &text[prev..stop.max(prev)], words, scratch, out)
    }

    /// A run of raw text between added tokens: normalized (a copy kept in `keep`), then cut
    /// at the normalized added tokens.
    fn normalized(
        &self,
        raw: &str,
        words: &dyn WordIds,
        scratch: &mut String,
        out: &mut Vec<u32>,
        keep: Option<&mut String>,
    ) -> Result<(), TokenizeError> {
        if raw.is_empty() {
            return Ok(());
        }
        // Most non-ASCII text is already NFC, which the quick check (UAX #15, the same crate
        // and tables as the crate's normalizer) proves without decomposing and recomposing.
        let text: Cow<str> =
            if self.nfc && !raw.is_ascii() && is_nfc_quick(raw.chars()) != IsNormalized::Yes {
                Cow::Owned(raw.nfc().map(|(c, _)| c).collect())
            } else {
                Cow::Borrowed(raw)
            };
        if let Some(k) = keep {
            k.push_str(&text);
        }
        match &self.normalized_added {
            Some(scan) => {
                let mut from = 0;
                for m in scan.find_iter(&text) {
                    self.pieces(0, &text[from..m.start], words, scratch, out)?;
                    out.push(m.id);
                    from = m.end;
                }
                self.pieces(0, &text[from..], words, scratch, out)
            }
            None => self.pieces(0, &text, words, scratch, out),
        }
    }

    /// Split step `step` over `piece` (each step sees its piece as a whole string, as the
    /// crate's slices do), and the words after the last step.
    fn pieces(
        &self,
        step: usize,
        piece: &str,
        words: &dyn WordIds,
        scratch: &mut String,
        out: &mut Vec<u32>,
    ) -> Result<(), TokenizeError> {
        if piece.is_empty() {
            return Ok(());
        }
        let Some(split) = self.splits.get(step) else {
            return words.piece_ids(piece, scratch, out);
        };
        if step + 1 == self.splits.len() {
            return self.last_split(split, piece, words, out);
        }
        let mut prev = 0;
        split.matcher.each(piece, |start, end| {
            if split.keep.gaps() {
                self.pieces(step + 1, &piece[prev..start], words, scratch, out)?;
            }
            if split.keep.matches() {
                self.pieces(step + 1, &piece[start..end], words, scratch, out)?;
            }
            prev = end;
            Ok::<(), TokenizeError>(())
        })?;
        if split.keep.gaps() {
            self.pieces(step + 1, &piece[prev..], words, scratch, out)?;
        }
        Ok(())
    }

    /// The last split step over `piece`: its pieces are words, looked up with the word
    /// cache held for the whole piece.
    fn last_split(
        &self,
        split: &Split,
        piece: &str,
        words: &dyn WordIds,
        out: &mut Vec<u32>,
    ) -> Result<(), TokenizeError> {
        let (gaps, matches) = (split.keep.gaps(), split.keep.matches());
        words.with_pieces(out, &mut |ids| {
            let mut prev = 0;
            split.matcher.each(piece, |start, end| {
                if gaps && prev < start {
                    ids(&piece[prev..start])?;
                }
                if matches && start < end {
                    ids(&piece[start..end])?;
                }
                prev = end;
                Ok::<(), TokenizeError>(())
            })?;
            if gaps && prev < piece.len() {
                ids(&piece[prev..])?;
            }
            Ok(())
        })
    }
}

/// Where `matcher` starts a piece in `text` at or after `from` (isolated matches: every start
/// and end of a match), as offsets from `from`; the first [`BOUNDARIES`] of them, the end of
/// the text excluded.
fn boundaries(matcher: &Matcher, text: &str, from: usize) -> Result<Vec<usize>, TokenizeError> {
    let mut found = Vec::with_capacity(BOUNDARIES);
    if from == 0 {
        found.push(0);
    }
    halted(matcher.each(text, |start, end| {
        for at in [start, end] {
            if at >= from && at < text.len() && found.last() != Some(&(at - from)) {
                found.push(at - from);
            }
        }
        if found.len() >= BOUNDARIES {
            return Err(Halt::Reached);
        }
        Ok(())
    }))?;
    Ok(found)
}

fn kind(v: &Json) -> Option<&str> {
    v.get("type")?.as_str()
}

fn split_step(v: &Json) -> Option<Split> {
    if kind(v)? != "Split" {
        return None;
    }
    let pattern = v.get("pattern")?;
    // A string pattern is matched literally: the crate escapes it into a regex.
    let source = match (pattern.get("Regex"), pattern.get("String")) {
        (Some(r), None) => r.as_str()?.to_string(),
        (None, Some(s)) => regex::escape(s.as_str()?),
        _ => return None,
    };
    let invert = v.get("invert")?.as_bool()?;
    let keep = match (v.get("behavior")?.as_str()?, invert) {
        ("Isolated", _) => Keep::All,
        ("Removed", true) => Keep::Matches,
        ("Removed", false) => Keep::Gaps,
        _ => return None,
    };
    Some(Split {
        matcher: Matcher::new(&source)?,
        keep,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(m: &Matcher, text: &str) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let _ = m.each(text, |s, e| -> Result<(), ()> {
            out.push((s, e));
            Ok(())
        });
        out
    }

    /// Random texts over every ASCII byte and the non-ASCII characters each hand rule must
    /// leave to the regex (letters, a fold of `s`, Unicode spaces and digits, a mark, CJK, an
    /// emoji), each split with and without the hand path.
    #[test]
    fn ascii_split_gives_the_regex_pieces() {
        let mut alphabet: Vec<String> = (0u8..128).map(|b| char::from(b).to_string()).collect();
        for s in [
            "é", "ſ", "K", "\u{a0}", "\u{85}", "\u{3000}", "\u{2028}", "٣", "①",
        ] {
            alphabet.push(s.into());
        }
        for s in [
            "\u{301}", "中", "😀", "'s", "'S", "'re", "'VE", "'ll", "'Ll", "'d", "'m", "'t",
        ] {
            alphabet.push(s.into());
        }
        for s in [
            "  ",
            " \n",
            "\r\n",
            "\n\n",
            "\t",
            " a",
            "ab",
            "12",
            "1234",
            " (",
            "\u{a0} ",
            "abcdefghijk",
        ] {
            alphabet.push(s.into());
        }
        let mut next = crate::tokenize::xorshift(0x2545_F491_4F6C_DD1Du64);
        for (x, _) in super::super::ascii_split::KNOWN {
            for tail in TAILS {
                let pattern = format!("{x}{tail}");
                let fast = Matcher::new(&pattern).expect("a tail pattern");
                let mut slow = Matcher::new(&pattern).expect("a tail pattern");
                match &mut slow {
                    Matcher::Tail { ascii, .. } => {
                        assert!(ascii.is_some(), "{pattern:?} is not recognised");
                        *ascii = None;
                    }
                    _ => panic!("{pattern:?} is not a tail pattern"),
                }
                for _ in 0..50_000 {
                    // Up to 23 elements: letter runs past the eight bytes read at once.
                    let len = next() % 24;
                    let text: String = (0..len)
                        .map(|_| alphabet[(next() % alphabet.len() as u64) as usize].as_str())
                        .collect();
                    assert_eq!(pieces(&fast, &text), pieces(&slow, &text), "{text:?}");
                }
            }
        }
    }

    #[test]
    fn other_pipelines_are_left_to_the_crate() {
        let byte_level = serde_json::json!({"type": "ByteLevel", "add_prefix_space": false,
            "trim_offsets": true, "use_regex": false});
        assert!(Direct::new(None, Some(byte_level.clone()), &[]).is_some());
        let prefix = serde_json::json!({"type": "ByteLevel", "add_prefix_space": true,
            "trim_offsets": true, "use_regex": true});
        assert!(Direct::new(None, Some(prefix), &[]).is_none());
        let nfkc = serde_json::json!({"type": "NFKC"});
        assert!(Direct::new(Some(nfkc), Some(byte_level.clone()), &[]).is_none());
        let merged = serde_json::json!({"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "a"}, "behavior": "MergedWithPrevious",
             "invert": false}, byte_level]});
        assert!(Direct::new(None, Some(merged), &[]).is_none());
        assert!(Direct::new(None, None, &[]).is_none());
    }
}
