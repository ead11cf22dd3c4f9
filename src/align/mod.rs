//! Holdings versus next prompt: common prefix, rewrite point and its cause, uncached tokens.

mod classify;

use serde::Serialize;

use crate::render::TurnPlan;
use crate::tokenize::{Encoded, TokenizeError, Tokenizer};

pub use classify::RewriteClass;

/// A token with the text it decodes to.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TokenView {
    pub id: u32,
    pub text: String,
}

/// Where turn k+1 stops extending what the server holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rewrite {
    pub position: usize,
    pub class: RewriteClass,
    pub held: Vec<TokenView>,
    pub next: Vec<TokenView>,
}

/// First position where the sampled ids differ from the tokenizer's encoding of the same text.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Drift {
    /// Position in the holdings (prompt tokens included).
    pub position: usize,
    pub sampled: Vec<TokenView>,
    pub encoded: Vec<TokenView>,
}

#[derive(Debug, thiserror::Error)]
pub enum AlignError {
    #[error(transparent)]
    Tokenize(#[from] TokenizeError),
    /// The sampled ids say another text than the reply: they belong to another reply (or
    /// another tokenizer), so comparing them with the text's encoding would report drift
    /// that is not there.
    #[error(
        "reply {reply}: `generated_ids` decode to another text than `generated` (first \
         difference at character {at}: the ids give {ids:?}, the text has {text:?})"
    )]
    IdsDoNotMatchText {
        reply: usize,
        at: usize,
        ids: String,
        text: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Uncached {
    pub block_size: usize,
    pub tokens: usize,
}

/// Tokens of each side shown from the divergence on (the human view cuts them to its width).
pub const SIDE_WINDOW: usize = 64;

#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    pub from_prompt: usize,
    pub to_prompt: usize,
    pub held_tokens: usize,
    pub next_prompt_tokens: usize,
    pub common_prefix_tokens: usize,
    pub prompt_tokens: usize,
    pub rewrite: Option<Rewrite>,
    pub retokenization_drift: Option<Drift>,
    pub uncached: Vec<Uncached>,
    /// Tokens before the divergence, for context in the human view.
    pub before: Vec<TokenView>,
    /// From the divergence on, each side as it is (held, next): not re-aligned, since a
    /// token-level diff would pair a dropped block with a look-alike later in the other side.
    pub sides: [Vec<TokenView>; 2],
    /// The held and next token ids (for later stages: router simulation).
    pub held_ids: Vec<u32>,
    pub next_ids: Vec<u32>,
}

#[derive(Debug, Clone)]
pub struct AlignOptions {
    pub block_sizes: Vec<usize>,
    /// Tokens shown on each side of a divergence.
    pub context: usize,
    pub sides: Sides,
}

/// Whether transitions get their texts around the divergence ([`Transition::before`], and
/// [`Transition::sides`] on a rewrite, each [`SIDE_WINDOW`] token texts a side).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sides {
    Every,
    /// Neither: a corpus shows the texts of its worst conversations only, and decodes those from
    /// the ids when it keeps one ([`divergence_views`]); decoding them for every conversation
    /// was 5% of a corpus profile on a template that rewrites every turn (Qwen3-8B).
    Skip,
}

/// The texts [`align_plan`] gives a transition with [`Sides::Every`]: `context` tokens before
/// the divergence, and from it on, each side's (held, next) on a rewrite.
pub fn divergence_views(
    tok: &Tokenizer,
    t: &Transition,
    context: usize,
) -> (Vec<TokenView>, [Vec<TokenView>; 2]) {
    context_views(
        tok,
        &t.held_ids,
        &t.next_ids,
        t.common_prefix_tokens,
        context,
        t.rewrite.is_some(),
    )
}

fn context_views(
    tok: &Tokenizer,
    held: &[u32],
    next: &[u32],
    lcp: usize,
    context: usize,
    rewrite: bool,
) -> (Vec<TokenView>, [Vec<TokenView>; 2]) {
    let before = views(tok, &held[lcp.saturating_sub(context)..lcp]);
    let sides = if rewrite {
        let end = |ids: &[u32]| (lcp + SIDE_WINDOW).min(ids.len());
        [
            views(tok, &held[lcp..end(held)]),
            views(tok, &next[lcp..end(next)]),
        ]
    } else {
        Default::default()
    };
    (before, sides)
}

impl Default for AlignOptions {
    fn default() -> Self {
        AlignOptions {
            block_sizes: vec![16, 64],
            context: 4,
            sides: Sides::Every,
        }
    }
}

pub fn common_prefix<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// The largest KV block size kvaudit takes from any flag, router setting, configuration,
/// partial or server: engines use 1 to a few hundred tokens a block (hybrid models' aligned
/// blocks a few thousand). Bounded so that what routers derive from a block size (GAIE's 4·B
/// bytes a block, blocks per prompt) stays small and no figure overflows.
pub const MAX_BLOCK_SIZE: usize = 1 << 16;

/// A block size setting kvaudit does not take; `what` names the flag or setting it came from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BlockSizeError {
    #[error("{what} {size}: a block size is 1 to {MAX_BLOCK_SIZE} tokens")]
    OutOfRange { what: String, size: usize },
    #[error("{what}: give at least one block size, e.g. 16,64")]
    Empty { what: String },
    #[error("{what}: block size {size} given twice")]
    Repeated { what: String, size: usize },
}

/// `b` if it is a block size kvaudit takes; else why not, naming `what` (a flag or setting).
pub fn check_block_size(what: &str, b: usize) -> Result<usize, BlockSizeError> {
    if (1..=MAX_BLOCK_SIZE).contains(&b) {
        Ok(b)
    } else {
        Err(BlockSizeError::OutOfRange {
            what: what.to_string(),
            size: b,
        })
    }
}

/// Block sizes of one run (`--block-sizes`, a gate's `block_sizes`, a partial's): at least one,
/// each in range, none twice (a report has one column per size).
pub fn check_block_sizes(what: &str, sizes: &[usize]) -> Result<(), BlockSizeError> {
    if sizes.is_empty() {
        return Err(BlockSizeError::Empty {
            what: what.to_string(),
        });
    }
    for (i, &b) in sizes.iter().enumerate() {
        check_block_size(what, b)?;
        if sizes[..i].contains(&b) {
            return Err(BlockSizeError::Repeated {
                what: what.to_string(),
                size: b,
            });
        }
    }
    Ok(())
}

/// `|N| - floor(min(LCP, |H|) / B) * B`: vLLM caches whole blocks only.
pub fn uncached_tokens(next: usize, lcp: usize, held: usize, block: usize) -> usize {
    let reusable = lcp.min(held) / block * block;
    next - reusable.min(next)
}

/// Align every transition of a planned conversation.
pub fn align_plan(
    plan: &TurnPlan,
    tok: &Tokenizer,
    options: &AlignOptions,
) -> Result<Vec<Transition>, AlignError> {
    let mut out: Vec<Transition> = Vec::new();
    // The next prompt of the last transition, with what lets the following prompts reuse its
    // ids: each prompt mostly repeats the one before, and tokenizing every prompt whole is
    // most of the work on long conversations.
    let mut carried: Option<(usize, Encoded)> = None;
    let system = classify::system_finder(plan.system.as_deref());
    for (k, turn) in plan.turns.iter().enumerate() {
        let Some(next_text) = &plan.next_prompts[k] else {
            continue;
        };
        // Prompt k+1 is both the next prompt of transition k and the held prompt of
        // transition k+1.
        let previous = carried.take();
        let prompt = match previous {
            Some((j, enc)) if plan.next_prompts[j].as_deref() == Some(turn.prompt.as_str()) => enc,
            other => tok.encode_after(&turn.prompt, other.as_ref().map(|(_, e)| e))?,
        };
        let prompt_ids = prompt.ids();
        let reply = tok.encode_reply(&turn.generated)?;
        let encoded = reply.ids().to_vec();
        let (generated, drift) = match &turn.generated_ids {
            Some(sampled) => {
                check_ids_say_the_text(tok, sampled, &encoded, k + 1)?;
                let at = common_prefix(sampled, &encoded);
                let drift = (at < sampled.len() || at < encoded.len()).then(|| Drift {
                    position: prompt_ids.len() + at,
                    sampled: views(tok, &sampled[at..(at + options.context).min(sampled.len())]),
                    encoded: views(tok, &encoded[at..(at + options.context).min(encoded.len())]),
                });
                (sampled.clone(), drift)
            }
            None => (encoded, None),
        };
        let mut held = prompt_ids.to_vec();
        held.extend_from_slice(&generated);
        // A reply cut at max_tokens: the last sampled token was never fed back.
        if turn.cut && !generated.is_empty() {
            held.pop();
        }
        let next_encoded = tok.encode_after_reusing(next_text, Some(&prompt), Some(&reply))?;
        let next = next_encoded.ids().to_vec();
        let lcp = common_prefix(&held, &next);
        let rewrite = if lcp < held.len() {
            let rerendered = |text: &Option<String>| -> Result<Option<Vec<u32>>, AlignError> {
                match text {
                    Some(text) => Ok(Some(
                        tok.encode_after_reusing(text, Some(&prompt), Some(&reply))?
                            .into_ids(),
                    )),
                    None => Ok(None),
                }
            };
            let next_same_day = rerendered(&plan.next_at_held_time[k])?;
            let next_same_request = rerendered(&plan.next_with_held_request[k])?;
            let evidence = classify::Evidence {
                held_text: format!("{}{}", turn.prompt, turn.generated),
                prompt_text: &turn.prompt,
                generated_text: &turn.generated,
                next_text,
                reasoning: turn.reasoning.as_deref(),
                system: system.as_ref(),
                lcp_same_day: next_same_day.map(|ids| common_prefix(&held, &ids)),
                lcp_same_request: next_same_request.map(|ids| common_prefix(&held, &ids)),
                lcp,
            };
            Some(Rewrite {
                position: lcp,
                class: classify::classify(&evidence),
                held: views(tok, &held[lcp..(lcp + options.context).min(held.len())]),
                next: views(tok, &next[lcp..(lcp + options.context).min(next.len())]),
            })
        } else {
            None
        };
        let uncached = options
            .block_sizes
            .iter()
            .map(|&b| Uncached {
                block_size: b,
                tokens: uncached_tokens(next.len(), lcp, held.len(), b),
            })
            .collect();
        let (before, sides) = match options.sides {
            Sides::Every => {
                context_views(tok, &held, &next, lcp, options.context, rewrite.is_some())
            }
            Sides::Skip => Default::default(),
        };
        out.push(Transition {
            from_prompt: k + 1,
            to_prompt: k + 2,
            held_tokens: held.len(),
            next_prompt_tokens: next.len(),
            common_prefix_tokens: lcp,
            prompt_tokens: prompt_ids.len(),
            before,
            sides,
            rewrite,
            retokenization_drift: drift,
            uncached,
            held_ids: held,
            next_ids: next,
        });
        carried = Some((k, next_encoded));
    }
    Ok(out)
}

/// Sampled ids may tokenize the reply differently from the tokenizer's own encoding (that is
/// drift), but they must decode to the same text. Both sides are decoded, so a decoder that
/// does not give back its input exactly (a dropped prefix space) treats them alike.
fn check_ids_say_the_text(
    tok: &Tokenizer,
    sampled: &[u32],
    encoded: &[u32],
    reply: usize,
) -> Result<(), AlignError> {
    let (ids, text) = (tok.decode(sampled), tok.decode(encoded));
    if ids == text {
        return Ok(());
    }
    // A model can sample text the tokenizer's normalizer rewrites (NFC: a base letter and a
    // combining mark that compose): the ids' text, encoded, then says what the reply's does.
    if tok.decode(&tok.encode(&ids)?) == text {
        return Ok(());
    }
    let at = ids
        .chars()
        .zip(text.chars())
        .take_while(|(a, b)| a == b)
        .count();
    let excerpt = |s: &str| -> String { s.chars().skip(at).take(24).collect() };
    Err(AlignError::IdsDoNotMatchText {
        reply,
        at,
        ids: excerpt(&ids),
        text: excerpt(&text),
    })
}

/// Each id with the text it decodes to on its own.
pub fn views(tok: &Tokenizer, ids: &[u32]) -> Vec<TokenView> {
    ids.iter()
        .map(|&id| TokenView {
            id,
            text: tok.token_text(id).into_owned(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uncached_counts_whole_blocks_only() {
        // Llama 3.1, seed write-up: H = 181, N = H + 15 (5-token follow-up + 10 markers).
        assert_eq!(uncached_tokens(196, 181, 181, 16), 196 - 176);
        assert_eq!(uncached_tokens(196, 181, 181, 64), 196 - 128);
        // LCP beyond H cannot be reused (the stop token was never computed).
        assert_eq!(uncached_tokens(100, 90, 80, 16), 100 - 80);
        assert_eq!(uncached_tokens(10, 3, 50, 16), 10);
    }

    #[test]
    fn lcp() {
        assert_eq!(common_prefix(&[1, 2, 3], &[1, 2, 4]), 2);
        assert_eq!(common_prefix(&[1, 2], &[1, 2, 4]), 2);
        assert_eq!(common_prefix(&[], &[1]), 0);
    }
}
