//! Each command's own flags (the flags several share are in `shared`).

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::*;

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

format_choice! {
    /// Formats of the corpus report on standard output.
    CorpusFormat {
        Human,
        Json,
        Markdown,
        Html,
    }
}

format_choice! {
    /// Output formats of `check`.
    CheckFormat {
        Human,
        Json,
        /// SARIF 2.1.0, for GitHub code scanning.
        Sarif,
        /// JUnit XML: one test case per model and scenario.
        Junit,
        /// For $GITHUB_STEP_SUMMARY and pull-request comments.
        Markdown,
    }
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

    /// The engine's serving flags (a file holding the `vllm serve …` command line) the router
    /// config is linted against: KVA408 when vllm-router's cache_aware cannot render on it,
    /// KVA409 and KVA410 when llm-d's precise producer cannot receive or place its events.
    #[arg(long, value_name = "FILE")]
    pub engine_args: Option<PathBuf>,

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

format_choice! {
    ReplayFormat {
        Human,
        Json,
        Prometheus,
    }
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

#[derive(Debug, Args)]
pub struct WatchArgs {
    #[command(flatten)]
    pub model: ModelArgs,

    /// A pod and where its KV events come from: `NAME=ENDPOINT`, its publisher to subscribe
    /// to (e.g. d0=tcp://10.0.0.5:5557; vLLM binds for `tcp://*:PORT`), or with --requests
    /// `NAME=FILE`, a capture of it `kvaudit capture` wrote (repeatable, one per pod).
    #[arg(long, value_name = "NAME=SOURCE")]
    pub pod: Vec<String>,

    /// A pod whose publisher connects out (vLLM with a host in its endpoint): `NAME=ENDPOINT`
    /// to bind for it, e.g. d1=tcp://0.0.0.0:5558 (repeatable).
    #[arg(long, value_name = "NAME=ENDPOINT")]
    pub bind: Vec<String>,

    /// Proxy mode: forward every connection to this URL (`http://HOST:PORT`, the router or
    /// the engine), every byte unchanged both ways, reading the chat requests and their
    /// answers as they pass.
    #[arg(long, value_name = "URL", conflicts_with = "requests")]
    pub upstream: Option<String>,

    /// Mirror mode: take copies of the requests (a gateway's request mirroring or shadow
    /// traffic) on ADDR, answer each at once and forward nothing; the serving pod comes from
    /// the events.
    #[arg(long, value_name = "ADDR", conflicts_with_all = ["requests", "upstream"])]
    pub mirror: Option<String>,

    /// Where the proxy listens (loopback unless you say otherwise).
    #[arg(long, default_value = "127.0.0.1:8001", value_name = "ADDR")]
    pub listen: String,

    /// A response header naming the pod that served the request (else the pod whose next
    /// stores carry the prompt).
    #[arg(long, value_name = "NAME")]
    pub pod_header: Option<String>,

    /// Serve Prometheus text at http://ADDR/metrics.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,

    /// How often the human summary goes to standard error while watching.
    #[arg(long, default_value = "60s", value_name = "DURATION")]
    pub interval: String,

    /// Stop after this long (else at SIGTERM or Ctrl-C); the report goes to standard output.
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,

    /// After the stop, how long exchanges in flight get to finish (less than the pod's
    /// termination grace period, so the report and files are written; a second signal skips
    /// it).
    #[arg(long, default_value = "10s", value_name = "DURATION")]
    pub drain: String,

    /// Only event topics starting with this prefix.
    #[arg(long, default_value = "", value_name = "PREFIX")]
    pub topic: String,

    /// The longest request or response body read (longer ones pass through unread, and are
    /// counted).
    #[arg(long, default_value = "16MiB", value_name = "SIZE", value_parser = message_size)]
    pub max_body: usize,

    /// How long to wait for each publisher and for the upstream to accept a connection.
    #[arg(long, default_value = "10s", value_name = "DURATION")]
    pub connect_timeout: String,

    /// Request-log mode: the requests, one JSON object a line (`-` for standard input):
    /// `{"ts": SECONDS, "request": {chat completion body}, "pod": NAME, "usage": {the
    /// response's usage}}`; `pod` and `usage` when known, `ts` on the engines' clock.
    #[arg(long, value_name = "FILE|-")]
    pub requests: Option<PathBuf>,

    /// The engine's KV block size (default: the --server engine's default).
    #[arg(long, value_name = "TOKENS", value_parser = block_size)]
    pub block_size: Option<usize>,

    /// A pod's HTTP address, `NAME=URL` (e.g. d0=http://10.0.0.5:8000; repeatable): read once
    /// at the start (vLLM's `/metrics`, SGLang's `/server_info`), its pool's block count bounds
    /// that pod's view in place of --capacity, and its block size must be --block-size.
    #[arg(long, value_name = "NAME=URL")]
    pub pod_api: Vec<String>,

    /// A pod's replay (ROUTER) endpoint, `NAME=ENDPOINT` (vLLM's `replay_endpoint`, e.g.
    /// d0=tcp://10.0.0.5:5558; repeatable): a gap in the pod's events is recovered through it,
    /// the pod's later batches held meanwhile so all apply in order, instead of the view going
    /// stale.
    #[arg(long, value_name = "NAME=ENDPOINT")]
    pub pod_replay: Vec<String>,

    /// How long a replay endpoint gets to connect and to send each message of its answer.
    #[arg(long, default_value = "2s", value_name = "DURATION")]
    pub replay_timeout: String,

    /// The most KV blocks one pod holds (its GPU block count): a pod's view stops there and
    /// is marked stale rather than grow without bound.
    #[arg(long, default_value_t = 4_000_000, value_name = "BLOCKS")]
    pub capacity: usize,

    /// Conversations remembered to link a request to the one before it (least recently
    /// seen forgotten first).
    #[arg(long, default_value_t = 100_000, value_name = "N")]
    pub conversations: usize,

    /// Also write the observed conversations, one JSON line each, as `kvaudit corpus` reads
    /// them (opt-in: they hold the prompts).
    #[arg(long, value_name = "FILE.jsonl")]
    pub record: Option<PathBuf>,

    /// Also write, when the run ends, the corpus totals of the recorded conversations as a
    /// partial for `kvaudit merge` (and its HTML report): what `kvaudit corpus RECORD
    /// --block-sizes B --engine-block-size B --partial FILE` with the same model, rendering and
    /// router flags (`--no-router` when none is given) writes. Needs --record.
    #[arg(long, value_name = "FILE", requires = "record")]
    pub partial: Option<PathBuf>,

    /// Also write one JSON line per attributed request: its number, pod, prompt length, the
    /// engine's cached_tokens and the tokens of each cause (counts only, no text).
    #[arg(long, value_name = "FILE.jsonl")]
    pub per_request: Option<PathBuf>,

    #[command(flatten)]
    pub router: RouterChoiceArgs,

    #[command(flatten)]
    pub rendering: RenderingArgs,

    /// Output format.
    #[arg(long, value_enum, default_value_t = WatchFormat::Human)]
    pub format: WatchFormat,
}

format_choice! {
    /// Formats of the watch summary.
    WatchFormat {
        Human,
        Json,
        Prometheus,
    }
}
