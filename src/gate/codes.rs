//! The one table of finding codes: what each means and what to do about it. `check
//! --explain`, `--list-codes`, SARIF rules, docs/codes.md and the tests all read this table,
//! so a code cannot mean two things in two places.

use serde::{Deserialize, Serialize};

use crate::align::RewriteClass;
use crate::finding::FindingKind;

/// What the gate does with a finding of a code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Not reported.
    Allow,
    /// Reported, never fails.
    Note,
    /// Reported, never fails.
    Warn,
    /// Fails the gate (exit 1).
    Deny,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::Allow => "allow",
            Level::Note => "note",
            Level::Warn => "warn",
            Level::Deny => "deny",
        }
    }

    /// The shared severity slot of [`crate::finding::Finding`].
    pub fn severity(self) -> Option<crate::finding::Severity> {
        use crate::finding::Severity;
        match self {
            Level::Allow => None,
            Level::Note => Some(Severity::Note),
            Level::Warn => Some(Severity::Warning),
            Level::Deny => Some(Severity::Error),
        }
    }
}

/// Which config knob sets a code's level besides `[gate] levels`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Knob {
    /// `[gate] rewrite`.
    Rewrite,
    /// `[gate] date_rollover`.
    DateRollover,
    None,
}

/// A stable finding code. The numbers never change meaning; new kinds get new numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Code {
    ReasoningDropped,
    GenerationPrefillNotReplayed,
    DateChanged,
    ContentTrimmed,
    SystemMoved,
    Retokenized,
    RewriteOther,
    RequestChanged,
    UncachedAboveCeiling,
    DateRollover,
    RetokenizationDrift,
    TemplateError,
    SpecialTokenMissing,
    IndexBehindEngine,
    DeciderPrefill,
    RouterBlockSize,
    RouterReadsApproximate,
    NonCachedTooLow,
    RouterUnmodelled,
    RouterSendsElsewhere,
    RouterCannotRender,
    EventsNotReceived,
    TopicPodNotEndpoint,
    EventsUndecodable,
    CommonPrefixShrank,
    UncachedGrew,
    NewRewriteClass,
    IndexVisibilityFell,
    Improvement,
    UnusedAllow,
}

pub struct CodeInfo {
    pub code: Code,
    pub id: &'static str,
    pub name: &'static str,
    pub default_level: Level,
    pub knob: Knob,
    pub meaning: &'static str,
    pub help: &'static str,
}

pub const CODES: &[CodeInfo] = &[
    CodeInfo {
        code: Code::ReasoningDropped,
        id: "KVA101",
        name: "reasoning_dropped",
        default_level: Level::Deny,
        knob: Knob::Rewrite,
        meaning: "The template does not render the reply's reasoning back into history, so the next prompt diverges from what the decode server holds at the start of the reply: everything after it is computed again.",
        help: "send the reasoning back (resend = \"raw\" or \"reasoning_field\" with a template that renders it), or use a template that keeps the reasoning of past turns in history",
    },
    CodeInfo {
        code: Code::GenerationPrefillNotReplayed,
        id: "KVA102",
        name: "generation_prefill_not_replayed",
        default_level: Level::Deny,
        knob: Knob::Rewrite,
        meaning: "The generation prompt pre-fills text (typically an empty <think></think> block when thinking is off) that history does not render again for that turn.",
        help: "render the same pre-filled block for past assistant turns as the generation prompt adds (e.g. keep the empty think block in history)",
    },
    CodeInfo {
        code: Code::DateChanged,
        id: "KVA103",
        name: "date_changed",
        default_level: Level::Deny,
        knob: Knob::Rewrite,
        meaning: "strftime_now printed another date in the next prompt than in the held one.",
        help: "pin the date: pass date_string (or the template's date kwarg) per conversation instead of calling strftime_now",
    },
    CodeInfo {
        code: Code::ContentTrimmed,
        id: "KVA104",
        name: "content_trimmed",
        default_level: Level::Deny,
        knob: Knob::Rewrite,
        meaning: "History trims whitespace the model generated, so the reply is rendered back with other tokens.",
        help: "render message content as sent (no |trim on assistant content), or strip the reply the same way before it is generated (stop sequences)",
    },
    CodeInfo {
        code: Code::SystemMoved,
        id: "KVA105",
        name: "system_moved",
        default_level: Level::Deny,
        knob: Knob::Rewrite,
        meaning: "The system prompt is rendered at another place in the next prompt (e.g. moved next to the last user message).",
        help: "render the system prompt once at the start of the conversation and never move it",
    },
    CodeInfo {
        code: Code::Retokenized,
        id: "KVA106",
        name: "retokenized",
        default_level: Level::Deny,
        knob: Knob::Rewrite,
        meaning: "The next prompt has the same characters as the held stream but they tokenize differently at the seam.",
        help: "end each rendered turn with a special token or a newline the tokenizer cannot merge with what follows",
    },
    CodeInfo {
        code: Code::RewriteOther,
        id: "KVA107",
        name: "rewrite_other",
        default_level: Level::Deny,
        knob: Knob::Rewrite,
        meaning: "The next prompt rewrites the held stream for a reason kvaudit does not classify.",
        help: "run `kvaudit diff-turns` on this model and conversation to see both sides of the divergence",
    },
    CodeInfo {
        code: Code::RequestChanged,
        id: "KVA108",
        name: "request_changed",
        default_level: Level::Deny,
        knob: Knob::Rewrite,
        meaning: "The request changed its template kwargs or tools since the held prompt, and the template prints them before the history ends (e.g. reasoning_effort in the system header).",
        help: "keep the kwargs and tools of a conversation fixed between requests, or move what varies after the history; `kvaudit diff-turns --remedies` prices each fix",
    },
    CodeInfo {
        code: Code::UncachedAboveCeiling,
        id: "KVA201",
        name: "uncached_above_ceiling",
        default_level: Level::Deny,
        knob: Knob::None,
        meaning: "A transition leaves more tokens to compute at a block size than [gate] max_uncached allows.",
        help: "fix the rewrite point that causes it, or raise the ceiling in [gate] max_uncached if the cost is accepted",
    },
    CodeInfo {
        code: Code::DateRollover,
        id: "KVA202",
        name: "date_rollover",
        default_level: Level::Warn,
        knob: Knob::DateRollover,
        meaning: "Rendered a day later (a conversation across midnight), the next prompt diverges earlier than on one day: the template prints today's date.",
        help: "pin the date kwarg (e.g. date_string) for the whole conversation instead of strftime_now",
    },
    CodeInfo {
        code: Code::RetokenizationDrift,
        id: "KVA203",
        name: "retokenization_drift",
        default_level: Level::Warn,
        knob: Knob::None,
        meaning: "The sampled ids (generated_ids) differ from the tokenizer's encoding of the same text, so the text sent back cannot reproduce what the server holds.",
        help: "send token ids back where the server accepts them, or accept the drift; it is a property of the tokenizer, not the template",
    },
    CodeInfo {
        code: Code::TemplateError,
        id: "KVA301",
        name: "template_error",
        default_level: Level::Deny,
        knob: Knob::None,
        meaning: "The template raised an exception or could not be rendered for a scenario.",
        help: "make the template render this conversation (see the template's message), or drop the scenario if the conversation is invalid for the model",
    },
    CodeInfo {
        code: Code::SpecialTokenMissing,
        id: "KVA302",
        name: "special_token_missing",
        default_level: Level::Deny,
        knob: Knob::None,
        meaning: "tokenizer_config.json names a special token that is not a token of tokenizer.json, so prompts cannot be tokenized as transformers would.",
        help: "add the token to tokenizer.json's added_tokens, or fix the name in tokenizer_config.json",
    },
    CodeInfo {
        code: Code::IndexBehindEngine,
        id: "KVA401",
        name: "index_behind_engine",
        default_level: Level::Warn,
        knob: Knob::None,
        meaning: "llm-d's index sees fewer tokens of the next prompt than the engine holds (events shorter than an index block are skipped).",
        help: "use an index block size that divides the engine's events, or a template whose rewrite point falls on a block boundary",
    },
    CodeInfo {
        code: Code::DeciderPrefill,
        id: "KVA402",
        name: "decider_prefill",
        default_level: Level::Warn,
        knob: Knob::None,
        meaning: "With what the engine holds the turn would stay decode-only, but the decider sees only the index and sends it to a prefill pod.",
        help: "make the index see what the engine holds (see KVA401), or raise the decider's non-cached-tokens threshold",
    },
    CodeInfo {
        code: Code::RouterBlockSize,
        id: "KVA403",
        name: "router_block_size",
        default_level: Level::Deny,
        knob: Knob::None,
        meaning: "A router configuration's block size cannot see what the decode pod holds: llm-d's precise index at a block size that is neither vLLM's nor a divisor of it drops every decode-time block (the reply), and Dynamo or vllm-router's kv_aware at any size but the engine's drop every event.",
        help: "set the router's block size to the engine's (llm-d: tokenProcessorConfig.blockSizeTokens equal to vLLM's --block-size or a divisor of it; Dynamo: --kv-cache-block-size equal to it)",
    },
    CodeInfo {
        code: Code::RouterReadsApproximate,
        id: "KVA404",
        name: "router_reads_approximate",
        default_level: Level::Deny,
        knob: Knob::None,
        meaning: "llm-d's prefix-cache-scorer or prefix-based-pd-decider reads the approximate producer, which records requests only: it never credits a decode pod with the reply it generated.",
        help: "name the precise producer in both plugins' prefixMatchInfoProducerName",
    },
    CodeInfo {
        code: Code::NonCachedTooLow,
        id: "KVA405",
        name: "non_cached_tokens_too_low",
        default_level: Level::Warn,
        knob: Knob::None,
        meaning: "The P/D decider's nonCachedTokens is under two engine blocks: a follow-up turn leaves the partial last block and the template's turn markers uncached, so nearly every turn goes to a prefill pod.",
        help: "pick nonCachedTokens from `kvaudit corpus` on your traffic (its non_cached_tokens table gives the share of turns each value keeps on the decode pod)",
    },
    CodeInfo {
        code: Code::RouterUnmodelled,
        id: "KVA406",
        name: "router_unmodelled",
        default_level: Level::Note,
        knob: Knob::None,
        meaning: "The router configuration names a plugin, producer or mode kvaudit does not model: its effect is not in the figures.",
        help: "check what it does by hand, or ask for it to be modelled",
    },
    CodeInfo {
        code: Code::RouterSendsElsewhere,
        id: "KVA407",
        name: "router_sends_elsewhere",
        default_level: Level::Warn,
        knob: Knob::None,
        meaning: "With what the decode pod holds the turn could stay on it (the P/D decider, reading the engine's view, keeps it decode-only), but a router asked about with `routers` / `--router` sends it elsewhere.",
        help: "see the router's rule in the message: a router that keys on the request never credits the reply; Dynamo needs --router-conditional-disagg and the engine's block size",
    },
    CodeInfo {
        code: Code::RouterCannotRender,
        id: "KVA408",
        name: "router_cannot_render",
        default_level: Level::Deny,
        knob: Knob::None,
        meaning: "vllm-router's cache_aware policy asks every worker to render each request, and the engine's serving flags (--engine-args) refuse it: vLLM 0.32 answers /v1/chat/completions/render with 403 unless started with --enable-scale-out, and the router then routes every turn by load alone, without a word.",
        help: "start every vLLM worker with --enable-scale-out; `kvaudit watch --router vllm-router` shows the cost live (misrouted: sent elsewhere against its rule)",
    },
    CodeInfo {
        code: Code::EventsNotReceived,
        id: "KVA409",
        name: "events_not_received",
        default_level: Level::Deny,
        knob: Knob::None,
        meaning: "llm-d's precise producer never receives the engine's KV events: the engine's flags (--engine-args) publish none (no --kv-events-config; for vLLM, enable_kv_cache_events not true; the null publisher), or publish under a topic that does not start with the producer's kvEventsConfig.topicFilter (\"kv@\" unless set; a topic such as \"kv-events\" reaches llm-d's subscriber 0 times). Nothing is logged; every lookup scores 0.",
        help: "give the engine --kv-events-config with a topic of the form kv@POD@MODEL, or set the producer's topicFilter to the engine's topic's prefix",
    },
    CodeInfo {
        code: Code::TopicPodNotEndpoint,
        id: "KVA410",
        name: "topic_pod_not_endpoint",
        default_level: Level::Deny,
        knob: Knob::None,
        meaning: "llm-d reads each event's model from its topic (kv@POD@MODEL), and with one bound socket for every pod (kvEventsConfig.zmqEndpoint) its pod too, scoring endpoints by IP address:port. The engine's topic has no model part, or (one socket) names no address:port: every event is indexed where no lookup finds it, and every lookup scores 0.",
        help: "publish under kv@ADDRESS:PORT@MODEL, the address and port the scheduler knows the pod by and the model the requests name (e.g. kv@$(POD_IP):8000@Qwen/Qwen3-8B in the pod spec)",
    },
    CodeInfo {
        code: Code::EventsUndecodable,
        id: "KVA411",
        name: "events_undecodable",
        default_level: Level::Deny,
        knob: Knob::None,
        meaning: "llm-d's precise producer decodes the engine's KV events with its sglang adapter (kvEventsConfig.engineType: sglang), which reads each event as a positional array; SGLang 0.5.23 and vLLM 0.26 on send each event as a map keyed by field name. Every message fails to decode (llm-d logs `failed to decode SGLang event`) and is dropped; every lookup scores 0.",
        help: "set kvEventsConfig.engineType to vllm (its adapter reads the tagged maps of both engines), or leave it out",
    },
    CodeInfo {
        code: Code::CommonPrefixShrank,
        id: "KVA501",
        name: "common_prefix_shrank",
        default_level: Level::Deny,
        knob: Knob::None,
        meaning: "Against the baseline, the next prompt shares fewer tokens with what the server holds.",
        help: "compare the old and new template with `kvaudit check --template NEW --baseline-template OLD`, or accept it with `kvaudit check --update-baseline`",
    },
    CodeInfo {
        code: Code::UncachedGrew,
        id: "KVA502",
        name: "uncached_grew",
        default_level: Level::Deny,
        knob: Knob::None,
        meaning: "Against the baseline, more tokens must be computed again at a block size.",
        help: "find the change that moved the rewrite point earlier, or accept it with `kvaudit check --update-baseline`",
    },
    CodeInfo {
        code: Code::NewRewriteClass,
        id: "KVA503",
        name: "new_rewrite_class",
        default_level: Level::Deny,
        knob: Knob::None,
        meaning: "Against the baseline, a transition has a rewrite class it did not have.",
        help: "see the rewrite code reported for the same transition for what to change",
    },
    CodeInfo {
        code: Code::IndexVisibilityFell,
        id: "KVA504",
        name: "index_visibility_fell",
        default_level: Level::Deny,
        knob: Knob::None,
        meaning: "Against the baseline, llm-d's index sees fewer tokens of the next prompt.",
        help: "check the router view with `kvaudit diff-turns`; accept it with `kvaudit check --update-baseline`",
    },
    CodeInfo {
        code: Code::Improvement,
        id: "KVA505",
        name: "improvement",
        default_level: Level::Note,
        knob: Knob::None,
        meaning: "Against the baseline, a transition got better (longer common prefix, fewer uncached tokens, a rewrite gone).",
        help: "record it with `kvaudit check --update-baseline` so a later change cannot lose it unnoticed",
    },
    CodeInfo {
        code: Code::UnusedAllow,
        id: "KVA901",
        name: "unused_allow",
        default_level: Level::Warn,
        knob: Knob::None,
        meaning: "An [[allow]] entry in kvaudit.toml matched no finding.",
        help: "remove the [[allow]] entry, or fix its code, model or scenario",
    },
];

impl Code {
    pub fn info(self) -> &'static CodeInfo {
        CODES
            .iter()
            .find(|c| c.code == self)
            .unwrap_or_else(|| unreachable!("every code is in CODES (tested)"))
    }

    pub fn id(self) -> &'static str {
        self.info().id
    }

    /// A code given as `KVA101` or by name (`reasoning_dropped`), any case.
    pub fn parse(text: &str) -> Option<Code> {
        let t = text.trim();
        CODES
            .iter()
            .find(|c| c.id.eq_ignore_ascii_case(t) || c.name.eq_ignore_ascii_case(t))
            .map(|c| c.code)
    }

    /// The gate's code for a finding of the shared model, where the gate reports that kind.
    pub fn for_kind(kind: FindingKind, class: Option<RewriteClass>) -> Option<Code> {
        match kind {
            FindingKind::RewritePoint => {
                Some(Code::for_rewrite(class.unwrap_or(RewriteClass::Other)))
            }
            FindingKind::DateRollover => Some(Code::DateRollover),
            FindingKind::IndexBehindEngine => Some(Code::IndexBehindEngine),
            _ => None,
        }
    }

    pub fn for_rewrite(class: RewriteClass) -> Code {
        match class {
            RewriteClass::ReasoningDropped => Code::ReasoningDropped,
            RewriteClass::GenerationPrefillNotReplayed => Code::GenerationPrefillNotReplayed,
            RewriteClass::DateChanged => Code::DateChanged,
            RewriteClass::ContentTrimmed => Code::ContentTrimmed,
            RewriteClass::SystemMoved => Code::SystemMoved,
            RewriteClass::Retokenized => Code::Retokenized,
            RewriteClass::Other => Code::RewriteOther,
            RewriteClass::RequestChanged => Code::RequestChanged,
        }
    }
}

impl Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.id())
    }
}

/// `--explain CODE`: the whole entry as text.
pub fn explain(code: Code) -> String {
    let c = code.info();
    format!(
        "{} {} (default: {})\n\n{}\n\nhelp: {}\n",
        c.id,
        c.name,
        c.default_level.name(),
        c.meaning,
        c.help
    )
}

/// `--list-codes`: one line per code.
pub fn list() -> String {
    let mut out = String::new();
    for c in CODES {
        out.push_str(&format!(
            "{}  {:<32} {:<5} {}\n",
            c.id,
            c.name,
            c.default_level.name(),
            c.meaning
        ));
    }
    out
}

/// The table as Markdown (docs/codes.md is this, kept current by a test).
pub fn markdown_table() -> String {
    let mut out = String::from(
        "# kvaudit check: finding codes\n\n\
         Generated from `src/gate/codes.rs` (`kvaudit check --list-codes`, `kvaudit check --explain CODE`).\n\n\
         | code | name | default | meaning | help |\n|---|---|---|---|---|\n",
    );
    for c in CODES {
        out.push_str(&format!(
            "| {} | `{}` | {} | {} | {} |\n",
            c.id,
            c.name,
            c.default_level.name(),
            c.meaning.replace('|', "\\|"),
            c.help.replace('|', "\\|")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_names_are_unique_and_every_code_is_listed() {
        let mut ids: Vec<&str> = CODES.iter().map(|c| c.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), CODES.len());
        let mut names: Vec<&str> = CODES.iter().map(|c| c.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), CODES.len());
        for c in CODES {
            assert_eq!(c.code.info().id, c.id);
            assert_eq!(Code::parse(c.id), Some(c.code));
            assert_eq!(Code::parse(&c.id.to_lowercase()), Some(c.code));
            assert_eq!(Code::parse(c.name), Some(c.code));
        }
        assert_eq!(Code::parse("KVA999"), None);
    }
}
