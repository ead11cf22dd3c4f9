//! The `probe` report: each turn's server numbers beside kvaudit's, and the verdict.

mod human;

use serde::Serialize;

use super::diff_turns::ModelView;
use super::{Exporter, Format, Report, View};
use crate::align::{Drift, TokenView};
use crate::probe::{Engine, MoreReuse, ProbeReport, PromptDivergence, TurnResult, Verdict};

/// The JSON shape of the probe report.
pub const SCHEMA_VERSION: u32 = 1;

/// The reuse rule of each engine, in words (the `probe` module documents where it comes from).
pub fn rule(engine: Engine, block: usize) -> String {
    match engine {
        Engine::Llamacpp => {
            "llama.cpp: min(LCP, held, N-1), token by token (one slot's common prefix)".into()
        }
        Engine::Vllm => format!("vLLM: floor(min(LCP, held, N-1)/{block})*{block} (full blocks)"),
        Engine::Sglang => {
            format!("SGLang: floor(min(LCP, held, N-1)/{block})*{block} (full pages)")
        }
    }
}

#[derive(Serialize)]
pub struct ProbeView<'a> {
    pub schema_version: u32,
    pub server: ServerView<'a>,
    /// What kvaudit rendered with (`server`: the render profile), as diff-turns reports it.
    pub model: ModelView<'a>,
    pub conversation: &'a str,
    pub resend: &'static str,
    pub turns: Vec<TurnView<'a>>,
    pub summary: SummaryView,
}

#[derive(Serialize)]
pub struct ServerView<'a> {
    pub url: &'a str,
    pub engine: Engine,
    pub served_model: &'a str,
    pub block_size: usize,
    /// Where the block size came from: `--block-size`, `/metrics`, `/server_info` or
    /// `default`.
    pub block_size_from: &'static str,
    /// The release the server says it runs (SGLang's /server_info), when it says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<&'a str>,
    pub prediction: String,
}

#[derive(Serialize)]
pub struct TurnView<'a> {
    pub turn: usize,
    pub verdict: Verdict,
    /// With `reused_more`: what left the extra tokens cached (`cause`: `earlier_request` with
    /// its `turn` and `tokens`, `before_the_probe`, or `unexplained`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub more_reuse: Option<&'a MoreReuse>,
    pub server_prompt_tokens: usize,
    pub kvaudit_prompt_tokens: usize,
    /// Where the server's prompt ids came from (absent: it gave none).
    pub server_prompt_ids_from: Option<&'static str>,
    pub prompt_divergence: Option<&'a PromptDivergence>,
    pub server_cached_tokens: usize,
    /// The answer's field (absent: the answer had none, counted as 0).
    pub cached_field: Option<&'static str>,
    pub predicted_cached_tokens: Option<usize>,
    /// diff-turns' numbers for the transition into this prompt.
    pub common_prefix_tokens: Option<usize>,
    pub held_tokens: Option<usize>,
    pub generated_tokens: Option<usize>,
    /// `sampled` when the server returned the reply's ids, else `encoded`.
    pub generated_ids_from: &'static str,
    /// Where the reply's sampled ids and its re-encoded text part (in the held stream).
    pub retokenization_drift: Option<&'a Drift>,
    pub finish_reason: Option<&'a str>,
    pub pod: Option<&'a str>,
}

#[derive(Serialize)]
pub struct SummaryView {
    pub turns: usize,
    pub agree: usize,
    pub server_renders_differently: usize,
    pub reused_less: usize,
    pub reused_more: usize,
}

impl<'a> TurnView<'a> {
    fn new(t: &'a TurnResult, next: Option<&'a TurnResult>) -> Self {
        TurnView {
            turn: t.turn,
            verdict: t.verdict,
            more_reuse: t.more_reuse.as_ref(),
            server_prompt_tokens: t.server_prompt_tokens,
            kvaudit_prompt_tokens: t.kvaudit_prompt_tokens,
            server_prompt_ids_from: t.server_prompt_ids_from,
            prompt_divergence: t.prompt_divergence.as_ref(),
            server_cached_tokens: t.server_cached_tokens,
            cached_field: t.cached_field,
            predicted_cached_tokens: t.predicted_cached_tokens,
            common_prefix_tokens: t.transition.as_ref().map(|x| x.common_prefix_tokens),
            held_tokens: t.transition.as_ref().map(|x| x.held_tokens),
            generated_tokens: t.generated_tokens,
            generated_ids_from: if t.sampled_ids { "sampled" } else { "encoded" },
            retokenization_drift: t.drift(next),
            finish_reason: t.finish_reason.as_deref(),
            pod: t.pod.as_deref(),
        }
    }
}

pub fn summary(r: &ProbeReport) -> SummaryView {
    let n = |v: Verdict| r.turns.iter().filter(|t| t.verdict == v).count();
    SummaryView {
        turns: r.turns.len(),
        agree: n(Verdict::Agrees),
        server_renders_differently: n(Verdict::ServerRendersDifferently),
        reused_less: n(Verdict::ReusedLess),
        reused_more: n(Verdict::ReusedMore),
    }
}

pub fn resend_name(r: &ProbeReport) -> &'static str {
    use crate::render::ResendMode;
    match r.resend {
        ResendMode::AsGiven => "as_given",
        ResendMode::Content => "content",
        ResendMode::Raw => "raw",
        ResendMode::ReasoningField => "reasoning_field",
    }
}

impl View for ProbeReport {
    type View<'a> = ProbeView<'a>;

    fn view(&self) -> ProbeView<'_> {
        ProbeView {
            schema_version: SCHEMA_VERSION,
            server: ServerView {
                url: &self.server,
                engine: self.engine,
                served_model: &self.served_model,
                block_size: self.block_size,
                block_size_from: self.block_size_from,
                version: self.server_version.as_deref(),
                prediction: rule(self.engine, self.block_size),
            },
            model: ModelView::new(&self.model),
            conversation: &self.source,
            resend: resend_name(self),
            turns: self
                .turns
                .iter()
                .enumerate()
                .map(|(i, t)| TurnView::new(t, self.turns.get(i + 1)))
                .collect(),
            summary: summary(self),
        }
    }
}

impl Report for ProbeReport {
    const NAME: &'static str = "probe";

    fn exporter(&self, format: Format) -> Option<&dyn Exporter<Self>> {
        super::human_or_json(format, &human::Human)
    }
}

/// Tokens as `text·id` pairs, control characters spelled out.
pub fn tokens_line(tokens: &[TokenView]) -> String {
    tokens
        .iter()
        .map(|t| format!("{}·{}", super::visible(&t.text), t.id))
        .collect::<Vec<_>>()
        .join(" ")
}
