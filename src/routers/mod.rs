//! What each router a fleet runs believes the decode pod holds after a turn, and where it
//! sends the next turn (reference/routers.md), each emulated from its own code at a pinned
//! version, one file per router behind [`Router`]: llm-d's precise index event by event
//! ([`llm_d`]), its approximate producer, Dynamo on KV events and without them, vllm-router,
//! SGLang's gateway smg, GAIE's prefix plugin. Adding a router is adding a file, its
//! [`Spec`] variant and its name in [`spec::NAMES`].
//!
//! Every router answers the same question for one transition: of prompt k+1, how much does
//! it credit to the pod that served turn k, and does turn k+1 go back to that pod to be
//! computed there (`decode`) or elsewhere, a prefill pod included (`other`)?

pub mod config;
pub mod dynamo;
pub mod dynamo_approx;
pub mod gaie;
pub mod llm_d;
pub mod llm_d_approx;
mod params;
pub mod reason;
pub mod smg;
pub mod spec;
pub mod vllm_router;

use serde_json::Value as Json;

use crate::align::common_prefix;

use llm_d::view::RouterView;
pub use params::RouterSpecError;
pub use reason::Reason;
pub use spec::Spec;

/// One router emulation with its settings: what it credits the pod of turn k with for
/// prompt k+1, where turn k+1 goes, and why.
pub trait Router: std::fmt::Debug + Send + Sync {
    /// The `--router` name.
    fn name(&self) -> &'static str;
    /// The version of the router's code the emulation follows.
    fn version(&self) -> &'static str;
    fn answer(&self, t: &TransitionView) -> Answer;
}

/// One transition as the routers see it (the aligned one is [`crate::align::Transition`]).
#[derive(Debug, Clone, Copy)]
pub struct TransitionView<'a> {
    /// Tokens of prompt k (it starts `held`).
    pub prompt_tokens: usize,
    /// What the decode pod holds after turn k: prompt k and the reply, without the token
    /// whose KV is never computed.
    pub held: &'a [u32],
    /// Prompt k+1.
    pub next: &'a [u32],
    /// Request k's and request k+1's messages, as the client sends them.
    pub request: &'a [Json],
    pub next_request: &'a [Json],
    pub engine_block_size: usize,
    /// The served model's name (GAIE's hash root).
    pub model: &'a str,
    /// llm-d's precise index simulated for this transition with this router's settings,
    /// when it was (llm-d answers from it; the others ignore it).
    pub index_view: Option<&'a RouterView>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Turn k+1 goes back to the pod that served turn k, which computes the rest itself.
    Decode,
    /// Another pod, or a prefill pod first.
    Other,
}

/// A router's match in its own unit, for routers that do not match tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Units {
    pub unit: &'static str,
    pub matched: usize,
    pub input: usize,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Answer {
    pub router: &'static str,
    /// The `--router` value as given (the name, when it was given alone).
    #[serde(skip)]
    pub label: std::sync::Arc<str>,
    pub version: &'static str,
    /// Tokens of prompt k+1 the router credits to the pod that served turn k. For a router
    /// that matches characters or bytes, its matched share of prompt k+1's tokens.
    pub visible_tokens: usize,
    pub units: Option<Units>,
    pub decision: Decision,
    /// Why, in a few words (the same for every transition it decides).
    #[serde(skip)]
    pub why: Reason,
    /// The rule that decided, with its figures.
    pub rule: String,
}

/// One router's answers, totalled over transitions.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Totals {
    #[serde(deserialize_with = "crate::names::de_name")]
    pub router: crate::names::Name,
    #[serde(with = "crate::names::arc_str")]
    pub label: std::sync::Arc<str>,
    #[serde(deserialize_with = "crate::names::de_name")]
    pub version: crate::names::Name,
    pub transitions: u64,
    /// Transitions whose next turn goes back to the decode pod of the turn before.
    pub decode: u64,
    pub visible_tokens: u64,
    pub next_tokens: u64,
    #[serde(deserialize_with = "crate::names::de_opt_name")]
    pub unit: Option<crate::names::Name>,
    pub matched_units: u64,
    pub input_units: u64,
    /// Transitions by why they were decided as they were.
    #[serde(deserialize_with = "crate::names::de_name_map")]
    pub reasons: std::collections::BTreeMap<&'static str, u64>,
}

impl Totals {
    pub fn add(&mut self, a: &Answer, next_tokens: usize) {
        self.router = a.router;
        self.label = a.label.clone();
        self.version = a.version;
        self.transitions += 1;
        self.decode += u64::from(a.decision == Decision::Decode);
        self.visible_tokens += a.visible_tokens as u64;
        self.next_tokens += next_tokens as u64;
        *self.reasons.entry(a.why.text()).or_default() += 1;
        if let Some(u) = a.units {
            self.unit = Some(u.unit);
            self.matched_units += u.matched as u64;
            self.input_units += u.input as u64;
        }
    }

    pub fn merge(&mut self, o: &Totals) {
        if o.transitions == 0 {
            return;
        }
        self.router = o.router;
        self.label = o.label.clone();
        self.version = o.version;
        self.unit = self.unit.or(o.unit);
        self.transitions += o.transitions;
        self.decode += o.decode;
        self.visible_tokens += o.visible_tokens;
        self.next_tokens += o.next_tokens;
        self.matched_units += o.matched_units;
        self.input_units += o.input_units;
        for (k, v) in &o.reasons {
            *self.reasons.entry(k).or_default() += v;
        }
    }

    /// The reason that decided most transitions (the first by name on a tie).
    pub fn main_reason(&self) -> Option<&'static str> {
        self.reasons
            .iter()
            .max_by_key(|(k, n)| (**n, std::cmp::Reverse(**k)))
            .map(|(k, _)| *k)
    }
}

/// One router's totals as the answer line reads them.
pub struct LineEntry<'a> {
    pub router: &'a str,
    pub decode: u64,
    pub transitions: u64,
    pub why: Option<&'a str>,
}

impl Totals {
    pub fn line_entry(&self) -> LineEntry<'_> {
        LineEntry {
            router: &self.label,
            decode: self.decode,
            transitions: self.transitions,
            why: self.main_reason(),
        }
    }
}

/// The answer an operator came for, one line: per router, in how many transitions the
/// next turn stays on the decode pod, and the main reason.
pub fn answer_line(entries: &[LineEntry]) -> Option<String> {
    let first = entries.first()?;
    let why = |t: &LineEntry| t.why.map(|w| format!(" ({w})")).unwrap_or_default();
    let plural = |n: u64, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    if let [t] = entries {
        return Some(format!(
            "answer: the next turn stays on the decode pod in {} of {} with {}{}",
            t.decode,
            plural(t.transitions, "transition"),
            t.router,
            why(t)
        ));
    }
    let parts: Vec<String> = entries
        .iter()
        .map(|t| format!("{} with {}{}", t.decode, t.router, why(t)))
        .collect();
    Some(format!(
        "answer: of {}, the next turn stays on the decode pod in {}",
        plural(first.transitions, "transition"),
        parts.join("; ")
    ))
}

pub(crate) fn whole_blocks(tokens: usize, block: usize) -> usize {
    tokens / block * block
}

/// What an index fed by the engine's events finds for prompt k+1, at the engine's block
/// size: the full blocks of the holdings that prompt k+1 repeats.
pub fn event_visible(t: &TransitionView) -> usize {
    whole_blocks(held_match(t), t.engine_block_size)
}

/// What prompt k+1 repeats of the holdings.
pub(crate) fn held_match(t: &TransitionView) -> usize {
    common_prefix(t.held, t.next).min(t.held.len())
}

/// What prompt k alone gives: routers that record the request, not the reply.
pub(crate) fn prompt_match(t: &TransitionView) -> usize {
    held_match(t).min(t.prompt_tokens)
}

pub(crate) fn share(matched: usize, input: usize) -> f64 {
    if input == 0 {
        0.0
    } else {
        matched as f64 / input as f64
    }
}

impl Answer {
    /// An answer in tokens, labelled with the router's name.
    pub(crate) fn tokens(
        router: &dyn Router,
        visible_tokens: usize,
        decision: Decision,
        why: Reason,
        rule: String,
    ) -> Answer {
        Answer {
            router: router.name(),
            label: router.name().into(),
            version: router.version(),
            visible_tokens,
            units: None,
            decision,
            why,
            rule,
        }
    }
}

/// A cache-aware policy's choice: the pod with the match when its rate is over the
/// threshold (`>`, as vllm-router and smg compare), else the least loaded pod.
pub(crate) fn threshold_rule(
    matched: usize,
    input: usize,
    threshold: f64,
    pd: bool,
) -> (Decision, Reason, String) {
    let rate = share(matched, input);
    let over = rate > threshold;
    let text = format!(
        "match rate {matched}/{input} = {rate:.4} {} {threshold}: {}",
        if over { ">" } else { "<=" },
        if over {
            "back to the pod of turn k"
        } else {
            "least-loaded pod"
        }
    );
    if pd {
        (
            Decision::Other,
            Reason::PdPrefillAlways,
            format!("{text}; in P/D mode a prefill pod is always used"),
        )
    } else if over {
        (Decision::Decode, Reason::MatchRateOver, text)
    } else {
        (Decision::Other, Reason::MatchRateNotOver, text)
    }
}

/// The answer of a router that reads the engine's events and sends a turn to the pod with
/// the most matched blocks (vllm-router's kv_aware, smg's events): in P/D mode a prefill pod
/// is always used; `pd`, `hit` and `miss` are its words for each case.
pub(crate) fn by_event_match(
    router: &dyn Router,
    t: &TransitionView,
    pd_mode: bool,
    [pd, hit, miss]: [(Reason, &str); 3],
) -> Answer {
    let visible = event_visible(t);
    let (decision, (why, rule)) = if pd_mode {
        (Decision::Other, pd)
    } else if visible > 0 {
        (Decision::Decode, hit)
    } else {
        (Decision::Other, miss)
    };
    Answer::tokens(router, visible, decision, why, rule.into())
}

/// `matched` of `input` units as the same share of `tokens`, rounded down.
pub(crate) fn scaled(matched: usize, input: usize, tokens: usize) -> usize {
    if input == 0 {
        0
    } else {
        (matched as u128 * tokens as u128 / input as u128) as usize
    }
}

#[cfg(test)]
mod tests;
