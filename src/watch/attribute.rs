//! One request's prompt tokens, each given exactly one cause.
//!
//! Every cause is a prefix of the prompt: the tokens before some position. A token takes the
//! first cause, in the order below, whose prefix covers it, so the counts sum to the prompt's
//! length by construction:
//!
//! 1. `reused`: the serving pod held it (whole blocks, and never the prompt's last token: the
//!    engine computes at least one);
//! 2. `misrouted`: another pod held it;
//! 3. `evicted`: the previous turn left it, in a whole block, and no pod holds it now;
//! 4. `block_tail`: the previous turn (or the serving pod) left it, but in the partial last
//!    block, or it is the last token of a prompt held whole;
//! 5. `rewritten`: the previous turn's tokens reached this far, but this prompt no longer
//!    extends them (the template rewrote history);
//! 6. `new`: nothing earlier in the conversation could have left it.
//!
//! "Held" is the longest prefix of the prompt a pod holds, counted in whole blocks, as the
//! pod's KV events say; "left by the previous turn" is the longest prefix this prompt shares
//! with the previous prompt plus its reply, less the reply's last sampled token (its KV is
//! never written).

use serde::Serialize;

/// What is known of one request when it is attributed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// The prompt's length in tokens, as the serving engine tokenized it.
    pub prompt_tokens: usize,
    /// The engine's KV block size.
    pub block_size: usize,
    /// Prompt tokens the serving pod held when the request came (a whole number of blocks).
    pub serving_held: usize,
    /// The most prompt tokens any other pod held (a whole number of blocks).
    pub others_held: usize,
    /// The prompt tokens the previous turn of the conversation left (its prompt and reply, less
    /// the last sampled token) that this prompt starts with.
    pub previous_shared: usize,
    /// How many tokens the previous turn left in all (0 for a conversation's first request).
    pub previous_left: usize,
    /// The engine's own `cached_tokens`, when the response carried it.
    pub engine_cached: Option<usize>,
}

/// Where each prompt token of a request went; the first six sum to the prompt's length.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Causes {
    pub reused: usize,
    pub misrouted: usize,
    pub evicted: usize,
    pub block_tail: usize,
    pub rewritten: usize,
    pub new: usize,
    /// How far the engine's `cached_tokens` is from `reused` (either way): counted, never
    /// folded into a cause.
    pub disagreement: usize,
}

impl Causes {
    /// The prompt tokens attributed: the prompt's length.
    pub fn total(&self) -> usize {
        self.reused + self.misrouted + self.evicted + self.block_tail + self.rewritten + self.new
    }
}

/// The causes of `r`'s prompt tokens (see the module documentation for the rules).
pub fn attribute(r: &Request) -> Causes {
    let n = r.prompt_tokens;
    let b = r.block_size.max(1);
    let whole = |t: usize| t / b * b;
    // The engine computes at least the last token: at most this much is ever reused.
    let reusable = whole(n.saturating_sub(1));
    let shared = r.previous_shared.min(r.previous_left).min(n);
    let ends = [
        whole(r.serving_held).min(reusable),
        whole(r.others_held).min(reusable),
        whole(shared).min(reusable),
        shared.max(r.serving_held.min(n)).max(r.others_held.min(n)),
        r.previous_left.min(n),
        n,
    ];
    let mut counts = [0usize; 6];
    let mut covered = 0;
    for (count, end) in counts.iter_mut().zip(ends) {
        *count = end.saturating_sub(covered);
        covered = covered.max(end);
    }
    let [reused, misrouted, evicted, block_tail, rewritten, new] = counts;
    Causes {
        reused,
        misrouted,
        evicted,
        block_tail,
        rewritten,
        new,
        disagreement: r.engine_cached.map_or(0, |c| c.abs_diff(reused)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(prompt_tokens: usize) -> Request {
        Request {
            prompt_tokens,
            block_size: 16,
            serving_held: 0,
            others_held: 0,
            previous_shared: 0,
            previous_left: 0,
            engine_cached: None,
        }
    }

    #[test]
    fn a_first_request_is_all_new_unless_a_pod_holds_its_prefix() {
        assert_eq!(
            attribute(&request(100)),
            Causes {
                new: 100,
                ..Causes::default()
            }
        );
        // A system prompt another request left on this pod (48 tokens, three blocks).
        let c = attribute(&Request {
            serving_held: 48,
            engine_cached: Some(48),
            ..request(100)
        });
        assert_eq!((c.reused, c.new, c.disagreement), (48, 52, 0));
    }

    #[test]
    fn an_extending_turn_on_its_pod_reuses_every_whole_block_it_left() {
        // Turn 1 left 90 tokens (prompt and reply less the last token); turn 2 extends them
        // all, and its pod holds the five whole blocks.
        let c = attribute(&Request {
            serving_held: 80,
            previous_shared: 90,
            previous_left: 90,
            engine_cached: Some(80),
            ..request(130)
        });
        assert_eq!(
            c,
            Causes {
                reused: 80,
                block_tail: 10,
                new: 40,
                ..Causes::default()
            }
        );
        assert_eq!(c.total(), 130);
        assert_eq!(c.total() - c.reused, 50);
    }

    #[test]
    fn a_rewritten_history_loses_what_follows_the_first_changed_token() {
        // Qwen3 drops the think block: turn 2 shares 40 tokens with what turn 1 left (90).
        let c = attribute(&Request {
            serving_held: 32,
            previous_shared: 40,
            previous_left: 90,
            engine_cached: Some(32),
            ..request(120)
        });
        assert_eq!(
            (c.reused, c.block_tail, c.rewritten, c.new),
            (32, 8, 50, 30)
        );
    }

    #[test]
    fn what_no_pod_holds_any_more_was_evicted_and_what_another_holds_was_misrouted() {
        let evicted = attribute(&Request {
            serving_held: 16,
            previous_shared: 90,
            previous_left: 90,
            ..request(130)
        });
        assert_eq!(
            (
                evicted.reused,
                evicted.evicted,
                evicted.block_tail,
                evicted.new
            ),
            (16, 64, 10, 40)
        );
        let misrouted = attribute(&Request {
            serving_held: 0,
            others_held: 80,
            previous_shared: 90,
            previous_left: 90,
            ..request(130)
        });
        assert_eq!(
            (misrouted.reused, misrouted.misrouted, misrouted.block_tail),
            (0, 80, 10)
        );
        // Another pod holding a prefix of a first request is misrouted too.
        let first = attribute(&Request {
            others_held: 32,
            ..request(100)
        });
        assert_eq!((first.misrouted, first.new), (32, 68));
    }

    #[test]
    fn the_last_token_is_always_computed() {
        // The same prompt sent again: its pod holds all 64 tokens, the engine reuses 48.
        let c = attribute(&Request {
            serving_held: 64,
            previous_shared: 64,
            previous_left: 64,
            engine_cached: Some(48),
            ..request(64)
        });
        assert_eq!((c.reused, c.block_tail, c.disagreement), (48, 16, 0));
        let c = attribute(&Request {
            engine_cached: Some(64),
            ..request(64)
        });
        assert_eq!(c.disagreement, 64);
    }

    #[test]
    fn the_causes_sum_to_the_prompt_whatever_the_inputs() {
        let mut next = crate::tokenize::xorshift(7);
        for _ in 0..100_000 {
            let mut pick = |m: u64| (next() % m) as usize;
            let n = pick(300);
            let r = Request {
                prompt_tokens: n,
                block_size: 1 + pick(64),
                serving_held: pick(400),
                others_held: pick(400),
                previous_shared: pick(400),
                previous_left: pick(400),
                engine_cached: None,
            };
            let c = attribute(&r);
            assert_eq!(c.total(), n, "{r:?} -> {c:?}");
            assert!(c.reused <= n.saturating_sub(1), "{r:?} -> {c:?}");
            assert_eq!(c.reused % r.block_size, 0, "{r:?} -> {c:?}");
        }
    }
}
