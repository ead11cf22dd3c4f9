//! Every flag of kvaudit (shell completions are generated from this definition).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "kvaudit",
    version,
    about = "Find where chat templates and KV-cache routing lose prefix reuse between chat turns",
    propagate_version = true
)]
pub struct Cli {
    /// When to colour the output.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto, global = true)]
    pub color: ColorChoice,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Render each turn with the model's template and tokenizer and show where turn k+1 stops
    /// extending what the decode server holds after turn k.
    DiffTurns(Box<DiffTurnsArgs>),
    /// Download a model's tokenizer and chat template files into the Hugging Face cache and
    /// print the snapshot directory.
    Fetch(FetchArgs),
}

#[derive(Debug, Args)]
pub struct ModelArgs {
    /// A local model directory, or a Hub id `org/name[@revision]`.
    #[arg(long, short = 'm', value_name = "DIR|ORG/NAME")]
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Human,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Resend {
    /// Content only, as a server with a reasoning parser returns it.
    Content,
    /// The generated text verbatim, reasoning block included.
    Raw,
    /// Content plus `reasoning_content` / `thinking`.
    ReasoningField,
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

#[derive(Debug, Args)]
pub struct DiffTurnsArgs {
    #[command(flatten)]
    pub model: ModelArgs,

    /// A conversation JSON file (repeatable; each is audited separately).
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

    /// Reply layout for derived replies (default: detected from the template).
    #[arg(long, value_enum)]
    pub reply_format: Option<ReplyFormatArg>,

    /// A template variable `key=value` (value parsed as JSON, else a string); repeatable.
    #[arg(long = "template-kwarg", value_name = "KEY=VALUE")]
    pub template_kwarg: Vec<String>,

    /// The clock for strftime_now, e.g. 2026-01-15T10:00:00 (default: now, local time).
    #[arg(long, value_name = "TIME")]
    pub now: Option<String>,

    /// Also render each prompt one day after the previous (23:59 -> 00:01) and report whether
    /// the divergence moves.
    #[arg(long)]
    pub date_rollover: bool,

    /// KV block sizes for the uncached counts.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "16,64",
        value_name = "B,B,..."
    )]
    pub block_sizes: Vec<usize>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
    pub format: OutputFormat,

    /// Instruction budget per render (templates are untrusted input).
    #[arg(long, default_value_t = crate::render::DEFAULT_FUEL, hide = true)]
    pub fuel: u64,
}

#[derive(Debug, Args)]
pub struct FetchArgs {
    /// Hub id `org/name[@revision]`.
    pub model: String,

    /// Revision (branch, tag or commit).
    #[arg(long)]
    pub revision: Option<String>,

    /// Check the cache only.
    #[arg(long)]
    pub offline: bool,
}
