//! `corpus`: many conversations audited on worker threads, exactly as `diff-turns` audits one,
//! and totalled: distributions of uncached tokens per block size, rewrite classes, the router's
//! view, the PPD session key, and what each serving alternative computes and moves.
//!
//! Every total is a sum, an exact count per value, or a top-k with a deterministic tie-break,
//! so workers keep their own tallies and merge them at the end: the report is the same for any
//! `--jobs`. Only the per-transition file needs input order; it goes through a reorder buffer
//! whose size is bounded by holding workers back.

pub mod alternatives;
pub mod input;
pub mod kv_bytes;
mod loading;
pub mod parquet_file;
pub mod partial;
pub mod sessions;
pub mod stats;
mod tally;
mod workers;
mod zstd_frames;

use alternatives::Assumptions;
use kv_bytes::KvBytes;
use sessions::Collisions;

use crate::audit::ModelInfo;

#[cfg(test)]
pub(crate) use loading::SetOnDrop;
pub use loading::{ModelLoad, run_loading};
pub use tally::{
    BlockTotals, Divergence, EXAMPLE_ROWS, RemedyTally, RemedyTotals, RouterTotals, Skipped, Skips,
    Tally, Worst,
};
pub use workers::{AuditorAt, Hooks, PerTransition, TransitionLines, run};

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct CorpusSettings {
    pub block_sizes: Vec<usize>,
    pub jobs: usize,
    /// `--seed`, reported with a sample.
    pub seed: u64,
    pub assumptions: Assumptions,
    pub kv_bytes: Option<KvBytes>,
    /// How many of the worst conversations the report keeps.
    pub worst: usize,
    /// How many shared session keys the report lists.
    pub shared_keys: usize,
    /// What a Parquet file may make the reading do (`--parquet-limit`): it changes which
    /// files are read, never a figure, so partials neither carry nor compare it.
    #[serde(skip)]
    pub parquet_limits: parquet_file::Limits,
}

/// The most worst conversations a report lists (`--worst`): each merge inserts into the list.
pub const MAX_WORST: usize = 10_000;

/// The run's result.
#[derive(Debug, Clone)]
pub struct CorpusReport {
    pub model: ModelInfo,
    pub settings: CorpusSettings,
    pub tally: Tally,
    pub collisions: Collisions,
    pub input: input::InputSummary,
}

impl CorpusReport {
    /// A rewrite point anywhere is a finding, as in diff-turns.
    pub fn has_findings(&self) -> bool {
        self.tally.transitions_with_rewrite > 0
    }
}
