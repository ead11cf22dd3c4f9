//! NVIDIA Dynamo 1.6.1's KV router on the engine's events: its index ([`index`]) and what it
//! does with a match, with and without conditional disaggregation.

pub mod index;

pub use index::{RadixTree, SEED, TreeStats, local_hash};

use super::llm_d::decider::MAX_TOKENS;
use super::params::{Params, RouterSpecError};
use super::{Answer, Decision, Reason, Router, TransitionView, event_visible, share};

/// The version of Dynamo both Dynamo emulations follow.
pub const VERSION: &str = "dynamo 1.6.1";

/// Dynamo's conditional disaggregation (`--router-conditional-disagg`): the ISL-bounding
/// policy's two limits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Conditional {
    pub isl_threshold: usize,
    pub ratio: f64,
}

/// `--router dynamo`. A block size left out is the engine's, as Dynamo's publisher takes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Dynamo {
    pub block_size: Option<usize>,
    pub conditional: Option<Conditional>,
}

impl Dynamo {
    pub(crate) fn parse(params: &mut Params) -> Result<Self, RouterSpecError> {
        let on = params.flag("conditional_disagg")?.unwrap_or(false);
        let isl = params.bounded("isl_threshold", 0..=MAX_TOKENS)?;
        let ratio = params.fraction("ratio")?;
        if !on && (isl.is_some() || ratio.is_some()) {
            return Err(RouterSpecError::Invalid(
                "isl_threshold and ratio are settings of conditional_disagg=true".into(),
            ));
        }
        Ok(Dynamo {
            block_size: params.block_size()?,
            conditional: on.then(|| Conditional {
                isl_threshold: isl.unwrap_or(2048),
                ratio: ratio.unwrap_or(0.7),
            }),
        })
    }
}

impl Router for Dynamo {
    fn name(&self) -> &'static str {
        "dynamo"
    }

    fn version(&self) -> &'static str {
        VERSION
    }

    fn answer(&self, t: &TransitionView) -> Answer {
        let eb = t.engine_block_size;
        let block = self.block_size.unwrap_or(eb);
        if block != eb {
            return Answer::tokens(
                self,
                0,
                Decision::Other,
                Reason::RouterBlockSizeDiffers,
                format!(
                    "router block {block} differs from the engine's {eb}: every event is converted to zero blocks, the worker is invisible"
                ),
            );
        }
        let visible = event_visible(t);
        let Some(c) = self.conditional else {
            return Answer::tokens(
                self,
                visible,
                Decision::Other,
                Reason::LoadConditionalOff,
                "decode chosen by load: decode-side reuse is not a routing signal without --router-conditional-disagg".into(),
            );
        };
        let n = t.next.len();
        let net_new = n - visible.min(n);
        let ratio = share(net_new, n);
        let keep = net_new < c.isl_threshold && ratio < c.ratio;
        Answer::tokens(
            self,
            visible,
            if keep {
                Decision::Decode
            } else {
                Decision::Other
            },
            if keep {
                Reason::RemotePrefillBypassed
            } else {
                Reason::TooManyNetNew
            },
            format!(
                "conditional disaggregation: net new {net_new} {} {} and {ratio:.4} {} {}: {}",
                if net_new < c.isl_threshold { "<" } else { ">=" },
                c.isl_threshold,
                if ratio < c.ratio { "<" } else { ">=" },
                c.ratio,
                if keep {
                    "remote prefill bypassed"
                } else {
                    "prefill pod first"
                }
            ),
        )
    }
}
