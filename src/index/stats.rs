//! The counters of one index view. Reasons are a handful of static labels counted once per
//! event, so they live in short sorted vectors found by the label's address first: a
//! `BTreeMap<&str, _>` spent a string comparison per tree node on every skipped event.

use std::collections::BTreeMap;

use crate::events::Text;

/// Counts per static label, iterated in label order (like the map they replace).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts(Vec<(&'static str, u64)>);

/// The same label: its address when it is the same constant, else its text.
#[inline]
pub(crate) fn same(a: &str, b: &str) -> bool {
    std::ptr::eq(a, b) || a == b
}

impl Counts {
    pub fn add(&mut self, label: &'static str) {
        self.add_n(label, 1);
    }

    pub fn add_n(&mut self, label: &'static str, n: u64) {
        match self.0.iter_mut().find(|(l, _)| same(l, label)) {
            Some((_, c)) => *c += n,
            None => {
                self.0.push((label, n));
                self.0.sort_unstable_by_key(|(l, _)| *l);
            }
        }
    }

    pub fn get(&self, label: &str) -> Option<u64> {
        self.0.iter().find(|(l, _)| same(l, label)).map(|(_, n)| *n)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn total(&self) -> u64 {
        self.0.iter().map(|(_, n)| n).sum()
    }

    /// (label, count) in label order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        self.0.iter().copied()
    }

    pub fn to_map(&self) -> BTreeMap<&'static str, u64> {
        self.iter().collect()
    }
}

impl serde::Serialize for Counts {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

/// Counts per (cache kind, reason), for llm-d's labelled metric.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KindCounts(Vec<(Text, &'static str, u64)>);

impl KindCounts {
    /// `kind` is kept as given: a decoder's shared constant stays shared, so the next event
    /// of that kind is found by address.
    pub fn add(&mut self, kind: &Text, reason: &'static str) {
        match self
            .0
            .iter_mut()
            .find(|(k, r, _)| same(r, reason) && same(k, kind))
        {
            Some((_, _, n)) => *n += 1,
            None => {
                self.0.push((kind.clone(), reason, 1));
                self.0
                    .sort_unstable_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
            }
        }
    }

    /// (cache kind, reason, count) in that order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &'static str, u64)> + '_ {
        self.0.iter().map(|(k, r, n)| (k.as_ref(), *r, *n))
    }
}

/// Counters of one view.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    pub messages_dropped: Counts,
    pub stores_accepted: u64,
    pub stores_skipped: Counts,
    /// (cache_kind, reason) → count, for the llm-d metric.
    pub stores_skipped_by_kind: KindCounts,
    pub removals_skipped: BTreeMap<(String, &'static str), u64>,
    pub stores_with_dropped_tail: u64,
    pub tier_updates: u64,
    /// Tokens in BlockStored events of messages llm-d decoded.
    pub tokens_stored: u64,
    /// Tokens the index covers with keys from those events.
    pub tokens_indexed: u64,
    pub removed_hashes_forwarded: u64,
    pub removed_hashes_suppressed: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_sorted_by_label_and_match_equal_text() {
        let mut c = Counts::default();
        c.add("parent_unresolved");
        c.add("incomplete_canonical_block");
        let owned = String::from("parent_unresolved");
        assert_eq!(c.get(&owned), Some(1));
        c.add_n("parent_unresolved", 2);
        assert_eq!(
            c.iter().collect::<Vec<_>>(),
            vec![("incomplete_canonical_block", 1), ("parent_unresolved", 3)]
        );
        assert_eq!(c.total(), 4);
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            r#"{"incomplete_canonical_block":1,"parent_unresolved":3}"#
        );
        let mut k = KindCounts::default();
        k.add(&Text::Borrowed("mamba"), "unsupported_cache_kind");
        k.add(
            &Text::Borrowed("full_attention"),
            "incomplete_canonical_block",
        );
        k.add(&Text::Owned("mamba".into()), "unsupported_cache_kind");
        assert_eq!(
            k.iter().collect::<Vec<_>>(),
            vec![
                ("full_attention", "incomplete_canonical_block", 1),
                ("mamba", "unsupported_cache_kind", 2)
            ]
        );
    }
}
