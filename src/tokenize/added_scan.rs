//! Finding added tokens in text as the `tokenizers` crate's added vocabulary does: one
//! leftmost-longest Aho-Corasick scan, built with the same library and match kind.
//!
//! The automaton steps through every byte, and a conversation's text passes through it more
//! than once (a reply alone, then inside each later prompt's new part): it was a tenth of a
//! corpus run. Chat models' added tokens start with one to three distinct bytes (`<` for
//! `<|im_start|>` and `<think>`, `[` for `[INST]`), so when they do, the scan jumps from one
//! such byte to the next with `memchr` and asks the automaton only whether a token starts
//! there. That finds the same matches: the leftmost match starts at the first place where
//! any pattern matches, and at that place the longest pattern that starts there. That last
//! question is answered by walking a trie of the patterns from the root, not by the
//! automaton: its leftmost-longest search over a window cost ~1,700 instructions per match,
//! and a prompt's new part holds half a dozen added tokens.

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
    prefixes: Prefixes,
    /// Bytes of the longest pattern.
    longest: usize,
    /// The distinct first bytes of the patterns, when there are at most three.
    starts: Option<Vec<u8>>,
}

/// The patterns as a plain trie (no failure links), for the longest pattern that starts at
/// one given byte.
struct Prefixes {
    /// Per node: its children as a range of `edges`, and the id of the pattern that ends there
    /// (`NO_PATTERN` if none). Node 0 is the root.
    nodes: Vec<(u32, u32, u32)>,
    /// (byte, child node), sorted by byte within each node's range.
    edges: Vec<(u8, u32)>,
    /// Per node with one child: the bytes that lead from it, through nodes of one child where
    /// no pattern ends, to the next node that branches or ends a pattern, as a range of
    /// `bytes`, and that node. Added tokens are long and mostly differ early
    /// (`<|start_header_id|>`, `<|reserved_special_token_17|>`), so a walk compares such a
    /// run at once instead of searching one child per byte.
    runs: Vec<Run>,
    /// The patterns' bytes, one after another: the runs are ranges of it.
    bytes: Vec<u8>,
}

#[derive(Clone, Copy, Default)]
struct Run {
    at: u32,
    len: u32,
    to: u32,
}

const NO_PATTERN: u32 = u32::MAX;

impl Prefixes {
    /// From distinct, non-empty patterns (the automaton refuses duplicates, so callers build
    /// it first). Nodes are numbered breadth-first, so every node's children are contiguous.
    fn new(patterns: &[(&[u8], u32)]) -> Prefixes {
        let mut sorted = patterns.to_vec();
        sorted.sort_unstable();
        let mut bytes = Vec::new();
        let mut starts = Vec::with_capacity(sorted.len());
        for (p, _) in &sorted {
            starts.push(bytes.len());
            bytes.extend_from_slice(p);
        }
        let mut nodes = Vec::new();
        let mut edges = Vec::new();
        // Where in `bytes` the edges out of each node begin: the next byte of a pattern
        // through it.
        let mut next_byte = Vec::new();
        // Each queued node: the sorted patterns that pass through it, and its depth.
        let mut queue = std::collections::VecDeque::from([(0, sorted.len(), 0usize)]);
        let mut numbered = 1u32;
        while let Some((lo, hi, depth)) = queue.pop_front() {
            let mut i = lo;
            let mut id = NO_PATTERN;
            // Sorted, so a pattern that ends at this node comes first among those through it.
            if i < hi && sorted[i].0.len() == depth {
                id = sorted[i].1;
                i += 1;
            }
            next_byte.push(starts.get(i).map_or(0, |&s| s + depth));
            let first = edges.len() as u32;
            while i < hi {
                let byte = sorted[i].0[depth];
                let end = i + sorted[i..hi].partition_point(|(p, _)| p[depth] == byte);
                edges.push((byte, numbered));
                numbered += 1;
                queue.push_back((i, end, depth + 1));
                i = end;
            }
            nodes.push((first, edges.len() as u32, id));
        }
        // Children are numbered after their parents, so each node's run extends its child's.
        let mut runs = vec![Run::default(); nodes.len()];
        for n in (0..nodes.len()).rev() {
            let (first, end, _) = nodes[n];
            if end - first != 1 {
                continue;
            }
            let child = edges[first as usize].1 as usize;
            let (c_first, c_end, c_id) = nodes[child];
            let (len, to) = if c_id == NO_PATTERN && c_end - c_first == 1 {
                (1 + runs[child].len, runs[child].to)
            } else {
                (1, child as u32)
            };
            runs[n] = Run {
                at: next_byte[n] as u32,
                len,
                to,
            };
        }
        Prefixes {
            nodes,
            edges,
            runs,
            bytes,
        }
    }

    /// Length and id of the longest pattern `text` starts with.
    fn longest(&self, text: &[u8]) -> Option<(usize, u32)> {
        let mut node = 0usize;
        let mut best = None;
        let mut i = 0;
        loop {
            let run = self.runs[node];
            if run.len > 0 {
                // No pattern ends inside a run: the text follows it whole or ends the walk.
                let (at, len) = (run.at as usize, run.len as usize);
                if text.get(i..i + len) != self.bytes.get(at..at + len) {
                    break;
                }
                i += len;
                node = run.to as usize;
            } else {
                let Some(byte) = text.get(i) else { break };
                let (first, end, _) = self.nodes[node];
                let children = &self.edges[first as usize..end as usize];
                let Ok(k) = children.binary_search_by_key(byte, |&(b, _)| b) else {
                    break;
                };
                node = children[k].1 as usize;
                i += 1;
            }
            let id = self.nodes[node].2;
            if id != NO_PATTERN {
                best = Some((i, id));
            }
        }
        best
    }
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
        let bytes: Vec<(&[u8], u32)> = patterns
            .iter()
            .map(|(p, id)| (p.as_ref().as_bytes(), *id))
            .collect();
        Ok(Some(AddedScan {
            trie,
            prefixes: Prefixes::new(&bytes),
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
        let (len, id) = self.prefixes.longest(text.get(at..)?)?;
        Some(Found {
            start: at,
            end: at + len,
            id,
        })
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

    /// The longest pattern starting at `at`, as the automaton's leftmost-longest search of
    /// the text from there finds it.
    fn at_by_automaton(scan: &AddedScan, text: &str, at: usize) -> Option<Found> {
        scan.trie
            .leftmost_find_iter(&text.as_bytes()[at..])
            .next()
            .filter(|m| m.start() == 0)
            .map(|m| Found::of(m, at))
    }

    #[test]
    fn the_prefiltered_scan_finds_what_the_automaton_finds() {
        // Patterns that nest, share prefixes and overlap, over texts built from their
        // pieces, so that candidates without a match, matches inside longer ones and
        // back-to-back tokens all occur.
        let sets: [&[&str]; 4] = [
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
            // Llama 3's: long tokens sharing long runs, and one a prefix of another.
            &[
                "<|start_header_id|>",
                "<|end_header_id|>",
                "<|eot_id|>",
                "<|reserved_special_token_1|>",
                "<|reserved_special_token_10|>",
                "<|reserved_special_token_2|>",
                "<|reserved",
            ],
        ];
        let alphabet = [
            "<",
            "|",
            "im_start",
            "im_end",
            "|>",
            ">",
            "think",
            "/",
            "[",
            "INST",
            "]",
            "s",
            "SYS",
            "a",
            "b",
            "c",
            "d",
            "x",
            " ",
            "é",
            "\n",
            "start_",
            "header",
            "_id",
            "end",
            "eot",
            "reserved",
            "_special_token_",
            "1",
            "0",
            "2",
            "<|",
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
                for at in 0..=text.len() {
                    assert_eq!(
                        scan.at(text.as_bytes(), at),
                        at_by_automaton(&scan, &text, at),
                        "{text:?} at {at}"
                    );
                }
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
