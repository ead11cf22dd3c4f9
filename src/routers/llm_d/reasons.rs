//! Why llm-d skips an event or drops a message (llm-d.md §2.4), as types: counters are arrays
//! indexed by the reason, and a reason cannot be misspelled or left without a name.
//!
//! Variants are declared in the order of their names, so counts iterate (and serialize) in
//! name order, as the string-keyed maps they replace did.

/// Why a BlockStored (or a BlockRemoved) is not applied to the index (§2.4 S1–S7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SkipReason {
    ExtraFeaturesMismatch,
    IncompleteCanonicalBlock,
    InvalidBlockSize,
    NonDenseBlockSpan,
    ParentUnresolved,
    TierUpdateUnresolved,
    /// A BlockRemoved names a group the pod never stored into.
    UnknownGroup,
    UnsupportedCacheKind,
}

/// Why llm-d drops a whole message (§2.4 M2–M3), or never receives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DropReason {
    /// The batch itself does not decode (its shape, a hash type).
    BatchDecodeError,
    BatchIsMap,
    /// One of its events does not decode with the engine adapter (the whole message goes).
    EventDecodeError,
    /// One socket for every pod, and its topic's pod is not an endpoint's `address:port`:
    /// indexed under a name no scored endpoint has.
    PodNotEndpoint,
    /// Its topic does not start with llm-d's topicFilter: its subscriber never receives it.
    TopicFilter,
}

/// A reason with a stable name, counted in a fixed-size array.
pub trait CountedReason: Copy + 'static {
    const ALL: &'static [Self];
    fn as_str(self) -> &'static str;
    fn index(self) -> usize;
}

impl CountedReason for SkipReason {
    const ALL: &'static [SkipReason] = &[
        SkipReason::ExtraFeaturesMismatch,
        SkipReason::IncompleteCanonicalBlock,
        SkipReason::InvalidBlockSize,
        SkipReason::NonDenseBlockSpan,
        SkipReason::ParentUnresolved,
        SkipReason::TierUpdateUnresolved,
        SkipReason::UnknownGroup,
        SkipReason::UnsupportedCacheKind,
    ];

    fn as_str(self) -> &'static str {
        match self {
            SkipReason::ExtraFeaturesMismatch => "extra_features_mismatch",
            SkipReason::IncompleteCanonicalBlock => "incomplete_canonical_block",
            SkipReason::InvalidBlockSize => "invalid_block_size",
            SkipReason::NonDenseBlockSpan => "non_dense_block_span",
            SkipReason::ParentUnresolved => "parent_unresolved",
            SkipReason::TierUpdateUnresolved => "tier_update_unresolved",
            SkipReason::UnknownGroup => "unknown_group",
            SkipReason::UnsupportedCacheKind => "unsupported_cache_kind",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl CountedReason for DropReason {
    const ALL: &'static [DropReason] = &[
        DropReason::BatchDecodeError,
        DropReason::BatchIsMap,
        DropReason::EventDecodeError,
        DropReason::PodNotEndpoint,
        DropReason::TopicFilter,
    ];

    fn as_str(self) -> &'static str {
        match self {
            DropReason::BatchDecodeError => "batch_decode_error",
            DropReason::BatchIsMap => "batch_is_map",
            DropReason::EventDecodeError => "event_decode_error",
            DropReason::PodNotEndpoint => "pod_not_endpoint",
            DropReason::TopicFilter => "topic_filter",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl SkipReason {
    /// The reasons llm-d itself counts in `llm_d_epp_kv_cache_events_stores_skipped_total`.
    pub fn counted_by_llm_d(self, profile: super::Profile) -> bool {
        matches!(
            self,
            SkipReason::UnsupportedCacheKind
                | SkipReason::InvalidBlockSize
                | SkipReason::NonDenseBlockSpan
        ) || (profile == super::Profile::DigestFirst
            && self == SkipReason::IncompleteCanonicalBlock)
    }
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for DropReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names are unique and in declaration order, which is what keeps the counts' JSON in
    /// name order.
    #[test]
    fn names_are_unique_and_sorted() {
        fn check<R: CountedReason>() {
            let names: Vec<&str> = R::ALL.iter().map(|r| r.as_str()).collect();
            let mut sorted = names.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(names, sorted);
            for (i, r) in R::ALL.iter().enumerate() {
                assert_eq!(r.index(), i);
            }
        }
        check::<SkipReason>();
        check::<DropReason>();
    }
}
