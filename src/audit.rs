//! The diff-turns pipeline: model files → rendered turns → tokens → alignment.

mod conversations;
mod error;
mod remedies;
mod render;

pub use conversations::*;
pub use render::*;

pub use error::{AuditError, FailureKind, hit_limit};
pub use remedies::{ConversationRemedies, Remedy, RemedyKind, TransitionRemedies};

use std::sync::Arc;

use anyhow::{Context, Result};
use serde_json::Value as Json;

use crate::align::{AlignOptions, RewriteClass, Transition, align_plan};
use crate::finding::{Finding, FindingKind};
use crate::model::ModelFiles;
use crate::render::{ChatRenderer, Clock, Conversation, field, plan_turns, reply::PlanOptions};
use crate::tokenize::{Tokenizer, sha256_hex};

#[derive(Debug, Clone)]
pub struct AuditSettings {
    pub clock: Clock,
    pub date_rollover: bool,
    pub plan: PlanOptions,
    pub align: AlignOptions,
    pub template_name: Option<String>,
    pub fuel: u64,
    /// Simulate the router's view of every transition.
    pub router: Option<crate::routers::llm_d::view::RouterSettings>,
    /// The routers asked about (`--router`), each answering every transition; llm-d's reads
    /// the `router` simulation above when its settings are those.
    pub routers: Vec<(std::sync::Arc<str>, crate::routers::Spec)>,
    /// Evaluate every applicable remedy for each rewrite point (`--remedies`).
    pub remedies: bool,
}

/// The name of the template `server` renders with: `--template-name` when given, else the
/// first of several named templates for a server that takes the first (SGLang 0.5.23), else
/// none (transformers' rule: `tool_use` with tools, `default` without).
pub fn template_name<'f>(
    files: &'f ModelFiles,
    server: crate::render::ServerProfile,
    name: Option<&'f str>,
) -> Option<&'f str> {
    name.or_else(|| {
        server
            .takes_first_named_template()
            .then(|| files.first_template_name())
            .flatten()
    })
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ModelInfo {
    pub source: String,
    /// The server profile the prompts were rendered as.
    pub server: crate::render::ServerProfile,
    pub template_origin: String,
    pub template_sha256: String,
    pub tokenizer_sha256: String,
}

/// How a transition changes when each prompt is rendered one day after the previous.
#[derive(Debug, Clone, PartialEq)]
pub struct RolloverShift {
    pub common_prefix_tokens: usize,
    pub rewrite_position: Option<usize>,
    pub class: Option<RewriteClass>,
    /// The divergence is earlier than on a single day.
    pub moved: bool,
    /// Tokens to compute again per block size, rendered across midnight.
    pub uncached: Vec<crate::align::Uncached>,
    /// With remedies asked for, on a transition whose divergence moves: the remedies of the
    /// transition as rendered across midnight (where pinning the date applies), best first.
    pub remedies: Option<Vec<Remedy>>,
}

#[derive(Debug, Clone)]
pub struct ConversationAudit {
    pub source: String,
    /// The template that rendered it (`tools` select `tool_use`, as transformers does).
    pub template: String,
    pub transitions: Vec<Transition>,
    /// The router's view of each transition, when asked for.
    pub routers: Vec<crate::routers::llm_d::view::RouterView>,
    /// Per transition, each `--router`'s answer, in the order given.
    pub answers: Vec<Vec<crate::routers::Answer>>,
    /// Replies, and those whose generated text was derived from the model's reasoning
    /// format (see [`crate::render::reply::Turn::derived`]).
    pub replies: usize,
    pub derived_replies: usize,
    /// One entry per transition when --date-rollover was asked for.
    pub rollover: Option<Vec<RolloverShift>>,
    /// The remedies of each rewrite point, when asked for.
    pub remedies: Option<ConversationRemedies>,
    /// The first request the server refuses: the transitions are those before it.
    pub refused: Option<crate::render::reply::Refused>,
}

/// A conversation that could not be audited (the others still are).
#[derive(Debug, Clone)]
pub struct ConversationError {
    pub source: String,
    /// The error and its causes, joined by ": ".
    pub message: String,
    /// kvaudit refused to evaluate the template (see
    /// [`crate::render::RenderError::is_limit`]).
    pub limit: bool,
    /// The server refuses one of its requests: the ones before it are audited (the
    /// conversation is also in the report's conversations).
    pub partial: bool,
}

#[derive(Debug, Clone)]
pub struct DiffTurnsReport {
    pub model: ModelInfo,
    pub conversations: Vec<ConversationAudit>,
    pub errors: Vec<ConversationError>,
}

impl DiffTurnsReport {
    /// The run's error when a conversation could not be audited: the first one's, alone when
    /// it is the only error and its conversation is reported up to the refused request, else
    /// with the count.
    pub fn first_error(&self) -> Option<anyhow::Error> {
        let e = self.errors.first()?;
        if self.errors.len() == 1 && e.partial {
            return Some(anyhow::anyhow!("{}: {}", e.source, e.message));
        }
        let unaudited = self.errors.iter().filter(|e| !e.partial).count();
        Some(anyhow::anyhow!(
            "{} of {} conversations could not be audited; the first, {}: {}",
            self.errors.len(),
            unaudited + self.conversations.len(),
            e.source,
            e.message
        ))
    }

    /// A rewrite point per diverging transition, and a date-rollover finding per transition
    /// whose next prompt diverges when rendered a day later.
    pub fn findings(&self) -> Vec<Finding> {
        let mut out = Vec::new();
        for c in &self.conversations {
            for t in &c.transitions {
                if let Some(r) = &t.rewrite {
                    out.push(Finding::new(
                        FindingKind::RewritePoint,
                        format!("{} turn {} -> {}", c.source, t.from_prompt, t.to_prompt),
                        format!(
                            "held {}, next {}, common prefix {}: rewrite at {} ({})",
                            t.held_tokens,
                            t.next_prompt_tokens,
                            t.common_prefix_tokens,
                            r.position,
                            r.class.name()
                        ),
                    ));
                }
            }
            for (t, r) in c.transitions.iter().zip(c.rollover.iter().flatten()) {
                if let Some(at) = r.rewrite_position {
                    out.push(Finding::new(
                        FindingKind::DateRollover,
                        format!("{} turn {} -> {}", c.source, t.from_prompt, t.to_prompt),
                        format!("a day later the next prompt diverges at {at}"),
                    ));
                }
            }
        }
        out
    }

    pub fn has_findings(&self) -> bool {
        !self.findings().is_empty()
    }
}

/// transformers adds a special token the tokenizer lacks as a new id, so renders with it could
/// not be tokenized like the reference: refuse instead of counting wrong tokens.
pub fn check_special_tokens(files: &ModelFiles, tok: &Tokenizer) -> Result<()> {
    for (name, value) in &files.special_tokens {
        let texts: Vec<&str> = match value {
            Json::String(s) => vec![s.as_str()],
            Json::Array(a) => a.iter().filter_map(Json::as_str).collect(),
            _ => Vec::new(),
        };
        for text in texts {
            if tok.token_id(text).is_none() {
                anyhow::bail!(
                    "tokenizer_config.json sets {name} to {text:?}, which is not a token of {}",
                    files.tokenizer_shown()
                );
            }
        }
    }
    Ok(())
}

/// Renders conversations with one model: the template chosen per conversation (tools select
/// `tool_use`), the model's stop tokens added to the reply rules.
struct Planner<'a> {
    files: &'a ModelFiles,
    settings: &'a AuditSettings,
    options: PlanOptions,
    /// Each selected template compiled once, by origin, shared by every conversation.
    renderers: std::sync::Mutex<Vec<(String, Arc<ChatRenderer>)>>,
}

/// One conversation, rendered.
pub struct Planned {
    template: crate::model::SelectedTemplate,
    renderer: Arc<ChatRenderer>,
    clock: Clock,
    plan: crate::render::TurnPlan,
}

impl Planned {
    /// The bytes of text the plan holds, roughly: what a queue of plans is bounded by.
    pub fn text_bytes(&self) -> usize {
        let p = &self.plan;
        let some = |v: &[Option<String>]| v.iter().flatten().map(String::len).sum::<usize>();
        p.turns
            .iter()
            .map(|t| t.prompt.len() + t.generated.len())
            .sum::<usize>()
            + some(&p.next_prompts)
            + some(&p.next_at_held_time)
            + some(&p.next_with_held_request)
    }
}

impl<'a> Planner<'a> {
    /// `extra_stops`: the texts of the model's stop tokens, which decide where a tool-call
    /// reply ends (and nothing else in a plan).
    fn new(files: &'a ModelFiles, settings: &'a AuditSettings, extra_stops: Vec<String>) -> Self {
        let mut options = settings.plan.clone();
        options.extra_stops.extend(extra_stops);
        Planner {
            files,
            settings,
            options,
            renderers: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// The planner of a model whose tokenizer is `tok`, once its special tokens check out.
    fn for_tokenizer(
        files: &'a ModelFiles,
        tok: &Tokenizer,
        settings: &'a AuditSettings,
    ) -> Result<Self> {
        check_special_tokens(files, tok)?;
        let stops = files
            .stop_token_ids
            .iter()
            .map(|&id| tok.token_text(id).into_owned())
            .collect();
        Ok(Planner::new(files, settings, stops))
    }

    /// The compiled renderer of a template, compiling it on first use.
    fn renderer(&self, template: &crate::model::SelectedTemplate) -> Result<Arc<ChatRenderer>> {
        let mut cache = self
            .renderers
            .lock()
            .map_err(|_| anyhow::anyhow!("a renderer thread panicked"))?;
        if let Some((_, r)) = cache.iter().find(|(origin, _)| *origin == template.origin) {
            return Ok(r.clone());
        }
        let r = Arc::new(
            ChatRenderer::new(
                &template.text,
                self.files.special_tokens.clone(),
                self.settings.fuel,
            )
            .with_context(|| format!("chat template {}", template.origin))?,
        );
        cache.push((template.origin.clone(), r.clone()));
        Ok(r)
    }

    /// The template a conversation renders with (tools select `tool_use`, as in
    /// transformers, or as the server profile decides), compiled, and the clock its prompts
    /// are rendered at.
    fn template(
        &self,
        conv: &Conversation,
    ) -> Result<(crate::model::SelectedTemplate, Arc<ChatRenderer>, Clock)> {
        let server = self.options.server;
        let has_tools = server.selects_tool_template(conv.any_tools());
        let name = template_name(self.files, server, self.settings.template_name.as_deref());
        let template = self.files.select_template(name, has_tools)?;
        let with_and_without = conv.tools_per_prompt.iter().any(Option::is_some)
            && conv.tools_per_prompt.iter().any(Option::is_none);
        if with_and_without
            && self.files.select_template(name, !has_tools)?.origin != template.origin
        {
            anyhow::bail!(
                "`tools_per_prompt` gives some prompts tools and others none, and this model \
                 renders those with different templates ({}); kvaudit renders one \
                 conversation with one template, so give every prompt a tool list (or none)",
                template.origin
            );
        }
        let renderer = self.renderer(&template)?;
        let clock = conv
            .clock
            .clone()
            .unwrap_or_else(|| self.settings.clock.clone());
        Ok((template, renderer, clock))
    }

    fn plan(&self, conv: &Conversation) -> Result<Planned> {
        let (template, renderer, clock) = self.template(conv)?;
        let plan = plan_turns(conv, &renderer, &clock, &self.options)?;
        Ok(Planned {
            template,
            renderer,
            clock,
            plan,
        })
    }
}

/// Renders conversations before the tokenizer is loaded, for [`Auditor::audit_planned`] to
/// finish once it is: a corpus run's workers render while the tokenizer loads. A plan does
/// not depend on the tokenizer except where a tool-call reply ends (at the model's stop
/// tokens, whose texts come from the tokenizer), so a conversation with a tool call in a reply
/// is not planned ahead.
pub struct PlanAhead<'a>(Planner<'a>);

impl<'a> PlanAhead<'a> {
    pub fn new(files: &'a ModelFiles, settings: &'a AuditSettings) -> PlanAhead<'a> {
        PlanAhead(Planner::new(files, settings, Vec::new()))
    }

    /// The plan [`Auditor::audit`] would make, when it can be made now. None also for a
    /// conversation that fails to plan: the auditor plans it again and reports its error.
    pub fn plan(&self, conv: &Conversation) -> Option<Planned> {
        if crate::render::reply::needs_stop_tokens(conv) {
            return None;
        }
        self.0.plan(conv).ok()
    }
}

pub fn diff_turns(
    files: &ModelFiles,
    tok: &Tokenizer,
    conversations: &[Conversation],
    settings: &AuditSettings,
) -> Result<DiffTurnsReport> {
    diff_turns_with_progress(files, tok, conversations, settings, |_, _| {})
}

/// [`diff_turns`], calling `on_conversation(index, source)` before each conversation.
pub fn diff_turns_with_progress(
    files: &ModelFiles,
    tok: &Tokenizer,
    conversations: &[Conversation],
    settings: &AuditSettings,
    on_conversation: impl Fn(usize, &str),
) -> Result<DiffTurnsReport> {
    let auditor = Auditor::new(files, tok, settings)?;
    let mut audits = Vec::new();
    let mut errors = Vec::new();
    for (i, conv) in conversations.iter().enumerate() {
        on_conversation(i, &conv.source);
        match auditor.audit(conv) {
            Ok(a) => {
                if let Some(r) = &a.refused {
                    errors.push(ConversationError {
                        source: conv.source.clone(),
                        limit: false,
                        partial: true,
                        message: format!("{r}: {}", r.source),
                    });
                }
                audits.push(a)
            }
            Err(e) => errors.push(ConversationError {
                source: conv.source.clone(),
                limit: e.hit_limit(),
                partial: false,
                message: e.message(),
            }),
        }
    }
    let mut model = auditor.model;
    // The model's template is the one that rendered the conversations: a conversation with
    // tools renders with `tool_use` where the model names one (as transformers does).
    let mut used: Vec<&str> = audits.iter().map(|c| c.template.as_str()).collect();
    used.sort_unstable();
    used.dedup();
    if let [only] = used.as_slice()
        && *only != model.template_origin
        && let Ok(t) = files.select_template(
            template_name(
                files,
                settings.plan.server,
                settings.template_name.as_deref(),
            ),
            true,
        )
        && t.origin == *only
    {
        model.template_sha256 = sha256_hex(t.text.as_bytes());
        model.template_origin = t.origin;
    } else if used.len() > 1 {
        model.template_origin = used.join(", ");
    }
    Ok(DiffTurnsReport {
        model,
        conversations: audits,
        errors,
    })
}

/// Audits conversations one at a time with one model, sharing compiled templates between
/// calls and threads: what `corpus` runs on each worker.
pub struct Auditor<'a> {
    planner: Planner<'a>,
    tok: &'a Tokenizer,
    settings: &'a AuditSettings,
    model: ModelInfo,
}

impl<'a> Auditor<'a> {
    pub fn new(
        files: &'a ModelFiles,
        tok: &'a Tokenizer,
        settings: &'a AuditSettings,
    ) -> Result<Auditor<'a>> {
        Auditor::adopting(files, tok, settings, None)
    }

    /// [`new`](Self::new), keeping the templates `ahead` compiled.
    pub fn adopting(
        files: &'a ModelFiles,
        tok: &'a Tokenizer,
        settings: &'a AuditSettings,
        ahead: Option<&PlanAhead<'a>>,
    ) -> Result<Auditor<'a>> {
        let planner = Planner::for_tokenizer(files, tok, settings)?;
        if let Some(ahead) = ahead
            && let (Ok(from), Ok(mut to)) = (ahead.0.renderers.lock(), planner.renderers.lock())
        {
            to.clone_from(&from);
        }
        let name = template_name(
            files,
            settings.plan.server,
            settings.template_name.as_deref(),
        );
        let default_template = files.select_template(name, false)?;
        let model = ModelInfo {
            source: files.source.clone(),
            server: settings.plan.server,
            template_origin: default_template.origin.clone(),
            template_sha256: sha256_hex(default_template.text.as_bytes()),
            tokenizer_sha256: tok.sha256().to_string(),
        };
        Ok(Auditor {
            planner,
            tok,
            settings,
            model,
        })
    }

    pub fn model(&self) -> &ModelInfo {
        &self.model
    }

    /// [`crate::align::divergence_views`] of a transition it audited, with its context.
    pub fn divergence_views(
        &self,
        t: &Transition,
    ) -> (
        Vec<crate::align::TokenView>,
        [Vec<crate::align::TokenView>; 2],
    ) {
        crate::align::divergence_views(self.tok, t, self.settings.align.context)
    }

    /// One conversation, exactly as `diff-turns` audits it.
    pub fn audit(&self, conv: &Conversation) -> Result<ConversationAudit, AuditError> {
        Ok(audit_conversation(
            &self.planner,
            self.tok,
            conv,
            self.settings,
        )?)
    }

    /// [`audit`](Self::audit) of a conversation [`PlanAhead`] has rendered already.
    pub fn audit_planned(
        &self,
        conv: &Conversation,
        planned: Planned,
    ) -> Result<ConversationAudit, AuditError> {
        Ok(audit_planned(
            &self.planner,
            self.tok,
            conv,
            planned,
            self.settings,
        )?)
    }

    /// The request a client sends for a conversation that ends with the prompt to send
    /// (`probe`): the messages with each earlier reply resent as [`plan_turns`] resends it, the
    /// kwargs and tools of that request, kvaudit's render of the prompt and its ids, and the
    /// transitions before it (the numbers diff-turns reports for the same conversation).
    pub fn next_request(&self, conv: &Conversation) -> Result<NextRequest> {
        let index = conv
            .messages
            .iter()
            .filter(|m| field(m, "role").and_then(Json::as_str) == Some("assistant"))
            .count();
        let kwargs = self.planner.options.kwargs_at(conv, index);
        let tools = conv.tools_at(index).cloned();
        if crate::render::reply::is_single_request(conv) {
            let (_, renderer, clock) = self.planner.template(conv)?;
            let prompt = crate::render::reply::render_single_request(
                conv,
                &renderer,
                &clock,
                &self.planner.options,
            )?;
            let prompt_ids = self.tok.encode(&prompt)?;
            return Ok(NextRequest {
                messages: conv
                    .messages
                    .iter()
                    .map(crate::render::resend::clean)
                    .collect(),
                kwargs,
                tools,
                prompt,
                prompt_ids,
                transitions: Vec::new(),
            });
        }
        let planned = self.planner.plan(conv)?;
        let Some(Some(prompt)) = planned.plan.next_prompts.last().cloned() else {
            anyhow::bail!("the conversation does not end with a message to answer");
        };
        let transitions = align_plan(&planned.plan, self.tok, &self.settings.align)?;
        let prompt_ids = match transitions.last() {
            Some(t) => t.next_ids.clone(),
            None => self.tok.encode(&prompt)?,
        };
        let mut turns = planned.plan.turns.iter();
        let mut messages = Vec::with_capacity(conv.messages.len());
        for m in &conv.messages {
            match (m.as_object(), field(m, "role").and_then(Json::as_str)) {
                (Some(obj), Some("assistant")) => {
                    let turn = turns
                        .next()
                        .context("the plan has fewer replies than the conversation")?;
                    messages.push(crate::render::resend::history_message(
                        obj,
                        conv.resend,
                        self.planner.options.server,
                        Some(&turn.generated),
                        turn.reasoning.as_deref(),
                    ));
                }
                _ => messages.push(crate::render::resend::clean(m)),
            }
        }
        Ok(NextRequest {
            messages,
            kwargs,
            tools,
            prompt,
            prompt_ids,
            transitions,
        })
    }
}

/// One request of a live chat, as kvaudit renders it (see [`Auditor::next_request`]).
#[derive(Debug, Clone)]
pub struct NextRequest {
    pub messages: Vec<Json>,
    /// The request's `chat_template_kwargs`.
    pub kwargs: serde_json::Map<String, Json>,
    pub tools: Option<Json>,
    pub prompt: String,
    pub prompt_ids: Vec<u32>,
    pub transitions: Vec<Transition>,
}

/// One conversation: its transitions, and the router and date-rollover views when asked for.
fn audit_conversation(
    planner: &Planner,
    tok: &Tokenizer,
    conv: &Conversation,
    settings: &AuditSettings,
) -> Result<ConversationAudit> {
    audit_planned(planner, tok, conv, planner.plan(conv)?, settings)
}

fn audit_planned(
    planner: &Planner,
    tok: &Tokenizer,
    conv: &Conversation,
    planned: Planned,
    settings: &AuditSettings,
) -> Result<ConversationAudit> {
    let transitions = align_plan(&planned.plan, tok, &settings.align)?;
    let remedies = if settings.remedies {
        Some(
            remedies::evaluate(planner, tok, conv, &planned, &transitions)
                .context("evaluating remedies (--remedies)")?,
        )
    } else {
        None
    };
    let rollover = if settings.date_rollover {
        let clock = Clock::Rollover(planned.clock.at(0).date());
        let plan = plan_turns(conv, &planned.renderer, &clock, &planner.options)
            .context("rendered a day later (--date-rollover)")?;
        let rolled = align_plan(&plan, tok, &settings.align)?;
        let mut shifts: Vec<RolloverShift> = rolled
            .iter()
            .zip(&transitions)
            .map(|(r, t)| RolloverShift {
                common_prefix_tokens: r.common_prefix_tokens,
                rewrite_position: r.rewrite.as_ref().map(|w| w.position),
                class: r.rewrite.as_ref().map(|w| w.class),
                moved: r.common_prefix_tokens < t.common_prefix_tokens,
                uncached: r.uncached.clone(),
                remedies: None,
            })
            .collect();
        // Only a divergence the date moves is new across midnight; the others have the
        // same-day remedies already.
        if settings.remedies && shifts.iter().any(|s| s.moved) {
            let across = Planned {
                template: planned.template.clone(),
                renderer: planned.renderer.clone(),
                clock,
                plan,
            };
            let found = remedies::evaluate(planner, tok, conv, &across, &rolled)
                .context("evaluating remedies across midnight (--remedies --date-rollover)")?;
            for (shift, r) in shifts.iter_mut().zip(&rolled) {
                if shift.moved {
                    shift.remedies = found
                        .transitions
                        .iter()
                        .find(|x| x.from_prompt == r.from_prompt)
                        .map(|x| x.remedies.clone());
                }
            }
        }
        Some(shifts)
    } else {
        None
    };
    let template = planned.template;
    let refused = planned.plan.refused.clone();
    let routers = match &settings.router {
        Some(r) => {
            let mut sim = crate::routers::llm_d::view::Simulator::new(r);
            transitions
                .iter()
                .map(|t| sim.run(t.prompt_tokens, &t.held_ids, &t.next_ids))
                .collect()
        }
        None => Vec::new(),
    };
    let answers = match &settings.router {
        Some(r) if !settings.routers.is_empty() => {
            router_answers(&settings.routers, r, &planned.plan, &transitions, &routers)
        }
        _ => Vec::new(),
    };
    Ok(ConversationAudit {
        source: conv.source.clone(),
        template: template.origin,
        transitions,
        routers,
        answers,
        replies: planned.plan.turns.len(),
        derived_replies: planned.plan.turns.iter().filter(|t| t.derived).count(),
        rollover,
        remedies,
        refused,
    })
}

/// Each router's answer for each transition. llm-d's reads `views` (the simulation of the
/// `router` settings) when its settings are those, and runs its own simulation otherwise.
fn router_answers(
    specs: &[(std::sync::Arc<str>, crate::routers::Spec)],
    base: &crate::routers::llm_d::view::RouterSettings,
    plan: &crate::render::reply::TurnPlan,
    transitions: &[Transition],
    views: &[crate::routers::llm_d::view::RouterView],
) -> Vec<Vec<crate::routers::Answer>> {
    use crate::routers::{Spec, TransitionView};
    let mut own: Vec<Option<crate::routers::llm_d::view::Simulator>> = specs
        .iter()
        .map(|(_, s)| match s {
            Spec::LlmD(l) if l != &crate::routers::llm_d::LlmD(base.clone()) => {
                Some(crate::routers::llm_d::view::Simulator::new(&l.0))
            }
            _ => None,
        })
        .collect();
    let model = base.index.model_name.as_deref().unwrap_or("");
    let request = |k: usize| -> &[Json] {
        let n = plan.request_messages.get(k).copied().unwrap_or(0);
        &plan.history[..n.min(plan.history.len())]
    };
    transitions
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let turn = TransitionView {
                prompt_tokens: t.prompt_tokens,
                held: &t.held_ids,
                next: &t.next_ids,
                request: request(t.from_prompt - 1),
                next_request: request(t.to_prompt - 1),
                engine_block_size: base.engine_block_size,
                model,
                index_view: None,
            };
            specs
                .iter()
                .zip(own.iter_mut())
                .map(|((label, spec), sim)| {
                    let view = sim
                        .as_mut()
                        .map(|s| s.run(t.prompt_tokens, &t.held_ids, &t.next_ids));
                    let turn = TransitionView {
                        index_view: view.as_ref().or(views.get(i)),
                        ..turn
                    };
                    let mut a = spec.router().answer(&turn);
                    a.label = label.clone();
                    a
                })
                .collect()
        })
        .collect()
}

/// The remedies of every rewrite point of one conversation, each measured by re-running the
/// audit under it (what `diff-turns --remedies` reports; `check` and `corpus` quote it).
pub fn remedies(
    files: &ModelFiles,
    tok: &Tokenizer,
    conv: &Conversation,
    settings: &AuditSettings,
) -> Result<ConversationRemedies> {
    let planner = Planner::for_tokenizer(files, tok, settings)?;
    let planned = planner.plan(conv)?;
    let transitions = align_plan(&planned.plan, tok, &settings.align)?;
    remedies::evaluate(&planner, tok, conv, &planned, &transitions)
}

/// Every rendered prompt of each conversation, tokenized: P_1 … P_m and the prompt after the
/// last reply (for `keys`).
pub fn conversation_prompts(
    files: &ModelFiles,
    tok: &Tokenizer,
    conversations: &[Conversation],
    settings: &AuditSettings,
) -> Result<Vec<(String, Vec<Vec<u32>>)>> {
    let planner = Planner::for_tokenizer(files, tok, settings)?;
    let mut out = Vec::new();
    for conv in conversations {
        let plan = planner
            .plan(conv)
            .with_context(|| format!("conversation {}", conv.source))?
            .plan;
        let mut texts: Vec<&str> = plan.turns.iter().map(|t| t.prompt.as_str()).collect();
        if let Some(Some(last)) = plan.next_prompts.last() {
            texts.push(last);
        }
        out.push((conv.source.clone(), tok.encode_each(texts)?));
    }
    Ok(out)
}
