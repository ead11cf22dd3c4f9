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
    /// When to colour human output (auto: on a terminal, unless NO_COLOR is set non-empty;
    /// FORCE_COLOR forces it).
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto, global = true)]
    pub color: ColorChoice,

    /// Print nothing on stdout: the exit code is the answer (0 clean, 1 findings, 2 error).
    /// Errors still go to stderr.
    #[arg(short, long, global = true)]
    pub quiet: bool,

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
    #[command(after_help = DIFF_TURNS_EXAMPLES)]
    DiffTurns(Box<DiffTurnsArgs>),
    /// Download a model's tokenizer and chat template files into the Hugging Face cache and
    /// print the snapshot directory.
    Fetch(FetchArgs),
    /// Replay a KV-event capture through llm-d's precise prefix index and report what it
    /// keeps, what it skips and why, and what lookups find versus what the engine holds.
    #[command(after_help = REPLAY_EXIT_CODES)]
    Replay(ReplayArgs),
    /// Print llm-d's block keys for a token list or a rendered conversation.
    Keys(Box<KeysArgs>),
    /// Print the exact prompts kvaudit renders for a conversation (what the model sees), or
    /// the held stream of one transition.
    #[command(long_about = RENDER_ABOUT, after_help = RENDER_EXAMPLES)]
    Render(Box<RenderArgs>),
    /// Record KV events live from vLLM/SGLang ZMQ publishers into a `.frames` file, with gap
    /// detection and recovery through the publishers' replay sockets.
    Capture(Box<CaptureArgs>),
    /// The CI gate: audit the models of kvaudit.toml, compare with the baseline, and fail
    /// (exit 1) on deny findings.
    #[command(long_about = CHECK_ABOUT, after_help = CHECK_EXAMPLES)]
    Check(Box<CheckArgs>),
    /// Audit a corpus of real conversations (JSONL, ShareGPT, WildChat; gzip or zstd; Parquet) on
    /// worker threads: uncached tokens per block size, rewrite classes, the router's view,
    /// PPD session-key collisions, and what each serving alternative computes and moves.
    #[command(long_about = CORPUS_ABOUT, after_help = CORPUS_EXAMPLES)]
    Corpus(Box<CorpusArgs>),
    /// Merge the partial results of corpus runs over shards (`corpus --partial`) into the
    /// report one run over all the shards would have printed.
    #[command(long_about = MERGE_ABOUT, after_help = MERGE_EXAMPLES)]
    Merge(MergeArgs),
    /// Chat with a live OpenAI-compatible server (vLLM, SGLang, llama.cpp) turn by turn and put
    /// its prompt and cached-token counts beside kvaudit's render and prediction.
    #[command(long_about = PROBE_ABOUT, after_help = PROBE_EXAMPLES)]
    Probe(Box<ProbeArgs>),
    /// Write a commented starter kvaudit.toml for the models given.
    Init(InitArgs),
    /// Print the shell completion script for a shell.
    Completions(CompletionsArgs),
}

const MERGE_ABOUT: &str = "Merge the partial results of corpus runs over shards of one input (each written by \
`kvaudit corpus --partial FILE`) into the report one run over all the shards, in the order given, would \
have printed: every figure equal, percentiles and the worst conversations included. The partials must \
come from the same kvaudit version, model (tokenizer and template digests) and settings; otherwise the \
merge is an error. Exit 0 when no transition has a rewrite point, 1 when some do, 2 on bad input.";

const CHECK_ABOUT: &str = "The CI gate: audit every [[model]] of kvaudit.toml (or --model) with the diff-turns pipeline over the \
built-in probe set or the [[scenario]] conversations, turn what it finds into findings with stable codes \
(kvaudit check --list-codes), compare with the baseline (kvaudit.lock, or --baseline-template), and exit \
0 when clean (warnings and notes allowed), 1 when a deny finding remains, 2 on errors.";

const CORPUS_ABOUT: &str = "Audit every conversation of one or more corpus files exactly as diff-turns audits \
one (same numbers, transition by transition), on worker threads, and total them: the distribution of \
uncached tokens and of held tokens lost at rewrite points per block size, rewrite classes, the share of \
each next prompt the decode pod holds, the router's view (index-visible vs engine-cached tokens, decider \
verdicts), PPD session-key collisions, and what plain P/D, vLLM bidirectional KV transfer, SGLang's \
decode radix cache and decode-local append prefill each compute and move. Rows that cannot be used are \
skipped and counted by reason. Exit 0 when no transition has a rewrite point, 1 when some do, 2 when \
nothing could be read or on bad flags.";

/// Row layouts `corpus` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FormatIn {
    /// Decided per file by its first row.
    Auto,
    /// kvaudit's conversation format or a bare list of messages, one per line (OpenAI chat).
    Openai,
    /// ShareGPT (`conversations` of `from`/`value`), a JSON array or one row per line.
    Sharegpt,
    /// WildChat / LMSYS-Chat rows (`conversation` of `role`/`content`), one per line.
    Wildchat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PrefillAffinityArg {
    /// Turn k+1 reaches the prefill pod that prefilled turn k, its prefix cache intact.
    Same,
    /// Another prefill pod (or an evicted cache): nothing of the history is there.
    None,
}

#[derive(Debug, Args)]
pub struct CorpusArgs {
    #[command(flatten)]
    pub model: ModelArgs,

    /// Corpus files (`-` for standard input); gzip, zstd and Parquet files are recognised by
    /// their first bytes.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,

    /// How rows are laid out.
    #[arg(long, value_enum, default_value_t = FormatIn::Auto)]
    pub format_in: FormatIn,

    /// Read at most N rows (used or skipped), in input order.
    #[arg(long, value_name = "N")]
    pub limit: Option<u64>,

    /// Audit a uniform random sample of N rows (reservoir sampling over the whole input,
    /// seeded: the same rows for the same input and --seed); memory grows with N.
    #[arg(long, value_name = "N")]
    pub sample: Option<u64>,

    /// Seed for --sample.
    #[arg(long, default_value_t = 0, value_name = "S")]
    pub seed: u64,

    /// Raise (or lower) one of the limits a Parquet file is read within, checked before any
    /// row is read: `file_bytes=SIZE` (its pages decompressed plus the rows made of them,
    /// default 4GiB), `row_group_bytes=SIZE` (the same for one row group, which bounds one
    /// row; default 256MiB), `columns=N` (fields its schema declares; default 4096).
    /// Repeatable.
    #[arg(long, value_name = "KEY=SIZE")]
    pub parquet_limit: Vec<String>,

    /// Worker threads (default: every core).
    #[arg(long, short = 'j', value_name = "N")]
    pub jobs: Option<usize>,

    #[command(flatten)]
    pub rendering: RenderingArgs,

    /// KV block sizes for the uncached counts and the alternatives.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "16,64",
        value_name = "B,B,...",
        value_parser = block_size,
        allow_negative_numbers = true
    )]
    pub block_sizes: Vec<usize>,

    #[command(flatten)]
    pub router: RouterArgs,

    /// Leave out the router view (simulated events, index lookups, decider).
    #[arg(long)]
    pub no_router: bool,

    /// For every rewrite point, re-run the audit under each applicable remedy (as
    /// `diff-turns --remedies`) and total, per remedy, the rewrite points it removes and the
    /// uncached tokens with and without it. Each remedy is a full re-render: slower.
    #[arg(long)]
    pub remedies: bool,

    /// Whether turn k+1's prefill pod still holds turn k's prompt (plain P/D and the
    /// alternatives that prefill on P).
    #[arg(long, value_enum, default_value_t = PrefillAffinityArg::Same)]
    pub prefill_affinity: PrefillAffinityArg,

    /// vLLM's kv_recompute_threshold: a D->P pull shorter than this many tokens is
    /// recomputed on P instead.
    #[arg(long, default_value_t = 64, value_name = "TOKENS")]
    pub kv_recompute_threshold: usize,

    /// KV-cache bytes per token, for bytes moved (default: derived from the model's
    /// config.json when it has the fields).
    #[arg(long, value_name = "BYTES")]
    pub kv_bytes_per_token: Option<u64>,

    /// Also write one JSON line per transition (the diff-turns transition plus each
    /// alternative's cost), in input order.
    #[arg(long, value_name = "FILE.jsonl")]
    pub per_transition: Option<PathBuf>,

    /// Also write a self-contained HTML report (inline CSS and SVG, no external assets).
    #[arg(long, value_name = "FILE.html")]
    pub html: Option<PathBuf>,

    /// How many of the worst conversations (most uncached tokens at the first block size)
    /// the report lists.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub worst: usize,

    /// Also write this shard's totals to FILE for `kvaudit merge` (not with --sample or
    /// --limit). A shard whose rows are all skipped still writes its partial.
    #[arg(long, value_name = "FILE")]
    pub partial: Option<PathBuf>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = CorpusFormat::Human)]
    pub format: CorpusFormat,
}

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// Partial results written by `kvaudit corpus --partial`, in the order of their shards.
    #[arg(required = true, value_name = "PARTIAL")]
    pub partials: Vec<PathBuf>,

    /// Also write a self-contained HTML report.
    #[arg(long, value_name = "FILE.html")]
    pub html: Option<PathBuf>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = CorpusFormat::Human)]
    pub format: CorpusFormat,
}

/// Formats of the corpus report on standard output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CorpusFormat {
    Human,
    Json,
    Markdown,
    Html,
}

/// Output formats of `check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CheckFormat {
    Human,
    Json,
    /// SARIF 2.1.0, for GitHub code scanning.
    Sarif,
    /// JUnit XML: one test case per model and scenario.
    Junit,
    /// For $GITHUB_STEP_SUMMARY and pull-request comments.
    Markdown,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// A router configuration to lint against the engine: llm-d's EndpointPickerConfig
    /// (YAML), or a file of Dynamo's, vllm-router's or smg's flags (KVA403–KVA406). With a
    /// kvaudit.toml, its llm-d wiring also becomes the router view of the models' run.
    #[arg(long, value_name = "FILE")]
    pub router_config: Option<PathBuf>,

    /// A router to ask about every transition, `NAME[:key=value,...]` as in diff-turns
    /// (repeatable; adds to kvaudit.toml's `routers`): KVA407 when it sends a turn elsewhere
    /// that the decode pod could serve.
    #[arg(long = "router", value_name = "SPEC")]
    pub routers: Vec<String>,

    /// The engine's KV block size (vLLM's --block-size) the router config is linted against.
    #[arg(long, default_value_t = 16, value_name = "B", value_parser = block_size, allow_negative_numbers = true)]
    pub engine_block_size: usize,

    /// The config file (default: ./kvaudit.toml when it exists).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Check this model (directory, GGUF file or Hub id) instead of the config's models;
    /// repeatable.
    #[arg(long, short = 'm', value_name = "DIR|FILE.gguf|ORG/NAME")]
    pub model: Vec<String>,

    /// Audit this conversation file instead of the config's scenarios; repeatable.
    #[arg(long, short = 'c', value_name = "FILE")]
    pub scenario: Vec<PathBuf>,

    /// The template under review, for every model (overrides the config's `template`).
    #[arg(long, value_name = "FILE")]
    pub template: Option<PathBuf>,

    /// Compare with this template instead of a lock: the gate fails on what got worse
    /// (e.g. `git show origin/main:chat_template.jinja > old.jinja`).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["baseline", "update_baseline"])]
    pub baseline_template: Option<PathBuf>,

    /// The lock file to compare with or write (default: [gate] baseline, else kvaudit.lock).
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,

    /// Write the lock from this run and exit 0 (accepting every finding as known).
    #[arg(long)]
    pub update_baseline: bool,

    /// Output format.
    #[arg(long, value_enum, default_value_t = CheckFormat::Human)]
    pub format: CheckFormat,

    /// Write the report to this file instead of stdout (`--update-baseline` writes no report).
    #[arg(
        long,
        short = 'o',
        value_name = "FILE",
        conflicts_with = "update_baseline"
    )]
    pub output: Option<PathBuf>,

    /// Explain a finding code (e.g. KVA101) and exit.
    #[arg(long, value_name = "CODE", conflicts_with = "list_codes")]
    pub explain: Option<String>,

    /// List every finding code and exit.
    #[arg(long)]
    pub list_codes: bool,

    /// Use the Hugging Face cache only, never the network (also HF_HUB_OFFLINE=1).
    #[arg(long)]
    pub offline: bool,

    /// Models audited at once (default: one per core).
    #[arg(long, short = 'j', default_value_t = 0, value_name = "N")]
    pub jobs: usize,

    /// Do not measure remedies: help lines give the code's general advice (overrides
    /// [gate] remedies; saves re-rendering each conversation once per remedy).
    #[arg(long)]
    pub no_remedies: bool,
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// A model to check (directory or Hub id, `@revision` to pin); repeatable.
    #[arg(
        long,
        short = 'm',
        value_name = "DIR|FILE.gguf|ORG/NAME",
        required = true
    )]
    pub model: Vec<String>,

    /// Where to write it.
    #[arg(long, default_value = "kvaudit.toml", value_name = "FILE")]
    pub output: PathBuf,

    /// Overwrite an existing file.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// replay's exit codes, shown by `replay --help` (README says the same).
pub const DIFF_TURNS_EXAMPLES: &str = "\
Examples:
  kvaudit diff-turns -m Qwen/Qwen3-8B --user \"Hi\" --reply \"Hello.\" --follow-up \"Thanks\"
  kvaudit diff-turns -m ./my-model -c chat.json --block-sizes 16,64 --remedies
  kvaudit diff-turns -m ./my-model -c chat.json --router dynamo --router gaie
  kvaudit diff-turns -m ./my-model -c chat.json --router-config epp.yaml";

pub const CORPUS_EXAMPLES: &str = "\
Examples:
  kvaudit corpus -m Qwen/Qwen3-8B chats.jsonl
  kvaudit corpus -m ./my-model logs/a.jsonl.zst --jobs 8 --html report.html
  kvaudit corpus -m ./my-model chats.jsonl --router dynamo:conditional_disagg=true";

pub const MERGE_EXAMPLES: &str = "\
Examples:
  kvaudit corpus -m ./my-model shard-0.jsonl --partial p0.json
  kvaudit corpus -m ./my-model shard-1.jsonl --partial p1.json
  kvaudit merge p0.json p1.json --format json
  kvaudit merge p0.json p1.json p2.json --html report.html

The order of the partials is the order of the shards: it decides ties among the worst
conversations and which skipped rows are quoted, as the order of files does in one run
(a shell glob sorts p10.json before p2.json).";

pub const CHECK_EXAMPLES: &str = "\
Examples:
  kvaudit check
  kvaudit check --update-baseline
  kvaudit check -m ./my-model --template new.jinja --baseline-template old.jinja
  kvaudit check --router-config epp.yaml --engine-block-size 16
  kvaudit check --explain KVA403";

pub const RENDER_EXAMPLES: &str = "\
Examples:
  kvaudit render -m Qwen/Qwen3-8B -c chat.json
  kvaudit render -m ./my-model -c chat.json --server vllm --tokens --format json
  kvaudit render -m ./my-model -c chat.json --held 1";

pub const PROBE_EXAMPLES: &str = "\
Examples:
  kvaudit probe --url http://127.0.0.1:8000 -m Qwen/Qwen3-8B
  kvaudit probe --url http://127.0.0.1:8080 -m ./my-model --block-sizes 32";

pub const REPLAY_EXIT_CODES: &str = "\
Examples:
  kvaudit replay d0.frames --block-sizes 16,64
  kvaudit replay d0.frames --router llm-d --router dynamo --lookup prompts.json

Exit codes:
  0  every message decoded, every BlockStored event indexed, and lookups find
     what the engine holds
  1  findings: messages llm-d drops or cannot decode (counted with
     --keep-going), BlockStored events skipped, token ids outside u32, events
     the engine view cannot split, sequences the index sees less of than the
     engine holds; or a capture with no messages (with a warning)
  2  error: unreadable input, a file that is not a capture, bad bytes without
     --keep-going (after the counts so far), bad flags";

#[derive(Debug, Args)]
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Human,
    Json,
}

/// Formats of the diff-turns report (Markdown: for `$GITHUB_STEP_SUMMARY` and PR comments).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    Human,
    Json,
    Markdown,
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
#[derive(Debug, Args)]
pub struct RouterArgs {
    /// A router's real configuration to emulate (repeatable): llm-d's EndpointPickerConfig
    /// (YAML), or a file of Dynamo's, vllm-router's or smg's flags; what it names and kvaudit
    /// does not model is reported.
    #[arg(long = "router-config", value_name = "FILE")]
    pub router_configs: Vec<PathBuf>,

    /// A router to ask, `NAME` or `NAME:key=value,...` (repeatable): llm-d (the default),
    /// llm-d-approx, dynamo, dynamo-approx, vllm-router, sglang, gaie; each answers what it
    /// credits to the decode pod and where the next turn goes (docs/routers.md).
    #[arg(long = "router", value_name = "SPEC")]
    pub routers: Vec<String>,

    /// The engine's (vLLM's) KV block size, for the simulated events of the router view.
    #[arg(long, default_value_t = 16, value_name = "B", value_parser = block_size, allow_negative_numbers = true)]
    pub engine_block_size: usize,

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
#[derive(Debug, Args)]
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
#[derive(Debug, Args)]
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
        let parse = move |text: &str| -> Result<ServerProfile, String> {
            match ServerProfile::parse(text) {
                Some(p) if this.allowed(p) => Ok(p),
                Some(_) => Err("probe talks to an engine: vllm, sglang or llamacpp".into()),
                None => Err(ServerProfile::unknown(text)),
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
#[derive(Debug, Args)]
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
}

#[derive(Debug, Args)]
pub struct DiffTurnsArgs {
    #[command(flatten)]
    pub model: ModelArgs,

    #[command(flatten)]
    pub conversation: ConversationArgs,

    /// Also render each prompt one day after the previous (23:59 -> 00:01) and report whether
    /// the divergence moves.
    #[arg(long)]
    pub date_rollover: bool,

    /// For each transition with a rewrite point, re-run the audit under every applicable
    /// remedy (each resend mode, each history switch the template reads, a pinned date,
    /// keeping the previous request's kwargs and tools) and report what each one saves.
    #[arg(long)]
    pub remedies: bool,

    /// KV block sizes for the uncached counts.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "16,64",
        value_name = "B,B,...",
        value_parser = block_size,
        allow_negative_numbers = true
    )]
    pub block_sizes: Vec<usize>,

    #[command(flatten)]
    pub router: RouterArgs,

    /// Output format.
    #[arg(long, value_enum, default_value_t = ReportFormat::Human)]
    pub format: ReportFormat,

    /// Human output: show only transitions with a rewrite point (the summary still counts
    /// every transition; JSON and Markdown always list them all).
    #[arg(long)]
    pub only_rewrites: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReplayFormat {
    Human,
    Json,
    Prometheus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EngineArg {
    Vllm,
    Sglang,
}

/// The llm-d emulation of replay and capture --live-replay.
#[derive(Debug, Args)]
pub struct EmulationArgs {
    /// llm-d index block sizes to emulate; a list is one pass over the stream
    /// (`--index-block-size`, its older name, still works).
    #[arg(
        long = "block-sizes",
        visible_alias = "index-block-size",
        value_delimiter = ',',
        default_value = "64",
        value_name = "B,B,...",
        value_parser = block_size,
        allow_negative_numbers = true
    )]
    pub index_block_size: Vec<usize>,

    /// A router to replay the events through, `NAME` or `NAME:block_size=B` (repeatable):
    /// `llm-d` (the default: one view per --block-sizes) or `dynamo` (at the engine's
    /// block size, learned from the events, unless block_size is given).
    #[arg(long = "router", value_name = "SPEC")]
    pub routers: Vec<String>,

    #[command(flatten)]
    pub index: IndexArgs,

    /// The engine that publishes the events.
    #[arg(long, value_enum, default_value_t = EngineArg::Vllm)]
    pub engine: EngineArg,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// A capture (`.frames` or raw `.msgpack`, detected from its first bytes); `-` for stdin.
    pub file: PathBuf,

    #[command(flatten)]
    pub emulation: EmulationArgs,

    /// Explicit lookups: a JSON list of token-id lists or {"tokens", "pod", "model"} objects.
    #[arg(long, value_name = "FILE")]
    pub lookup: Option<PathBuf>,

    /// Count undecodable messages as malformed and go on, instead of stopping.
    #[arg(long)]
    pub keep_going: bool,

    /// Pod name for captures without topics (raw msgpack).
    #[arg(long, default_value = "pod-0")]
    pub pod: String,

    /// Output format.
    #[arg(long, value_enum, default_value_t = ReplayFormat::Human)]
    pub format: ReplayFormat,
}

#[derive(Debug, Args)]
pub struct KeysArgs {
    /// Token ids, comma separated.
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["tokens_file", "model"])]
    pub tokens: Vec<u32>,

    /// A file of token ids (a JSON list, or ids separated by commas or whitespace).
    #[arg(long, value_name = "FILE", conflicts_with = "model")]
    pub tokens_file: Option<PathBuf>,

    /// Render conversations with this model and print the keys of every prompt.
    #[arg(long, short = 'm', value_name = "DIR|FILE.gguf|ORG/NAME")]
    pub model: Option<String>,

    /// With --model: use the Hugging Face cache only.
    #[arg(long, requires = "model")]
    pub offline: bool,

    /// With --model: use this chat template file instead of the model's.
    #[arg(long, value_name = "FILE", requires = "model")]
    pub template: Option<PathBuf>,

    #[command(flatten)]
    pub conversation: ConversationArgs,

    /// llm-d's block size (blockSizeTokens; `--index-block-size`, its older name, still
    /// works).
    #[arg(
        long = "block-sizes",
        visible_alias = "index-block-size",
        default_value_t = 64,
        value_name = "B",
        value_parser = block_size,
        allow_negative_numbers = true
    )]
    pub index_block_size: usize,

    #[command(flatten)]
    pub index: IndexArgs,

    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
    pub format: OutputFormat,
}

const RENDER_ABOUT: &str = "\
Print the exact prompts kvaudit renders for a conversation (what the model sees), or the held \
stream of one transition.

Each prompt is what transformers' apply_chat_template(..., add_generation_prompt=True, \
tokenize=False) returns for the messages before an assistant reply (and for the whole \
conversation after the last reply): the prompts diff-turns aligns. A conversation without an \
assistant message is one request and renders to one prompt.

Human output: a header line per prompt, `==> prompt 2 (312 tokens, template X) <==`, then the \
text verbatim, with nothing escaped, so it can be copied as is. A text that does not end with \
a newline is followed by a `\\ No newline at end of text` line (as in diff). With --tokens the \
text is shown as `text·id` pairs instead: control characters spelled out (\\n, \\t, \\r), \
special tokens (added tokens marked special in tokenizer.json) in ⟨ ⟩, bold on a terminal, a \
new line after each token that ends a line.

--format json gives every string exactly as rendered, the token count, and with --tokens the \
ids and each token's text and special flag, plus the template that rendered each conversation \
and its SHA-256, and the tokenizer's SHA-256.

Exit codes: 0 rendered, 2 bad input (including a template that raises); render has no \
findings, so it never exits 1.";

#[derive(Debug, Args)]
pub struct RenderArgs {
    #[command(flatten)]
    pub model: ModelArgs,

    #[command(flatten)]
    pub conversation: ConversationArgs,

    /// Show the tokens: `text·id` pairs, special tokens in ⟨ ⟩ (JSON: ids and tokens).
    #[arg(long)]
    pub tokens: bool,

    /// Only prompt N (1-based) of each conversation.
    #[arg(long, value_name = "N", conflicts_with = "held")]
    pub prompt: Option<usize>,

    /// Instead of prompts, what the decode server holds after generation N: prompt N and its
    /// reply without the stop token (the held tokens of transition N -> N+1 in diff-turns).
    #[arg(long, value_name = "N")]
    pub held: Option<usize>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
    pub format: OutputFormat,
}

#[derive(Debug, Args)]
pub struct FetchArgs {
    /// Hub id `org/name[@revision]`.
    pub model: String,

    /// Revision (branch, tag or commit).
    #[arg(long)]
    pub revision: Option<String>,

    /// Check the cache only.
    #[arg(long, conflicts_with = "force")]
    pub offline: bool,

    /// Ask the Hub again even when the revision is cached: a branch or tag that moved is
    /// re-resolved and only files whose content changed are downloaded.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct CaptureArgs {
    /// A publisher to connect to, e.g. tcp://10.0.0.5:5557 (repeatable; one SUB socket each).
    #[arg(long, value_name = "ENDPOINT", required_unless_present = "bind")]
    pub endpoint: Vec<String>,

    /// Bind here instead, for publishers that connect out (e.g. tcp://0.0.0.0:5557). The
    /// address bound is printed to stderr ("listening on ...") and given in the summary,
    /// so port 0 (the system picks a free port) can be used.
    #[arg(long, value_name = "ENDPOINT")]
    pub bind: Option<String>,

    /// Only topics starting with this prefix (ZMQ subscription; default: everything).
    #[arg(long, default_value = "", value_name = "PREFIX")]
    pub topic: String,

    /// The capture file to write (`.frames` layout, readable by `replay`).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,

    /// Stop after this many messages written. When the publishers have sent N (by their
    /// sequence numbers) but some were lost in gaps, capture does not wait for messages that
    /// will never come: once the live stream is quiet for --replay-timeout, recovery gets one
    /// more --replay-timeout, then capture stops ("stopped by max messages with gaps").
    #[arg(long, value_name = "N")]
    pub max_messages: Option<u64>,

    /// Stop after this long, e.g. 90s, 5m.
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,

    /// The replay (ROUTER) socket of each --endpoint, same order, to recover gaps.
    #[arg(long, value_name = "ENDPOINT")]
    pub replay_endpoint: Vec<String>,

    /// Run the llm-d emulation on the stream as it arrives (status line each second on a terminal).
    #[arg(long)]
    pub live_replay: bool,

    #[command(flatten)]
    pub emulation: EmulationArgs,

    /// How long to wait for each publisher to accept the connection, and for each
    /// connection's ZMTP handshake (a publisher that does not complete it in time is dropped
    /// and counted).
    #[arg(long, default_value = "10s", value_name = "DURATION")]
    pub connect_timeout: String,

    /// The largest message (all its frames together) a publisher or replay endpoint may
    /// send, like libzmq's ZMQ_MAXMSGSIZE: a peer that announces more is dropped before any
    /// of it is read, and counted ("oversized_message"). Bytes, or with KiB, MiB, GiB (also
    /// K, M, G: powers of 1024); from 1 KiB to 1 GiB. The default is 30x the largest batch a
    /// vLLM engine step produces (about 8 MB for 1M tokens).
    #[arg(long, default_value = "256MiB", value_name = "SIZE", value_parser = message_size)]
    pub max_message_size: usize,

    /// How long to wait for a replay socket to answer a gap.
    #[arg(long, default_value = "2s", value_name = "DURATION")]
    pub replay_timeout: String,

    /// Output format of the summary.
    #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
    pub format: OutputFormat,
}

/// A KV block size flag: a whole number from 1 to [`crate::align::MAX_BLOCK_SIZE`].
pub fn block_size(text: &str) -> Result<usize, String> {
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
        _ if !t.is_empty() && t.bytes().all(|c| c.is_ascii_digit()) => Err(range()),
        _ => Err(format!(
            "expected {}",
            range().trim_start_matches("a block size is ")
        )),
    }
}

/// The range `--max-message-size` takes: a message holds at least a topic, a sequence
/// number and a small batch; past 1 GiB (`events::frames::MAX_PAYLOAD`) a payload would not
/// be written anyway.
pub const MESSAGE_SIZE_RANGE: std::ops::RangeInclusive<usize> = (1 << 10)..=(1 << 30);

/// `--max-message-size`: `268435456`, `256MiB`, `256M`, `64KiB`, `1GiB` (powers of 1024).
pub fn message_size(text: &str) -> Result<usize, String> {
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
        Some(_) => Err(range()),
        // All digits, but past u64: out of range rather than malformed.
        None if !t.is_empty() && t.bytes().all(|c| c.is_ascii_digit()) => Err(range()),
        None => Err("expected a size like 256MiB, 64KiB or 1048576 (bytes)".into()),
    }
}

const PROBE_ABOUT: &str = "\
Chat with a live OpenAI-compatible server turn by turn and check kvaudit's prediction against \
what the server reports.

Each turn is sent with temperature 0, a fixed seed and --max-tokens, asking for token ids where \
the engine returns them (vLLM and SGLang `return_token_ids`, llama-server `logprobs`); the reply \
is sent back as --resend says and the next user message follows. For every turn, side by side: \
the server's prompt token count and kvaudit's render of the same messages (a difference means \
the server renders differently, shown first, with the position where the prompt ids diverge \
when the server returns them), the server's cached tokens and kvaudit's prediction, and the \
retokenization drift of the reply.

Prediction: vLLM and SGLang cache full blocks (pages) and never the whole prompt, \
floor(min(LCP, held, N-1)/B)*B with B from --block-size (default 16 for vLLM, 1 for SGLang); \
llama-server reuses its slot's common prefix token by token, min(LCP, held, N-1). held counts \
the prompt and the reply's sampled ids whose KV was computed (a reply cut at --max-tokens \
loses its last token). Turn 1 has no prediction: what the cache held before is unknown.

The conversation: --conversation FILE (its user messages are sent; its assistant messages \
only mark where the live replies go), the quick form (--user, --follow-up ...), or the built-in \
probe (one question, then three follow-ups of growing length).

Exit codes: 0 every turn agrees, 1 a turn does not (server renders differently, reused less \
or more than predicted), 2 errors: bad flags, an unreachable server, an answer without the \
usage fields (naming the server flag that enables them: vLLM --enable-prompt-tokens-details, \
SGLang --enable-cache-report).";

#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// The server's OpenAI base URL, e.g. http://host:8000/v1.
    #[arg(long, value_name = "URL")]
    pub url: String,

    #[command(flatten)]
    pub model: ModelArgs,

    /// The model name the server serves it under (default: the first of /v1/models).
    #[arg(long, value_name = "NAME")]
    pub served_model: Option<String>,

    /// The engine behind the URL, `name@release` to pick the release whose rendering applies
    /// (default: from /v1/models `owned_by`, its newest release kvaudit follows).
    #[arg(long, value_name = "SERVER[@RELEASE]", value_parser = ServerParser::engines())]
    pub server: Option<crate::render::ServerProfile>,

    /// A conversation JSON file: its user messages are sent, its assistant messages mark where
    /// the server's replies go.
    #[arg(long, short = 'c', value_name = "FILE")]
    pub conversation: Option<PathBuf>,

    /// Quick form: a system prompt.
    #[arg(long, conflicts_with = "conversation")]
    pub system: Option<String>,

    /// Quick form: the first user message.
    #[arg(long, conflicts_with = "conversation")]
    pub user: Option<String>,

    /// Quick form: a later user message (repeatable, in order).
    #[arg(long = "follow-up", requires = "user", conflicts_with = "conversation")]
    pub follow_up: Vec<String>,

    /// How the client sends each reply back.
    #[arg(long, value_enum, default_value_t = Resend::Content)]
    pub resend: Resend,

    /// Send at most K turns (default: every user turn of the conversation).
    #[arg(long, value_name = "K")]
    pub turns: Option<usize>,

    /// max_tokens of each request.
    #[arg(long, default_value_t = 64, value_name = "N")]
    pub max_tokens: u32,

    /// The sampling seed of each request (with temperature 0).
    #[arg(long, default_value_t = 0, value_name = "S")]
    pub seed: u64,

    /// The server's KV block size (vLLM --block-size) or page size (SGLang --page-size);
    /// `--block-size` still works.
    #[arg(
        long = "block-sizes",
        visible_alias = "block-size",
        value_name = "B",
        value_parser = block_size,
        allow_negative_numbers = true
    )]
    pub block_size: Option<usize>,

    /// The API key (default: OPENAI_API_KEY); sent only to the --url host, never printed.
    #[arg(long, value_name = "KEY", hide_env_values = true)]
    pub api_key: Option<String>,

    /// An extra request header `NAME: VALUE` (repeatable), for routers that need one.
    #[arg(long = "header", value_name = "NAME: VALUE")]
    pub header: Vec<String>,

    /// A response header that names the pod that answered (repeatable; default: the
    /// usual router headers, e.g. x-gateway-destination-endpoint).
    #[arg(long = "pod-header", value_name = "NAME")]
    pub pod_header: Vec<String>,

    /// How long one request may take, generation included.
    #[arg(long, default_value = "120s", value_name = "DURATION")]
    pub timeout: String,

    /// How long to wait for the connection.
    #[arg(long, default_value = "10s", value_name = "DURATION")]
    pub connect_timeout: String,

    /// Also write the conversation as it happened (replies with their sampled ids), which
    /// `diff-turns --conversation` audits to the same numbers.
    #[arg(long, value_name = "FILE")]
    pub save_conversation: Option<PathBuf>,

    /// Reply layout for the replies (default: detected from the template).
    #[arg(long, value_enum)]
    pub reply_format: Option<ReplyFormatArg>,

    /// A template variable `key=value` sent as the request's `chat_template_kwargs` and
    /// rendered by kvaudit alike (value parsed as JSON, else a string); repeatable. E.g.
    /// enable_thinking=false.
    #[arg(long = "template-kwarg", value_name = "KEY=VALUE")]
    pub template_kwarg: Vec<String>,

    /// The server's default template kwarg `key=value` (vLLM/SGLang
    /// `--default-chat-template-kwargs`, llama-server `--chat-template-kwargs`): kvaudit
    /// renders with it, the request does not send it; repeatable.
    #[arg(long = "server-template-kwarg", value_name = "KEY=VALUE")]
    pub server_template_kwarg: Vec<String>,

    /// The clock for strftime_now (default: now, local time), as the server's.
    #[arg(long, value_name = "TIME")]
    pub now: Option<String>,

    /// Instruction budget per render (templates are untrusted input).
    #[arg(long, default_value_t = crate::render::DEFAULT_FUEL, hide = true)]
    pub fuel: u64,

    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
    pub format: OutputFormat,
}
