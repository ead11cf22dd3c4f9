//! What each router a fleet runs believes the decode pod holds after a turn, and where it
//! sends the next turn (reference/routers.md). llm-d's precise index is emulated event by
//! event in [`crate::index`]; the others here, each from its own code at a pinned version.
//!
//! Every router answers the same question for one transition: of prompt k+1, how much does
//! it credit to the pod that served turn k, and does turn k+1 go back to that pod to be
//! computed there (`decode`) or elsewhere, a prefill pod included (`other`)?

pub mod config;
pub mod dynamo;
pub mod gaie;
pub mod sglang;
pub mod spec;

use serde_json::Value as Json;

use crate::align::common_prefix;

use crate::index::decider::{Rule, Verdict, decide};
use crate::index::router::RouterView;
pub use spec::Spec;
use spec::{ApproxPolicy, SglangMode, VllmRouterPolicy};

/// One transition as the routers see it.
#[derive(Debug, Clone, Copy)]
pub struct Turn<'a> {
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
    pub why: &'static str,
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
        *self.reasons.entry(a.why).or_default() += 1;
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

fn whole_blocks(tokens: usize, block: usize) -> usize {
    tokens / block * block
}

/// What an index fed by the engine's events finds for prompt k+1, at the engine's block
/// size: the full blocks of the holdings that prompt k+1 repeats.
pub fn event_visible(t: &Turn) -> usize {
    whole_blocks(
        common_prefix(t.held, t.next).min(t.held.len()),
        t.engine_block_size,
    )
}

fn share(matched: usize, input: usize) -> f64 {
    if input == 0 {
        0.0
    } else {
        matched as f64 / input as f64
    }
}

/// A cache-aware policy's choice: the pod with the match when its rate is over the
/// threshold (`>`, as vllm-router and smg compare), else the least loaded pod.
fn threshold_rule(
    matched: usize,
    input: usize,
    threshold: f64,
    pd: bool,
) -> (Decision, &'static str, String) {
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
            "P/D: a prefill pod is always used",
            format!("{text}; in P/D mode a prefill pod is always used"),
        )
    } else if over {
        (Decision::Decode, "match rate over the threshold", text)
    } else {
        (
            Decision::Other,
            "match rate at or under the threshold: the reply is not keyed",
            text,
        )
    }
}

fn from_verdict(v: Verdict) -> Decision {
    match v {
        Verdict::DecodeOnly => Decision::Decode,
        Verdict::PrefillDecode => Decision::Other,
    }
}

/// Why the decider kept a turn on the decode pod, in a few words.
fn decode_why(rule: Rule) -> &'static str {
    match rule {
        Rule::Disabled => "no P/D decider",
        Rule::ShortPrompt => "prompt shorter than promptTokens",
        Rule::BelowThreshold => "prompt shorter than nonCachedTokens",
        _ => "few enough uncached tokens",
    }
}

fn llm_d_answer(spec: &Spec, view: &RouterView) -> Answer {
    let decision = from_verdict(view.decision.verdict);
    let why = match decision {
        Decision::Decode => decode_why(view.decision.rule),
        Decision::Other if view.index_visible_tokens < view.engine_cached_tokens => {
            "the index sees less than the pod holds"
        }
        Decision::Other => "too many uncached tokens",
    };
    Answer {
        router: spec.name(),
        label: spec.name().into(),
        version: spec.version(),
        visible_tokens: view.index_visible_tokens,
        units: None,
        decision,
        why,
        rule: format!(
            "prefix-based-pd-decider: {} ({} uncached of {}; index block {})",
            view.decision.rule,
            view.decision.non_cached,
            view.decision.input_tokens,
            view.index_block_size
        ),
    }
}

/// The answer of `spec` for one transition. `llm_d` is the precise index's view of it,
/// simulated event by event (llm-d's answer is read from it).
pub fn answer(spec: &Spec, t: &Turn, llm_d: Option<&RouterView>) -> Answer {
    let eb = t.engine_block_size;
    let held_match = common_prefix(t.held, t.next).min(t.held.len());
    // What prompt k alone gives: routers that record the request, not the reply.
    let prompt_match = held_match.min(t.prompt_tokens);
    let simple = |visible: usize, decision: Decision, why: &'static str, rule: String| Answer {
        router: spec.name(),
        label: spec.name().into(),
        version: spec.version(),
        visible_tokens: visible,
        units: None,
        decision,
        why,
        rule,
    };
    match spec {
        Spec::LlmD(_) => match llm_d {
            Some(view) => llm_d_answer(spec, view),
            None => simple(0, Decision::Other, "not simulated", "not simulated".into()),
        },
        Spec::LlmDApprox {
            block_size,
            decider,
        } => {
            // The producer hashes prompt tokens in blocks of at least 64 (minBlockSizeTokens)
            // and records requests only; prompt k's partial last block is hashed too, so it
            // matches only a prompt k+1 that ends at the same place.
            let block = block_size.unwrap_or(eb).max(64);
            let visible = if t.next.len() == t.prompt_tokens && prompt_match == t.prompt_tokens {
                t.prompt_tokens
            } else {
                whole_blocks(prompt_match, block)
            }
            .min(t.next.len());
            let d = decide(decider, t.next.len(), visible / block, block);
            let decision = from_verdict(d.verdict);
            simple(
                visible,
                decision,
                match decision {
                    Decision::Decode => decode_why(d.rule),
                    Decision::Other => "too many uncached tokens: the reply is not recorded",
                },
                format!(
                    "prefix-based-pd-decider: {} ({} uncached of {}; block {block})",
                    d.rule, d.non_cached, d.input_tokens
                ),
            )
        }
        Spec::Dynamo {
            block_size,
            conditional,
        } => {
            let block = block_size.unwrap_or(eb);
            if block != eb {
                return simple(
                    0,
                    Decision::Other,
                    "router block size is not the engine's: the worker is invisible",
                    format!(
                        "router block {block} differs from the engine's {eb}: every event is converted to zero blocks, the worker is invisible"
                    ),
                );
            }
            let visible = event_visible(t);
            match conditional {
                None => simple(
                    visible,
                    Decision::Other,
                    "decode chosen by load, conditional disaggregation off",
                    "decode chosen by load: decode-side reuse is not a routing signal without --router-conditional-disagg".into(),
                ),
                Some(c) => {
                    let n = t.next.len();
                    let net_new = n - visible.min(n);
                    let ratio = share(net_new, n);
                    let keep = net_new < c.isl_threshold && ratio < c.ratio;
                    simple(
                        visible,
                        if keep { Decision::Decode } else { Decision::Other },
                        if keep {
                            "remote prefill bypassed"
                        } else {
                            "too many net-new tokens"
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
        }
        Spec::DynamoApprox { policy, block_size } => {
            let block = block_size.unwrap_or(eb);
            let (visible, what) = match policy {
                ApproxPolicy::Ttl => (
                    whole_blocks(prompt_match, block),
                    "ttl: routed prompts only, turn k+1 assumed within 120 s",
                ),
                ApproxPolicy::Lru => (
                    whole_blocks(held_match, block),
                    "lru: routed prompts and the streamed reply",
                ),
            };
            simple(
                visible,
                Decision::Other,
                "decode chosen by load, no conditional disaggregation without KV events",
                format!(
                    "{what}; without KV events there is no conditional disaggregation: decode chosen by load"
                ),
            )
        }
        Spec::VllmRouter {
            policy: VllmRouterPolicy::CacheAware,
            threshold,
            pd,
            ..
        } => {
            let (decision, why, rule) = threshold_rule(prompt_match, t.next.len(), *threshold, *pd);
            simple(prompt_match, decision, why, rule)
        }
        Spec::VllmRouter {
            policy: VllmRouterPolicy::KvAware,
            block_size,
            pd,
            ..
        } => {
            if *block_size != eb {
                return simple(
                    0,
                    Decision::Other,
                    "event block size is not the engine's: every batch rejected",
                    format!(
                        "--kv-event-block-size {block_size} differs from the engine's {eb}: every batch is rejected and the source cleared"
                    ),
                );
            }
            let visible = event_visible(t);
            if *pd {
                simple(
                    visible,
                    Decision::Other,
                    "P/D: decode chosen by occupancy",
                    "P/D: decode is chosen by occupancy, never by placement; a prefill pod is always used".into(),
                )
            } else if visible > 0 {
                simple(
                    visible,
                    Decision::Decode,
                    "most matched blocks",
                    "the pod with the most matched blocks".into(),
                )
            } else {
                simple(
                    0,
                    Decision::Other,
                    "no block matched",
                    "no block matched: least-occupied pod".into(),
                )
            }
        }
        Spec::Sglang {
            mode: SglangMode::Http,
            threshold,
            pd,
        } => {
            let before = sglang::routing_text(t.request);
            let after = sglang::routing_text(t.next_request);
            let matched = sglang::common_chars(&before, &after);
            let input = after.chars().count();
            let (decision, why, rule) = threshold_rule(matched, input, *threshold, *pd);
            Answer {
                router: spec.name(),
                label: spec.name().into(),
                version: spec.version(),
                visible_tokens: scaled(matched, input, t.next.len()),
                units: Some(Units {
                    unit: "characters",
                    matched,
                    input,
                }),
                decision,
                why,
                rule,
            }
        }
        Spec::Sglang {
            mode: SglangMode::Events,
            pd,
            ..
        } => {
            // The router learns the block size from the first stored event: always the
            // engine's.
            let visible = event_visible(t);
            if *pd {
                simple(
                    visible,
                    Decision::Other,
                    "P/D: a prefill pod is always used",
                    "P/D: a prefill and a decode pod are always both chosen".into(),
                )
            } else if visible > 0 {
                simple(
                    visible,
                    Decision::Decode,
                    "highest overlap",
                    "the pod with the highest overlap".into(),
                )
            } else {
                simple(
                    0,
                    Decision::Other,
                    "no overlap",
                    "no overlap: least-loaded pod".into(),
                )
            }
        }
        Spec::Gaie {
            block_size,
            max_blocks,
        } => {
            let block = block_size.unwrap_or(eb);
            let m = gaie::matched_blocks(t.model, t.request, t.next_request, block, *max_blocks);
            let visible = (m.matched * block).min(t.next.len());
            let decision = if m.matched > 0 {
                Decision::Decode
            } else {
                Decision::Other
            };
            Answer {
                router: spec.name(),
                label: spec.name().into(),
                version: spec.version(),
                visible_tokens: visible,
                units: Some(Units {
                    unit: "bytes",
                    matched: m.matched * block * gaie::BYTES_PER_TOKEN,
                    input: m.input_bytes,
                }),
                decision,
                why: match decision {
                    Decision::Decode => "highest prefix score",
                    Decision::Other => "no whole block of request k matches",
                },
                rule: format!(
                    "prefix scorer {}/{} blocks of {} bytes: {} (a scorer, no P/D decider)",
                    m.matched,
                    m.total,
                    block * gaie::BYTES_PER_TOKEN,
                    if m.matched > 0 {
                        "the pod of turn k scores highest"
                    } else {
                        "no pod matches"
                    }
                ),
            }
        }
    }
}

/// `matched` of `input` units as the same share of `tokens`, rounded down.
fn scaled(matched: usize, input: usize, tokens: usize) -> usize {
    if input == 0 {
        0
    } else {
        (matched as u128 * tokens as u128 / input as u128) as usize
    }
}

#[cfg(test)]
mod tests;
