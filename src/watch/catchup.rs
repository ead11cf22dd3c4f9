//! One pod's sequence gap recovered in order. From the gap on, the pod's live batches are held
//! while its replay endpoint brings the missing ones; then every batch goes to the monitor in
//! sequence order. Applied as they arrive instead, a recovered store could land after a later
//! removal of the same block, and the view would hold a block the pod had already dropped.
//!
//! A stream joined late (its first number above 0) is caught up the same way: the pod's
//! earlier batches are asked for, and when its replay buffer still holds its whole history the
//! view is exact from the start.
//!
//! The hold is bounded: past [`MAX_HELD`] batches, or [`MAX_RANGES`] separate missing ranges,
//! or when the caller gives up (the endpoint failed, its answers ended, a timeout), what is
//! held is released in order and what never came is counted lost, so the pod is marked stale.

use std::collections::BTreeMap;

use crate::capture::Missing;

/// Batches held for one pod, at most (live and recovered: a catch-up that reaches it ends).
pub const MAX_HELD: usize = 4096;
/// Separate missing ranges of one pod, at most.
pub const MAX_RANGES: usize = 1024;

/// Where a batch goes among those held: recovered ones of a gap right before the live batch
/// that showed the gap (in their own order), live ones in the order they came.
type Place = (u64, bool, u64);

/// What a pod's catch-up has held and still misses. A pod may publish under several topics,
/// each numbered on its own (`K` names one).
#[derive(Debug)]
pub struct Catchup<K, T> {
    /// Still missing, per topic, each range with the place of the live batch after it.
    missing: Missing<K, u64>,
    /// Every batch from the first gap on, live or recovered, by place.
    held: BTreeMap<Place, T>,
    /// The place of the next live batch.
    next: u64,
    /// Batches recovered.
    recovered: u64,
    /// Per topic, the numbers up to this one were sent before kvaudit joined the stream:
    /// asked for to rebuild the view, but never counted lost.
    joined: BTreeMap<K, u64>,
}

impl<K, T> Default for Catchup<K, T> {
    fn default() -> Self {
        Catchup {
            missing: Missing::default(),
            held: BTreeMap::new(),
            next: 0,
            recovered: 0,
            joined: BTreeMap::new(),
        }
    }
}

/// A catch-up ended: the batches in order, how many of them were recovered, and how many
/// sequence numbers never came.
#[derive(Debug, PartialEq, Eq)]
pub struct Released<T> {
    pub batches: Vec<T>,
    pub recovered: u64,
    pub lost: u64,
}

impl<K: Ord + Clone, T> Catchup<K, T> {
    /// `from..=to` of `topic` went missing, before the next live batch. False when the
    /// catch-up would keep too many ranges: give up.
    pub fn gap(&mut self, topic: &K, from: u64, to: u64) -> bool {
        if from > to {
            return true;
        }
        if self.missing.len() >= MAX_RANGES {
            return false;
        }
        self.missing.insert(topic.clone(), from, to, self.next);
        true
    }

    /// `topic`'s stream was joined at `first` (> 0) and its earlier batches are asked for (as
    /// a gap `0..first`): those that do not come are not lost.
    pub fn joined(&mut self, topic: &K, first: u64) {
        if let Some(last) = first.checked_sub(1) {
            self.joined.insert(topic.clone(), last);
        }
    }

    /// The hold has no room for another batch: give up.
    pub fn is_full(&self) -> bool {
        self.held.len() >= MAX_HELD
    }

    /// A live batch, held behind the gap (when [`is_full`](Catchup::is_full) is false).
    pub fn hold(&mut self, batch: T) {
        self.held.insert((self.next, true, 0), batch);
        self.next += 1;
    }

    /// A batch the replay endpoint brought; taken only when its number is still missing (a
    /// reply repeats what arrived live too): whether it was.
    pub fn recovered(&mut self, topic: &K, seq: u64, batch: T) -> bool {
        let Some(place) = self.missing.take(topic, seq) else {
            return false;
        };
        self.held.insert((place, false, seq), batch);
        self.recovered += 1;
        true
    }

    /// Nothing is missing any more.
    pub fn complete(&self) -> bool {
        self.missing.is_empty()
    }

    /// Everything held, in order; what is still missing is lost.
    pub fn release(self) -> Released<T> {
        let lost = self
            .missing
            .iter()
            .filter_map(|(topic, start, end, _)| {
                // What came before the join was never ours to lose.
                let start = match self.joined.get(topic) {
                    Some(&j) if start <= j => j.checked_add(1)?,
                    _ => start,
                };
                (start <= end).then(|| (end - start).saturating_add(1))
            })
            .fold(0u64, u64::saturating_add);
        Released {
            batches: self.held.into_values().collect(),
            recovered: self.recovered,
            lost,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovered_batches_go_before_the_live_ones_that_followed_them() {
        let mut c = Catchup::default();
        // Live: 4 arrives after 1, so 2..=3 are missing; 5 and 6 follow live.
        assert!(c.gap(&"a", 2, 3));
        for seq in [4, 5, 6] {
            c.hold(seq);
        }
        c.recovered(&"a", 3, 3);
        assert!(!c.complete());
        // A reply starts at the first missing number and repeats what came live.
        c.recovered(&"a", 2, 2);
        c.recovered(&"a", 4, 40);
        // Another topic's numbers are its own.
        c.recovered(&"b", 2, 20);
        assert!(c.complete());
        assert_eq!(
            c.release(),
            Released {
                batches: vec![2, 3, 4, 5, 6],
                recovered: 2,
                lost: 0
            }
        );
    }

    #[test]
    fn topics_keep_the_order_they_came_in_and_each_gap_goes_before_what_showed_it() {
        let mut c = Catchup::default();
        // a1 missing, shown by a2; then b1, b2 missing (shown by b3); then a3.
        assert!(c.gap(&"a", 1, 1));
        c.hold("a2");
        c.hold("b0");
        assert!(c.gap(&"b", 1, 2));
        c.hold("b3");
        c.hold("a3");
        c.recovered(&"b", 2, "b2");
        c.recovered(&"a", 1, "a1");
        c.recovered(&"b", 1, "b1");
        assert_eq!(
            c.release().batches,
            vec!["a1", "a2", "b0", "b1", "b2", "b3", "a3"]
        );
    }

    #[test]
    fn what_never_came_is_counted_lost_and_the_rest_still_goes_in_order() {
        let mut c = Catchup::default();
        assert!(c.gap(&"a", 10, 19));
        c.hold(20);
        assert!(c.gap(&"a", 21, 21));
        c.hold(22);
        c.recovered(&"a", 15, 15);
        assert_eq!(
            c.release(),
            Released {
                batches: vec![15, 20, 22],
                recovered: 1,
                lost: 10
            }
        );
    }

    #[test]
    fn a_stream_joined_late_asks_for_its_history_without_counting_it_lost() {
        // Joined at 5: 0..=4 are asked for; the buffer had kept only 3 and 4.
        let mut c = Catchup::default();
        assert!(c.gap(&"a", 0, 4));
        c.joined(&"a", 5);
        c.hold(5);
        assert!(c.gap(&"a", 7, 8));
        c.hold(9);
        for seq in [3, 4, 8] {
            c.recovered(&"a", seq, seq);
        }
        assert_eq!(
            c.release(),
            Released {
                batches: vec![3, 4, 5, 8, 9],
                recovered: 3,
                lost: 1
            }
        );
    }

    #[test]
    fn the_hold_and_the_ranges_are_bounded() {
        let mut c: Catchup<&str, ()> = Catchup::default();
        for _ in 0..MAX_HELD {
            assert!(!c.is_full());
            c.hold(());
        }
        assert!(c.is_full());
        let mut c: Catchup<&str, ()> = Catchup::default();
        for i in 0..MAX_RANGES as u64 {
            assert!(c.gap(&"a", i * 2, i * 2));
        }
        assert!(!c.gap(&"a", u64::MAX - 1, u64::MAX - 1));
        // A hostile jump of the whole number space counts, without overflow.
        let mut c: Catchup<&str, ()> = Catchup::default();
        assert!(c.gap(&"a", 0, u64::MAX));
        assert_eq!(c.release().lost, u64::MAX);
    }
}
