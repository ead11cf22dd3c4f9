//! The counters of one index view. Reasons are enums, so a count is an array slot.

use std::collections::BTreeMap;
use std::marker::PhantomData;

use super::reasons::{CountedReason, DropReason, SkipReason};
use crate::events::Text;

/// The most variants a reason enum has (checked by a test).
const SLOTS: usize = 8;

/// Counts per reason, iterated (and serialized) in name order, reasons never seen left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counts<R> {
    n: [u64; SLOTS],
    seen: [bool; SLOTS],
    reason: PhantomData<R>,
}

impl<R> Default for Counts<R> {
    fn default() -> Self {
        Counts {
            n: [0; SLOTS],
            seen: [false; SLOTS],
            reason: PhantomData,
        }
    }
}

impl<R: CountedReason> Counts<R> {
    #[inline]
    pub fn add(&mut self, reason: R) {
        self.add_n(reason, 1);
    }

    #[inline]
    pub fn add_n(&mut self, reason: R, n: u64) {
        let i = reason.index();
        self.n[i] += n;
        self.seen[i] = true;
    }

    pub fn get(&self, reason: R) -> Option<u64> {
        let i = reason.index();
        self.seen[i].then_some(self.n[i])
    }

    pub fn is_empty(&self) -> bool {
        !self.seen.iter().any(|&s| s)
    }

    pub fn total(&self) -> u64 {
        self.n.iter().sum()
    }

    /// (reason, count) of every reason seen, in name order.
    pub fn reasons(&self) -> impl Iterator<Item = (R, u64)> + '_ {
        R::ALL
            .iter()
            .filter(|r| self.seen[r.index()])
            .map(|&r| (r, self.n[r.index()]))
    }

    /// (name, count) of every reason seen, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        self.reasons().map(|(r, n)| (r.as_str(), n))
    }

    pub fn to_map(&self) -> BTreeMap<&'static str, u64> {
        self.iter().collect()
    }
}

impl<R: CountedReason> serde::Serialize for Counts<R> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

/// The same text: its address when it is the same constant, else its bytes.
#[inline]
pub(crate) fn same(a: &str, b: &str) -> bool {
    std::ptr::eq(a, b) || a == b
}

/// Counts per (cache kind, reason), for llm-d's labelled metric.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KindCounts(Vec<(Text, SkipReason, u64)>);

impl KindCounts {
    /// `kind` is kept as given: a decoder's shared constant stays shared, so the next event
    /// of that kind is found by address.
    pub fn add(&mut self, kind: &Text, reason: SkipReason) {
        match self
            .0
            .iter_mut()
            .find(|(k, r, _)| *r == reason && same(k, kind))
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
        self.0.iter().map(|(k, r, n)| (k.as_ref(), r.as_str(), *n))
    }
}

/// Counters of one view.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    pub messages_dropped: Counts<DropReason>,
    pub stores_accepted: u64,
    pub stores_skipped: Counts<SkipReason>,
    /// (cache_kind, reason) → count, for the llm-d metric.
    pub stores_skipped_by_kind: KindCounts,
    pub removals_skipped: BTreeMap<(String, SkipReason), u64>,
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
    fn counts_are_in_name_order() {
        let mut c = Counts::<SkipReason>::default();
        c.add(SkipReason::ParentUnresolved);
        c.add(SkipReason::IncompleteCanonicalBlock);
        assert_eq!(c.get(SkipReason::ParentUnresolved), Some(1));
        assert_eq!(c.get(SkipReason::InvalidBlockSize), None);
        c.add_n(SkipReason::ParentUnresolved, 2);
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
        k.add(&Text::Borrowed("mamba"), SkipReason::UnsupportedCacheKind);
        k.add(
            &Text::Borrowed("full_attention"),
            SkipReason::IncompleteCanonicalBlock,
        );
        k.add(
            &Text::Owned("mamba".into()),
            SkipReason::UnsupportedCacheKind,
        );
        assert_eq!(
            k.iter().collect::<Vec<_>>(),
            vec![
                ("full_attention", "incomplete_canonical_block", 1),
                ("mamba", "unsupported_cache_kind", 2)
            ]
        );
    }

    #[test]
    fn every_reason_has_a_slot() {
        assert!(SkipReason::ALL.len() <= SLOTS && DropReason::ALL.len() <= SLOTS);
    }
}
