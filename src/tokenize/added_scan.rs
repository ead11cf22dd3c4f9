//! Finding added tokens in text as the `tokenizers` crate's added vocabulary does: one
//! leftmost-longest Aho-Corasick scan, built with the same library and match kind.
//!
//! The automaton steps through every byte, and a conversation's text passes through it more
//! than once (a reply alone, then inside each later prompt's new part): it was a tenth of a
//! corpus run. Chat models' added tokens start with one to three distinct bytes (`<` for
//! `<|im_start|>` and `<think>`, `[` for `[INST]`), so when they do, the scan jumps from one
//! such byte to the next with `memchr` and asks the automaton only whether a token starts
//! there. That finds the same matches: the leftmost match starts at the first place where
//! any pattern matches, and at that place the automaton's longest.

use daachorse::{DoubleArrayAhoCorasick, DoubleArrayAhoCorasickBuilder, MatchKind};

/// One added token found in a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    pub start: usize,
    pub end: usize,
    pub id: u32,
}

impl Found {
    /// The automaton's match `m` in a text that starts at byte `at` of the whole.
    fn of(m: daachorse::Match<u32>, at: usize) -> Found {
        Found {
            start: at + m.start(),
            end: at + m.end(),
            id: m.value(),
        }
    }
}

pub struct AddedScan {
    trie: DoubleArrayAhoCorasick<u32>,
    /// Bytes of the longest pattern.
    longest: usize,
    /// The distinct first bytes of the patterns, when there are at most three.
    starts: Option<Vec<u8>>,
}

impl AddedScan {
    /// None when there is no pattern (empty ones are left out); an error when the patterns
    /// do not build, which leaves the crate's own scan to decide.
    pub fn new<S: AsRef<str>>(
        patterns: impl IntoIterator<Item = (S, u32)>,
    ) -> Result<Option<AddedScan>, daachorse::errors::DaachorseError> {
        let patterns: Vec<(S, u32)> = patterns
            .into_iter()
            .filter(|(p, _)| !p.as_ref().is_empty())
            .collect();
        let Some(longest) = patterns.iter().map(|(p, _)| p.as_ref().len()).max() else {
            return Ok(None);
        };
        let mut starts: Vec<u8> = patterns
            .iter()
            .map(|(p, _)| p.as_ref().as_bytes()[0])
            .collect();
        starts.sort_unstable();
        starts.dedup();
        let trie = DoubleArrayAhoCorasickBuilder::new()
            .match_kind(MatchKind::LeftmostLongest)
            .build_with_values(patterns.iter().map(|(p, id)| (p.as_ref(), *id)))?;
        Ok(Some(AddedScan {
            trie,
            longest,
            starts: (starts.len() <= 3).then_some(starts),
        }))
    }

    /// Bytes of the longest pattern.
    pub fn longest(&self) -> usize {
        self.longest
    }

    /// The longest pattern that starts at byte `at` of `text`.
    pub fn at(&self, text: &[u8], at: usize) -> Option<Found> {
        let window = text.get(at..(at + self.longest).min(text.len()))?;
        self.trie
            .leftmost_find_iter(window)
            .next()
            .filter(|m| m.start() == 0)
            .map(|m| Found::of(m, at))
    }

    /// The matches of the crate's scan over `text`, in order.
    pub fn find_iter<'t>(&'t self, text: &'t str) -> impl Iterator<Item = Found> + 't {
        let bytes = text.as_bytes();
        let mut plain = match self.starts {
            Some(_) => None,
            None => Some(self.trie.leftmost_find_iter(bytes)),
        };
        let mut from = 0;
        std::iter::from_fn(move || {
            if let Some(it) = plain.as_mut() {
                return it.next().map(|m| Found::of(m, 0));
            }
            let starts = self.starts.as_deref().unwrap_or_default();
            while from < bytes.len() {
                let rest = &bytes[from..];
                let next = match *starts {
                    [a] => memchr::memchr(a, rest),
                    [a, b] => memchr::memchr2(a, b, rest),
                    [a, b, c] => memchr::memchr3(a, b, c, rest),
                    _ => None,
                };
                let p = from + next?;
                match self.at(bytes, p) {
                    Some(found) => {
                        from = found.end;
                        return Some(found);
                    }
                    None => from = p + 1,
                }
            }
            None
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The automaton's own scan, for comparison.
    fn plain(scan: &AddedScan, text: &str) -> Vec<Found> {
        scan.trie
            .leftmost_find_iter(text)
            .map(|m| Found::of(m, 0))
            .collect()
    }

    #[test]
    fn the_prefiltered_scan_finds_what_the_automaton_finds() {
        // Patterns that nest, share prefixes and overlap, over texts built from their
        // pieces, so that candidates without a match, matches inside longer ones and
        // back-to-back tokens all occur.
        let sets: [&[&str]; 3] = [
            &[
                "<|im_start|>",
                "<|im_end|>",
                "<think>",
                "</think>",
                "<",
                "<|",
            ],
            &["[INST]", "[/INST]", "<s>", "</s>", "<<SYS>>"],
            &["ab", "abc", "bcd", "<x>", "b"],
        ];
        let alphabet = [
            "<", "|", "im_start", "im_end", "|>", ">", "think", "/", "[", "INST", "]", "s", "SYS",
            "a", "b", "c", "d", "x", " ", "é", "\n",
        ];
        let mut next = crate::tokenize::xorshift(0x9E37_79B9_7F4A_7C15u64);
        for set in sets {
            let scan = AddedScan::new(set.iter().enumerate().map(|(i, p)| (*p, i as u32)))
                .ok()
                .flatten()
                .expect("the patterns build");
            assert!(
                scan.starts.is_some(),
                "{set:?} has at most three first bytes"
            );
            for _ in 0..20_000 {
                let len = next() % 16;
                let text: String = (0..len)
                    .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                    .collect();
                assert_eq!(
                    scan.find_iter(&text).collect::<Vec<_>>(),
                    plain(&scan, &text),
                    "{text:?}"
                );
            }
        }
    }

    #[test]
    fn many_first_bytes_take_the_automaton_and_no_pattern_builds_nothing() {
        let scan = AddedScan::new([("<a>", 1), ("[b]", 2), ("{c}", 3), ("(d)", 4)])
            .ok()
            .flatten()
            .unwrap();
        assert!(scan.starts.is_none());
        let text = "x(d)<a>{c}[b]y";
        assert_eq!(scan.find_iter(text).collect::<Vec<_>>(), plain(&scan, text));
        assert_eq!(scan.find_iter(text).count(), 4);
        assert!(matches!(AddedScan::new([("", 1)]), Ok(None)));
        assert!(matches!(
            AddedScan::new(Vec::<(&str, u32)>::new()),
            Ok(None)
        ));
        assert_eq!(scan.longest(), 3);
        assert_eq!(scan.at(text.as_bytes(), 1).map(|f| f.id), Some(4));
        assert_eq!(scan.at(text.as_bytes(), 2), None);
    }
}
