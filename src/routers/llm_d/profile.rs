//! Which llm-d behaviour the index reproduces where versions differ.

/// Which llm-d behaviour to reproduce for events shorter than one index block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// The seed write-up's view: such an event fails a digest check as
    /// `incomplete_canonical_block` before its parent is resolved.
    DigestFirst,
    /// llm-d-router as of 2026-08: such an event is dropped silently (no keys, no mapping) and
    /// its descendants fail as `parent_unresolved`.
    Router202608,
}

impl Profile {
    pub fn name(self) -> &'static str {
        match self {
            Profile::DigestFirst => "digest-first",
            Profile::Router202608 => "router-2026-08",
        }
    }
}
