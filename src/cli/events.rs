//! The commands that read KV events (`replay`, `keys`, `capture`): their flags.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::*;

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
