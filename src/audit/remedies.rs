//! For each rewrite point, the fixes that would remove it, each measured by re-running the
//! audit of the conversation under it.
//!
//! Remedies evaluated:
//! - every resend mode other than the conversation's own (`content`, `raw`, `reasoning_field`
//!   with the field the server reads);
//! - every history switch the template reads (found from its source, see
//!   `render::inspect_switches`), with each value it tests, sent on every request;
//! - pinning the date, when the template reads one and the prompts are rendered at different
//!   times;
//! - keeping the previous request's kwargs and tools, for a transition whose request changed.
//!
//! A switch value that leaves a transition exactly as it was (the template's default) is left
//! out of that transition's list; every resend mode is listed.

use anyhow::Result;
use serde::Serialize;
use serde_json::{Map, Value as Json};

use super::{Planned, Planner};
use crate::align::{RewriteClass, Transition, Uncached, align_plan};
use crate::render::{Clock, Conversation, ResendMode, ServerProfile, TurnPlan, plan_turns};
use crate::tokenize::Tokenizer;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RemedyKind {
    /// Send the reply back another way (`--resend`).
    Resend,
    /// Send a template kwarg on every request.
    Kwarg,
    /// Render every prompt with the same date.
    PinDate,
    /// Send the previous request's kwargs and tools again.
    KeepRequest,
}

impl RemedyKind {
    pub fn name(self) -> &'static str {
        match self {
            RemedyKind::Resend => "resend",
            RemedyKind::Kwarg => "kwarg",
            RemedyKind::PinDate => "pin_date",
            RemedyKind::KeepRequest => "keep_request",
        }
    }
}

/// One transition under one remedy.
#[derive(Debug, Clone, PartialEq)]
pub struct Remedy {
    pub kind: RemedyKind,
    /// The resend mode, the kwarg, the date variable (or `strftime_now`), or what the request
    /// changed (`kwargs`, `tools`, `kwargs_and_tools`).
    pub name: String,
    /// The kwarg's value, the reasoning field's name, the pinned date, or the kwargs kept.
    pub value: Option<Json>,
    /// A switch that only works when the reasoning reaches the template: the resend mode it
    /// was evaluated with (`reasoning_field`), reported when that changes its outcome.
    pub with_resend: Option<&'static str>,
    pub common_prefix_tokens: usize,
    /// Where the next prompt still diverges under the remedy, and why.
    pub rewrite: Option<(usize, RewriteClass)>,
    pub uncached: Vec<Uncached>,
    pub removes_rewrite: bool,
}

impl Remedy {
    /// The remedy as one would apply it to a whole fleet, the same for every conversation:
    /// the kwarg and its value, or the resend mode; a pinned date and a kept request are one
    /// remedy each whatever the date or the kwargs kept (corpus totals group by this).
    pub fn group(&self) -> String {
        match (self.kind, &self.value, self.with_resend) {
            (RemedyKind::Kwarg, Some(v), Some(mode)) => {
                format!("kwarg {}={v} with resend {mode}", self.name)
            }
            (RemedyKind::Kwarg, Some(v), None) => format!("kwarg {}={v}", self.name),
            (kind, _, _) => format!("{} {}", kind.name(), self.name),
        }
    }

    /// A keep_request remedy's kwargs as `key=value`, `key unset` for one the held request
    /// did not send (empty for other kinds).
    pub fn kept_kwargs(&self) -> Vec<String> {
        match (self.kind, &self.value) {
            (RemedyKind::KeepRequest, Some(Json::Object(kept))) => kept
                .iter()
                .map(|(k, v)| match v {
                    Json::Null => format!("{k} unset"),
                    v => format!("{k}={v}"),
                })
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// The remedies of one transition with a rewrite point, best first.
#[derive(Debug, Clone, PartialEq)]
pub struct TransitionRemedies {
    pub from_prompt: usize,
    pub to_prompt: usize,
    pub remedies: Vec<Remedy>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ConversationRemedies {
    /// The history switches the template reads (none: no kwarg remedy exists).
    pub switches: Vec<String>,
    /// The date variables the template reads (`strftime_now` when it calls it).
    pub date_sources: Vec<String>,
    pub transitions: Vec<TransitionRemedies>,
}

/// A variant of the audit: what is changed, and the transitions it gives.
struct Variant {
    kind: RemedyKind,
    name: String,
    value: Option<Json>,
    with_resend: Option<&'static str>,
    transitions: Vec<Transition>,
}

pub(super) fn evaluate(
    planner: &Planner,
    tok: &Tokenizer,
    conv: &Conversation,
    planned: &Planned,
    baseline: &[Transition],
) -> Result<ConversationRemedies> {
    let (switches, dates) = crate::render::inspect_switches(planned.renderer.source());
    let mut date_sources = dates.variables.clone();
    if dates.strftime_now {
        date_sources.push("strftime_now".into());
    }
    let mut out = ConversationRemedies {
        switches: switches.iter().map(|s| s.name.clone()).collect(),
        date_sources,
        transitions: Vec::new(),
    };
    if baseline.iter().all(|t| t.rewrite.is_none()) {
        return Ok(out);
    }
    let align = &planner.settings.align;
    let run = |conv: &Conversation, clock: &Clock, options: &crate::render::reply::PlanOptions| {
        // A variant the template refuses (raise_exception on a value) is no remedy.
        plan_turns(conv, &planned.renderer, clock, options)
            .ok()
            .and_then(|plan| align_plan(&plan, tok, align).ok())
    };
    let mut variants: Vec<Variant> = Vec::new();

    for (mode, name) in [
        (ResendMode::Content, "content"),
        (ResendMode::Raw, "raw"),
        (ResendMode::ReasoningField, "reasoning_field"),
    ] {
        if conv.resend == mode {
            continue;
        }
        let mut c = conv.clone();
        c.resend = mode;
        let value = (mode == ResendMode::ReasoningField).then(|| {
            Json::String(match planner.options.server {
                ServerProfile::Vllm => "reasoning".into(),
                _ => "reasoning_content".into(),
            })
        });
        if let Some(transitions) = run(&c, &planned.clock, &planner.options) {
            variants.push(Variant {
                kind: RemedyKind::Resend,
                name: name.into(),
                value,
                with_resend: None,
                transitions,
            });
        }
    }

    for switch in &switches {
        for value in &switch.values {
            let mut options = planner.options.clone();
            options
                .override_kwargs
                .insert(switch.name.clone(), value.clone());
            if let Some(transitions) = run(conv, &planned.clock, &options) {
                variants.push(Variant {
                    kind: RemedyKind::Kwarg,
                    name: switch.name.clone(),
                    value: Some(value.clone()),
                    with_resend: None,
                    transitions,
                });
            }
            // A switch that keeps reasoning needs the reasoning in the request: under vLLM
            // a file's `reasoning_content` is dropped, so also try it with the field resent.
            if conv.resend != ResendMode::ReasoningField {
                let mut c = conv.clone();
                c.resend = ResendMode::ReasoningField;
                if let Some(transitions) = run(&c, &planned.clock, &options) {
                    variants.push(Variant {
                        kind: RemedyKind::Kwarg,
                        name: switch.name.clone(),
                        value: Some(value.clone()),
                        with_resend: Some("reasoning_field"),
                        transitions,
                    });
                }
            }
        }
    }

    let prompts = planned.plan.turns.len() + 1;
    let clock_moves = (1..prompts).any(|k| planned.clock.at(k) != planned.clock.at(0));
    if dates.reads_date() && clock_moves {
        let pinned = planned.clock.frozen();
        if let Some(transitions) = run(conv, &pinned, &planner.options) {
            variants.push(Variant {
                kind: RemedyKind::PinDate,
                with_resend: None,
                name: out
                    .date_sources
                    .first()
                    .cloned()
                    .unwrap_or_else(|| "strftime_now".into()),
                value: Some(Json::String(
                    planned.clock.at(0).format("%Y-%m-%dT%H:%M:%S").to_string(),
                )),
                transitions,
            });
        }
    }

    let kept = keep_request(planner, tok, conv, &planned.plan)?;

    for t in baseline.iter().filter(|t| t.rewrite.is_some()) {
        let mut remedies: Vec<Remedy> = Vec::new();
        for v in &variants {
            let Some(under) = v
                .transitions
                .iter()
                .find(|u| u.from_prompt == t.from_prompt)
            else {
                continue;
            };
            // Every resend mode is reported (that one changes nothing is worth knowing); a
            // switch value that changes nothing is the template's default.
            if v.kind != RemedyKind::Resend && same_outcome(t, under) {
                continue;
            }
            if v.with_resend.is_some() {
                // Only when the resend changes what the switch does on this transition.
                let alone = variants
                    .iter()
                    .filter(|a| a.with_resend.is_none() && a.kind == v.kind)
                    .filter(|a| a.name == v.name && a.value == v.value)
                    .find_map(|a| {
                        a.transitions
                            .iter()
                            .find(|u| u.from_prompt == t.from_prompt)
                    });
                let resent = variants
                    .iter()
                    .filter(|a| a.kind == RemedyKind::Resend && a.name == "reasoning_field")
                    .find_map(|a| {
                        a.transitions
                            .iter()
                            .find(|u| u.from_prompt == t.from_prompt)
                    });
                let adds =
                    |other: Option<&Transition>| other.is_none_or(|o| !same_outcome(o, under));
                if !adds(alone) || !adds(resent) {
                    continue;
                }
            }
            let mut r = remedy(v.kind, &v.name, v.value.clone(), under);
            r.with_resend = v.with_resend;
            remedies.push(r);
        }
        if let Some((_, (name, value, under))) = kept.iter().find(|(k, _)| k + 1 == t.from_prompt) {
            remedies.push(remedy(
                RemedyKind::KeepRequest,
                name,
                Some(value.clone()),
                under,
            ));
        }
        // Best first: removes the rewrite, then fewest uncached tokens at each block size.
        remedies.sort_by(|a, b| {
            b.removes_rewrite.cmp(&a.removes_rewrite).then_with(|| {
                let tokens = |r: &Remedy| r.uncached.iter().map(|u| u.tokens).collect::<Vec<_>>();
                tokens(a).cmp(&tokens(b))
            })
        });
        out.transitions.push(TransitionRemedies {
            from_prompt: t.from_prompt,
            to_prompt: t.to_prompt,
            remedies,
        });
    }
    Ok(out)
}

fn same_outcome(a: &Transition, b: &Transition) -> bool {
    a.held_ids == b.held_ids && a.next_ids == b.next_ids
}

fn remedy(kind: RemedyKind, name: &str, value: Option<Json>, under: &Transition) -> Remedy {
    Remedy {
        kind,
        name: name.to_string(),
        value,
        with_resend: None,
        common_prefix_tokens: under.common_prefix_tokens,
        rewrite: under.rewrite.as_ref().map(|r| (r.position, r.class)),
        uncached: under.uncached.clone(),
        removes_rewrite: under.rewrite.is_none(),
    }
}

/// Per transition (0-based k) whose request changed: what changed, the held request's values
/// of the kwargs that differ, and the transition with the next prompt rendered under the
/// held request.
type Kept = Vec<(usize, (String, Json, Transition))>;

fn keep_request(
    planner: &Planner,
    tok: &Tokenizer,
    conv: &Conversation,
    plan: &TurnPlan,
) -> Result<Kept> {
    let options = &planner.options;
    if !plan.next_with_held_request.iter().any(Option::is_some) {
        return Ok(Vec::new());
    }
    // The same plan, each next prompt replaced by its rendering under the held request.
    let mut kept_plan = plan.clone();
    for (k, text) in plan.next_with_held_request.iter().enumerate() {
        if let Some(text) = text {
            kept_plan.next_prompts[k] = Some(text.clone());
            kept_plan.next_at_held_time[k] = None;
        }
    }
    kept_plan.next_with_held_request = vec![None; plan.turns.len()];
    let transitions = align_plan(&kept_plan, tok, &planner.settings.align)?;
    let mut out = Vec::new();
    for t in transitions {
        let k = t.from_prompt - 1;
        if plan
            .next_with_held_request
            .get(k)
            .is_none_or(Option::is_none)
        {
            continue;
        }
        let held = options.kwargs_at(conv, k);
        let next = options.kwargs_at(conv, k + 1);
        let mut kept = Map::new();
        for key in held.keys().chain(next.keys()) {
            if held.get(key) != next.get(key) && !kept.contains_key(key) {
                kept.insert(key.clone(), held.get(key).cloned().unwrap_or(Json::Null));
            }
        }
        let tools_changed = conv.tools_at(k) != conv.tools_at(k + 1);
        let name = match (kept.is_empty(), tools_changed) {
            (false, true) => "kwargs_and_tools",
            (true, true) => "tools",
            _ => "kwargs",
        };
        out.push((k, (name.to_string(), Json::Object(kept), t)));
    }
    Ok(out)
}
