//! vllm-router 0.1.17: `cache_aware` keys the request's prompt in a tree (never the reply)
//! and compares the match rate with a threshold; `kv_aware` reads the engine's KV events at
//! `--kv-event-block-size`.

use super::params::{Params, RouterSpecError};
use super::{
    Answer, Decision, Reason, Router, TransitionView, by_event_match, prompt_match, threshold_rule,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VllmRouterPolicy {
    CacheAware,
    KvAware,
}

/// `--router vllm-router`.
#[derive(Debug, Clone, PartialEq)]
pub struct VllmRouter {
    pub policy: VllmRouterPolicy,
    pub threshold: f64,
    /// `--kv-event-block-size` (kv_aware): 16 unless given.
    pub block_size: usize,
    pub pd: bool,
}

impl VllmRouter {
    pub(crate) fn parse(params: &mut Params) -> Result<Self, RouterSpecError> {
        let policy = match params.word("policy")?.as_deref() {
            None | Some("cache_aware") => VllmRouterPolicy::CacheAware,
            Some("kv_aware") => VllmRouterPolicy::KvAware,
            Some(o) => {
                return Err(RouterSpecError::value(
                    "policy",
                    o,
                    "cache_aware or kv_aware",
                ));
            }
        };
        Ok(VllmRouter {
            policy,
            threshold: params.fraction("threshold")?.unwrap_or(0.3),
            block_size: params.block_size()?.unwrap_or(16),
            pd: params.flag("pd")?.unwrap_or(false),
        })
    }
}

impl Router for VllmRouter {
    fn name(&self) -> &'static str {
        "vllm-router"
    }

    fn version(&self) -> &'static str {
        "vllm-router 0.1.17"
    }

    fn answer(&self, t: &TransitionView) -> Answer {
        if self.policy == VllmRouterPolicy::CacheAware {
            let matched = prompt_match(t);
            let (decision, why, rule) =
                threshold_rule(matched, t.next.len(), self.threshold, self.pd);
            return Answer::tokens(self, matched, decision, why, rule);
        }
        let eb = t.engine_block_size;
        if self.block_size != eb {
            return Answer::tokens(
                self,
                0,
                Decision::Other,
                Reason::EventBlockSizeDiffers,
                format!(
                    "--kv-event-block-size {} differs from the engine's {eb}: every batch is rejected and the source cleared",
                    self.block_size
                ),
            );
        }
        by_event_match(
            self,
            t,
            self.pd,
            [
                (
                    Reason::PdByOccupancy,
                    "P/D: decode is chosen by occupancy, never by placement; a prefill pod is always used",
                ),
                (
                    Reason::MostMatchedBlocks,
                    "the pod with the most matched blocks",
                ),
                (
                    Reason::NoBlockMatched,
                    "no block matched: least-occupied pod",
                ),
            ],
        )
    }
}
