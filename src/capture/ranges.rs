//! Sequence numbers still missing, per topic (each numbered on its own), as disjoint inclusive
//! ranges each with a value: what a gap recovery waits for (capture's replay worker, watch's
//! catch-up). A recovered number is taken out of its range, which splits around it, so a
//! reply repeating it is not taken twice.

use std::borrow::Borrow;
use std::collections::BTreeMap;

type Ranges<V> = BTreeMap<u64, (u64, V)>;

#[derive(Debug, Clone)]
pub(crate) struct Missing<K, V> {
    /// Per topic, `start → (end, value)`, disjoint; no topic without a range.
    topics: BTreeMap<K, Ranges<V>>,
    /// Ranges in all topics.
    ranges: usize,
}

impl<K, V> Default for Missing<K, V> {
    fn default() -> Self {
        Missing {
            topics: BTreeMap::new(),
            ranges: 0,
        }
    }
}

/// The range of `m` holding `seq`: its start, end and value.
fn range_of<V: Copy>(m: &Ranges<V>, seq: u64) -> Option<(u64, u64, V)> {
    let (&start, &(end, value)) = m.range(..=seq).next_back()?;
    (seq <= end).then_some((start, end, value))
}

impl<K: Ord, V: Copy> Missing<K, V> {
    /// `from..=to` of `topic` is missing (disjoint from its ranges; one starting at `from` is
    /// replaced).
    pub(crate) fn insert(&mut self, topic: K, from: u64, to: u64, value: V) {
        let m = self.topics.entry(topic).or_default();
        if m.insert(from, (to, value)).is_none() {
            self.ranges += 1;
        }
    }

    /// Takes `seq` of `topic` out (its range split around it): the range's value, when it
    /// was missing.
    pub(crate) fn take<Q>(&mut self, topic: &Q, seq: u64) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        let m = self.topics.get_mut(topic)?;
        let (start, end, value) = range_of(m, seq)?;
        m.remove(&start);
        self.ranges -= 1;
        if start < seq {
            m.insert(start, (seq - 1, value));
            self.ranges += 1;
        }
        if seq < end {
            m.insert(seq + 1, (end, value));
            self.ranges += 1;
        }
        if m.is_empty() {
            self.topics.remove(topic);
        }
        Some(value)
    }

    /// The topic, as kept, whose missing numbers hold `seq`: `topic`'s, or with no topic
    /// given, the first that does.
    pub(crate) fn holder<Q>(&self, topic: Option<&Q>, seq: u64) -> Option<&K>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        let holds = |m: &Ranges<V>| range_of(m, seq).is_some();
        match topic {
            Some(t) => {
                let (k, m) = self.topics.get_key_value(t)?;
                holds(m).then_some(k)
            }
            None => self.topics.iter().find(|(_, m)| holds(m)).map(|(k, _)| k),
        }
    }

    /// The first number missing, of any topic.
    pub(crate) fn first(&self) -> Option<u64> {
        self.topics
            .values()
            .filter_map(|m| m.keys().next().copied())
            .min()
    }

    /// Keeps the ranges whose value passes `keep`.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(V) -> bool) {
        for m in self.topics.values_mut() {
            m.retain(|_, (_, v)| keep(*v));
        }
        self.topics.retain(|_, m| !m.is_empty());
        self.ranges = self.topics.values().map(BTreeMap::len).sum();
    }

    /// Each range: its topic, start, end and value.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&K, u64, u64, V)> + '_ {
        self.topics
            .iter()
            .flat_map(|(k, m)| m.iter().map(move |(&s, &(e, v))| (k, s, e, v)))
    }

    /// Ranges, of all topics.
    pub(crate) fn len(&self) -> usize {
        self.ranges
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ranges == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_taken_splits_its_range_and_is_not_taken_twice() {
        let mut m = Missing::default();
        m.insert("a", 3, 7, 1);
        m.insert("b", 3, 3, 2);
        m.insert("a", 10, 10, 3);
        m.insert("a", 10, 12, 4);
        assert_eq!(m.len(), 3, "the same start replaced");
        assert_eq!(m.take("a", 5), Some(1));
        assert_eq!(m.take("a", 5), None);
        assert_eq!(m.take("c", 4), None);
        assert_eq!(m.holder(Some("a"), 4), Some(&"a"));
        assert_eq!(m.holder(Some("a"), 8), None);
        assert_eq!(m.holder::<&str>(None, 3), Some(&"a"));
        assert_eq!(m.holder::<&str>(None, 11), Some(&"a"));
        assert_eq!(
            m.iter().collect::<Vec<_>>(),
            [
                (&"a", 3, 4, 1),
                (&"a", 6, 7, 1),
                (&"a", 10, 12, 4),
                (&"b", 3, 3, 2)
            ]
        );
        assert_eq!((m.take("a", 3), m.take("b", 3)), (Some(1), Some(2)));
        assert_eq!((m.len(), m.first()), (3, Some(4)));
        assert_eq!(
            m.holder::<&str>(None, 3),
            None,
            "b's only number taken: b is gone"
        );
        m.retain(|v| v == 4);
        assert_eq!((m.len(), m.first()), (1, Some(10)));
        for seq in 10..=12 {
            assert_eq!(m.take("a", seq), Some(4));
        }
        assert!(m.is_empty() && m.first().is_none());
    }
}
