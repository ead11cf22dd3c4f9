//! The CI gate (`kvaudit check`): models from `kvaudit.toml` audited with the diff-turns
//! pipeline, their transitions turned into findings with stable codes and levels, compared
//! with a baseline, suppressed by `[[allow]]` entries with reasons.

pub mod codes;
pub mod config;
mod findings;
pub mod lock;
mod run;

use serde::Serialize;

pub use codes::{Code, Level};
pub use run::{Baseline, CheckOptions, check};

use crate::align::{TokenView, Uncached};

/// A finding of the gate: code, level, where, what, and what to do.
#[derive(Debug, Clone, Serialize)]
pub struct GateFinding {
    pub code: Code,
    pub name: &'static str,
    pub level: Level,
    pub model: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scenario: Option<String>,
    /// `1 -> 2`
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transition: Option<String>,
    /// N of transition N -> N+1 (the lock's key).
    #[serde(skip)]
    pub from_prompt: Option<usize>,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Evidence>,
    /// What to do: for a rewrite point, the best measured remedy with its numbers (or that
    /// none helps) when `[gate] remedies` is on; otherwise the code's line from the table.
    pub help: String,
    /// The remedies measured for this rewrite point, best first, exactly as `diff-turns
    /// --remedies` gives them (None: not evaluated). The report's view serializes them.
    #[serde(skip)]
    pub remedies: Option<Vec<crate::audit::Remedy>>,
    /// The template file the finding is about and the line its text came from, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template_file: Option<String>,
    pub template_line: usize,
    /// The `[[allow]]` reason that silenced it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed: Option<String>,
    /// Already in the baseline: known, not a change, so it does not fail the gate.
    pub baselined: bool,
}

impl GateFinding {
    /// It counts toward the verdict (not silenced, not known from the baseline).
    pub fn active(&self) -> bool {
        self.allowed.is_none() && !self.baselined && self.level != Level::Allow
    }

    pub fn fails(&self) -> bool {
        self.active() && self.level == Level::Deny
    }
}

/// The numbers behind a transition finding, as diff-turns reports them.
#[derive(Debug, Clone, Serialize)]
pub struct Evidence {
    pub held_tokens: usize,
    pub next_prompt_tokens: usize,
    pub common_prefix_tokens: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rewrite_position: Option<usize>,
    pub held: Vec<TokenView>,
    pub next: Vec<TokenView>,
    pub uncached: Vec<Uncached>,
}

/// One audited model, for the report's header and the JUnit test cases.
#[derive(Debug, Clone, Serialize)]
pub struct ModelSummary {
    pub source: String,
    pub server: String,
    pub template: String,
    pub template_sha256: String,
    pub tokenizer_sha256: String,
    pub scenarios: Vec<String>,
    pub transitions: usize,
    /// The router view's totals, when it was simulated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub router: Option<RouterSummary>,
}

/// llm-d's index against the engine over a model's transitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RouterSummary {
    pub index_block_size: usize,
    pub engine_cached_tokens: u64,
    pub index_visible_tokens: u64,
    /// Transitions the decider keeps decode-only with the engine's view, and with the index's.
    pub decode_only_engine: u64,
    pub decode_only_index: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct BaselineSummary {
    /// `kvaudit.lock` or `template OLD.jinja`.
    pub source: String,
    pub entries: usize,
}

#[derive(Debug, Clone)]
pub struct CheckReport {
    pub models: Vec<ModelSummary>,
    pub findings: Vec<GateFinding>,
    pub baseline: Option<BaselineSummary>,
    /// The lock of this run (written by --update-baseline).
    pub lock: lock::Lock,
}

impl CheckReport {
    pub fn failed(&self) -> bool {
        self.findings.iter().any(GateFinding::fails)
    }

    pub fn count(&self, level: Level) -> usize {
        self.findings
            .iter()
            .filter(|f| f.active() && f.level == level)
            .count()
    }
}
