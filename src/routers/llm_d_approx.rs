//! llm-d's approx-prefix-cache-producer: the index keeps what the router itself routed
//! (prompt tokens, never the reply), hashed in blocks of at least 64 tokens.

use super::llm_d::decider::{DeciderConfig, decide};
use super::llm_d::view::RouterSettings;
use super::llm_d::{decider_settings, decode_reason, from_verdict};
use super::params::{Params, RouterSpecError};
use super::{Answer, Decision, Reason, Router, TransitionView, prompt_match, whole_blocks};

/// `--router llm-d-approx`.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmDApprox {
    pub block_size: Option<usize>,
    pub decider: DeciderConfig,
}

impl LlmDApprox {
    pub(crate) fn parse(
        params: &mut Params,
        base: &RouterSettings,
    ) -> Result<Self, RouterSpecError> {
        Ok(LlmDApprox {
            block_size: params.block_size()?,
            decider: decider_settings(params, base.decider)?,
        })
    }
}

impl Router for LlmDApprox {
    fn name(&self) -> &'static str {
        "llm-d-approx"
    }

    fn version(&self) -> &'static str {
        super::llm_d::VERSION
    }

    fn answer(&self, t: &TransitionView) -> Answer {
        // The producer hashes prompt tokens in blocks of at least 64 (minBlockSizeTokens)
        // and records requests only; prompt k's partial last block is hashed too, so it
        // matches only a prompt k+1 that ends at the same place.
        let block = self.block_size.unwrap_or(t.engine_block_size).max(64);
        let matched = prompt_match(t);
        let visible = if t.next.len() == t.prompt_tokens && matched == t.prompt_tokens {
            t.prompt_tokens
        } else {
            whole_blocks(matched, block)
        }
        .min(t.next.len());
        let d = decide(&self.decider, t.next.len(), visible / block, block);
        let decision = from_verdict(d.verdict);
        Answer::tokens(
            self,
            visible,
            decision,
            match decision {
                Decision::Decode => decode_reason(d.rule),
                Decision::Other => Reason::ReplyNotRecorded,
            },
            format!(
                "prefix-based-pd-decider: {} ({} uncached of {}; block {block})",
                d.rule, d.non_cached, d.input_tokens
            ),
        )
    }
}
