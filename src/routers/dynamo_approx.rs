//! Dynamo 1.6.1's router without KV events: it predicts what a worker holds from what it
//! routed there (`ttl`) or from that and the streamed reply (`lru`).

use super::params::{Params, RouterSpecError};
use super::whole_blocks;
use super::{Answer, Decision, Reason, Router, TransitionView, held_match, prompt_match};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApproxPolicy {
    Ttl,
    Lru,
}

/// `--router dynamo-approx`.
#[derive(Debug, Clone, PartialEq)]
pub struct DynamoApprox {
    pub policy: ApproxPolicy,
    pub block_size: Option<usize>,
}

impl DynamoApprox {
    pub(crate) fn parse(params: &mut Params) -> Result<Self, RouterSpecError> {
        Ok(DynamoApprox {
            policy: match params.word("policy")?.as_deref() {
                None | Some("ttl") => ApproxPolicy::Ttl,
                Some("lru") => ApproxPolicy::Lru,
                Some(o) => return Err(RouterSpecError::value("policy", o, "ttl or lru")),
            },
            block_size: params.block_size()?,
        })
    }
}

impl Router for DynamoApprox {
    fn name(&self) -> &'static str {
        "dynamo-approx"
    }

    fn version(&self) -> &'static str {
        super::dynamo::VERSION
    }

    fn answer(&self, t: &TransitionView) -> Answer {
        let block = self.block_size.unwrap_or(t.engine_block_size);
        let (visible, what) = match self.policy {
            ApproxPolicy::Ttl => (
                whole_blocks(prompt_match(t), block),
                "ttl: routed prompts only, turn k+1 assumed within 120 s",
            ),
            ApproxPolicy::Lru => (
                whole_blocks(held_match(t), block),
                "lru: routed prompts and the streamed reply",
            ),
        };
        Answer::tokens(
            self,
            visible,
            Decision::Other,
            Reason::LoadWithoutEvents,
            format!(
                "{what}; without KV events there is no conditional disaggregation: decode chosen by load"
            ),
        )
    }
}
