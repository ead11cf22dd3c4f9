//! The diff-turns pipeline: model files → rendered turns → tokens → alignment.

mod remedies;

pub use remedies::{ConversationRemedies, Remedy, RemedyKind, TransitionRemedies};

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use serde_json::{Value as Json, json};

use crate::align::{AlignOptions, RewriteClass, Transition, align_plan};
use crate::finding::{Finding, FindingKind};
use crate::model::{HubSettings, ModelFiles, fetch_detailed, is_hub_id};
use crate::render::{
    ChatRenderer, Clock, Conversation, ResendMode, field, plan_turns, reply::PlanOptions,
};
use crate::tokenize::{Tokenizer, sha256_hex};

/// Where to find a model and which of its files to override.
#[derive(Debug, Clone, Default)]
pub struct ModelSpec {
    pub model: String,
    pub revision: Option<String>,
    pub offline: bool,
    pub template: Option<PathBuf>,
    pub tokenizer: Option<PathBuf>,
    pub progress: bool,
}

/// The model's tokenizer as `server` tokenizes prompts: llama.cpp without tokenizer.json's
/// Unicode normalization ([`Tokenizer::from_file_as_llamacpp`]), the others as transformers;
/// a GGUF's tokenizer, made as llama.cpp makes it, for every server.
pub fn tokenizer_for(
    files: &ModelFiles,
    server: crate::render::ServerProfile,
) -> Result<Tokenizer, crate::tokenize::TokenizeError> {
    match server {
        // A GGUF's tokenizer is llama.cpp's own already.
        crate::render::ServerProfile::Llamacpp if files.gguf.is_none() => {
            Tokenizer::from_file_as_llamacpp(&files.tokenizer_path)
        }
        _ => Tokenizer::from_file(&files.tokenizer_path),
    }
    .map_err(|e| match &files.gguf {
        // The tokenizer.json made from a GGUF is kvaudit's file: name the user's.
        Some(g) => crate::tokenize::TokenizeError::Load {
            path: g.file.display().to_string(),
            message: format!(
                "the tokenizer made from its metadata: {}",
                without_path(&e, &files.tokenizer_path)
            ),
        },
        None => e,
    })
}

/// An error's words without the path it names (the made file's, which means nothing to a user).
fn without_path(e: &crate::tokenize::TokenizeError, path: &Path) -> String {
    use crate::tokenize::TokenizeError as E;
    match e {
        E::Read { source, .. } => source.to_string(),
        E::Load { message, .. } => message.clone(),
        E::Encode(m) => m.clone(),
    }
    .replace(&path.display().to_string(), "tokenizer.json")
}

/// Why `spec` names no model, in the words a user needs: a file that is not one kvaudit reads,
/// or a path that does not exist (with the part that is missing, and the nearest sibling
/// directory when one is a likely typo).
fn not_a_model(spec: &str) -> String {
    const KINDS: &str = "a model directory (holding tokenizer.json and tokenizer_config.json), \
                         a GGUF file, or a Hub id of the form org/name[@revision]";
    let path = Path::new(spec);
    if path.exists() {
        return format!("model {spec:?} is a file; kvaudit reads {KINDS}");
    }
    // The deepest part of the path that exists, and the first that does not.
    let mut missing = path;
    while let Some(parent) = missing.parent() {
        if parent.as_os_str().is_empty() || parent.is_dir() {
            break;
        }
        missing = parent;
    }
    let mut text = format!("model {spec:?}: {} does not exist", missing.display());
    let parent = match missing.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let near = missing.file_name().and_then(|typed| {
        let dirs: Vec<String> = std::fs::read_dir(parent)
            .ok()?
            .take(10_000)
            .flatten()
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        crate::suggest::closest(&typed.to_string_lossy(), dirs.iter().map(String::as_str))
            .map(|name| missing.with_file_name(name))
    });
    match near {
        Some(near) => text.push_str(&format!(" (did you mean {}?)", near.display())),
        None => text.push_str(", and it is not a Hub id of the form org/name[@revision]"),
    }
    text
}

/// The model's files: a directory (a directory wins over a Hub id of the same spelling, as in
/// transformers), a GGUF file, or a Hub id fetched into the Hugging Face cache.
pub fn resolve_model(spec: &ModelSpec) -> Result<ModelFiles> {
    let path = Path::new(&spec.model);
    let mut fetched = None;
    let mut gguf = None;
    let named_gguf = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gguf"));
    let dir = if path.is_dir() {
        path.to_path_buf()
    } else if path.is_file() && (named_gguf || crate::model::gguf::is_gguf(path)) {
        // A file named .gguf that is not one gets the reader's own word on what is wrong.
        let (dir, origin) = crate::model::gguf::materialize(path)?;
        gguf = Some(origin);
        dir
    } else if std::fs::symlink_metadata(path).is_err() && !named_gguf && is_hub_id(&spec.model) {
        // Only a name that is nothing on this machine is asked of the Hub: a local path never
        // becomes a network request, nor does a missing GGUF file.
        let settings = HubSettings::from_env(spec.offline)?;
        let f = fetch_detailed(
            &spec.model,
            spec.revision.as_deref(),
            &settings,
            spec.progress,
        )?;
        let dir = f.snapshot.clone();
        fetched = Some(f);
        dir
    } else {
        anyhow::bail!("{}", not_a_model(&spec.model));
    };
    let mut files = ModelFiles::from_dir(
        &dir,
        &spec.model,
        spec.template.as_deref(),
        spec.tokenizer.as_deref(),
    )
    .map_err(|e| match &gguf {
        Some(g) => anyhow::anyhow!(
            "{}: the files made from its metadata: {e}",
            g.file.display()
        ),
        None => e.into(),
    })?;
    files.fetched = fetched;
    files.gguf = gguf;
    Ok(files)
}

#[derive(Debug, Clone)]
pub struct AuditSettings {
    pub clock: Clock,
    pub date_rollover: bool,
    pub plan: PlanOptions,
    pub align: AlignOptions,
    pub template_name: Option<String>,
    pub fuel: u64,
    /// Simulate the router's view of every transition.
    pub router: Option<crate::index::router::RouterSettings>,
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
    pub routers: Vec<crate::index::router::RouterView>,
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

/// Whether `e` is, or was caused by, a render that went past one of kvaudit's limits.
pub fn hit_limit(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<crate::render::RenderError>()
            .is_some_and(crate::render::RenderError::is_limit)
    })
}

#[derive(Debug, Clone)]
pub struct DiffTurnsReport {
    pub model: ModelInfo,
    pub conversations: Vec<ConversationAudit>,
    pub errors: Vec<ConversationError>,
}

impl DiffTurnsReport {
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
                limit: hit_limit(&e),
                partial: false,
                message: e
                    .chain()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(": "),
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
    pub fn audit(&self, conv: &Conversation) -> Result<ConversationAudit> {
        audit_conversation(&self.planner, self.tok, conv, self.settings)
    }

    /// [`audit`](Self::audit) of a conversation [`PlanAhead`] has rendered already.
    pub fn audit_planned(
        &self,
        conv: &Conversation,
        planned: Planned,
    ) -> Result<ConversationAudit> {
        audit_planned(&self.planner, self.tok, conv, planned, self.settings)
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
            let mut sim = crate::index::router::Simulator::new(r);
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
    base: &crate::index::router::RouterSettings,
    plan: &crate::render::reply::TurnPlan,
    transitions: &[Transition],
    views: &[crate::index::router::RouterView],
) -> Vec<Vec<crate::routers::Answer>> {
    use crate::routers::{Spec, Turn, answer};
    let mut own: Vec<Option<crate::index::router::Simulator>> = specs
        .iter()
        .map(|(_, s)| match s {
            Spec::LlmD(l) if l != &crate::routers::spec::LlmD(base.clone()) => {
                Some(crate::index::router::Simulator::new(&l.0))
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
            let turn = Turn {
                prompt_tokens: t.prompt_tokens,
                held: &t.held_ids,
                next: &t.next_ids,
                request: request(t.from_prompt - 1),
                next_request: request(t.to_prompt - 1),
                engine_block_size: base.engine_block_size,
                model,
            };
            specs
                .iter()
                .zip(own.iter_mut())
                .map(|((label, spec), sim)| {
                    let view = sim
                        .as_mut()
                        .map(|s| s.run(t.prompt_tokens, &t.held_ids, &t.next_ids));
                    let mut a = answer(spec, &turn, view.as_ref().or(views.get(i)));
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

/// The seed write-up's probe: one short question and answer, then three follow-ups of
/// growing length (a five-token thanks, a one-line and a three-line question).
pub const PROBE_QUESTION: &str = "What is the difference between a process and a thread?";
pub const PROBE_REASONING: &str = "The user asks about processes versus threads. I should contrast memory isolation, creation cost and how they share data.";
pub const PROBE_ANSWER: &str = "A process is an independent program with its own memory space, while a thread is a unit of execution inside a process. Threads of the same process share memory, so they are cheaper to create but need synchronization.";
pub const PROBE_FOLLOW_UPS: [(&str, &str); 3] = [
    ("probe:thanks", "Thanks, makes sense."),
    (
        "probe:one-line",
        "Could you also explain how this changes when the two threads run on multiple CPU cores?",
    ),
    (
        "probe:three-line",
        "That helps a lot. I am building a small web crawler that downloads a few thousand pages and parses them. Should I use threads, processes, or asyncio for that, and how would the answer change if parsing each page took a noticeable amount of CPU time each?",
    ),
];

/// One question, one reply, one follow-up: the quick form of a conversation.
pub struct QuickTurn<'a> {
    pub source: String,
    pub system: Option<&'a str>,
    pub user: &'a str,
    pub reply: &'a str,
    pub reasoning: Option<&'a str>,
    pub follow_up: &'a str,
    pub resend: ResendMode,
}

pub fn quick_conversation(q: &QuickTurn) -> Conversation {
    let mut messages: Vec<Json> = Vec::new();
    if let Some(s) = q.system {
        messages.push(json!({"role": "system", "content": s}));
    }
    messages.push(json!({"role": "user", "content": q.user}));
    let mut reply = json!({"role": "assistant", "content": q.reply});
    if let Some(r) = q.reasoning {
        reply["reasoning_content"] = Json::String(r.to_string());
    }
    messages.push(reply);
    messages.push(json!({"role": "user", "content": q.follow_up}));
    Conversation::of_messages(&q.source, messages, q.resend)
}

pub fn probe_conversations(system: Option<&str>, resend: ResendMode) -> Vec<Conversation> {
    PROBE_FOLLOW_UPS
        .iter()
        .map(|(name, follow_up)| {
            quick_conversation(&QuickTurn {
                source: name.to_string(),
                system,
                user: PROBE_QUESTION,
                reply: PROBE_ANSWER,
                reasoning: Some(PROBE_REASONING),
                follow_up,
                resend,
            })
        })
        .collect()
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

/// Which part of each conversation `render` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenderSelection {
    /// Every prompt, P_1 to the prompt after the last reply.
    AllPrompts,
    /// Prompt N (1-based).
    Prompt(usize),
    /// What the decode server holds after generation N: prompt N and its reply, without the
    /// stop token (transition N -> N+1).
    Held(usize),
}

/// One token of a rendered text.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedToken {
    pub id: u32,
    /// The token decoded on its own (a piece of a multi-byte character shows as U+FFFD).
    pub text: String,
    /// An added token marked special in tokenizer.json.
    pub special: bool,
}

/// A prompt exactly as rendered, and its token ids.
#[derive(Debug, Clone)]
pub struct RenderedPrompt {
    /// 1-based.
    pub number: usize,
    pub text: String,
    pub ids: Vec<u32>,
    /// Each token's own text, when asked for.
    pub tokens: Option<Vec<RenderedToken>>,
}

/// The held stream of one transition: `prompt_N ++ generated_N`, the ids diff-turns aligns.
#[derive(Debug, Clone)]
pub struct HeldStream {
    /// N of transition N -> N+1.
    pub from_prompt: usize,
    pub prompt_text: String,
    pub generated_text: String,
    /// The conversation's `generated_ids` were used (else the generated text, encoded).
    pub sampled_ids: bool,
    pub prompt_tokens: usize,
    /// Prompt ids, then generated ids.
    pub ids: Vec<u32>,
    pub tokens: Option<Vec<RenderedToken>>,
}

#[derive(Debug, Clone)]
pub struct RenderedConversation {
    pub source: String,
    pub template_origin: String,
    pub template_sha256: String,
    /// How many prompts the conversation renders to (before any selection).
    pub prompt_count: usize,
    pub prompts: Vec<RenderedPrompt>,
    pub held: Vec<HeldStream>,
    /// The first request the server refuses: the prompts stop before it.
    pub refused: Option<crate::render::reply::Refused>,
}

#[derive(Debug, Clone)]
pub struct RenderedConversations {
    pub model_source: String,
    pub tokenizer_sha256: String,
    pub conversations: Vec<RenderedConversation>,
}

/// The prompts kvaudit renders for each conversation (the ones diff-turns aligns), or the
/// held stream of one transition. A conversation without an assistant message is one request
/// and renders to one prompt. `tokens` adds each token's own text.
pub fn render_conversations(
    files: &ModelFiles,
    tok: &Tokenizer,
    conversations: &[Conversation],
    settings: &AuditSettings,
    selection: RenderSelection,
    tokens: bool,
) -> Result<RenderedConversations> {
    let planner = Planner::for_tokenizer(files, tok, settings)?;
    let special = if tokens {
        tok.special_ids()
    } else {
        Default::default()
    };
    let pieces = |ids: &[u32]| {
        tokens.then(|| {
            ids.iter()
                .map(|&id| RenderedToken {
                    id,
                    text: tok.token_text(id).into_owned(),
                    special: special.contains(&id),
                })
                .collect::<Vec<_>>()
        })
    };
    let mut out = Vec::new();
    for conv in conversations {
        let context = || format!("conversation {}", conv.source);
        let (template, texts, turns, refused) = if crate::render::reply::is_single_request(conv) {
            let (template, renderer, clock) = planner.template(conv)?;
            let text = crate::render::reply::render_single_request(
                conv,
                &renderer,
                &clock,
                &planner.options,
            )
            .with_context(context)?;
            (template, vec![text], Vec::new(), None)
        } else {
            let Planned { template, plan, .. } = planner.plan(conv)?;
            let mut texts: Vec<String> = plan.turns.iter().map(|t| t.prompt.clone()).collect();
            if let Some(Some(last)) = plan.next_prompts.last() {
                texts.push(last.clone());
            }
            // A turn is a transition only when a prompt follows it.
            let turns: Vec<crate::render::Turn> = plan
                .turns
                .into_iter()
                .zip(&plan.next_prompts)
                .filter(|(_, next)| next.is_some())
                .map(|(t, _)| t)
                .collect();
            (template, texts, turns, plan.refused)
        };
        let count = texts.len();
        let mut rendered = RenderedConversation {
            source: conv.source.clone(),
            template_sha256: sha256_hex(template.text.as_bytes()),
            template_origin: template.origin,
            prompt_count: count,
            prompts: Vec::new(),
            held: Vec::new(),
            refused: None,
        };
        // A prompt or transition at or past the refused request is that refusal.
        let refused_error = |n: usize| {
            refused
                .as_ref()
                .filter(|r| r.request <= n)
                .map(|r| anyhow::anyhow!("conversation {}: {r}: {}", conv.source, r.source))
        };
        match selection {
            RenderSelection::AllPrompts | RenderSelection::Prompt(_) => {
                let mut base = None;
                for (i, text) in texts.into_iter().enumerate() {
                    let number = i + 1;
                    if matches!(selection, RenderSelection::Prompt(n) if n != number) {
                        continue;
                    }
                    let encoded = tok
                        .encode_after(&text, base.as_ref())
                        .with_context(context)?;
                    let ids = encoded.ids().to_vec();
                    base = Some(encoded);
                    rendered.prompts.push(RenderedPrompt {
                        number,
                        tokens: pieces(&ids),
                        text,
                        ids,
                    });
                }
                if let RenderSelection::Prompt(n) = selection
                    && rendered.prompts.is_empty()
                {
                    if let Some(e) = refused_error(n) {
                        return Err(e);
                    }
                    anyhow::bail!(
                        "conversation {} has {count} prompt{}, so there is no prompt {n}",
                        conv.source,
                        if count == 1 { "" } else { "s" }
                    );
                }
            }
            RenderSelection::Held(n) => {
                let Some(turn) = n.checked_sub(1).and_then(|k| turns.get(k)) else {
                    if let Some(e) = refused_error(n + 1) {
                        return Err(e);
                    }
                    let have = match turns.len() {
                        0 => "no transition (no assistant reply is followed by a prompt)".into(),
                        1 => "one transition, 1 -> 2".into(),
                        t => format!("transitions 1 -> 2 to {t} -> {}", t + 1),
                    };
                    anyhow::bail!(
                        "conversation {} has {have}, so there is no held stream {n} -> {}",
                        conv.source,
                        n.saturating_add(1)
                    );
                };
                // The same ids align_plan holds: prompt N, then the sampled ids when the
                // conversation gives them, else the generated text encoded.
                let mut ids = tok.encode(&turn.prompt).with_context(context)?;
                let prompt_tokens = ids.len();
                match &turn.generated_ids {
                    Some(sampled) => ids.extend_from_slice(sampled),
                    None => ids.extend(tok.encode(&turn.generated).with_context(context)?),
                }
                rendered.held.push(HeldStream {
                    from_prompt: n,
                    prompt_text: turn.prompt.clone(),
                    generated_text: turn.generated.clone(),
                    sampled_ids: turn.generated_ids.is_some(),
                    prompt_tokens,
                    tokens: pieces(&ids),
                    ids,
                });
            }
        }
        if selection == RenderSelection::AllPrompts {
            rendered.refused = refused;
        }
        out.push(rendered);
    }
    Ok(RenderedConversations {
        model_source: files.source.clone(),
        tokenizer_sha256: tok.sha256().to_string(),
        conversations: out,
    })
}
