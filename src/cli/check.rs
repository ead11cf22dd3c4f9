//! `check`, `init` and `completions`: their flags.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::*;

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
