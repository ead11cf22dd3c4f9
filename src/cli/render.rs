//! `render` and `fetch`: their flags.

use clap::Args;

use super::*;

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
