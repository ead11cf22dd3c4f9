//! What each `--router` would have done with a request that continues a conversation, set
//! beside where the request really went: the reason a `misrouted` token was computed again.
//!
//! Every router answers the question of [`crate::routers::Router`]: of this prompt, what does
//! it credit to the pod that served the conversation's previous turn, and does it send the turn
//! back there? Where the turn went is known when the previous request was attributed: it went
//! back when the same pod served both. Misrouted tokens (another pod held more of the prompt
//! than the serving pod) take one reason per router:
//! - the turn went elsewhere and the rule sends it elsewhere: the rule's own reason;
//! - the turn went elsewhere though the rule sends it back: against the rule, which the
//!   emulation cannot see (load balancing, or a router whose own view failed: vllm-router
//!   behind vLLM pods started without `--enable-scale-out` is refused its render call and
//!   routes by load alone);
//! - the turn went back, and another pod held more: what the router credits is the previous
//!   pod's, and the copy elsewhere came from traffic it did not route or see;
//! - the previous turn's pod is not known (not seen, or not attributed).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value as Json;

use super::lru::Lru;
use crate::align::Transition;
use crate::routers::{Answer, Decision, Spec, TransitionView};

/// The reasons of misrouted tokens besides a router's own.
pub const AGAINST_RULE: &str = "sent elsewhere against its rule";
pub const HELD_ELSEWHERE: &str = "back to the previous turn's pod; another pod held more";
pub const PREVIOUS_UNKNOWN: &str = "the previous turn's pod is not known";

/// The routers to ask, with what they need beyond the transition.
pub struct Routers {
    specs: Vec<(Arc<str>, Spec)>,
    /// The served model's name (GAIE's hash root, llm-d's).
    model: String,
    block_size: usize,
}

impl Routers {
    pub fn new(specs: Vec<(Arc<str>, Spec)>, model: String, block_size: usize) -> Routers {
        Routers {
            specs,
            model,
            block_size,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }

    /// Each router's answer for the step from the previous request to this one. `messages`
    /// are this request's; the previous request's are those before its last reply.
    pub fn answers(&self, t: &Transition, messages: &[Json]) -> Vec<Answer> {
        if self.specs.is_empty() {
            return Vec::new();
        }
        let last_reply = crate::render::last_reply(messages).unwrap_or(0);
        let view = TransitionView {
            prompt_tokens: t.prompt_tokens,
            held: &t.held_ids,
            next: &t.next_ids,
            request: &messages[..last_reply],
            next_request: messages,
            engine_block_size: self.block_size,
            model: &self.model,
            index_view: None,
        };
        self.specs
            .iter()
            .map(|(label, spec)| {
                // llm-d answers from its index as simulated for this step alone: a fresh one
                // each time, so nothing grows with the run.
                let simulated = match spec {
                    Spec::LlmD(l) => Some(crate::routers::llm_d::view::Simulator::new(&l.0).run(
                        t.prompt_tokens,
                        &t.held_ids,
                        &t.next_ids,
                    )),
                    _ => None,
                };
                let view = TransitionView {
                    index_view: simulated.as_ref(),
                    ..view
                };
                let mut a = spec.router().answer(&view);
                a.label = label.clone();
                a
            })
            .collect()
    }

    /// Totals for each router, in the order the flags gave them.
    pub fn totals(&self) -> Vec<RouterTotals> {
        self.specs
            .iter()
            .map(|(label, spec)| RouterTotals {
                router: label.to_string(),
                version: spec.version(),
                ..RouterTotals::default()
            })
            .collect()
    }
}

/// Where a turn went against the pod of the conversation's previous request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Went {
    /// The pod that served the previous request.
    Back,
    Elsewhere,
    /// The previous request's pod is not known.
    Unknown,
}

impl Went {
    pub fn of(serving: &str, previous: Option<&str>) -> Went {
        match previous {
            None => Went::Unknown,
            Some(p) if p == serving => Went::Back,
            Some(_) => Went::Elsewhere,
        }
    }
}

/// The pod of each recent request, by the request's key: bounded, the least recently
/// written forgotten first. A conversation's turn replaces its previous turn's entry, so one
/// conversation holds one entry, as in the conversations' LRU.
pub struct ServedBy(Lru<Arc<str>>);

impl ServedBy {
    pub fn new(capacity: usize) -> ServedBy {
        ServedBy(Lru::new(capacity))
    }

    /// Request `key` was served by `pod`; `previous`, its conversation's request before it,
    /// will not be asked about again.
    pub fn insert(&mut self, key: u64, previous: Option<u64>, pod: Arc<str>) {
        if let Some(p) = previous {
            self.0.remove(p);
        }
        self.0.insert(key, pod, drop);
    }

    pub fn get(&self, key: u64) -> Option<&str> {
        self.0.get(key).map(|p| &**p)
    }
}

/// One router's figures over the requests that continue a conversation (carry a reply).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RouterTotals {
    /// The `--router` value as given.
    pub router: String,
    pub version: &'static str,
    /// Turns it was asked about.
    pub turns: u64,
    /// Prompt tokens it credits to the previous turn's pod, summed.
    pub credited_tokens: u64,
    /// Turns its rule sends back to the previous turn's pod.
    pub rule_back: u64,
    /// Turns where it could be seen where the turn went, and of those, the ones that went
    /// where its rule says.
    pub observed: u64,
    pub as_rule: u64,
    /// Misrouted tokens by why this router sent them away.
    pub misrouted: BTreeMap<String, u64>,
}

impl RouterTotals {
    /// One turn: the router's answer, where the turn went, its misrouted tokens.
    pub fn add(&mut self, a: &Answer, went: Went, misrouted: usize) {
        self.turns += 1;
        self.credited_tokens += a.visible_tokens as u64;
        let back = a.decision == Decision::Decode;
        self.rule_back += u64::from(back);
        if went != Went::Unknown {
            self.observed += 1;
            self.as_rule += u64::from(back == (went == Went::Back));
        }
        if misrouted > 0 {
            let why = match (went, back) {
                (Went::Unknown, _) => PREVIOUS_UNKNOWN,
                (Went::Back, _) => HELD_ELSEWHERE,
                (Went::Elsewhere, true) => AGAINST_RULE,
                (Went::Elsewhere, false) => a.why.text(),
            };
            *self.misrouted.entry(why.to_string()).or_default() += misrouted as u64;
        }
    }

    /// What was counted after `e`, an earlier reading of the same router.
    pub fn since(&self, e: &RouterTotals) -> RouterTotals {
        RouterTotals {
            router: self.router.clone(),
            version: self.version,
            turns: self.turns.saturating_sub(e.turns),
            credited_tokens: self.credited_tokens.saturating_sub(e.credited_tokens),
            rule_back: self.rule_back.saturating_sub(e.rule_back),
            observed: self.observed.saturating_sub(e.observed),
            as_rule: self.as_rule.saturating_sub(e.as_rule),
            misrouted: self
                .misrouted
                .iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.saturating_sub(e.misrouted.get(k).copied().unwrap_or(0)),
                    )
                })
                .filter(|(_, v)| *v > 0)
                .collect(),
        }
    }

    /// The reason the router gave for most misrouted tokens (a previous pod not known is no
    /// reason it gave).
    pub fn main_reason(&self) -> Option<&str> {
        self.misrouted
            .iter()
            .filter(|(why, _)| why.as_str() != PREVIOUS_UNKNOWN)
            .max_by_key(|(_, n)| **n)
            .map(|(why, _)| why.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routers::{Reason, Units};

    fn answer(decision: Decision, why: Reason) -> Answer {
        Answer {
            router: "vllm-router",
            label: "vllm-router".into(),
            version: "vllm-router 0.1.17",
            visible_tokens: 96,
            units: None::<Units>,
            decision,
            why,
            rule: String::new(),
        }
    }

    #[test]
    fn where_a_turn_went_is_the_previous_requests_pod_or_not() {
        assert_eq!(Went::of("d0", Some("d0")), Went::Back);
        assert_eq!(Went::of("d0", Some("d1")), Went::Elsewhere);
        assert_eq!(Went::of("d0", None), Went::Unknown);
    }

    #[test]
    fn served_by_keeps_one_entry_a_conversation_and_forgets_the_least_recent() {
        let mut s = ServedBy::new(2);
        s.insert(1, None, "d0".into());
        s.insert(2, None, "d1".into());
        // A retry of request 1 makes it the most recent: 2 is forgotten next, not 1.
        s.insert(1, None, "d1".into());
        s.insert(3, None, "d0".into());
        assert_eq!(
            (s.get(1), s.get(2), s.get(3)),
            (Some("d1"), None, Some("d0"))
        );
        // Request 4 continues request 3's conversation: it takes 3's place.
        s.insert(4, Some(3), "d1".into());
        assert_eq!(
            (s.get(1), s.get(3), s.get(4)),
            (Some("d1"), None, Some("d1"))
        );
    }

    #[test]
    fn misrouted_tokens_take_the_rules_reason_or_against_the_rule() {
        let mut t = RouterTotals::default();
        t.add(
            &answer(Decision::Other, Reason::MatchRateNotOver),
            Went::Elsewhere,
            64,
        );
        t.add(
            &answer(Decision::Decode, Reason::MatchRateOver),
            Went::Elsewhere,
            32,
        );
        t.add(
            &answer(Decision::Decode, Reason::MatchRateOver),
            Went::Back,
            0,
        );
        t.add(
            &answer(Decision::Other, Reason::MatchRateNotOver),
            Went::Back,
            16,
        );
        t.add(
            &answer(Decision::Decode, Reason::MatchRateOver),
            Went::Unknown,
            8,
        );
        assert_eq!(t.turns, 5);
        assert_eq!(t.credited_tokens, 480);
        assert_eq!(t.rule_back, 3);
        assert_eq!((t.observed, t.as_rule), (4, 2));
        assert_eq!(
            t.misrouted,
            BTreeMap::from([
                (Reason::MatchRateNotOver.text().to_string(), 64),
                (AGAINST_RULE.to_string(), 32),
                (HELD_ELSEWHERE.to_string(), 16),
                (PREVIOUS_UNKNOWN.to_string(), 8),
            ])
        );
        assert_eq!(t.main_reason(), Some(Reason::MatchRateNotOver.text()));
    }
}
