//! Every flag of kvaudit (shell completions are generated from this definition).

use clap::{Parser, Subcommand, ValueEnum};

/// A command's `--format` values: the report formats it offers, each the [`Format`] of the
/// same name, so a command's formats are listed once and cannot drift from the reports'.
///
/// [`Format`]: crate::report::Format
macro_rules! format_choice {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
        pub enum $name {
            $($(#[$vmeta])* $variant),+
        }

        impl From<$name> for crate::report::Format {
            fn from(f: $name) -> crate::report::Format {
                match f {
                    $($name::$variant => crate::report::Format::$variant),+
                }
            }
        }
    };
}

mod commands;
mod shared;

pub use commands::*;
pub use shared::*;

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
    /// Attribute every prompt token of a fleet's requests to why it was or was not served from
    /// the KV cache (reused, misrouted, evicted, block tail, rewritten, new), with each pod's
    /// holdings kept by its KV events.
    Watch(Box<WatchArgs>),
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

/// replay's exit codes, shown by `replay --help` (README says the same).
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

/// The range `--max-message-size` takes: a message holds at least a topic, a sequence
/// number and a small batch; past 1 GiB (`events::frames::MAX_PAYLOAD`) a payload would not
/// be written anyway.
pub const MESSAGE_SIZE_RANGE: std::ops::RangeInclusive<usize> = (1 << 10)..=(1 << 30);

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
