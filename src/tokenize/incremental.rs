//! Tokenizing a text that shares a long prefix with one tokenized before, reusing its ids.
//!
//! A conversation's prompt i+1 starts with most of prompt i, and tokenizing every prompt from
//! scratch makes a long conversation quadratic in its text. The reuse is exact because of how
//! the `tokenizers` crate encodes: the added vocabulary first splits the raw text at every
//! non-normalized added token (one leftmost-longest Aho-Corasick scan over the whole text),
//! and every piece between two such tokens is then normalized, pre-tokenized and run through
//! the model on its own. So the ids of a text are the ids of its pieces, concatenated, and a
//! text that agrees with another up to the end of one of those tokens has the same ids up to
//! there, provided the scan itself splits both texts there (see [`Splitter::resumes_at`]).
//!
//! Some pipelines break the "on its own" part, and for them every text is encoded in full:
//! a Metaspace pre-tokenizer that prepends `▁` only to the piece at offset 0 (prepend scheme
//! `first`), added tokens that strip neighbouring whitespace or match single words only (a
//! match then moves with the text around it), truncation or padding (which act on the whole
//! text), and BPE dropout (random, so no encoding repeats another).

use serde_json::Value as Json;
use tokenizers::AddedToken;

use super::added_scan::AddedScan;

/// A text's ids, with the places where a later text that shares a prefix with it can take
/// them over.
#[derive(Debug, Clone, Default)]
pub struct Encoded {
    /// Kept only when the tokenizer can resume (else empty, and `cuts` too).
    text: String,
    ids: Vec<u32>,
    /// Byte offsets just past an added token where the scan splits `text`, each with the
    /// number of ids before it; ascending.
    cuts: Vec<(usize, usize)>,
    /// Leading ids taken over from the text this one was encoded after.
    reused: usize,
    /// Ids taken over from a reply the text repeats.
    taken_over: usize,
}

impl Encoded {
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }

    pub fn into_ids(self) -> Vec<u32> {
        self.ids
    }

    /// How many leading ids were taken over from the base text rather than encoded.
    pub fn reused(&self) -> usize {
        self.reused
    }

    /// How many ids were taken over from a reply the text repeats rather than encoded.
    pub fn taken_over(&self) -> usize {
        self.taken_over
    }

    pub(super) fn set_taken_over(&mut self, n: usize) {
        self.taken_over = n;
    }
}

/// The scan the crate's added vocabulary does over the raw text, rebuilt from the same
/// patterns (the non-normalized added tokens).
pub struct Splitter {
    scan: AddedScan,
}

/// Why texts cannot be encoded piecewise with this tokenizer, if they cannot.
pub fn unsupported(
    pre_tokenizer: Option<Json>,
    truncation: bool,
    padding: bool,
    dropout: bool,
    added: &[AddedToken],
) -> Option<&'static str> {
    if truncation {
        return Some("truncation");
    }
    if padding {
        return Some("padding");
    }
    if dropout {
        return Some("BPE dropout");
    }
    if pre_tokenizer.as_ref().is_some_and(prepends_to_first_piece) {
        return Some("a Metaspace pre-tokenizer that prepends only at offset 0");
    }
    let moving = added
        .iter()
        .any(|t| !t.normalized && (t.lstrip || t.rstrip || t.single_word));
    moving.then_some("an added token with lstrip, rstrip or single_word")
}

/// Any Metaspace whose prepend scheme is not one that treats every piece alike.
fn prepends_to_first_piece(v: &Json) -> bool {
    match v {
        Json::Object(o) => {
            let metaspace = o.get("type").and_then(Json::as_str) == Some("Metaspace");
            let scheme = o.get("prepend_scheme").and_then(Json::as_str);
            (metaspace && !matches!(scheme, Some("always" | "never")))
                || o.values().any(prepends_to_first_piece)
        }
        Json::Array(a) => a.iter().any(prepends_to_first_piece),
        _ => false,
    }
}

impl Splitter {
    /// None when no added token splits the raw text (nothing to resume at), or when the
    /// patterns do not build (the crate would have refused them too).
    pub fn new(added: &[(u32, AddedToken)]) -> Option<Splitter> {
        let patterns = added
            .iter()
            .filter(|(_, t)| !t.normalized)
            .map(|(id, t)| (t.content.as_str(), *id));
        let scan = AddedScan::new(patterns).ok()??;
        Some(Splitter { scan })
    }

    /// The last cut of `base` that `text` also splits at, as an index into `base.cuts`.
    ///
    /// A cut of `base` at `p` within the common prefix is also a cut of `text` unless some
    /// added-token occurrence in `text` starts before `p` and ends after it: the scan is
    /// leftmost-longest, so the choices it makes before `p` depend only on occurrences that
    /// end by `p`, which both texts share, and once a match ends at `p` it starts afresh
    /// there. (In `base` no occurrence across `p` can ever be the leftmost one, or the match
    /// chosen there would cover `p`.)
    fn resumes_at(&self, base: &Encoded, text: &str) -> Option<usize> {
        let shared = common_prefix_bytes(base.text.as_bytes(), text.as_bytes());
        let below = base.cuts.partition_point(|&(at, _)| at <= shared);
        (0..below)
            .rev()
            .find(|&i| !self.crosses(text.as_bytes(), base.cuts[i].0))
    }

    /// Whether an occurrence of a pattern in `text` starts before `at` and ends after it (the
    /// longest occurrence from each start is the one to look at).
    fn crosses(&self, text: &[u8], at: usize) -> bool {
        (at.saturating_sub(self.scan.longest() - 1)..at)
            .any(|start| self.scan.at(text, start).is_some_and(|m| m.end > at))
    }

    /// `text` encoded after the longest prefix of `base` it can take over, one gap at a time:
    /// `encode` appends the ids of the text between two added tokens the scan matches (which
    /// holds none, or the scan would have matched it first), and the matched token's own id
    /// follows. That is the crate's split, so the encoder of a gap need not scan it again.
    pub fn encode<E>(
        &self,
        text: &str,
        base: Option<&Encoded>,
        mut encode: impl FnMut(&str, &mut Vec<u32>) -> Result<(), E>,
    ) -> Result<Encoded, E> {
        let resume = base.and_then(|b| Some((b, self.resumes_at(b, text)?)));
        let (mut ids, mut cuts, start) = match resume {
            Some((b, i)) => {
                let (at, n) = b.cuts[i];
                (b.ids[..n].to_vec(), b.cuts[..=i].to_vec(), at)
            }
            None => (Vec::new(), Vec::new(), 0),
        };
        let reused = ids.len();
        let tail = &text[start..];
        let mut from = 0;
        for m in self.scan.find_iter(tail) {
            encode(&tail[from..m.start], &mut ids)?;
            ids.push(m.id);
            from = m.end;
            cuts.push((start + from, ids.len()));
        }
        encode(&tail[from..], &mut ids)?;
        Ok(Encoded {
            text: text.to_string(),
            ids,
            cuts,
            reused,
            taken_over: 0,
        })
    }
}

/// A text that cannot resume keeps nothing but its ids.
pub fn whole(ids: Vec<u32>) -> Encoded {
    Encoded {
        ids,
        ..Encoded::default()
    }
}

/// Compared a cache line at a time: prompts share hundreds of kilobytes.
fn common_prefix_bytes(a: &[u8], b: &[u8]) -> usize {
    const CHUNK: usize = 64;
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + CHUNK <= n && a[i..i + CHUNK] == b[i..i + CHUNK] {
        i += CHUNK;
    }
    i + a[i..n]
        .iter()
        .zip(&b[i..n])
        .take_while(|(x, y)| x == y)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_prefix_in_and_across_chunks() {
        let a: Vec<u8> = (0..200u8).collect();
        for cut in [0, 1, 63, 64, 65, 128, 199] {
            let mut b = a.clone();
            b[cut] ^= 1;
            assert_eq!(common_prefix_bytes(&a, &b), cut);
        }
        assert_eq!(common_prefix_bytes(&a, &a[..70]), 70);
        assert_eq!(common_prefix_bytes(&a, &a), 200);
    }

    #[test]
    fn metaspace_first_is_found_inside_sequences() {
        let seq = serde_json::json!({"type": "Sequence", "pretokenizers": [
            {"type": "Split"}, {"type": "Metaspace", "prepend_scheme": "first"}]});
        assert!(prepends_to_first_piece(&seq));
        let always = serde_json::json!({"type": "Metaspace", "prepend_scheme": "always"});
        assert!(!prepends_to_first_piece(&always));
        let byte_level = serde_json::json!({"type": "ByteLevel", "add_prefix_space": true});
        assert!(!prepends_to_first_piece(&byte_level));
    }
}
