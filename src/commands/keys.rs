use std::io::IsTerminal;

use anyhow::{Context, Result, bail};
use serde_json::json;

use super::Outcome;
use super::diff_turns::{conversations, settings};
use super::index_config;
use crate::audit::{self, ModelSpec};
use crate::cli::{KeysArgs, OutputFormat};
use crate::index::KeyHasher;
use crate::tokenize::Tokenizer;

pub fn run(args: &KeysArgs, out: &mut dyn std::io::Write) -> Result<Outcome> {
    if args.index_block_size == 0 {
        bail!("--index-block-size must be positive");
    }
    let mut cfg = index_config(&args.index, args.index_block_size);
    let sequences: Vec<(String, Vec<u32>)> = if let Some(model) = &args.model {
        let files = audit::resolve_model(&ModelSpec {
            model: model.clone(),
            offline: args.offline,
            template: args.template.clone(),
            progress: std::io::stderr().is_terminal(),
            ..ModelSpec::default()
        })?;
        let tok = Tokenizer::from_file(&files.tokenizer_path)?;
        let convs = conversations(&args.conversation)?;
        let settings = settings(&args.conversation, None)?;
        cfg.model_name.get_or_insert_with(|| model.clone());
        audit::conversation_prompts(&files, &tok, &convs, &settings)?
            .into_iter()
            .flat_map(|(source, prompts)| {
                prompts
                    .into_iter()
                    .enumerate()
                    .map(move |(i, ids)| (format!("{source} prompt {}", i + 1), ids))
            })
            .collect()
    } else if let Some(path) = &args.tokens_file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        vec![(
            path.display().to_string(),
            parse_tokens(&text).with_context(|| format!("{}", path.display()))?,
        )]
    } else if !args.tokens.is_empty() {
        vec![("tokens".into(), args.tokens.clone())]
    } else {
        bail!("give --tokens, --tokens-file or --model");
    };
    let Some(model_name) = cfg.model_name.clone() else {
        bail!("--model-name is needed: llm-d hashes the model name into every key");
    };
    let hasher = KeyHasher::new(cfg.algo, &cfg.seed);
    let root = hasher.root(&model_name);
    let keyed: Vec<(String, usize, Vec<u64>)> = sequences
        .into_iter()
        .map(|(name, ids)| {
            let keys = hasher.keys(root, &ids, cfg.block_size, None);
            (name, ids.len(), keys)
        })
        .collect();
    let text = match args.format {
        OutputFormat::Json => {
            let seqs: Vec<_> = keyed
                .iter()
                .map(|(name, n, keys)| json!({"source": name, "tokens": n, "keys": keys}))
                .collect();
            let v = json!({
                "schema_version": 1,
                "index_block_size": cfg.block_size,
                "hash": cfg.algo.name(),
                "hash_seed": cfg.seed,
                "model_name": model_name,
                "root": root,
                "sequences": seqs,
            });
            format!("{}\n", serde_json::to_string_pretty(&v)?)
        }
        OutputFormat::Human => {
            let mut s = String::new();
            let many = keyed.len() > 1;
            for (name, n, keys) in &keyed {
                if many {
                    s.push_str(&format!("# {name}: {n} tokens, {} keys\n", keys.len()));
                }
                for k in keys {
                    s.push_str(&format!("{k}\n"));
                }
            }
            s
        }
    };
    out.write_all(text.as_bytes())?;
    Ok(Outcome::Clean)
}

/// A JSON list of ids, or ids separated by commas or whitespace.
fn parse_tokens(text: &str) -> Result<Vec<u32>> {
    let t = text.trim();
    if t.starts_with('[') {
        return serde_json::from_str::<Vec<u32>>(t).context("expected a JSON list of token ids");
    }
    t.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|p| !p.is_empty())
        .map(|p| {
            p.parse::<u32>()
                .with_context(|| format!("{p:?} is not a token id"))
        })
        .collect()
}
