//! The `keys` report: llm-d's block keys for token sequences, as llm-d computes them.

use serde::Serialize;

use crate::index::{IndexConfig, KeyHasher};

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
    pub root: u64,
    pub sequences: Vec<KeyedSequence>,
}

#[derive(Debug, Serialize)]
pub struct KeyedSequence {
    pub source: String,
    pub tokens: usize,
    pub keys: Vec<u64>,
}

impl KeysReport {
    /// The keys of every named sequence under `cfg` (block size, hash, seed) and `model_name`.
    pub fn new(cfg: &IndexConfig, model_name: &str, sequences: Vec<(String, Vec<u32>)>) -> Self {
        let hasher = KeyHasher::new(cfg.algo, &cfg.seed);
        let root = hasher.root(model_name);
        KeysReport {
            schema_version: SCHEMA_VERSION,
            index_block_size: cfg.block_size,
            hash: cfg.algo.name(),
            hash_seed: cfg.seed.clone(),
            model_name: model_name.to_string(),
            server: None,
            root,
            sequences: sequences
                .into_iter()
                .map(|(source, ids)| KeyedSequence {
                    keys: hasher.keys(root, &ids, cfg.block_size, None),
                    tokens: ids.len(),
                    source,
                })
                .collect(),
        }
    }

    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }

    /// One key a line; with several sequences, a `# source: N tokens, K keys` line before each.
    pub fn to_human(&self) -> String {
        let mut s = String::new();
        let many = self.sequences.len() > 1;
        for seq in &self.sequences {
            if many {
                s.push_str(&format!(
                    "# {}: {} tokens, {} keys\n",
                    seq.source,
                    seq.tokens,
                    seq.keys.len()
                ));
            }
            for k in &seq.keys {
                s.push_str(&format!("{k}\n"));
            }
        }
        s
    }
}
