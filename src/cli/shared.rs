//! Flags several commands share: the model, the conversation, rendering, routers, llm-d's index, and the values they parse.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::*;

#[derive(Debug, Clone, Args)]
pub struct ModelArgs {
    /// A local model directory, a GGUF file (its tokenizer and chat templates, tokenized as
    /// llama.cpp tokenizes), or a Hub id `org/name[@revision]`.
    #[arg(long, short = 'm', value_name = "DIR|FILE.gguf|ORG/NAME")]
    pub model: String,

    /// Hub revision (branch, tag or commit); overrides `@revision` in --model.
    #[arg(long)]
    pub revision: Option<String>,

    /// Use the Hugging Face cache only, never the network (also HF_HUB_OFFLINE=1).
    #[arg(long)]
    pub offline: bool,

    /// Use this chat template file instead of the model's (e.g. the file under review).
    #[arg(long, value_name = "FILE")]
    pub template: Option<PathBuf>,

    /// Use the model's named template (e.g. `tool_use`).
    #[arg(long, value_name = "NAME")]
    pub template_name: Option<String>,

    /// Use this tokenizer.json instead of the model's.
    #[arg(long, value_name = "FILE")]
    pub tokenizer: Option<PathBuf>,
}

format_choice! {
    OutputFormat {
        Human,
        Json,
    }
}

format_choice! {
    /// Formats of the diff-turns report (Markdown: for `$GITHUB_STEP_SUMMARY` and PR comments).
    ReportFormat {
        Human,
        Json,
        Markdown,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Resend {
    /// Content only, as a server with a reasoning parser returns it.
    Content,
    /// The generated text verbatim, reasoning block included.
    Raw,
    /// Content plus the reasoning field the server reads: `reasoning` under --server vllm,
    /// else `reasoning_content` / `thinking`.
    ReasoningField,
}

/// The router view's settings: simulated decode-pod events, llm-d's index and its decider
/// (shared by diff-turns and corpus).
#[derive(Debug, Clone, Args)]
pub struct RouterArgs {
    #[command(flatten)]
    pub choice: RouterChoiceArgs,

    /// The engine's (vLLM's) KV block size, for the simulated events of the router view.
    #[arg(long, default_value_t = 16, value_name = "B", value_parser = block_size, allow_negative_numbers = true)]
    pub engine_block_size: usize,
}

/// Which routers to ask and llm-d's index and decider settings, without the engine's block
/// size (watch has its own: the pods' events are at that size).
#[derive(Debug, Clone, Args)]
pub struct RouterChoiceArgs {
    /// A router's real configuration to emulate (repeatable): llm-d's EndpointPickerConfig
    /// (YAML), or a file of Dynamo's, vllm-router's or smg's flags; what it names and kvaudit
    /// does not model is reported.
    #[arg(long = "router-config", value_name = "FILE")]
    pub router_configs: Vec<PathBuf>,

    /// A router to ask, `NAME` or `NAME:key=value,...` (repeatable): llm-d (diff-turns' and
    /// corpus' default; watch asks none unless given), llm-d-approx, dynamo, dynamo-approx,
    /// vllm-router, sglang, gaie; each answers what it credits to the decode pod and where the
    /// next turn goes (docs/routers.md).
    #[arg(long = "router", value_name = "SPEC")]
    pub routers: Vec<String>,

    /// llm-d's index block size (blockSizeTokens) for the router view.
    #[arg(long, default_value_t = 64, value_name = "B", value_parser = block_size, allow_negative_numbers = true)]
    pub index_block_size: usize,

    #[command(flatten)]
    pub index: IndexArgs,

    /// The prefix-based P/D decider's settings (llm-d's nonCachedTokens, promptTokens); a
    /// setting left out keeps its default here, and 0 turns a threshold off.
    #[arg(
        long,
        default_value = "non-cached-tokens=512,prompt-tokens=1024",
        value_name = "SETTINGS"
    )]
    pub decider: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReplyFormatArg {
    Plain,
    #[value(name = "think_nl", alias = "think-nl")]
    ThinkNl,
    #[value(name = "think_tight", alias = "think-tight")]
    ThinkTight,
    Harmony,
}

/// Where the conversations come from (shared by diff-turns and keys).
#[derive(Debug, Clone, Args)]
pub struct ConversationArgs {
    /// A conversation JSON file, `-` for standard input (repeatable; each is audited
    /// separately).
    #[arg(long, short = 'c', value_name = "FILE")]
    pub conversation: Vec<PathBuf>,

    /// Quick form: a system prompt.
    #[arg(long, conflicts_with = "conversation")]
    pub system: Option<String>,

    /// Quick form: the first user message.
    #[arg(long, conflicts_with = "conversation")]
    pub user: Option<String>,

    /// Quick form: the assistant's answer (content).
    #[arg(long, requires = "user", conflicts_with = "conversation")]
    pub reply: Option<String>,

    /// Quick form: the assistant's reasoning, for reasoning models.
    #[arg(long, requires = "user", conflicts_with = "conversation")]
    pub reasoning: Option<String>,

    /// Quick form: a follow-up user message (repeatable; each is a separate conversation).
    #[arg(long = "follow-up", requires = "user", conflicts_with = "conversation")]
    pub follow_up: Vec<String>,

    /// Quick form and probes: how the client sends the reply back.
    #[arg(long, value_enum, default_value_t = Resend::Content, conflicts_with = "conversation")]
    pub resend: Resend,

    #[command(flatten)]
    pub rendering: RenderingArgs,
}

/// How prompts are rendered, whatever the conversations' source (shared by diff-turns, keys,
/// render and corpus).
#[derive(Debug, Clone, Args)]
pub struct RenderingArgs {
    /// Reply layout for derived replies (default: detected from the template).
    #[arg(long, value_enum)]
    pub reply_format: Option<ReplyFormatArg>,

    /// A template variable `key=value` (value parsed as JSON, Python's True/False/None as
    /// booleans and null, else a string); repeatable. A key the template never reads is
    /// warned about. Under --server vllm|sglang this is the request's `chat_template_kwargs`.
    #[arg(long = "template-kwarg", value_name = "KEY=VALUE")]
    pub template_kwarg: Vec<String>,

    /// A template variable that changes at prompt N and stays, `N:KEY=VALUE` (value parsed
    /// as JSON, else a string), over --template-kwarg; repeatable. E.g. 2:enable_thinking=false.
    #[arg(long = "kwargs-turn", value_name = "N:KEY=VALUE")]
    pub kwargs_turn: Vec<String>,

    /// Render each request as this server does: its message preprocessing (content null,
    /// content parts, tool-call arguments, reasoning fields, tools, kwargs) before the template.
    #[arg(long, value_name = "SERVER[@RELEASE]", value_parser = ServerParser::any(),
          default_value = "transformers")]
    pub server: crate::render::ServerProfile,

    /// The server's default template kwarg `key=value` (vLLM/SGLang
    /// `--default-chat-template-kwargs`; the request's own win); repeatable.
    #[arg(long = "server-template-kwarg", value_name = "KEY=VALUE")]
    pub server_template_kwarg: Vec<String>,

    /// The clock for strftime_now, e.g. 2026-01-15T10:00:00 (default: now, local time). A zone
    /// (Z, +02:00) is allowed and the time is taken as the wall clock at that offset, which is
    /// what a server in that zone prints.
    #[arg(long, value_name = "TIME")]
    pub now: Option<String>,

    /// Instruction budget per render (templates are untrusted input).
    #[arg(long, default_value_t = crate::render::DEFAULT_FUEL, hide = true)]
    pub fuel: u64,
}

/// `--server`: a render profile by name, `name@release` where kvaudit follows releases
/// (`sglang@0.5.23`, `sglang@main`, `vllm@0.32`); a bare name is the newest release the tests
/// run. Its values are listed in `--help` and the completions.
#[derive(Debug, Clone, Copy)]
pub struct ServerParser {
    /// Only the engines `probe` can talk to (no `transformers`).
    engines_only: bool,
}

impl ServerParser {
    pub fn any() -> ServerParser {
        ServerParser {
            engines_only: false,
        }
    }

    pub fn engines() -> ServerParser {
        ServerParser { engines_only: true }
    }

    fn allowed(self, p: crate::render::ServerProfile) -> bool {
        !(self.engines_only && p == crate::render::ServerProfile::Transformers)
    }
}

impl clap::builder::TypedValueParser for ServerParser {
    type Value = crate::render::ServerProfile;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Self::Value, clap::Error> {
        use crate::render::ServerProfile;
        let this = *self;
        // A function parser, so a refusal is clap's one-line value-validation error.
        let parse = move |text: &str| -> Result<ServerProfile, FlagValueError> {
            match ServerProfile::parse(text) {
                Some(p) if this.allowed(p) => Ok(p),
                Some(_) => Err(FlagValueError::OutOfRange(
                    "probe talks to an engine: vllm, sglang or llamacpp".into(),
                )),
                None => Err(FlagValueError::Malformed(ServerProfile::unknown(text))),
            }
        };
        clap::builder::TypedValueParser::parse_ref(&parse, cmd, arg, value)
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            crate::render::ServerProfile::VALUES
                .iter()
                .filter(|(_, p, _)| self.allowed(*p))
                .map(|&(name, _, help)| {
                    clap::builder::PossibleValue::new(name)
                        .help(help)
                        .hide(help.is_empty())
                }),
        ))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HashArg {
    #[value(name = "cbor-fnv")]
    CborFnv,
    Xxh64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProfileArg {
    /// Events shorter than one index block fail a digest check (incomplete_canonical_block).
    #[value(name = "digest-first")]
    DigestFirst,
    /// llm-d-router as of 2026-08: silent drop, then parent_unresolved for the descendants.
    #[value(name = "router-2026-08")]
    Router202608,
}

/// How llm-d's precise index is configured (shared by replay, keys and diff-turns).
#[derive(Debug, Clone, Args)]
pub struct IndexArgs {
    /// Block key hash.
    #[arg(long, value_enum, default_value_t = HashArg::CborFnv)]
    pub hash: HashArg,

    /// llm-d's hashSeed.
    #[arg(long, default_value = "", value_name = "SEED")]
    pub hash_seed: String,

    /// Model name used in block keys (default: from each topic, or the --model given).
    #[arg(long, value_name = "NAME")]
    pub model_name: Option<String>,

    /// Which llm-d behaviour to reproduce for events shorter than one index block.
    #[arg(long, value_enum, default_value_t = ProfileArg::DigestFirst)]
    pub llmd_profile: ProfileArg,

    /// llm-d's kvEventsConfig.topicFilter (replay, capture): its subscriber receives only
    /// messages whose topic starts with it, and never sees the others (counted as
    /// `topic_filter`); an empty filter receives every topic.
    #[arg(long, default_value = crate::routers::llm_d::DEFAULT_TOPIC_FILTER, value_name = "PREFIX")]
    pub topic_filter: String,

    /// llm-d binds one socket for every pod (kvEventsConfig.zmqEndpoint set; replay,
    /// capture): each message's pod is the one its topic names (kv@POD@MODEL), scored only
    /// when that is an endpoint's IP address:port; the others are counted as
    /// `pod_not_endpoint` and credit nothing.
    #[arg(long)]
    pub global_socket: bool,
}

/// Why a flag's value was refused (clap prints it after the flag).
#[derive(Debug, thiserror::Error)]
pub enum FlagValueError {
    /// Well formed, but not one the flag takes.
    #[error("{0}")]
    OutOfRange(String),
    #[error("{0}")]
    Malformed(String),
}

/// A KV block size flag: a whole number from 1 to [`crate::align::MAX_BLOCK_SIZE`].
pub fn block_size(text: &str) -> Result<usize, FlagValueError> {
    let range = || {
        format!(
            "a block size is a whole number of tokens from 1 to {}",
            crate::align::MAX_BLOCK_SIZE
        )
    };
    let t = text.trim();
    match t.parse::<usize>() {
        Ok(b) if (1..=crate::align::MAX_BLOCK_SIZE).contains(&b) => Ok(b),
        // All digits, but past the range (or past usize): out of range, not malformed.
        _ if !t.is_empty() && t.bytes().all(|c| c.is_ascii_digit()) => {
            Err(FlagValueError::OutOfRange(range()))
        }
        _ => Err(FlagValueError::Malformed(format!(
            "expected {}",
            range().trim_start_matches("a block size is ")
        ))),
    }
}

/// `--max-message-size`: `268435456`, `256MiB`, `256M`, `64KiB`, `1GiB` (powers of 1024).
pub fn message_size(text: &str) -> Result<usize, FlagValueError> {
    let t = text.trim();
    let range = || {
        format!(
            "must be from {} bytes (1 KiB) to {} bytes (1 GiB)",
            MESSAGE_SIZE_RANGE.start(),
            MESSAGE_SIZE_RANGE.end()
        )
    };
    match crate::input::parse_size(t).map(usize::try_from) {
        Some(Ok(b)) if MESSAGE_SIZE_RANGE.contains(&b) => Ok(b),
        Some(_) => Err(FlagValueError::OutOfRange(range())),
        // All digits, but past u64: out of range rather than malformed.
        None if !t.is_empty() && t.bytes().all(|c| c.is_ascii_digit()) => {
            Err(FlagValueError::OutOfRange(range()))
        }
        None => Err(FlagValueError::Malformed(
            "expected a size like 256MiB, 64KiB or 1048576 (bytes)".into(),
        )),
    }
}
