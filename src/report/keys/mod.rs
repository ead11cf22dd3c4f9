//! The `keys` report: llm-d's block keys for token sequences, as llm-d computes them.

mod human;

use serde::Serialize;

use super::{Exporter, Format, Report, View};

use crate::routers::llm_d::{IndexConfig, KeyHasher};

/// The JSON shape of the `keys` report (its own schema version).
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Serialize)]
pub struct KeysReport {
    pub schema_version: u32,
    pub index_block_size: usize,
    pub hash: &'static str,
    pub hash_seed: String,
    pub model_name: String,
    /// The server profile prompts were rendered as (when keys renders conversations).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<&'static str>,
    /// Where the model name came from (`--model-name`, the Hub id, a config file).
    pub model_name_from: String,
    pub root: u64,
    pub sequences: Vec<KeyedSequence>,
}

#[derive(Debug, Serialize)]
pub struct KeyedSequence {
    pub source: String,
    pub tokens: usize,
    pub keys: Vec<u64>,
    /// Tokens after the last whole block: llm-d makes no key for them.
    pub tokens_without_key: usize,
}

impl KeysReport {
    /// The keys of every named sequence under `cfg` (block size, hash, seed) and `model_name`.
    pub fn new(
        cfg: &IndexConfig,
        model_name: &str,
        model_name_from: &str,
        sequences: Vec<(String, Vec<u32>)>,
    ) -> Self {
        let hasher = KeyHasher::new(cfg.algo, &cfg.seed);
        let root = hasher.root(model_name);
        KeysReport {
            schema_version: SCHEMA_VERSION,
            index_block_size: cfg.block_size,
            hash: cfg.algo.name(),
            hash_seed: cfg.seed.clone(),
            model_name: model_name.to_string(),
            server: None,
            model_name_from: model_name_from.to_string(),
            root,
            sequences: sequences
                .into_iter()
                .map(|(source, ids)| KeyedSequence {
                    keys: hasher.keys(root, &ids, cfg.block_size, None),
                    tokens: ids.len(),
                    tokens_without_key: ids.len() % cfg.block_size,
                    source,
                })
                .collect(),
        }
    }
}

impl View for KeysReport {
    type View<'a> = &'a KeysReport;

    fn view(&self) -> &KeysReport {
        self
    }
}

impl Report for KeysReport {
    const NAME: &'static str = "keys";

    fn exporter(&self, format: Format) -> Option<&dyn Exporter<Self>> {
        super::human_or_json(format, &human::Human)
    }
}
