//! Why a router sent a turn where it did: one value per reason any router gives, so reports
//! total them by kind (the figures of each decision are in the answer's rule).

/// Why a router decided a transition as it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    // llm-d's P/D decider, precise or approximate index.
    NoDecider,
    ShortPrompt,
    UnderNonCachedTokens,
    FewUncached,
    IndexSeesLess,
    TooManyUncached,
    ReplyNotRecorded,
    NotSimulated,
    // Dynamo.
    RouterBlockSizeDiffers,
    LoadConditionalOff,
    RemotePrefillBypassed,
    TooManyNetNew,
    LoadWithoutEvents,
    // Cache-aware thresholds (vllm-router, smg over HTTP).
    PdPrefillAlways,
    MatchRateOver,
    MatchRateNotOver,
    // Routers fed by events (vllm-router kv_aware, smg events).
    EventBlockSizeDiffers,
    PdByOccupancy,
    MostMatchedBlocks,
    NoBlockMatched,
    HighestOverlap,
    NoOverlap,
    // GAIE.
    HighestPrefixScore,
    NoWholeBlock,
}

impl Reason {
    /// The reason in a few words, as reports print it and total it.
    pub fn text(self) -> &'static str {
        match self {
            Reason::NoDecider => "no P/D decider",
            Reason::ShortPrompt => "prompt shorter than promptTokens",
            Reason::UnderNonCachedTokens => "prompt shorter than nonCachedTokens",
            Reason::FewUncached => "few enough uncached tokens",
            Reason::IndexSeesLess => "the index sees less than the pod holds",
            Reason::TooManyUncached => "too many uncached tokens",
            Reason::ReplyNotRecorded => "too many uncached tokens: the reply is not recorded",
            Reason::NotSimulated => "not simulated",
            Reason::RouterBlockSizeDiffers => {
                "router block size is not the engine's: the worker is invisible"
            }
            Reason::LoadConditionalOff => "decode chosen by load, conditional disaggregation off",
            Reason::RemotePrefillBypassed => "remote prefill bypassed",
            Reason::TooManyNetNew => "too many net-new tokens",
            Reason::LoadWithoutEvents => {
                "decode chosen by load, no conditional disaggregation without KV events"
            }
            Reason::PdPrefillAlways => "P/D: a prefill pod is always used",
            Reason::MatchRateOver => "match rate over the threshold",
            Reason::MatchRateNotOver => {
                "match rate at or under the threshold: the reply is not keyed"
            }
            Reason::EventBlockSizeDiffers => {
                "event block size is not the engine's: every batch rejected"
            }
            Reason::PdByOccupancy => "P/D: decode chosen by occupancy",
            Reason::MostMatchedBlocks => "most matched blocks",
            Reason::NoBlockMatched => "no block matched",
            Reason::HighestOverlap => "highest overlap",
            Reason::NoOverlap => "no overlap",
            Reason::HighestPrefixScore => "highest prefix score",
            Reason::NoWholeBlock => "no whole block of request k matches",
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.text())
    }
}
