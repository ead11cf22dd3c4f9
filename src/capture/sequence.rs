//! Sequence numbers per publisher: what each message's number says about the stream (next,
//! gap, duplicate, restart).

use std::collections::BTreeMap;

/// What one message's sequence number says about its publisher's stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeqVerdict {
    First,
    Next,
    /// `missing` numbers after `after` never arrived.
    Gap {
        after: u64,
        missing: u64,
    },
    Duplicate,
    /// The number dropped back: the publisher restarted (vLLM counts from 0 per process).
    Restart {
        from: u64,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublisherState {
    pub endpoint: String,
    pub topic: String,
    pub first_seq: u64,
    pub last_seq: u64,
    pub messages: u64,
}

/// Sequence bookkeeping, keyed by (endpoint, topic): each vLLM process (and DP rank) counts
/// from 0 on its own.
#[derive(Debug, Default)]
pub struct SeqTracker {
    pubs: BTreeMap<(String, String), PublisherState>,
}

impl SeqTracker {
    pub fn observe(&mut self, endpoint: &str, topic: &str, seq: u64) -> SeqVerdict {
        let key = (endpoint.to_string(), topic.to_string());
        match self.pubs.get_mut(&key) {
            None => {
                self.pubs.insert(
                    key,
                    PublisherState {
                        endpoint: endpoint.into(),
                        topic: topic.into(),
                        first_seq: seq,
                        last_seq: seq,
                        messages: 1,
                    },
                );
                SeqVerdict::First
            }
            Some(p) => {
                let last = p.last_seq;
                // Checked, not `last + 1`: a publisher at u64::MAX that sends a small number
                // has restarted, and the sum must not overflow.
                let verdict = if last.checked_add(1) == Some(seq) {
                    SeqVerdict::Next
                } else if seq > last {
                    SeqVerdict::Gap {
                        after: last,
                        missing: seq - last - 1,
                    }
                } else if seq == last {
                    return SeqVerdict::Duplicate;
                } else {
                    SeqVerdict::Restart { from: last }
                };
                p.last_seq = seq;
                p.messages += 1;
                verdict
            }
        }
    }

    /// A message recovered for one of the publisher's gaps: its sequence number was seen
    /// (as missing) already, but the message counts for the publisher once it is written.
    pub fn recovered(&mut self, endpoint: &str, topic: &str) {
        if let Some(p) = self
            .pubs
            .get_mut(&(endpoint.to_string(), topic.to_string()))
        {
            p.messages += 1;
        }
    }

    pub fn publishers(&self) -> Vec<PublisherState> {
        self.pubs.values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_per_publisher() {
        let mut t = SeqTracker::default();
        assert_eq!(t.observe("e", "a", 5), SeqVerdict::First);
        assert_eq!(t.observe("e", "b", 0), SeqVerdict::First);
        assert_eq!(t.observe("e", "a", 6), SeqVerdict::Next);
        assert_eq!(
            t.observe("e", "a", 9),
            SeqVerdict::Gap {
                after: 6,
                missing: 2
            }
        );
        assert_eq!(t.observe("e", "a", 9), SeqVerdict::Duplicate);
        assert_eq!(t.observe("e", "a", 0), SeqVerdict::Restart { from: 9 });
        assert_eq!(t.observe("e", "b", 1), SeqVerdict::Next);
        let p = t.publishers();
        assert_eq!((p[0].first_seq, p[0].last_seq, p[0].messages), (5, 0, 4));
        // A recovered message counts for its publisher; one of no publisher seen is ignored.
        t.recovered("e", "a");
        t.recovered("e", "unseen");
        let p = t.publishers();
        assert_eq!((p.len(), p[0].last_seq, p[0].messages), (2, 0, 5));
    }

    /// Wire sequence numbers are any u64: the top of the range is neither a gap nor an overflow.
    #[test]
    fn sequences_at_the_top_of_the_range() {
        let mut t = SeqTracker::default();
        assert_eq!(t.observe("e", "a", u64::MAX - 2), SeqVerdict::First);
        assert_eq!(
            t.observe("e", "a", u64::MAX),
            SeqVerdict::Gap {
                after: u64::MAX - 2,
                missing: 1
            }
        );
        assert_eq!(t.observe("e", "a", u64::MAX), SeqVerdict::Duplicate);
        assert_eq!(
            t.observe("e", "a", 5),
            SeqVerdict::Restart { from: u64::MAX }
        );
        assert_eq!(t.observe("e", "a", 6), SeqVerdict::Next);
        assert_eq!(t.observe("e", "b", u64::MAX), SeqVerdict::First);
        assert_eq!(
            t.observe("e", "b", 0),
            SeqVerdict::Restart { from: u64::MAX }
        );
        assert_eq!(
            t.observe("e", "b", u64::MAX),
            SeqVerdict::Gap {
                after: 0,
                missing: u64::MAX - 1
            }
        );
        assert_eq!(t.observe("e", "c", u64::MAX - 1), SeqVerdict::First);
        assert_eq!(t.observe("e", "c", u64::MAX), SeqVerdict::Next);
    }
}
