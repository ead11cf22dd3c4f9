//! `probe`'s flags.

use std::path::PathBuf;

use clap::Args;

use super::*;

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
