//! `corpus` and `merge`: their flags and formats.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::*;

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
