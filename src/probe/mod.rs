//! `probe`: a live multi-turn chat through an OpenAI-compatible server, the server's own
//! prompt and cached-token counts beside kvaudit's render and prediction for the same messages.
//!
//! Each turn sends the conversation so far (temperature 0, a fixed seed), takes the reply as a
//! client resends it ([`crate::render::resend::history_message`], the `--resend` modes), and
//! renders the same request with kvaudit ([`crate::audit::Auditor::next_request`]: the
//! diff-turns pipeline, so the common prefix, held tokens and drift are diff-turns' numbers for
//! the recorded conversation). The prediction of what the server reuses on turn k+1:
//!
//! - vLLM and SGLang: `floor(min(LCP, held', N - 1) / B) · B`. Only full blocks (pages) are
//!   cached, and neither engine lets a hit cover the whole prompt (vLLM's `get_computed_blocks`
//!   and SGLang's radix match stop at `N - 1`; server-preprocessing.md 1.9, 2.7).
//! - llama.cpp: `min(LCP, held', N - 1)`, token by token. llama-server keeps the slot's tokens
//!   and reuses their common prefix with the new prompt (`get_common_prefix`), then gives back
//!   one token when that covers the whole prompt ("need to evaluate at least 1 token"); one
//!   slot (`-np 1`) and no `--cache-reuse` chunk shifting make this exact.
//!
//! `held'` is the held stream whose KV was computed: the prompt and every sampled token but the
//! last one sampled (an end-of-turn token is not part of the reply; a reply cut at
//! `max_tokens` ends with a token that was sampled but never fed back).

pub mod http;
pub mod wire;

use anyhow::{Context, Result};
use serde_json::{Map, Value as Json, json};

use crate::align::{Drift, TokenView, Transition, views};
use crate::audit::{AuditSettings, Auditor, ModelInfo};
use crate::model::ModelFiles;
use crate::render::{Conversation, ResendMode, ServerProfile};
use crate::tokenize::Tokenizer;

pub use http::{Client, HttpSettings};
pub use wire::Engine;

/// Why a probe stopped (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("{0}")]
    Usage(String),
    #[error("cannot reach the server at {server}: {why}")]
    Unreachable { server: String, why: String },
    #[error("{endpoint} answered HTTP {status}{}", message.as_ref().map(|m| format!(": {m}")).unwrap_or_default())]
    Status {
        endpoint: String,
        status: u16,
        message: Option<String>,
    },
    #[error("{endpoint}: {why}")]
    Protocol { endpoint: String, why: String },
    #[error("{server} reports no cached-token count ({what}): {hint}")]
    NoCachedTokens {
        server: String,
        what: String,
        hint: String,
    },
}

/// How the probe runs.
#[derive(Debug, Clone)]
pub struct ProbeSettings {
    /// The engine behind the URL and the release whose rendering applies (`--server`);
    /// `None`: the engine read from `/v1/models` (`owned_by`), its newest release.
    pub server: Option<ServerProfile>,
    /// The `model` field of each request; `None`: the first model `/v1/models` lists.
    pub served_model: Option<String>,
    /// At most this many requests (default: every prompt of the conversation).
    pub turns: Option<usize>,
    pub max_tokens: u32,
    pub seed: u64,
    /// The server's KV block (vLLM) or page (SGLang) size; default per engine.
    pub block_size: Option<usize>,
    /// Response headers that name the pod that answered (a router's), first found wins.
    pub pod_headers: Vec<String>,
    pub audit: AuditSettings,
}

/// Response headers routers use to say where a request went.
pub const DEFAULT_POD_HEADERS: [&str; 4] = [
    "x-gateway-destination-endpoint",
    "x-llm-d-pod",
    "x-pod-name",
    "x-served-by",
];

/// What a turn's numbers say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Agrees,
    /// The server's prompt is not kvaudit's render of the same messages (another template,
    /// other preprocessing, a BOS): every other number of the turn is moot.
    ServerRendersDifferently,
    /// Eviction, another block size, another pod.
    ReusedLess,
    /// The cache held more than this chat left in it (an earlier identical chat, a router
    /// sending the turn to a pod that had the prefix).
    ReusedMore,
}

impl Verdict {
    /// For a table cell.
    pub fn short(self) -> &'static str {
        match self {
            Verdict::Agrees => "agrees",
            Verdict::ServerRendersDifferently => "renders differently",
            Verdict::ReusedLess => "reused less",
            Verdict::ReusedMore => "reused more",
        }
    }

    pub fn words(self) -> &'static str {
        match self {
            Verdict::Agrees => "agrees",
            Verdict::ServerRendersDifferently => "server renders differently",
            Verdict::ReusedLess => "server reused less than predicted",
            Verdict::ReusedMore => "server reused more than predicted",
        }
    }
}

/// What left the server holding more of a prompt than the turn before it did: the cause a
/// "reused more" verdict is shown with.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "cause", rename_all = "snake_case")]
pub enum MoreReuse {
    /// An earlier request of this probe shares a longer prefix with this prompt than the
    /// turn before it: its `tokens` (the engine's reusable part of that prefix) were still
    /// cached.
    EarlierRequest { turn: usize, tokens: usize },
    /// The cache held part of this conversation before the probe began (turn 1 was served
    /// with cached tokens): an earlier run, or another client sending the same chat.
    BeforeTheProbe { turn_1_cached_tokens: usize },
    /// Nothing this probe sent explains it (another client, or a pod that held the prefix).
    Unexplained,
}

/// Why `cached` tokens of `prompt` were reused when fewer were predicted: the earlier request
/// (its prompt and what it generated, as `sent`) whose reusable common prefix with `prompt`
/// covers them, else the cache before the probe, else unexplained.
pub fn explain_more_reuse(
    engine: Engine,
    block: usize,
    prompt: &[u32],
    cached: usize,
    sent: &[Vec<u32>],
    turn_1_cached: usize,
) -> MoreReuse {
    let reusable = |shared: usize| {
        let shared = shared.min(prompt.len().saturating_sub(1));
        match engine {
            Engine::Llamacpp => shared,
            Engine::Vllm | Engine::Sglang => shared / block.max(1) * block,
        }
    };
    let best = sent
        .iter()
        .enumerate()
        .map(|(j, ids)| (reusable(crate::align::common_prefix(ids, prompt)), j + 1))
        .max_by_key(|&(tokens, turn)| (tokens, std::cmp::Reverse(turn)));
    match best {
        Some((tokens, turn)) if tokens >= cached => MoreReuse::EarlierRequest { turn, tokens },
        _ if turn_1_cached > 0 => MoreReuse::BeforeTheProbe {
            turn_1_cached_tokens: turn_1_cached,
        },
        _ => MoreReuse::Unexplained,
    }
}

/// Where the server's prompt ids and kvaudit's first differ.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PromptDivergence {
    pub position: usize,
    pub server: Vec<TokenView>,
    pub kvaudit: Vec<TokenView>,
}

/// One request and what came back.
#[derive(Debug, Clone)]
pub struct TurnResult {
    /// 1-based.
    pub turn: usize,
    pub server_prompt_tokens: usize,
    pub kvaudit_prompt_tokens: usize,
    /// Where the server's prompt ids came from, when it gave them (`prompt_token_ids`, or
    /// llama-server's `/apply-template` + `/tokenize`).
    pub server_prompt_ids_from: Option<&'static str>,
    pub prompt_divergence: Option<PromptDivergence>,
    pub server_cached_tokens: usize,
    /// The answer's field it came from (`None`: absent, counted as 0).
    pub cached_field: Option<&'static str>,
    /// kvaudit's prediction (none for turn 1: what the cache held before is unknown).
    pub predicted_cached_tokens: Option<usize>,
    /// diff-turns' transition into this prompt (turn 2 on).
    pub transition: Option<Transition>,
    /// The reply's length in tokens: sampled ids, else its text encoded (unknown for the last
    /// turn then: no transition encodes it).
    pub generated_tokens: Option<usize>,
    /// Whether the server returned the sampled ids (else the reply's text is encoded).
    pub sampled_ids: bool,
    pub finish_reason: Option<String>,
    /// The pod that answered, when a router's response header says.
    pub pod: Option<String>,
    pub verdict: Verdict,
    /// With a "reused more" verdict: what left the extra tokens cached.
    pub more_reuse: Option<MoreReuse>,
}

impl TurnResult {
    /// The reply's retokenization drift, from the transition out of this turn.
    pub fn drift<'a>(&self, next: Option<&'a TurnResult>) -> Option<&'a Drift> {
        next?.transition.as_ref()?.retokenization_drift.as_ref()
    }
}

#[derive(Debug, Clone)]
pub struct ProbeReport {
    /// The server, scheme://host:port.
    pub server: String,
    pub engine: Engine,
    pub served_model: String,
    pub block_size: usize,
    /// `--block-size`, `/metrics` (vLLM's cache_config_info), `/server_info` (SGLang's
    /// page_size) or `default`.
    pub block_size_from: &'static str,
    /// The release the server says it runs, where it says (SGLang's /server_info).
    pub server_version: Option<String>,
    pub model: ModelInfo,
    pub source: String,
    pub resend: ResendMode,
    pub turns: Vec<TurnResult>,
    /// The conversation as it happened (replies with `generated` and `generated_ids`): what
    /// `diff-turns --conversation` audits to the same numbers.
    pub recorded: Json,
}

impl ProbeReport {
    pub fn all_agree(&self) -> bool {
        self.turns.iter().all(|t| t.verdict == Verdict::Agrees)
    }
}

/// The render profile of an engine.
pub fn profile(engine: Engine) -> ServerProfile {
    match engine {
        Engine::Vllm => ServerProfile::Vllm,
        Engine::Sglang => ServerProfile::Sglang(Default::default()),
        Engine::Llamacpp => ServerProfile::Llamacpp,
    }
}

/// When the server names its release and it is not the one kvaudit renders as: what to say
/// (a difference shows as "server renders differently" where the releases disagree).
pub fn release_mismatch(report: &ProbeReport) -> Option<String> {
    let running = report.server_version.as_deref()?;
    let rendered = report.model.server.release()?;
    (running != rendered).then(|| {
        format!(
            "the server runs {} {running:?}; kvaudit renders as {} (--server {}@RELEASE picks \
             another it knows: see --help)",
            report.engine.name(),
            report.model.server.label(),
            report.engine.name(),
        )
    })
}

/// The engine a render profile stands for (`None` for transformers).
pub fn engine_of(profile: ServerProfile) -> Option<Engine> {
    match profile {
        ServerProfile::Vllm => Some(Engine::Vllm),
        ServerProfile::Sglang(_) => Some(Engine::Sglang),
        ServerProfile::Llamacpp => Some(Engine::Llamacpp),
        ServerProfile::Transformers => None,
    }
}

/// What the server can reuse of prompt k+1 after turn k (the module's rule).
pub fn predict_cached(engine: Engine, block: usize, t: &Transition) -> usize {
    // held_tokens already leaves out the last token of a reply cut at max_tokens (the
    // conversation records its finish_reason).
    let reusable = t
        .common_prefix_tokens
        .min(t.held_tokens)
        .min(t.next_prompt_tokens.saturating_sub(1));
    match engine {
        Engine::Llamacpp => reusable,
        Engine::Vllm | Engine::Sglang => match block {
            0 => 0,
            b => reusable / b * b,
        },
    }
}

/// The verdict of one turn from its numbers.
pub fn verdict(
    server_prompt: usize,
    kvaudit_prompt: usize,
    divergence: bool,
    cached: usize,
    predicted: Option<usize>,
) -> Verdict {
    if server_prompt != kvaudit_prompt || divergence {
        return Verdict::ServerRendersDifferently;
    }
    match predicted {
        Some(p) if cached < p => Verdict::ReusedLess,
        Some(p) if cached > p => Verdict::ReusedMore,
        _ => Verdict::Agrees,
    }
}

/// The requests of a conversation: the messages each prompt adds (the file's assistant
/// messages mark where a reply goes; the live server writes the replies).
pub fn user_segments(conv: &Conversation) -> Result<Vec<Vec<Json>>, ProbeError> {
    let mut segments: Vec<Vec<Json>> = vec![Vec::new()];
    for (i, m) in conv.messages.iter().enumerate() {
        let role = m.get("role").and_then(Json::as_str).unwrap_or("");
        let calls = m
            .get("tool_calls")
            .and_then(Json::as_array)
            .is_some_and(|a| !a.is_empty());
        if role == "tool" || role == "ipython" || role == "function" || calls {
            return Err(ProbeError::Usage(format!(
                "{}: message {i} is a tool call or tool result; probe replays the user turns \
                 against the live model, which does not make the file's tool calls, so pick a \
                 conversation without tools",
                conv.source
            )));
        }
        if role == "assistant" {
            if segments.last().is_some_and(|s| !s.is_empty()) {
                segments.push(Vec::new());
            }
        } else {
            if let Some(last) = segments.last_mut() {
                last.push(crate::render::resend::clean(m));
            }
        }
    }
    segments.retain(|s| !s.is_empty());
    if segments.is_empty() {
        return Err(ProbeError::Usage(format!(
            "{}: no user message to send",
            conv.source
        )));
    }
    Ok(segments)
}

/// The ids a reply carries: the sampled ids without the trailing stop tokens (their KV is
/// never computed, and the reply's text does not hold them).
fn reply_ids(ids: &[u32], stops: &[u32]) -> Vec<u32> {
    let mut end = ids.len();
    while end > 0 && stops.contains(&ids[end - 1]) {
        end -= 1;
    }
    ids[..end].to_vec()
}

/// First position where two id lists differ (the shorter one's end when one extends the other).
fn first_difference(a: &[u32], b: &[u32]) -> Option<usize> {
    let at = crate::align::common_prefix(a, b);
    (at < a.len() || at < b.len()).then_some(at)
}

/// Tokens shown on each side of a prompt divergence.
const CONTEXT: usize = 8;

/// Run the chat. `conv` gives the user turns (its assistant messages, if any, only say where
/// replies go), its tools, kwargs and resend mode.
pub fn run(
    client: &Client,
    files: &ModelFiles,
    tokenizer: &dyn Fn(ServerProfile) -> Result<Tokenizer>,
    conv: &Conversation,
    settings: &ProbeSettings,
) -> Result<ProbeReport> {
    // Which engine, and the model name to ask for.
    // Why /v1/models said nothing, when it failed (a wrong key answers 401 here first).
    let mut models_failed = None;
    let (listed_model, listed_engine) =
        if settings.server.is_none() || settings.served_model.is_none() {
            match client.get("/models", true) {
                Ok(answer) => wire::parse_models(&answer),
                Err(e @ ProbeError::Unreachable { .. }) => return Err(e.into()),
                Err(e) => {
                    models_failed = Some(e.to_string());
                    (None, None)
                }
            }
        } else {
            (None, None)
        };
    let named = settings.server.and_then(engine_of);
    let engine = match named.or(listed_engine) {
        Some(e) => e,
        None => {
            let why = match models_failed {
                Some(e) => format!("asking {}/v1/models failed ({e})", client.shown()),
                None => format!(
                    "{}/v1/models does not say which engine serves it",
                    client.shown()
                ),
            };
            return Err(ProbeError::Usage(format!(
                "{why}; give --server vllm, sglang or llamacpp"
            ))
            .into());
        }
    };
    let served_model = settings
        .served_model
        .clone()
        .or(listed_model)
        .unwrap_or_else(|| files.source.clone());
    // The server's own block size where it says it: vLLM's /metrics carries its cache config,
    // SGLang's /server_info its page size (and its version).
    let from_metrics = || {
        client
            .get_text("/metrics", false)
            .ok()
            .and_then(|text| wire::metrics_block_size(&text))
    };
    let server_info = match engine {
        Engine::Sglang => client
            .get("/server_info", false)
            .ok()
            .map(|a| wire::sglang_server_info(&a.body)),
        _ => None,
    }
    .unwrap_or_default();
    let (block, block_size_from) = match (settings.block_size, engine) {
        (Some(b), _) => (b, "--block-size"),
        (None, Engine::Vllm) => match from_metrics() {
            Some(b) => (b, "/metrics"),
            None => (engine.default_block_size(), "default"),
        },
        (None, Engine::Sglang) => match server_info.page_size {
            Some(b) => (b, "/server_info"),
            None => (engine.default_block_size(), "default"),
        },
        (None, _) => (engine.default_block_size(), "default"),
    };
    if block == 0 {
        return Err(ProbeError::Usage("--block-size must be positive".into()).into());
    }
    let mut audit = settings.audit.clone();
    let server = settings
        .server
        .filter(|p| engine_of(*p) == Some(engine))
        .unwrap_or(profile(engine));
    audit.plan.server = server;
    let tok = &tokenizer(server)?;
    let auditor = Auditor::new(files, tok, &audit)?;
    let segments = user_segments(conv)?;
    let k = settings.turns.unwrap_or(segments.len()).min(segments.len());
    if k == 0 {
        return Err(ProbeError::Usage("--turns must be at least 1".into()).into());
    }
    let mut stops: Vec<u32> = files.stop_token_ids.clone();
    if let Some(eos) = files
        .special_tokens
        .get("eos_token")
        .and_then(Json::as_str)
        .and_then(|t| tok.token_id(t))
    {
        stops.push(eos);
    }

    let mut messages: Vec<Json> = Vec::new();
    let mut turns: Vec<TurnResult> = Vec::new();
    // What each request left for the engine to hold: its prompt, and its reply's sampled ids
    // but the last (whose KV is never written).
    let mut sent: Vec<Vec<u32>> = Vec::new();
    let mut any_cached_field = false;
    for (i, segment) in segments.iter().take(k).enumerate() {
        let turn = i + 1;
        messages.extend(segment.iter().cloned());
        let so_far = Conversation {
            messages: messages.clone(),
            ..conv.clone()
        };
        let request = auditor
            .next_request(&so_far)
            .with_context(|| format!("kvaudit's render of turn {turn}"))?;
        let body = wire::chat_body(
            engine,
            &wire::ChatRequest {
                model: &served_model,
                messages: &request.messages,
                tools: request.tools.as_ref(),
                kwargs: &request.kwargs,
                max_tokens: settings.max_tokens,
                seed: settings.seed,
            },
        );
        let answer = client
            .post("/chat/completions", true, &body)
            .with_context(|| format!("turn {turn}"))?;
        let reply = wire::parse_chat(engine, &answer).with_context(|| format!("turn {turn}"))?;
        if reply.has_tool_calls {
            return Err(ProbeError::Protocol {
                endpoint: "/v1/chat/completions".into(),
                why: format!(
                    "turn {turn}: the model answered with a tool call; probe sends no tool \
                     results, so it stops here"
                ),
            }
            .into());
        }
        any_cached_field |= reply.cached_field.is_some();
        if engine == Engine::Llamacpp && reply.cached_field.is_none() {
            return Err(ProbeError::NoCachedTokens {
                server: client.shown().to_string(),
                what: format!("turn {turn}"),
                hint: engine.cached_tokens_flag().into(),
            }
            .into());
        }
        // The server's own prompt ids: in the answer (vLLM, SGLang with return_token_ids), or
        // llama-server's render of the same body, tokenized as it tokenizes prompts.
        let (server_ids, ids_from) = match (&reply.prompt_ids, engine) {
            (Some(ids), _) => (Some(ids.clone()), Some("prompt_token_ids")),
            (None, Engine::Llamacpp) => {
                let text = wire::parse_applied_template(
                    &client
                        .post("/apply-template", false, &body)
                        .with_context(|| format!("turn {turn}"))?,
                )?;
                let ids = wire::parse_tokenized(
                    &client
                        .post(
                            "/tokenize",
                            false,
                            &json!({"content": text, "add_special": true, "parse_special": true}),
                        )
                        .with_context(|| format!("turn {turn}"))?,
                )?;
                (Some(ids), Some("/apply-template + /tokenize"))
            }
            (None, _) => (None, None),
        };
        let prompt_divergence = server_ids.as_ref().and_then(|server| {
            first_difference(server, &request.prompt_ids).map(|at| PromptDivergence {
                position: at,
                server: views(tok, &server[at..(at + CONTEXT).min(server.len())]),
                kvaudit: views(
                    tok,
                    &request.prompt_ids[at..(at + CONTEXT).min(request.prompt_ids.len())],
                ),
            })
        });
        let transition = request.transitions.last().cloned();
        let predicted = transition
            .as_ref()
            .map(|t| predict_cached(engine, block, t));
        let cached = reply.cached_tokens.unwrap_or(0);
        let generated_ids = reply
            .generated_ids
            .as_ref()
            .map(|ids| reply_ids(ids, &stops));
        let turn_verdict = verdict(
            reply.prompt_tokens,
            request.prompt_ids.len(),
            prompt_divergence.is_some(),
            cached,
            predicted,
        );
        let more_reuse = (turn_verdict == Verdict::ReusedMore).then(|| {
            let turn_1_cached = turns.first().map_or(0, |t| t.server_cached_tokens);
            explain_more_reuse(
                engine,
                block,
                &request.prompt_ids,
                cached,
                &sent,
                turn_1_cached,
            )
        });
        let mut held = request.prompt_ids.clone();
        if let Some(ids) = &reply.generated_ids {
            held.extend_from_slice(&ids[..ids.len().saturating_sub(1)]);
        }
        sent.push(held);
        turns.push(TurnResult {
            turn,
            server_prompt_tokens: reply.prompt_tokens,
            kvaudit_prompt_tokens: request.prompt_ids.len(),
            server_prompt_ids_from: ids_from,
            verdict: turn_verdict,
            more_reuse,
            prompt_divergence,
            server_cached_tokens: cached,
            cached_field: reply.cached_field,
            predicted_cached_tokens: predicted,
            transition,
            generated_tokens: generated_ids.as_ref().map(Vec::len),
            sampled_ids: generated_ids.is_some(),
            finish_reason: reply.finish_reason.clone(),
            pod: settings
                .pod_headers
                .iter()
                .find_map(|h| answer.header(h))
                .map(|p| p.chars().filter(|c| !c.is_control()).take(200).collect()),
        });
        // The reply as the conversation records it: the server's content and reasoning, and
        // with sampled ids, the text they decode to (what the model generated).
        let mut assistant = Map::new();
        assistant.insert("role".into(), json!("assistant"));
        assistant.insert("content".into(), json!(reply.content));
        if let Some(r) = &reply.reasoning {
            assistant.insert("reasoning_content".into(), json!(r));
        }
        if let Some(ids) = &generated_ids {
            assistant.insert("generated".into(), json!(tok.decode(ids)));
            assistant.insert("generated_ids".into(), json!(ids));
        }
        // A reply cut at max_tokens holds one token less: diff-turns reads this.
        if let Some(reason) = &reply.finish_reason {
            assistant.insert("finish_reason".into(), json!(reason));
        }
        messages.push(Json::Object(assistant));
    }
    // vLLM and SGLang leave the field out when nothing was cached; never seeing it where
    // reuse was predicted means the server does not report it.
    if !any_cached_field && turns.iter().any(|t| t.predicted_cached_tokens > Some(0)) {
        return Err(ProbeError::NoCachedTokens {
            server: client.shown().to_string(),
            what: format!("{} turns", turns.len()),
            hint: engine.cached_tokens_flag().into(),
        }
        .into());
    }
    // Without sampled ids, a reply's length is its text encoded: the next transition's.
    for i in 1..turns.len() {
        if !turns[i - 1].sampled_ids {
            turns[i - 1].generated_tokens = turns[i]
                .transition
                .as_ref()
                .map(|t| t.held_tokens.saturating_sub(t.prompt_tokens));
        }
    }
    let mut recorded = json!({"messages": messages});
    if let Some(tools) = &conv.tools {
        recorded["tools"] = tools.clone();
    }
    if !conv.template_kwargs.is_empty() {
        recorded["template_kwargs"] = Json::Object(conv.template_kwargs.clone());
    }
    Ok(ProbeReport {
        server: client.shown().to_string(),
        engine,
        served_model,
        block_size: block,
        block_size_from,
        server_version: server_info.version,
        model: auditor.model().clone(),
        source: conv.source.clone(),
        resend: conv.resend,
        turns,
        recorded,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transition(held: usize, next: usize, lcp: usize) -> Transition {
        Transition {
            from_prompt: 1,
            to_prompt: 2,
            held_tokens: held,
            next_prompt_tokens: next,
            common_prefix_tokens: lcp,
            prompt_tokens: held / 2,
            rewrite: None,
            retokenization_drift: None,
            uncached: Vec::new(),
            before: Vec::new(),
            sides: Default::default(),
            held_ids: Vec::new(),
            next_ids: Vec::new(),
        }
    }

    #[test]
    fn vllm_counts_full_blocks_below_the_prompt_length() {
        // LCP 45 -> two blocks of 16.
        assert_eq!(
            predict_cached(Engine::Vllm, 16, &transition(50, 80, 45)),
            32
        );
        // The whole prompt held: capped at N - 1 = 63 -> three blocks.
        assert_eq!(
            predict_cached(Engine::Vllm, 16, &transition(70, 64, 64)),
            48
        );
        // SGLang's default page of 1: N - 1.
        assert_eq!(
            predict_cached(Engine::Sglang, 1, &transition(70, 64, 64)),
            63
        );
    }

    #[test]
    fn llamacpp_reuses_token_by_token_less_the_unfed_last_token() {
        assert_eq!(
            predict_cached(Engine::Llamacpp, 1, &transition(50, 80, 45)),
            45
        );
        // Held fully extended by the next prompt: all of it.
        assert_eq!(
            predict_cached(Engine::Llamacpp, 1, &transition(50, 80, 50)),
            50
        );
    }

    #[test]
    fn verdict_puts_a_render_difference_first() {
        assert_eq!(
            verdict(10, 11, false, 5, Some(5)),
            Verdict::ServerRendersDifferently
        );
        assert_eq!(
            verdict(10, 10, true, 5, Some(5)),
            Verdict::ServerRendersDifferently
        );
        assert_eq!(verdict(10, 10, false, 4, Some(5)), Verdict::ReusedLess);
        assert_eq!(verdict(10, 10, false, 6, Some(5)), Verdict::ReusedMore);
    }

    #[test]
    fn more_reuse_is_traced_to_the_request_that_left_it() {
        // Turn 3's prompt repeats turn 1's first 70 tokens but parts from turn 2's at 40.
        let prompt: Vec<u32> = (0..100).collect();
        let turn_1: Vec<u32> = (0..70).chain([999]).collect();
        let turn_2: Vec<u32> = (0..40).chain([998; 30]).collect();
        let sent = [turn_1, turn_2];
        let explain =
            |engine, cached, before| explain_more_reuse(engine, 32, &prompt, cached, &sent, before);
        // vLLM reuses full blocks of the 70 shared tokens: 64.
        assert_eq!(
            explain(Engine::Vllm, 64, 0),
            MoreReuse::EarlierRequest {
                turn: 1,
                tokens: 64
            }
        );
        // llama.cpp reuses them token by token.
        assert_eq!(
            explain(Engine::Llamacpp, 70, 0),
            MoreReuse::EarlierRequest {
                turn: 1,
                tokens: 70
            }
        );
        // More than any request left: from before the probe when turn 1 found some cached,
        // else unexplained.
        assert_eq!(
            explain(Engine::Vllm, 96, 16),
            MoreReuse::BeforeTheProbe {
                turn_1_cached_tokens: 16
            }
        );
        assert_eq!(explain(Engine::Vllm, 96, 0), MoreReuse::Unexplained);
        // The last prompt token is never reused, so a request equal to the prompt leaves N-1.
        let whole = [prompt.clone()];
        assert_eq!(
            explain_more_reuse(Engine::Llamacpp, 32, &prompt, 99, &whole, 0),
            MoreReuse::EarlierRequest {
                turn: 1,
                tokens: 99
            }
        );
        assert_eq!(verdict(10, 10, false, 3, None), Verdict::Agrees);
    }

    #[test]
    fn stop_tokens_are_dropped_from_the_end_only() {
        assert_eq!(reply_ids(&[7, 9, 7, 9, 9], &[9]), vec![7, 9, 7]);
        assert_eq!(first_difference(&[1, 2, 3], &[1, 2]), Some(2));
        assert_eq!(first_difference(&[1, 2], &[1, 2]), None);
    }
}
