//! `diff-turns`' flags.

use clap::Args;

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
