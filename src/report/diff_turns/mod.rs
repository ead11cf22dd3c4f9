//! The diff-turns report: its view (the JSON shape, defined once) and its exporters.

mod human;

use serde::Serialize;

use super::json::Json;
use super::markdown::Markdown;
use super::{Exporter, Format, Report, View};
use crate::align::{Drift, Rewrite, Transition, Uncached};
use crate::audit::{ConversationAudit, DiffTurnsReport, Remedy, RolloverShift};
use crate::routers::llm_d::view::RouterView;

/// The JSON shape of the diff-turns report.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Serialize)]
pub struct DiffTurnsView<'a> {
    pub schema_version: u32,
    pub model: ModelView<'a>,
    pub conversations: Vec<ConversationView<'a>>,
    /// Conversations that could not be audited (the run exits 2 after reporting the rest).
    pub errors: Vec<ErrorView<'a>>,
}

#[derive(Serialize)]
pub struct ErrorView<'a> {
    pub source: &'a str,
    pub error: &'a str,
}

#[derive(Serialize)]
pub struct ModelView<'a> {
    pub source: &'a str,
    /// The server profile requests were rendered as (`--server`).
    pub server: &'static str,
    /// The server release whose rules applied (`vllm`: `0.32`; `sglang`: `0.5.23` or `main`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_release: Option<&'static str>,
    pub template: &'a str,
    pub template_sha256: &'a str,
    pub tokenizer_sha256: &'a str,
}

#[derive(Serialize)]
pub struct ConversationView<'a> {
    pub source: &'a str,
    /// The template that rendered it (conversations with `tools` select `tool_use`).
    pub template: &'a str,
    /// With --remedies: what the template exposes to keep prompts stable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remedy_sources: Option<RemedySourcesView<'a>>,
    pub transitions: Vec<TransitionView<'a>>,
    /// The first request the server refuses (the transitions stop before it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<RefusedView>,
}

#[derive(Serialize)]
pub struct RefusedView {
    /// 1-based request (prompt) number.
    pub request: usize,
    /// `rejected:<rule>` or `unsupported`.
    pub reason: String,
    pub error: String,
}

#[derive(Serialize)]
pub struct RemedySourcesView<'a> {
    /// The history switches the template reads (empty: no kwarg remedy exists).
    pub history_switches: &'a [String],
    /// The date variables it reads (`strftime_now` when it calls it).
    pub date_sources: &'a [String],
}

/// One remedy of one transition.
#[derive(Serialize)]
pub struct RemedyView<'a> {
    pub kind: &'static str,
    pub name: &'a str,
    pub value: &'a Option<serde_json::Value>,
    /// The resend mode the remedy needs besides (a switch that keeps reasoning needs the
    /// reasoning sent back).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub with_resend: Option<&'static str>,
    pub common_prefix_tokens: usize,
    pub rewrite_position: Option<usize>,
    pub class: Option<&'static str>,
    pub uncached: &'a [Uncached],
    pub removes_rewrite: bool,
}

impl<'a> RemedyView<'a> {
    pub(crate) fn new(r: &'a Remedy) -> Self {
        RemedyView {
            kind: r.kind.name(),
            name: &r.name,
            value: &r.value,
            with_resend: r.with_resend,
            common_prefix_tokens: r.common_prefix_tokens,
            rewrite_position: r.rewrite.map(|(p, _)| p),
            class: r.rewrite.map(|(_, c)| c.name()),
            uncached: &r.uncached,
            removes_rewrite: r.removes_rewrite,
        }
    }
}

#[derive(Serialize)]
pub struct TransitionView<'a> {
    pub from_prompt: usize,
    pub to_prompt: usize,
    pub held_tokens: usize,
    pub next_prompt_tokens: usize,
    pub common_prefix_tokens: usize,
    pub rewrite: &'a Option<Rewrite>,
    pub retokenization_drift: &'a Option<Drift>,
    pub uncached: &'a [Uncached],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub router: Option<RouterJson<'a>>,
    /// Each `--router`'s answer (llm-d's alone when none was given).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub routers: Vec<AnswerView<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub date_rollover: Option<RolloverView<'a>>,
    /// With --remedies, on a transition with a rewrite point: every remedy that changes it,
    /// best first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remedies: Option<Vec<RemedyView<'a>>>,
}

#[derive(Serialize)]
pub struct RouterJson<'a> {
    pub engine_block_size: usize,
    pub index_block_size: usize,
    pub engine_cached_tokens: usize,
    pub index_visible_tokens: usize,
    pub events_emitted: usize,
    pub events_skipped: &'a std::collections::BTreeMap<&'static str, u64>,
    pub decider: DeciderView,
}

#[derive(Serialize)]
pub struct DeciderView {
    pub verdict: &'static str,
    pub input_tokens: usize,
    pub cached_tokens: usize,
    pub non_cached_tokens: usize,
    pub rule: String,
}

/// One router's answer for a transition.
#[derive(Serialize)]
pub struct AnswerView<'a> {
    pub router: &'static str,
    /// The `--router` value as given.
    pub spec: &'a str,
    pub version: &'static str,
    pub visible_tokens: usize,
    /// Routers that match characters or bytes: the unit, and the match in it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unit: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched_units: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_units: Option<usize>,
    pub decision: crate::routers::Decision,
    pub rule: &'a str,
}

impl<'a> AnswerView<'a> {
    pub fn new(a: &'a crate::routers::Answer) -> Self {
        AnswerView {
            router: a.router,
            spec: &a.label,
            version: a.version,
            visible_tokens: a.visible_tokens,
            unit: a.units.map(|u| u.unit),
            matched_units: a.units.map(|u| u.matched),
            input_units: a.units.map(|u| u.input),
            decision: a.decision,
            rule: &a.rule,
        }
    }
}

#[derive(Serialize)]
pub struct RolloverView<'a> {
    pub common_prefix_tokens: usize,
    pub rewrite_position: Option<usize>,
    pub class: Option<&'static str>,
    pub moved: bool,
    pub uncached: &'a [Uncached],
    /// With --remedies, when the divergence moves: the remedies across midnight, best first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remedies: Option<Vec<RemedyView<'a>>>,
}

impl<'a> ConversationView<'a> {
    fn new(c: &'a ConversationAudit) -> Self {
        let transitions = c
            .transitions
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut view = TransitionView::new(
                    t,
                    c.routers.get(i),
                    c.rollover.as_ref().and_then(|r| r.get(i)),
                );
                view.routers = c
                    .answers
                    .get(i)
                    .map(|a| a.iter().map(AnswerView::new).collect())
                    .unwrap_or_default();
                view.remedies = c.remedies.as_ref().and_then(|r| {
                    r.transitions
                        .iter()
                        .find(|x| x.from_prompt == t.from_prompt)
                        .map(|x| x.remedies.iter().map(RemedyView::new).collect())
                });
                view
            })
            .collect();
        ConversationView {
            source: &c.source,
            template: &c.template,
            remedy_sources: c.remedies.as_ref().map(|r| RemedySourcesView {
                history_switches: &r.switches,
                date_sources: &r.date_sources,
            }),
            transitions,
            refused: c.refused.as_ref().map(|r| RefusedView {
                request: r.request,
                reason: r.source.reason(),
                error: r.source.to_string(),
            }),
        }
    }
}

impl<'a> TransitionView<'a> {
    pub(crate) fn new(
        t: &'a Transition,
        router: Option<&'a RouterView>,
        shift: Option<&'a RolloverShift>,
    ) -> Self {
        TransitionView {
            from_prompt: t.from_prompt,
            to_prompt: t.to_prompt,
            held_tokens: t.held_tokens,
            next_prompt_tokens: t.next_prompt_tokens,
            common_prefix_tokens: t.common_prefix_tokens,
            rewrite: &t.rewrite,
            retokenization_drift: &t.retokenization_drift,
            uncached: &t.uncached,
            router: router.map(RouterJson::new),
            routers: Vec::new(),
            date_rollover: shift.map(|s| RolloverView {
                common_prefix_tokens: s.common_prefix_tokens,
                rewrite_position: s.rewrite_position,
                class: s.class.map(|c| c.name()),
                moved: s.moved,
                uncached: &s.uncached,
                remedies: s
                    .remedies
                    .as_ref()
                    .map(|r| r.iter().map(RemedyView::new).collect()),
            }),
            remedies: None,
        }
    }
}

impl<'a> RouterJson<'a> {
    fn new(r: &'a RouterView) -> Self {
        RouterJson {
            engine_block_size: r.engine_block_size,
            index_block_size: r.index_block_size,
            engine_cached_tokens: r.engine_cached_tokens,
            index_visible_tokens: r.index_visible_tokens,
            events_emitted: r.events_emitted,
            events_skipped: &r.events_skipped,
            decider: DeciderView {
                verdict: r.decision.verdict.name(),
                input_tokens: r.decision.input_tokens,
                cached_tokens: r.decision.cached_tokens,
                non_cached_tokens: r.decision.non_cached,
                rule: r.decision.rule.to_string(),
            },
        }
    }
}

impl<'a> ModelView<'a> {
    pub(crate) fn new(m: &'a crate::audit::ModelInfo) -> Self {
        ModelView {
            source: &m.source,
            server: m.server.name(),
            server_release: m.server.release(),
            template: &m.template_origin,
            template_sha256: &m.template_sha256,
            tokenizer_sha256: &m.tokenizer_sha256,
        }
    }
}

impl View for DiffTurnsReport {
    type View<'a> = DiffTurnsView<'a>;

    fn view(&self) -> DiffTurnsView<'_> {
        DiffTurnsView {
            schema_version: SCHEMA_VERSION,
            model: ModelView::new(&self.model),
            conversations: self
                .conversations
                .iter()
                .map(ConversationView::new)
                .collect(),
            errors: self
                .errors
                .iter()
                .map(|e| ErrorView {
                    source: &e.source,
                    error: &e.message,
                })
                .collect(),
        }
    }
}

impl Report for DiffTurnsReport {
    const NAME: &'static str = "diff-turns";

    fn exporter(&self, format: Format) -> Option<&dyn Exporter<Self>> {
        match format {
            Format::Human => Some(&human::Human),
            Format::Json => Some(&Json),
            Format::Markdown => Some(&Markdown),
            Format::Prometheus | Format::Sarif | Format::Junit | Format::Html => None,
        }
    }
}
