//! llm-d's precise prefix-cache router: its index fed by the engine's KV events
//! ([`index`], keys in [`hash`], what it skips in [`reasons`] and [`stats`]), the P/D decider
//! ([`decider`]), and one chat turn's events through both ([`view`]).

pub mod decider;
pub mod hash;
pub mod index;
pub mod profile;
pub mod reasons;
pub mod stats;
pub mod view;

pub use hash::{HashAlgo, KeyHasher, KeyMemo};
pub use index::{
    DEFAULT_TOPIC_FILTER, Index, IndexConfig, message_drop_reason, names_endpoint, parse_topic,
    receives,
};
pub use profile::Profile;
pub use reasons::{CountedReason, DropReason, SkipReason};
pub use stats::{Counts, Stats};

use super::params::{Params, RouterSpecError};
use super::{Answer, Decision, Router, TransitionView};
use decider::{Rule, Verdict};
use view::RouterSettings;

/// The version of llm-d-router both llm-d emulations follow.
pub const VERSION: &str = "llm-d-router ebab687 (2026-08-21) + #2560";

/// llm-d's precise index and its decider (`--router llm-d`).
#[derive(Debug, Clone, PartialEq)]
pub struct LlmD(pub RouterSettings);

impl LlmD {
    /// `base` holds the settings of the other flags (`--index-block-size`, `--decider`, …),
    /// which `llm-d:key=value` overrides.
    pub(crate) fn parse(
        params: &mut Params,
        base: &RouterSettings,
    ) -> Result<LlmD, RouterSpecError> {
        let mut s = base.clone();
        if let Some(b) = params.block_size()? {
            s.index.block_size = b;
        }
        if let Some(f) = params.word("topic_filter")? {
            s.index.topic_filter = f;
        }
        if let Some(g) = params.flag("global_socket")? {
            s.index.global_socket = g;
        }
        s.decider = decider_settings(params, s.decider)?;
        Ok(LlmD(s))
    }
}

/// `nonCachedTokens` and `promptTokens` from a `--router` value over `d`: both llm-d
/// routers read them.
pub(crate) fn decider_settings(
    params: &mut Params,
    mut d: decider::DeciderConfig,
) -> Result<decider::DeciderConfig, RouterSpecError> {
    if let Some(n) = params.bounded("non_cached_tokens", 0..=decider::MAX_TOKENS)? {
        d.non_cached_tokens = n;
    }
    if let Some(n) = params.bounded("prompt_tokens", 0..=decider::MAX_TOKENS)? {
        d.prompt_tokens = n;
    }
    Ok(d)
}

pub(crate) fn from_verdict(v: Verdict) -> Decision {
    match v {
        Verdict::DecodeOnly => Decision::Decode,
        Verdict::PrefillDecode => Decision::Other,
    }
}

/// Why the decider kept a turn on the decode pod.
pub(crate) fn decode_reason(rule: Rule) -> super::Reason {
    match rule {
        Rule::Disabled => super::Reason::NoDecider,
        Rule::ShortPrompt => super::Reason::ShortPrompt,
        Rule::BelowThreshold => super::Reason::UnderNonCachedTokens,
        _ => super::Reason::FewUncached,
    }
}

impl Router for LlmD {
    fn name(&self) -> &'static str {
        "llm-d"
    }

    fn version(&self) -> &'static str {
        VERSION
    }

    fn answer(&self, t: &TransitionView) -> Answer {
        let Some(view) = t.index_view else {
            return Answer::tokens(
                self,
                0,
                Decision::Other,
                super::Reason::NotSimulated,
                "not simulated".into(),
            );
        };
        let decision = from_verdict(view.decision.verdict);
        let why = match decision {
            Decision::Decode => decode_reason(view.decision.rule),
            Decision::Other if view.index_visible_tokens < view.engine_cached_tokens => {
                super::Reason::IndexSeesLess
            }
            Decision::Other => super::Reason::TooManyUncached,
        };
        Answer::tokens(
            self,
            view.index_visible_tokens,
            decision,
            why,
            format!(
                "prefix-based-pd-decider: {} ({} uncached of {}; index block {})",
                view.decision.rule,
                view.decision.non_cached,
                view.decision.input_tokens,
                view.index_block_size
            ),
        )
    }
}
